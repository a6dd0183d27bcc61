"""The turn's decisions (no I/O, no trio): routing, guards, hook outputs, the history.

Three pure parts the trio code (``_actor``, ``_turn``) drives:

- ``TurnRouter``, the actor's inbox: state (the running turn, who asked to cancel it)
  + message -> effects.

  ==========================  ==========================================================
  message                      effects
  ==========================  ==========================================================
  ``StartTurn``                ``Begin`` (a second one while a turn runs is a bug of the
                               session: ``RuntimeError``)
  ``CancelTurn``               nothing runs: ``Acknowledge`` at once (to the session);
                               the running turn's first cancel: ``Route`` (it ends the
                               turn, which acknowledges after its ``TurnEnded``); a later
                               one: nothing (one acknowledgement per turn)
  a reply (model, hooks,       ``Route`` to the running turn; dropped when none runs (a
  tools, loop detector)        late reply of a turn that ended)
  the inbox closes             the running turn is cancelled as by ``CancelTurn``
                               (requested by ``shutdown``)
  ==========================  ==========================================================

- The guards and readings of one prompt's loop (Gemini CLI's ``processTurn`` and the
  headless host's): the turn limits, the loop detector's two strikes, hook outputs, a
  settled batch that ends the turn, a failed request's error.
- ``TurnHistory``: what the turn adds to the conversation, and how a cancel, a guard,
  a compression or a cleared context changes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeGuard, assert_never, get_args

import attrs

from bus.messages import (
    ApiError,
    BatchCancelAcknowledged,
    BatchSettled,
    CancelTurn,
    GenerationCancelled,
    HooksFinished,
    LoopVerdict,
    ModelChunk,
    ModelFailed,
    ModelFinished,
    ModelRetrying,
    StartTurn,
    StopReason,
    TurnCancelAcknowledged,
    TurnError,
)

from ._compression import is_environment_context
from ._logic import is_function_response
from ._tokens import estimate_tokens, history_parts

# -- the actor's inbox -------------------------------------------------------------------
TurnReply: TypeAlias = (
    ModelChunk
    | HooksFinished
    | ModelRetrying
    | ModelFinished
    | ModelFailed
    | GenerationCancelled
    | BatchSettled
    | BatchCancelAcknowledged
    | LoopVerdict
)
"""A reply to a request of the running turn (routed to it)."""

TurnInbox: TypeAlias = StartTurn | CancelTurn | TurnReply
"""Every message the turn actor acts on; anything else sent to it is ignored."""

Routed: TypeAlias = TurnReply | CancelTurn
"""What the actor gives the running turn's loop (``Route``)."""

_INBOX_TYPES: tuple[type, ...] = (StartTurn, CancelTurn, *get_args(TurnReply))


def is_turn_inbox(msg: Message) -> TypeGuard[TurnInbox]:
    return isinstance(msg, _INBOX_TYPES)


@attrs.define(eq=False)
class RunningTurn:
    """The turn the actor runs, as the router and the turn's loop both see it."""

    start: StartTurn
    cancel_requested_by: str | None = None
    """Who asked to cancel it (the first cancel): the turn acknowledges to them after
    its ``TurnEnded``."""


@attrs.frozen
class Begin:
    """Run ``turn``'s loop."""

    turn: RunningTurn


@attrs.frozen
class Route:
    """Give ``message`` to the running turn's loop."""

    message: Routed


@attrs.frozen
class Acknowledge:
    """Send ``message`` to the session at once (no turn runs to do it)."""

    message: TurnCancelAcknowledged


RouterEffect: TypeAlias = Begin | Route | Acknowledge

SHUTDOWN = "shutdown"
"""``requested_by`` of the cancel of a turn whose actor's inbox closed."""


