"""The session actor: one conversation.

Accepts: ``OpenSession``, ``SubmitPrompt``, ``CancelTurn``, ``ConfigureSession``,
``AddContext``, ``CloseSession`` from clients; ``TurnEnded``, ``HistoryCompressed`` (the conversation is replaced by its
compressed form) and ``TurnCancelAcknowledged`` from the turn actor.
Emits: ``SessionOpened``, ``PromptQueued``, ``SessionConfigured``, ``ContextAdded``, ``StartTurn`` to the turn actor,
``CancelTurn`` forwarded to it, ``TurnCancelAcknowledged`` and ``SessionClosed`` for
clients.
Owns: the history (Gemini ``Content`` list), the prompt queue, the settings of the
session (model, approval mode) and its counters (model turns made, the last prompt's
token count, whether a compression inflated).
Stops: on ``CloseSession`` (a running turn is cancelled first; ``SessionClosed`` is its
last message), when its inbox closes, or by its supervisor's cancel.
"""

from __future__ import annotations

import collections
from typing import Any

import attrs
import trio

from bus import Bus, Port
from bus.messages import (
    AddContext,
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


@attrs.frozen(kw_only=True)
class SessionWiring:
    session_id: str
    address: str
    turn_address: str
    max_session_turns: int = -1


@attrs.define
class SessionState:
    """The pure state of a session."""

    model: str = ""
    approval_mode: str = "default"
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
    cancelling: str | None = None
    """The turn whose cancel was asked and whose acknowledgement is still due: the next
    turn starts (or the session closes) only after it."""


class SessionActor:
    def __init__(self, bus: Bus, wiring: SessionWiring) -> None:
        self.bus = bus
        self.w = wiring
        self.state = SessionState(max_session_turns=wiring.max_session_turns)

    async def run(self, *, task_status: trio.TaskStatus[Port] = trio.TASK_STATUS_IGNORED) -> None:
        port = self.bus.connect(self.w.address)
        task_status.started(port)
        try:
            async for env in port:
                msg = env.message
                st = self.state
                match msg:
                    case OpenSession():
                        st.model, st.approval_mode, st.workspace = msg.model, msg.approval_mode, msg.workspace
                        st.history = list(msg.history)
                        await port.publish(
                            SessionOpened(
                                session_id=self.w.session_id,
                                model=msg.model,
                                approval_mode=msg.approval_mode,
                                workspace=msg.workspace,
                                resumed=bool(msg.history),
                            )
                        )
                    case SubmitPrompt():
                        if st.closing is not None:
                            continue
                        st.queue.append(msg)
                        if st.running_turn is None:
                            await self._start_next(port)
                        else:
                            await port.publish(
                                PromptQueued(
                                    session_id=self.w.session_id,
                                    prompt_id=msg.prompt_id,
                                    position=len(st.queue),
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
                        await port.publish(
                            SessionConfigured(
                                session_id=self.w.session_id,
                                request_id=msg.request_id,
                                approval_mode=st.approval_mode,
                                model=st.model,
                                requested_by=msg.requested_by,
                            )
                        )
                    case AddContext():
                        request = attrs.evolve(msg, requested_by=msg.requested_by or env.sender)
                        if st.running_turn is None:
                            await self._add_context(port, request)
                        else:
                            st.pending_context.append(request)
                    case CancelTurn():
                        if st.running_turn is None or (msg.turn_id and msg.turn_id != st.running_turn):
                            # Nothing of it runs (any more): acknowledged at once, and
                            # never mistaken for the running turn's acknowledgement.
                            await port.publish(
                                TurnCancelAcknowledged(
                                    session_id=self.w.session_id,
                                    turn_id=msg.turn_id,
                                    requested_by=msg.requested_by,
                                )
                            )
                        elif st.cancelling is None:
                            st.cancelling = st.running_turn
                            await port.send(
                                attrs.evolve(msg, turn_id=st.running_turn), to=self.w.turn_address
                            )
                    case TurnEnded():
                        if msg.history_reset:
                            st.history = [h for h in st.history if _is_environment_context(h)]
                        st.history.extend(msg.history_added)
                        st.model_requests += msg.model_requests
                        st.last_prompt_token_count = -1 if msg.history_reset else msg.last_prompt_token_count
                        st.compression_failed = msg.compression_failed
                        st.running_turn = None
                        pending, st.pending_context = st.pending_context, []
                        for request in pending:
                            await self._add_context(port, request)
                        if st.cancelling is not None:
                            continue  # the next turn starts after the acknowledgement
                        if st.closing is not None:
                            break
                        await self._start_next(port)
                    case HistoryCompressed():
                        # The running turn compressed the conversation; its later
                        # additions come with its TurnEnded.
                        if msg.history:
                            st.history = list(msg.history)
                    case TurnCancelAcknowledged():
                        await port.publish(msg)
                        if msg.turn_id is None or msg.turn_id != st.cancelling:
                            continue
                        st.cancelling = None
                        if st.running_turn is None:
                            if st.closing is not None:
                                break
                            await self._start_next(port)
                    case CloseSession():
                        st.closing = msg.reason
                        st.queue.clear()
                        if st.running_turn is None:
                            break
                        # The turn ends (TurnEnded), then acknowledges the cancel: both
                        # come before SessionClosed.
                        if st.cancelling is not None:
                            continue  # already being cancelled
                        st.cancelling = st.running_turn
                        await port.send(
                            CancelTurn(
                                session_id=self.w.session_id,
                                turn_id=st.running_turn,
                                reason=msg.reason,
                                requested_by=env.sender,
                            ),
                            to=self.w.turn_address,
                        )
                    case _:
                        pass
            await port.publish(
                SessionClosed(session_id=self.w.session_id, reason=self.state.closing or "inbox closed")
            )
        finally:
            port.close()

    async def _add_context(self, port: Port, request: AddContext) -> None:
        """A user turn of its own, as Gemini CLI adds shell-mode output to its history."""
        added = ContextAdded(
            session_id=self.w.session_id,
            request_id=request.request_id,
            content={"role": "user", "parts": list(request.parts)},
            requested_by=request.requested_by,
        )
        self.state.history.append(added.content)
        await port.publish(added)

    async def _start_next(self, port: Port) -> None:
        st = self.state
        if not st.queue:
            return
        prompt = st.queue.popleft()
        st.running_turn = new_id()
        await port.send(
            StartTurn(
                session_id=self.w.session_id,
                turn_id=st.running_turn,
                prompt_id=prompt.prompt_id,
                model=st.model,
                approval_mode=st.approval_mode,
                history=tuple(st.history),
                parts=prompt.parts,
                session_turns_used=st.model_requests,
                max_session_turns=st.max_session_turns,
                last_prompt_token_count=st.last_prompt_token_count,
                compression_failed=st.compression_failed,
            ),
            to=self.w.turn_address,
        )


def _is_environment_context(content: Any) -> bool:
    parts = list(content.get("parts") or [])
    return bool(parts) and str(parts[0].get("text", "")).startswith("<session_context>")
