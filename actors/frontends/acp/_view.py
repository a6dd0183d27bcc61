"""One session as an ACP client sees it: bus messages in, ACP effects out.

A pure state machine (no I/O, no trio): the front end feeds it every message of its
session, in bus order, and carries out the effects it returns, in order. It owns the
mapping from our messages to ACP:

==============================================  =============================================
bus message                                      ACP
==============================================  =============================================
``TextStreamed``                                 ``agent_message_chunk`` (after a mid-stream retry,
                                                 only what the new attempt adds to the
                                                 text sent, see below)
``ThoughtStreamed``                              ``agent_thought_chunk`` (``**subject**\\n…``)
``ToolCallUpdated`` awaiting_approval            ``tool_call`` pending (an edit: with its diff,
                                                 once the front end has read the original)
``ApprovalRequested``                            ``session/request_permission`` (``AskPermission``)
``ToolCallUpdated`` executing                    ``tool_call`` in_progress, or ``tool_call_update``
                                                 in_progress after a permission
``ToolCallUpdated`` success                      ``tool_call_update`` completed (+ ``plan`` for
                                                 ``write_todos``, from ``ToolFinished``'s data;
                                                 a user's own call, from a ``ScheduleBatch``
                                                 ``client_initiated``, shows its whole output)
``ToolCallUpdated`` error                        ``tool_call_update`` failed (``tool_call`` failed
                                                 when it never started)
``ToolCallUpdated`` cancelled                    ``tool_call_update`` failed when announced;
                                                 nothing for a call that never started
(a shell command in the client's terminal,       ``tool_call_update`` with the terminal in its content,
``terminal_attached``)                           kept first in every later update of the call
``SessionConfigured`` (mode changed)             ``current_mode_update`` and ``config_option_update``
                                                 (also when only the model changed)
``TurnStarted`` / ``TurnEnded``                  the ``session/prompt`` answer (``PromptDone``):
                                                 stop reason, ``_meta.quota`` from the main
                                                 model requests' usage, or a JSON-RPC error
==============================================  =============================================

Chunks cannot be taken back: after a mid-stream retry (``StreamRetried``) the new
attempt's text is held back while it repeats what was sent, and only what goes beyond
it is sent (``RetriedText``). When it says something else, or the response ends before
reaching what was sent, a chunk first says that the response's text above is discarded,
then the new attempt's text follows from its start.

In replay mode (``session/load``) the same mapping runs over a recording: prompts become
``user_message_chunk``, nothing is asked or answered, and ``collapse_replay`` folds each
call into one ``tool_call`` with its final state and joins streamed text; for a session
that runs nowhere any more, ``interrupted`` ends the calls it left unsettled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

import attrs

from actors.common import token_count
from actors.frontends.acp._present import (
    SHELL_CANCELLED_TEXT,
    SHELL_TOOLS,
    Presentation,
    Presenter,
    diff_content,
    permission_options,
    plan_entries,
    text_content,
)
from actors.frontends.acp._protocol import config_options, mode_id
from actors.frontends.acp._rpc import RpcError
from actors.frontends.headless import RetriedText, Shown, discard_notice
from actors.host.sessions import INTERRUPTED_TOOL_REASON, clean_message, is_ignored_user_text
from actors.host.user_calls import result_text
from actors.turn import token_limit
from bus.json_values import thaw
from bus.messages import (
    ApprovalRequested,
    GenerateRequest,
    GenerationCancelled,
    Message,
    ModelChunk,
    ModelFailed,
    ModelFinished,
    ScheduleBatch,
    SessionClosed,
    SessionConfigured,
    SessionOpened,
    StreamRetried,
    SubagentActivity,
    SubmitPrompt,
    TextStreamed,
    ThoughtStreamed,
    ToolCallRequested,
    ToolCallUpdated,
    ToolFinished,
    ToolResult,
    TurnEnded,
    TurnNotice,
    TurnStarted,
)


@attrs.frozen
class Update:
    """Send ``session/update`` with this ``update``."""

    update: Mapping[str, Any]


@attrs.frozen
class NeedOriginal:
    """Read ``path`` (through the client when it serves files), then call
    ``SessionView.original_read`` before feeding the next message."""

    call_id: str
    path: str


@attrs.frozen
class AskPermission:
    """Send ``session/request_permission``; answer the scheduler with ``ApprovalAnswered``."""

    correlation_id: str
    call_id: str
    tool_call: Mapping[str, Any]
    options: tuple[Mapping[str, str], ...]


@attrs.frozen
class TurnBegan:
    prompt_id: str
    turn_id: str


@attrs.frozen
class PromptDone:
    """Answer the ``session/prompt`` of ``prompt_id``: ``result``, or ``error``."""

    prompt_id: str
    result: Mapping[str, Any] | None = None
    error: RpcError | None = None


@attrs.frozen
class Configured:
    request_id: str
    approval_mode: str
    model: str


@attrs.frozen
class Closed:
    reason: str


Effect: TypeAlias = Update | NeedOriginal | AskPermission | TurnBegan | PromptDone | Configured | Closed

STOP_REASONS = {
    "end_turn": "end_turn",
    "cancelled": "cancelled",
    "loop_detected": "max_turn_requests",
    "max_session_turns": "max_turn_requests",
    "turn_limit": "max_turn_requests",
    "context_window_overflow": "max_tokens",
    "agent_blocked": "refusal",
    "agent_stopped": "refusal",
    "stop_execution": "refusal",
}
"""Our ``TurnEnded.stop_reason`` -> ACP's ``StopReason`` (``error`` and
``invalid_stream`` are decided separately)."""

REFUSING_STREAM_TEXTS = frozenset(
    {
        "The model response was blocked due to safety settings.",
        "The model response was blocked due to recitation/copyright filters.",
        "The model response was blocked due to other policy settings.",
    }
)
"""``TurnNotice`` texts of an invalid stream that the model's filters caused."""
TRUNCATED_STREAM_TEXT = (
    "Model response was truncated because it exceeded the token limit. Try using /compress "
    "to free up context space."
)


