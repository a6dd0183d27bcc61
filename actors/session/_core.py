"""The session's decisions: state + message in, effects out (no I/O, no trio).

``SessionCore.feed(msg, sender)`` takes one message of the session's inbox and returns
what the actor does, in order: ``Publish`` (for observers and clients), ``ToTurn`` (to
the turn actor) and at last ``Stop`` (the session is over: ``SessionClosed`` is
published before it, and nothing is fed after it). The trio shell (``_actor``) only
carries the effects out.

==============================  ===========================================================
message                          effects
==============================  ===========================================================
``OpenSession``                  ``SessionOpened`` (``resumed`` when it carries history)
``SubmitPrompt``                 ``StartTurn`` at once when no turn runs (and no cancel is
                                 due), ``PromptQueued`` otherwise; dropped while closing
``ConfigureSession``             ``SessionConfigured`` (from the next turn on)
``AddContext``                   ``ContextAdded`` at once between turns; after the running
                                 turn's ``TurnEnded`` otherwise
``CancelTurn``                   nothing running (or another turn named): an immediate
                                 ``TurnCancelAcknowledged``; the running turn: forwarded to
                                 the turn actor once (a second cancel is folded into it)
``TurnEnded``                    its history is taken, pending context added, then the
                                 next prompt's ``StartTurn`` (after the cancel's
                                 acknowledgement, when one is due) or, closing, ``Stop``
``HistoryCompressed``            the conversation is replaced (no effect)
``TurnCancelAcknowledged``       published; the acknowledgement of the cancel due lets the
                                 next turn start (or the session stop)
``CloseSession``                 the queue is dropped; ``Stop`` at once between turns, else
                                 the running turn is cancelled, and ``Stop`` follows its
                                 ``TurnEnded`` and acknowledgement (or the acknowledgement
                                 of a cancel already due)
==============================  ===========================================================

The orderings this guarantees (checked by ``tests/session/test_orderings.py``): at most
one turn runs; no turn starts while a cancel's acknowledgement is due; prompts start in
the order they came; ``SessionClosed`` is the last message, after the running turn's
end and its cancel's acknowledgement.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeGuard, assert_never, get_args

import attrs

from bus.json_values import FrozenTuple
from bus.messages import (
    AddContext,
    ApprovalMode,
    CancelTurn,
    CloseSession,
    ConfigureSession,
    ContextAdded,
    HistoryCompressed,
    OpenSession,
    PromptQueued,
    SessionClosed,
    SessionConfigured,
    SessionOpened,
    StartTurn,
    SubmitPrompt,
    TurnCancelAcknowledged,
    TurnEnded,
    new_id,
)

if TYPE_CHECKING:
    from bus.messages import Message  # the union: imported when first used (bus.messages)

SessionInbox: TypeAlias = (
    OpenSession
    | SubmitPrompt
    | ConfigureSession
    | AddContext
    | CancelTurn
    | TurnEnded
    | HistoryCompressed
    | TurnCancelAcknowledged
    | CloseSession
)
"""Every message the session acts on; anything else sent to it is ignored."""

_INBOX_TYPES: tuple[type, ...] = get_args(SessionInbox)


def is_session_inbox(msg: Message) -> TypeGuard[SessionInbox]:
    return isinstance(msg, _INBOX_TYPES)


@attrs.frozen
class Publish:
    """Publish ``message`` (to observers and clients)."""

    message: Message


@attrs.frozen
class ToTurn:
    """Send ``message`` to the session's turn actor."""

    message: StartTurn | CancelTurn


@attrs.frozen
class Stop:
    """The session is over: the actor stops reading its inbox."""


Effect: TypeAlias = Publish | ToTurn | Stop


@attrs.define
class SessionState:
    """The pure state of a session."""

    model: str = ""
    approval_mode: ApprovalMode = "default"
    workspace: str = ""
    history: list[Any] = attrs.field(factory=list)
    queue: collections.deque[SubmitPrompt] = attrs.field(factory=collections.deque)
    running_turn: str | None = None
    model_requests: int = 0
    last_prompt_token_count: int = -1
    """Prompt tokens of the last successful model request (-1: estimate from history)."""
    compression_failed: bool = False
    max_session_turns: int = -1
    pending_context: list[AddContext] = attrs.field(factory=list)
    """Context a client added while a turn ran: appended to the history when it ends
    (the turn's own additions come first)."""
    closing: str | None = None
    """The reason of the ``CloseSession`` received (no prompt is taken any more)."""
    cancelling: str | None = None
    """The turn whose cancel was asked and whose acknowledgement is still due: the next
    turn starts (or the session closes) only after it."""
    stopped: bool = False
    """``Stop`` was returned: nothing may be fed any more."""