class TurnRouter:
    """Which turn runs, and where each message of the actor's inbox goes."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.current: RunningTurn | None = None

    def feed(self, msg: TurnInbox) -> list[RouterEffect]:
        current = self.current
        match msg:
            case StartTurn():
                if current is not None:
                    raise RuntimeError("StartTurn while a turn is running")
                self.current = RunningTurn(msg)
                return [Begin(self.current)]
            case CancelTurn():
                if current is None:
                    return [
                        Acknowledge(
                            TurnCancelAcknowledged(
                                session_id=msg.session_id, turn_id=msg.turn_id, requested_by=msg.requested_by
                            )
                        )
                    ]
                if current.cancel_requested_by is None:
                    current.cancel_requested_by = msg.requested_by
                    return [Route(msg)]
                return []
            case (
                ModelChunk()
                | HooksFinished()
                | ModelRetrying()
                | ModelFinished()
                | ModelFailed()
                | GenerationCancelled()
                | BatchSettled()
                | BatchCancelAcknowledged()
                | LoopVerdict()
            ):
                return [Route(msg)] if current is not None else []
            case _ as unreachable:
                assert_never(unreachable)

    def inbox_closed(self) -> list[RouterEffect]:
        """Stop a running turn the orderly way (as a ``CancelTurn`` would)."""
        current = self.current
        if current is None or current.cancel_requested_by is not None:
            return []
        current.cancel_requested_by = SHUTDOWN
        return [
            Route(
                CancelTurn(
                    session_id=self.session_id,
                    turn_id=current.start.turn_id,
                    reason="session closing",
                    requested_by=SHUTDOWN,
                )
            )
        ]

    def finished(self, turn: RunningTurn) -> None:
        """``turn``'s loop returned (it sent ``TurnEnded`` and any acknowledgement)."""
        if self.current is turn:
            self.current = None


# -- guards ------------------------------------------------------------------------------
MAX_TURNS = 100
"""Gemini CLI's bound on re-prompts within one round of the tool loop: recovery turns
after a loop, next-speaker continuations and AfterAgent retries each use one."""

LOOP_DETECTED_MESSAGE = "Loop detected, stopping execution"
MAX_SESSION_TURNS_MESSAGE = "Maximum session turns exceeded"
LOOP_CHECK_HISTORY = 20
"""Contents of the history the LLM loop check reads (Gemini CLI's 20)."""

TURN_LIMIT_MESSAGE = (
    "Reached max session turns for this session. Increase the number of turns by specifying "
    "maxSessionTurns in settings.json."
)

if TYPE_CHECKING:
    from bus.messages import Message  # the union: imported when first used (bus.messages)

FATAL_TOOL_ERRORS = frozenset({"no_space_left"})


def loop_recovery_prompt(detail: str | None) -> str:
    """The user message of Gemini CLI's recovery turn after a first detected loop."""
    return (
        f"System: Potential loop detected. Details: {detail or 'Repetitive patterns identified'}. "
        "Please take a step back and confirm you're making forward progress. If not, take a step "
        "back, analyze your previous actions and rethink how you're approaching the problem. "
        "Avoid repeating the same tool calls or responses without new results."
    )


def host_round_limit(start: StartTurn, host_rounds: int, *, finish_tool: str | None, interactive: bool) -> TurnError | None:
    """The headless host's own ``maxSessionTurns`` check on its tool-loop rounds (Gemini
    CLI's ``FatalTurnLimitedError``); not for interactive sessions nor a subagent's."""
    limited = finish_tool is None and not interactive
    if limited and 0 <= start.max_session_turns < host_rounds:
        return TurnError(kind="turn_limit", type="FatalTurnLimitedError", message=TURN_LIMIT_MESSAGE, exit_code=53)
    return None


def over_session_turns(start: StartTurn, requests: int) -> bool:
    """Gemini CLI's ``maxSessionTurns`` over every model turn of the session (this
    turn's ``requests`` included; ``<= 0``: no bound)."""
    return 0 < start.max_session_turns < start.session_turns_used + requests


Strike: TypeAlias = Literal["loop_detected", "max_session_turns", "recover"]


def strike(verdict: LoopVerdict, bounded: int) -> Strike:
    """Gemini CLI's two strikes: a second detection in the prompt ends the turn; a first
    one is recovered from by a re-prompt, unless none is left in this round."""
    if verdict.count > 1:
        return "loop_detected"
    if bounded <= 1:
        return "max_session_turns"
    return "recover"


