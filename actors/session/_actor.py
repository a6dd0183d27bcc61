"""The session actor: one conversation.

Accepts (``SessionInbox``): ``OpenSession``, ``SubmitPrompt``, ``CancelTurn``,
``ConfigureSession``, ``AddContext``, ``CloseSession`` from clients; ``TurnEnded``,
``HistoryCompressed`` (the conversation is replaced by its compressed form) and
``TurnCancelAcknowledged`` from the turn actor. Anything else is ignored.
Emits: ``SessionOpened``, ``PromptQueued``, ``SessionConfigured``, ``ContextAdded``,
``StartTurn`` to the turn actor, ``CancelTurn`` forwarded to it,
``TurnCancelAcknowledged`` and ``SessionClosed`` for clients.
Owns: the history (Gemini ``Content`` list), the prompt queue, the settings of the
session (model, approval mode) and its counters (model turns made, the last prompt's
token count, whether a compression inflated) -- all in the pure core (``_core``), whose
effects this shell carries out in order.
Stops: on ``CloseSession`` (a running turn is cancelled first; ``SessionClosed`` is its
last message), when its inbox closes, or by its supervisor's cancel.
"""

from __future__ import annotations

from typing import assert_never

import attrs
import trio

from bus import Bus, Port

from ._core import Effect, Publish, SessionCore, Stop, ToTurn, is_session_inbox


@attrs.frozen(kw_only=True)
class SessionWiring:
    session_id: str
    address: str
    turn_address: str
    max_session_turns: int = -1


class SessionActor:
    def __init__(self, bus: Bus, wiring: SessionWiring) -> None:
        self.bus = bus
        self.w = wiring
        self.core = SessionCore(wiring.session_id, max_session_turns=wiring.max_session_turns)

    async def run(self, *, task_status: trio.TaskStatus[Port] = trio.TASK_STATUS_IGNORED) -> None:
        port = self.bus.connect(self.w.address)
        task_status.started(port)
        try:
            async for env in port:
                if not is_session_inbox(env.message):
                    continue  # not a message of the session's: nothing to do
                if await self._carry_out(port, self.core.feed(env.message, env.sender)):
                    return
            await self._carry_out(port, self.core.inbox_closed())
        finally:
            port.close()

    async def _carry_out(self, port: Port, effects: list[Effect]) -> bool:
        """Carry out ``effects`` in order; whether the session stopped."""
        for effect in effects:
            match effect:
                case Publish():
                    await port.publish(effect.message)
                case ToTurn():
                    await port.send(effect.message, to=self.w.turn_address)
                case Stop():
                    return True
                case _ as unreachable:
                    assert_never(unreachable)
        return False