class SessionCore:
    """One session's state and its reactions to its inbox."""

    def __init__(
        self,
        session_id: str,
        *,
        max_session_turns: int = -1,
        new_turn_id: Callable[[], str] = new_id,
    ) -> None:
        self.session_id = session_id
        self.state = SessionState(max_session_turns=max_session_turns)
        self._new_turn_id = new_turn_id

    def feed(self, msg: SessionInbox, sender: str) -> list[Effect]:
        """The effects of ``msg`` (sent by ``sender``), in the order they are carried out."""
        st = self.state
        if st.stopped:
            raise RuntimeError("the session was fed a message after it stopped")
        out: list[Effect] = []
        match msg:
            case OpenSession():
                st.model, st.approval_mode, st.workspace = msg.model, msg.approval_mode, msg.workspace
                st.history = list(msg.history)
                out.append(
                    Publish(
                        SessionOpened(
                            session_id=self.session_id,
                            model=msg.model,
                            approval_mode=msg.approval_mode,
                            workspace=msg.workspace,
                            resumed=bool(msg.history),
                        )
                    )
                )
            case SubmitPrompt():
                if st.closing is not None:
                    return out
                st.queue.append(msg)
                if st.running_turn is None and st.cancelling is None:
                    self._start_next(out)
                else:
                    out.append(
                        Publish(
                            PromptQueued(session_id=self.session_id, prompt_id=msg.prompt_id, position=len(st.queue))
                        )
                    )
            case ConfigureSession():
                # Applies from the next turn (a running turn keeps its settings).
                if msg.approval_mode is not None:
                    st.approval_mode = msg.approval_mode
                if msg.model is not None:
                    st.model = msg.model
                if msg.max_session_turns is not None:
                    st.max_session_turns = msg.max_session_turns
                out.append(
                    Publish(
                        SessionConfigured(
                            session_id=self.session_id,
                            request_id=msg.request_id,
                            approval_mode=st.approval_mode,
                            model=st.model,
                            requested_by=msg.requested_by,
                        )
                    )
                )
            case AddContext():
                request = attrs.evolve(msg, requested_by=msg.requested_by or sender)
                if st.running_turn is None:
                    self._add_context(out, request)
                else:
                    st.pending_context.append(request)
            case CancelTurn():
                if st.running_turn is None or (msg.turn_id and msg.turn_id != st.running_turn):
                    # Nothing of it runs (any more): acknowledged at once, and never
                    # mistaken for the running turn's acknowledgement.
                    out.append(
                        Publish(
                            TurnCancelAcknowledged(
                                session_id=self.session_id, turn_id=msg.turn_id, requested_by=msg.requested_by
                            )
                        )
                    )
                elif st.cancelling is None:
                    st.cancelling = st.running_turn
                    out.append(ToTurn(attrs.evolve(msg, turn_id=st.running_turn)))
            case TurnEnded():
                if msg.history_reset:
                    st.history = [h for h in st.history if is_environment_context(h)]
                st.history.extend(msg.history_added)
                st.model_requests += msg.model_requests
                st.last_prompt_token_count = -1 if msg.history_reset else msg.last_prompt_token_count
                st.compression_failed = msg.compression_failed
                st.running_turn = None
                pending, st.pending_context = st.pending_context, []
                for request in pending:
                    self._add_context(out, request)
                if st.cancelling is None:  # else: the next turn starts after the acknowledgement
                    self._next_or_stop(out)
            case HistoryCompressed():
                # The running turn compressed the conversation; its later additions come
                # with its TurnEnded.
                if msg.history:
                    st.history = list(msg.history)
            case TurnCancelAcknowledged():
                out.append(Publish(msg))
                if msg.turn_id is not None and msg.turn_id == st.cancelling:
                    st.cancelling = None
                    if st.running_turn is None:
                        self._next_or_stop(out)
            case CloseSession():
                st.closing = msg.reason
                st.queue.clear()
                if st.cancelling is not None:
                    pass  # stops after that cancel's acknowledgement (and its turn's end)
                elif st.running_turn is None:
                    self._stop(out)
                else:
                    # The turn ends (TurnEnded), then acknowledges the cancel: both come
                    # before SessionClosed.
                    st.cancelling = st.running_turn
                    out.append(
                        ToTurn(
                            CancelTurn(
                                session_id=self.session_id,
                                turn_id=st.running_turn,
                                reason=msg.reason,
                                requested_by=sender,
                            )
                        )
                    )
            case _ as unreachable:
                assert_never(unreachable)
        return out

    def inbox_closed(self) -> list[Effect]:
        """The session's inbox closed: it stops where it is."""
        if self.state.stopped:
            return []
        out: list[Effect] = []
        self._stop(out)
        return out

    def _stop(self, out: list[Effect]) -> None:
        self.state.stopped = True
        reason = self.state.closing or "inbox closed"
        out.extend([Publish(SessionClosed(session_id=self.session_id, reason=reason)), Stop()])

    def _next_or_stop(self, out: list[Effect]) -> None:
        if self.state.closing is not None:
            self._stop(out)
        else:
            self._start_next(out)

    def _add_context(self, out: list[Effect], request: AddContext) -> None:
        """A user turn of its own, as Gemini CLI adds shell-mode output to its history."""
        added = ContextAdded(
            session_id=self.session_id,
            request_id=request.request_id,
            content={"role": "user", "parts": list(request.parts)},
            requested_by=request.requested_by,
        )
        self.state.history.append(added.content)
        out.append(Publish(added))

    def _start_next(self, out: list[Effect]) -> None:
        st = self.state
        if not st.queue:
            return
        prompt = st.queue.popleft()
        st.running_turn = self._new_turn_id()
        out.append(
            ToTurn(
                StartTurn(
                    session_id=self.session_id,
                    turn_id=st.running_turn,
                    prompt_id=prompt.prompt_id,
                    model=st.model,
                    approval_mode=st.approval_mode,
                    # Every item came frozen in a message: the new message takes them as they are.
                    history=FrozenTuple(st.history),
                    parts=prompt.parts,
                    session_turns_used=st.model_requests,
                    max_session_turns=st.max_session_turns,
                    last_prompt_token_count=st.last_prompt_token_count,
                    compression_failed=st.compression_failed,
                )
            )
        )


def is_environment_context(content: Any) -> bool:
    """The ``<session_context>`` user turn a cleared history keeps."""
    parts = list(content.get("parts") or [])
    return bool(parts) and str(parts[0].get("text", "")).startswith("<session_context>")