# -- hook outputs --------------------------------------------------------------------------
def hook_reason(output: Mapping[str, Any]) -> str:
    """Gemini CLI's effective reason of a hook output."""
    return str(output.get("stopReason") or output.get("reason") or "No reason provided")


def escape_hook_context(text: str) -> str:
    return text.replace("<", "&lt;").replace(">", "&gt;")


def hook_stops(output: Mapping[str, Any]) -> bool:
    """The hook ends the agent's run (``continue: false``)."""
    return output.get("continue") is False


def hook_blocks(output: Mapping[str, Any]) -> bool:
    """The hook blocks (``decision`` ``block`` or ``deny``)."""
    return output.get("decision") in ("block", "deny")


def hook_specific(output: Mapping[str, Any]) -> Mapping[str, Any]:
    specific = output.get("hookSpecificOutput") or {}
    return specific if isinstance(specific, Mapping) else {}


def hook_context(output: Mapping[str, Any]) -> str | None:
    """A BeforeAgent hook's ``additionalContext``, as the text the prompt gets."""
    context = hook_specific(output).get("additionalContext")
    return f"<hook_context>{escape_hook_context(str(context))}</hook_context>" if context else None


def hook_clears_context(output: Mapping[str, Any]) -> bool:
    return bool(hook_specific(output).get("clearContext"))


def stopped_text(output: Mapping[str, Any], *, system_message_first: bool) -> str:
    shown = str(output.get("systemMessage") or "").strip() if system_message_first else ""
    return f"Agent execution stopped: {shown or hook_reason(output)}"


def blocked_text(output: Mapping[str, Any]) -> str:
    shown = str(output.get("systemMessage") or "").strip()
    return f"Agent execution blocked: {shown or hook_reason(output)}"


# -- results ---------------------------------------------------------------------------------
def settled_stop(settled: BatchSettled, finish_tool: str | None) -> tuple[StopReason, TurnError | None] | None:
    """Whether a settled batch ends the turn (its responses are kept, not sent): a fatal
    tool error, a call that stops execution, or a subagent's successful finish call."""
    fatal = next((c for c in settled.calls if c.error_type in FATAL_TOOL_ERRORS), None)
    if fatal is not None:
        display = fatal.result_display if isinstance(fatal.result_display, str) else None
        return "error", TurnError(
            kind="fatal_tool",
            type=fatal.error_type or "FatalToolExecutionError",
            message=f"Error executing tool {fatal.name}: {display or fatal.error_message}",
            exit_code=54,
        )
    if any(c.error_type == "stop_execution" for c in settled.calls):
        return "stop_execution", None
    if finish_tool is not None and any(c.name == finish_tool and c.status == "success" for c in settled.calls):
        return "goal", None
    return None


def api_error(err: ApiError) -> TurnError:
    """The turn's error for a model request that failed for good."""
    return TurnError(kind="api", type=err.type, message=err.message, exit_code=1, status=err.status)


INVALID_STREAM_MESSAGES = {
    "NO_RESPONSE_TEXT": (
        "The model returned an empty response with no text or thoughts. This may be a transient "
        "API issue; please try again."
    ),
    "THINKING_ONLY_RESPONSE": (
        "The model returned reasoning thoughts but no final response text. If your context "
        "window is near capacity, try using /compress."
    ),
    "MAX_TOKENS_EXCEEDED": (
        "Model response was truncated because it exceeded the token limit. Try using /compress "
        "to free up context space."
    ),
    "SAFETY_BLOCKED": "The model response was blocked due to safety settings.",
    "RECITATION_BLOCKED": "The model response was blocked due to recitation/copyright filters.",
    "OTHER_BLOCKED": "The model response was blocked due to other policy settings.",
}


def invalid_stream_message(kind: str, message: str) -> str:
    """What headless shows for an invalid stream (Gemini CLI's per-type texts)."""
    return INVALID_STREAM_MESSAGES.get(kind) or message.strip() or (
        "Invalid stream: The model returned an empty response or malformed tool call."
    )