def stop_reason(stop: str, invalid_stream_notice: str | None) -> str:
    if stop == "invalid_stream":
        # Gemini CLI ends such a turn gracefully (end_turn); filters refuse, a cut
        # response ran out of tokens.
        if invalid_stream_notice in REFUSING_STREAM_TEXTS:
            return "refusal"
        if invalid_stream_notice == TRUNCATED_STREAM_TEXT:
            return "max_tokens"
        return "end_turn"
    return STOP_REASONS.get(stop, "end_turn")


@attrs.define
class _Call:
    call_id: str
    name: str
    args: Any = attrs.field(factory=dict)
    announced: bool = False
    status: str = ""
    presentation: Presentation | None = None
    content: list[dict[str, Any]] = attrs.field(factory=list)
    result: ToolResult | None = None
    activity: list[str] = attrs.field(factory=list)
    """A subagent call's lines of activity (its content while it runs)."""
    user: bool = False
    """The user asked for it (``/tool``, ``/shell``): its result is shown in full."""
    terminal_id: str | None = None
    """It runs in the client's terminal (ACP ``terminal/*``): shown in its content."""


@attrs.define
class _Turn:
    prompt_id: str
    input_tokens: int = 0
    output_tokens: int = 0
    models: dict[str, list[int]] = attrs.field(factory=dict)
    invalid_stream_notice: str | None = None
    context: tuple[int, str] | None = None
    """The last main response's total tokens and its model (``usage_update``)."""

    def meta(self) -> dict[str, Any]:
        return {
            "quota": {
                "token_count": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens},
                "model_usage": [
                    {"model": m, "token_count": {"input_tokens": i, "output_tokens": o}}
                    for m, (i, o) in self.models.items()
                ],
            }
        }


def zero_quota() -> dict[str, Any]:
    return {"quota": {"token_count": {"input_tokens": 0, "output_tokens": 0}, "model_usage": []}}