# -- the history ---------------------------------------------------------------------------
@attrs.define
class TurnHistory:
    """The conversation as the turn sees it, and what the turn adds to it.

    The whole conversation is one list (``log``: ``base`` and then what was added) that
    only ever grows at its end; any other change (a rollback, a compression, a cleared
    context) makes a new list. The request builder relies on it: given the same list
    again, it takes in only the new contents (``_logic.RequestBuilder``)."""

    base: tuple[Any, ...]
    """The conversation before this turn's additions (a compression replaces it)."""
    last_prompt_tokens: int
    """Prompt tokens of the last request (the context-window check and compression)."""
    compression_failed: bool
    keeps_cancelled_request: bool = False
    """A subagent's session keeps what a cancel interrupted (see ``rollback``)."""
    log: list[Any] = attrs.field()
    """``base`` followed by what the turn added: append only (see the class doc)."""
    tokens_at_base: int = attrs.field()
    """``last_prompt_tokens`` as it was for ``base`` (restored when the prompt is rolled
    back)."""
    reset: bool = False
    """A hook cleared the context: the session's history restarts from its environment."""
    in_flight: Any = None
    """The message of the model request being prepared or sent (for ``rollback``)."""

    @log.default
    def _log(self) -> list[Any]:
        return list(self.base)

    @tokens_at_base.default
    def _tokens_at_base(self) -> int:
        return self.last_prompt_tokens

    @classmethod
    def of(cls, start: StartTurn, *, keeps_cancelled_request: bool = False) -> TurnHistory:
        base = tuple(start.history)
        tokens = start.last_prompt_token_count
        return cls(
            base=base,
            last_prompt_tokens=tokens if tokens >= 0 else estimate_tokens(history_parts(base)),
            compression_failed=start.compression_failed,
            keeps_cancelled_request=keeps_cancelled_request,
        )

    @property
    def added(self) -> list[Any]:
        """What the turn added to ``base``."""
        return self.log[len(self.base) :]

    def add(self, content: Any) -> None:
        self.log.append(content)

    def contents(self) -> tuple[Any, ...]:
        return tuple(self.log)

    def last(self, n: int) -> tuple[Any, ...]:
        """The last ``n`` contents."""
        return tuple(self.log[-n:]) if n > 0 else ()

    def answered(self, message: Any, content: Any, prompt_tokens: int | None) -> None:
        """A request and its answer join the conversation."""
        if prompt_tokens is not None:
            self.last_prompt_tokens = prompt_tokens
        self.log.extend([message, content])
        self.in_flight = None

    def rollback(self) -> None:
        """A cancel while a model request is prepared or streams. Gemini CLI rolls the
        whole prompt back; a subagent's session keeps what it did and the request it was
        making, so that its recovery turn goes on from there (Gemini CLI's agent keeps
        its chat)."""
        if not self.keeps_cancelled_request:
            self.log = list(self.base)
        elif self.in_flight is not None:
            self.log.append(self.in_flight)
            self.in_flight = None

    def keep_responses(self, message: Any) -> None:
        """A request that is not sent keeps its function responses (every call stays
        answered); a prompt that is not sent is dropped."""
        if is_function_response(message["parts"]):
            self.log.append(message)

    def clear_context(self) -> None:
        """A hook cleared the context: the conversation restarts from its environment."""
        self.reset = True
        self.base = tuple(h for h in self.base if is_environment_context(h))
        self.log = list(self.base)
        self.last_prompt_tokens = self.tokens_at_base = estimate_tokens(history_parts(self.base))

    def replace(self, history: tuple[Any, ...]) -> None:
        """A compression's new conversation replaces the base and what was added."""
        self.base, self.log = history, list(history)
        self.last_prompt_tokens = self.tokens_at_base = estimate_tokens(history_parts(self.base))

    def cancelled(self) -> None:
        """The prompt is rolled back: so is its token count."""
        self.last_prompt_tokens = self.tokens_at_base