class SessionView:
    def __init__(
        self, presenter: Presenter, *, replay: bool = False, approval_mode: str = "default", model: str = ""
    ) -> None:
        self.presenter = presenter
        self.replay = replay
        self.titled = False
        """The session's title (its first prompt) was shown or replayed."""
        self._title: str | None = None
        """The title to tell when the first prompt's turn ends."""
        self.model_fixed = False
        """The model cannot be changed (``--attach``): the model option offers only it."""
        self.approval_mode = approval_mode
        self.model = model
        self.calls: dict[str, _Call] = {}
        self.turns: dict[str, _Turn] = {}
        self.current_turn: str | None = None
        self._main_requests: dict[str, tuple[str, Any]] = {}
        """Main model requests in flight: request id -> (turn id, last usage metadata)."""
        self._text = RetriedText()
        """The current response's text across mid-stream retries."""
        self._retry_reason = ""

    def follow_on(self, *, approval_mode: str, model: str) -> None:
        """The replay has reached the recording's end and the session's live messages
        follow from there: map them as live ones. A call the replay showed is not shown
        again (a question still waiting on it is asked, about the call shown)."""
        self.replay = False
        self.approval_mode, self.model = approval_mode, model

    def config_update(self) -> Update:
        """``config_option_update`` with the session's current mode and model."""
        options = config_options(self.approval_mode, self.model, fixed_model=self.model_fixed)
        return Update({"sessionUpdate": "config_option_update", "configOptions": options})

    # -- the mapping ----------------------------------------------------------------------
    def feed(self, msg: Message) -> list[Effect]:
        match msg:
            case TextStreamed():
                return self._message(self._text.feed(msg.text) if msg.text else None)
            case StreamRetried():
                self._text.retry()
                self._retry_reason = msg.reason
                return []
            case ThoughtStreamed():
                text = f"**{msg.subject}**\n{msg.description}" if msg.subject else msg.description
                return [_chunk("agent_thought_chunk", text)] if text else []
            case ToolCallRequested():
                self.calls[msg.call_id] = _Call(msg.call_id, msg.name, thaw(msg.args))
                return []
            case ScheduleBatch():
                for asked in msg.calls:  # the user's own calls have no ToolCallRequested
                    if asked.client_initiated and asked.call_id not in self.calls:
                        self.calls[asked.call_id] = _Call(asked.call_id, asked.name, thaw(asked.args), user=True)
                return self._message(self._text.end())
            case ToolCallUpdated():
                return self._call_updated(msg)
            case ApprovalRequested():
                return self._approval(msg)
            case ToolFinished():
                call = self.calls.get(msg.call_id)
                if call is not None:
                    call.result = msg.result
                return []
            case SubagentActivity():
                return self._subagent(msg)
            case TurnStarted():
                self.current_turn = msg.turn_id
                self.turns[msg.turn_id] = _Turn(msg.prompt_id)
                return [] if self.replay else [TurnBegan(msg.prompt_id, msg.turn_id)]
            case TurnNotice(kind="invalid_stream"):
                turn = self.turns.get(msg.turn_id)
                if turn is not None:
                    turn.invalid_stream_notice = msg.message
                return []
            case GenerateRequest(role="main") if self.current_turn is not None:
                self._main_requests[msg.request_id] = (self.current_turn, None)
                return self._message(self._text.end())
            case ModelChunk():
                req = self._main_requests.get(msg.request_id)
                chunk = thaw(msg.chunk)
                if req is not None and isinstance(chunk, dict) and isinstance(chunk.get("usageMetadata"), dict):
                    self._main_requests[msg.request_id] = (req[0], chunk["usageMetadata"])
                return []
            case ModelFinished():
                self._count_usage(msg.request_id, msg.model)
                return []
            case ModelFailed() | GenerationCancelled():
                self._main_requests.pop(msg.request_id, None)
                return []
            case TurnEnded():
                return [*self._message(self._text.end()), *self._turn_ended(msg)]
            case SubmitPrompt():
                text = msg.display_text or "".join(
                    str(p.get("text", "")) for p in thaw(msg.parts) if isinstance(p, dict)
                )
                first = not self.titled and not is_ignored_user_text(text.strip())
                self.titled = self.titled or first
                if self.replay:
                    return [_chunk("user_message_chunk", text)] if text else []
                if first:
                    # The session's title, as session/list shows it: its first prompt
                    # (told when its turn ends, not ahead of the turn's own updates).
                    self._title = clean_message(text)
                return []
            case SessionOpened():
                self.approval_mode, self.model = msg.approval_mode, msg.model
                # The session's actors (re)start: what was open before (its process
                # was killed mid-turn, or a failover moved it) ended with that process;
                # a prompt of this editor still waiting on such a turn is answered.
                ended, self.turns, self.current_turn = self.turns, {}, None
                done = [] if self.replay else [PromptDone(t.prompt_id, {"stopReason": "cancelled"}) for t in ended.values()]
                return [*self._message(self._text.end()), *self.interrupted(INTERRUPTED_TOOL_REASON), *done]
            case SessionConfigured():
                changed = msg.approval_mode != self.approval_mode
                model_changed = msg.model != self.model
                self.approval_mode, self.model = msg.approval_mode, msg.model
                if self.replay:
                    return []
                out: list[Effect] = []
                if changed:
                    out.append(
                        Update({"sessionUpdate": "current_mode_update", "currentModeId": mode_id(msg.approval_mode)})
                    )
                if changed or model_changed:
                    # Config options (the spec's successor of modes) kept in step.
                    out.append(self.config_update())
                out.append(Configured(msg.request_id, msg.approval_mode, msg.model))
                return out
            case SessionClosed():
                return [] if self.replay else [Closed(msg.reason)]
            case _:
                return []

    def _message(self, shown: Shown | None) -> list[Effect]:
        """The response's text to send, after saying (when a retried stream said
        something else) that the text sent before it is discarded."""
        if shown is None:
            return []
        out: list[Effect] = []
        if shown.diverged:
            notice = discard_notice(self._retry_reason, where="above")
            out.append(_chunk("agent_message_chunk", f"\n\n[{notice}]\n\n"))
        if shown.text:
            out.append(_chunk("agent_message_chunk", shown.text))
        return out

    def original_read(self, call_id: str, original: str) -> list[Effect]:
        """The file an edit awaiting approval changes, as it is now: announce the call
        with the diff it would make."""
        call = self.calls[call_id]
        p = self._presentation(call)
        assert p.edit_path is not None
        proposed = self.presenter.proposed_text(call.name, call.args, original)
        call.content = [diff_content(p.edit_path, original, proposed)]
        return [self._announce(call, "pending")]

    # -- tool calls ---------------------------------------------------------------------------
    def _subagent(self, msg: SubagentActivity) -> list[Effect]:
        """A subagent's activity as the content of the ``invoke_agent`` call it runs
        under: one line per step, deeper agents indented."""
        call = self.calls.get(msg.call_id)
        if call is None or not call.announced or call.status not in ("executing", "scheduled"):
            return []
        pad = "  " * (msg.depth - 1)
        match msg.kind:
            case "started":
                line = f"{pad}{msg.agent_name} started"
            case "tool_call":
                line = f"{pad}{msg.agent_name}: {msg.tool_name}"
            case "tool_update" if msg.status != "success":
                line = f"{pad}{msg.agent_name}: {msg.tool_name} {msg.status}"
            case "thought" if msg.text:
                line = f"{pad}{msg.agent_name}: {msg.text.splitlines()[0]}"
            case "error":
                line = f"{pad}{msg.agent_name}: {msg.text}"
            case "finished":
                line = f"{pad}{msg.agent_name} finished: {msg.status}"
            case _:
                return []
        call.activity.append(line)
        call.content = [text_content("\n".join(call.activity))]
        return [
            Update(
                {"sessionUpdate": "tool_call_update", "toolCallId": call.call_id, "status": "in_progress", "content": call.content}
            )
        ]

    def _call(self, call_id: str, name: str) -> _Call:
        call = self.calls.get(call_id)
        if call is None:
            call = self.calls[call_id] = _Call(call_id, name)
        return call

    def _presentation(self, call: _Call) -> Presentation:
        if call.presentation is None:
            call.presentation = self.presenter.present(call.name, call.args)
        return call.presentation

    def terminal_attached(self, call_id: str, name: str, terminal_id: str) -> list[Effect]:
        """The call runs in the client's terminal ``terminal_id``: the client shows it
        inside the call, live, and keeps showing it after the call ends."""
        call = self._call(call_id, name)
        call.terminal_id = terminal_id
        if not call.announced:
            return []  # its tool_call will carry the terminal
        return [
            Update(
                {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "content": _with_terminal(call, call.content)}
            )
        ]

    def interrupted(self, text: str) -> list[Effect]:
        """A session whose process was killed in the middle of a turn (a replay of one
        that runs nowhere now, or one reopened since: its ``SessionOpened`` is
        ``resumed``): each call it showed that never settled ends ``failed`` with
        ``text``, instead of running (or waiting) forever in the client."""
        out: list[Effect] = []
        for call in self.calls.values():
            if call.announced and call.status not in ("success", "error", "cancelled"):
                call.status = "error"
                call.content = [text_content(text)]
                out.append(Update({"sessionUpdate": "tool_call_update", **self._fields(call, "failed")}))
        return out

    def _fields(self, call: _Call, status: str) -> dict[str, Any]:
        p = self._presentation(call)
        return {
            "toolCallId": call.call_id,
            "status": status,
            "title": p.title,
            "content": _with_terminal(call, call.content),
            "locations": [dict(loc) for loc in p.locations],
            "kind": p.kind,
        }

    def _announce(self, call: _Call, status: str) -> Update:
        call.announced = True
        return Update({"sessionUpdate": "tool_call", **self._fields(call, status)})

    def _call_updated(self, msg: ToolCallUpdated) -> list[Effect]:
        call = self._call(msg.call_id, msg.name)
        previous, call.status = call.status, msg.status
        p = self._presentation(call)
        match msg.status:
            case "awaiting_approval":
                if p.edit_path is not None and not self.replay:
                    return [NeedOriginal(call.call_id, p.edit_path)]
                call.content = self.presenter.running_content(p)
                return [self._announce(call, "pending")]
            case "executing":
                if not call.announced:
                    call.content = self.presenter.running_content(p)
                    return [self._announce(call, "in_progress")]
                return [Update({"sessionUpdate": "tool_call_update", "toolCallId": call.call_id, "status": "in_progress"})]
            case "success":
                display = thaw(call.result.return_display) if call.result is not None else None
                call.content = self.presenter.result_content(call.name, display)
                if call.user and call.result is not None and not any(c.get("type") == "diff" for c in call.content):
                    # The user ran it to see it: the shell's output, the listing, the file.
                    text = result_text(call.name, display, _text_of(thaw(call.result.llm_content)))
                    call.content = [text_content(text)] if text else []
                kind = "tool_call_update" if call.announced else "tool_call"
                call.announced = True
                out: list[Effect] = [Update({"sessionUpdate": kind, **self._fields(call, "completed")})]
                data = thaw(call.result.data) if call.result is not None else None
                if isinstance(data, dict) and "todos" in data:
                    out.append(Update({"sessionUpdate": "plan", "entries": plan_entries(data["todos"])}))
                return out
            case "error":
                text = msg.detail or "The tool call failed."
                if call.announced:
                    # Gemini CLI's failure update: status, the message, the kind.
                    return [
                        Update(
                            {
                                "sessionUpdate": "tool_call_update",
                                "toolCallId": call.call_id,
                                "status": "failed",
                                "content": _with_terminal(call, [text_content(text)]),
                                "kind": p.kind,
                            }
                        )
                    ]
                call.content = [text_content(text)]
                return [self._announce(call, "failed")]
            case "cancelled":
                if not call.announced:
                    return []  # never started: the client never heard of it
                if call.name in SHELL_TOOLS and previous == "executing":
                    text = SHELL_CANCELLED_TEXT
                else:
                    text = msg.detail or "Cancelled."
                call.content = [text_content(text)]
                return [Update({"sessionUpdate": "tool_call_update", **self._fields(call, "failed")})]
            case _:
                return []

    def _approval(self, msg: ApprovalRequested) -> list[Effect]:
        call = self._call(msg.call_id, msg.name)
        args = thaw(msg.args)
        if args != call.args:  # a hook changed them
            call.args, call.presentation = args, None
        out: list[Effect] = []
        if not call.announced:
            call.content = self.presenter.running_content(self._presentation(call))
            out.append(self._announce(call, "pending"))
        if self.replay:
            return out
        details = thaw(msg.details)
        details_type = str(details.get("type", "info")) if isinstance(details, dict) else "info"
        out.append(
            AskPermission(
                correlation_id=msg.correlation_id,
                call_id=call.call_id,
                tool_call=self._fields(call, "pending"),
                options=tuple(permission_options(details_type)),
            )
        )
        return out

    # -- turns ----------------------------------------------------------------------------------
    def _count_usage(self, request_id: str, model: str) -> None:
        entry = self._main_requests.pop(request_id, None)
        if entry is None:
            return
        turn_id, usage = entry
        turn = self.turns.get(turn_id)
        if turn is None or not isinstance(usage, dict):
            return
        prompt = token_count(usage.get("promptTokenCount"))
        output = token_count(usage.get("candidatesTokenCount"))
        turn.context = (token_count(usage.get("totalTokenCount")) or prompt + output, model)
        turn.input_tokens += prompt
        turn.output_tokens += output
        if prompt or output:
            counts = turn.models.setdefault(model, [0, 0])
            counts[0] += prompt
            counts[1] += output

    def _turn_ended(self, msg: TurnEnded) -> list[Effect]:
        turn = self.turns.pop(msg.turn_id, None)
        if self.current_turn == msg.turn_id:
            self.current_turn = None
        if turn is None or self.replay:
            return []
        out: list[Effect] = []
        if self._title is not None:
            out.append(Update({"sessionUpdate": "session_info_update", "title": self._title}))
            self._title = None
        if turn.context is not None:
            # What the conversation now holds of the model's context window (the
            # spec's usage_update), before the answer.
            used, model = turn.context
            out.append(Update({"sessionUpdate": "usage_update", "used": used, "size": token_limit(model)}))
        return [*out, self._answer(turn, msg)]

    def _answer(self, turn: _Turn, msg: TurnEnded) -> PromptDone:
        if msg.stop_reason == "error":
            err = msg.error
            return PromptDone(
                turn.prompt_id,
                error=RpcError(
                    (err.status if err is not None and err.status else None) or 500,
                    err.message if err is not None else "The turn failed.",
                ),
            )
        reason = stop_reason(msg.stop_reason, turn.invalid_stream_notice)
        if reason == "cancelled":
            return PromptDone(turn.prompt_id, {"stopReason": "cancelled"})
        return PromptDone(turn.prompt_id, {"stopReason": reason, "_meta": turn.meta()})


def _with_terminal(call: _Call, content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``content`` led by the call's terminal, when it ran in one (a later update's
    content replaces the earlier one: the terminal must stay in each)."""
    if call.terminal_id is None:
        return content
    return [{"type": "terminal", "terminalId": call.terminal_id}, *(c for c in content if c.get("type") != "terminal")]


def _text_of(llm_content: Any) -> str:
    if isinstance(llm_content, str):
        return llm_content
    if isinstance(llm_content, list | tuple):
        return "".join(str(p.get("text", "")) for p in llm_content if isinstance(p, dict))
    return ""


def _chunk(kind: str, text: str) -> Update:
    return Update({"sessionUpdate": kind, "content": {"type": "text", "text": text}})


def collapse_replay(updates: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A replay as a client wants it: each call once, as a ``tool_call`` with its final
    state, where it started; streamed text of one message joined into one chunk."""
    out: list[dict[str, Any]] = []
    calls: dict[str, int] = {}
    for update in updates:
        kind = update.get("sessionUpdate")
        if kind in ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk"):
            if out and out[-1].get("sessionUpdate") == kind:
                last = out[-1]
                last["content"] = {
                    "type": "text",
                    "text": str(last["content"].get("text", "")) + str(update["content"].get("text", "")),
                }
                continue
            out.append({**update, "content": dict(update["content"])})
        elif kind == "tool_call":
            calls[str(update["toolCallId"])] = len(out)
            out.append(dict(update))
        elif kind == "tool_call_update" and str(update.get("toolCallId")) in calls:
            merged = out[calls[str(update["toolCallId"])]]
            merged.update({k: v for k, v in update.items() if k != "sessionUpdate"})
        else:
            out.append(dict(update))
    return out
