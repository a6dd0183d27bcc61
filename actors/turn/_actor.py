"""The turn actor: one prompt's model <-> tool loop, one turn at a time per session.

Accepts (``TurnInbox``): ``StartTurn`` and ``CancelTurn`` from the session; the
gateway's replies (``ModelChunk``, ``ModelRetrying``, ``ModelFinished``, ``ModelFailed``,
``GenerationCancelled``), the hook runner's (``HooksFinished``), the scheduler's
(``BatchSettled``, ``BatchCancelAcknowledged``) and the loop detector's
(``LoopVerdict``). Anything else sent to it is ignored.
Guards (Gemini CLI's ``processTurn``), before each model request: ``maxSessionTurns``,
the re-prompt bound ``MAX_TURNS``, compression (``_compression``; the new history goes
to the session as ``HistoryCompressed``), the context-window check (``_tokens``), and
the loop detector's ``turn_started`` check; while the response streams, every text
chunk and every call is put to the loop detector (``CheckLoop``) before it is shown,
and a looping one cuts the stream (first strike: a recovery prompt; second:
``loop_detected``); after an answer without calls, the next-speaker check
(``_next_speaker``, off by default).
Emits: ``GenerateRequest`` to the gateway, ``ScheduleBatch``/``CancelBatch`` to the
scheduler, turn events for observers (``TurnStarted``, ``ModelSelected``,
``TextStreamed``, ``ThoughtStreamed``, ``ToolCallRequested``, ``StreamRetried``,
``TurnNotice``), and ``TurnEnded`` then (after a cancel) ``TurnCancelAcknowledged`` to
the session. ``TurnEnded`` is the last message of a turn: before sending it the turn
waits for the terminal reply of every request it made.
Owns: the running turn's state (its history additions, its requests in flight).
Stops: when its inbox closes (a running turn is cancelled the same way as by
``CancelTurn``), or by its supervisor's cancel.

The pure parts are in ``_core`` (``TurnRouter``: which turn runs and where each message
goes; the guards and hook readings; ``TurnHistory``); one prompt's loop, which sends and
waits, is ``_turn._Turn`` (its requests to its peers: ``_requests``); this module is
the trio shell.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import assert_never

import trio

from bus import Bus, Port

from . import _compression
from ._core import (
    Acknowledge,
    Begin,
    Route,
    Routed,
    RouterEffect,
    RunningTurn,
    TurnRouter,
    is_turn_inbox,
)
from ._logic import RequestBuilder
from ._turn import _Turn
from ._wiring import TurnWiring

__all__ = ["TurnActor", "TurnWiring", "_Turn"]


class TurnActor:
    def __init__(self, bus: Bus, wiring: TurnWiring) -> None:
        self.bus = bus
        self.w = wiring
        self.router = TurnRouter(wiring.session_id)
        self._inbox: trio.MemorySendChannel[Routed] | None = None
        """The running turn's channel of routed messages."""
        # The session's count of compression truncation files outlives each turn.
        self._saver = (
            _compression.OutputSaver(Path(wiring.project_temp_dir)) if wiring.project_temp_dir else None
        )
        # The requests' contents, made from what each request adds (for the session's turns).
        self._builder = RequestBuilder()

    async def run(self, *, task_status: trio.TaskStatus[Port] = trio.TASK_STATUS_IGNORED) -> None:
        port = self.bus.connect(self.w.address)
        try:
            async with trio.open_nursery() as nursery:
                task_status.started(port)
                async for env in port:
                    if is_turn_inbox(env.message):
                        await self._carry_out(port, nursery, self.router.feed(env.message))
                # Inbox closed: stop a running turn the orderly way.
                await self._carry_out(port, nursery, self.router.inbox_closed())
        finally:
            port.close()

    async def _carry_out(self, port: Port, nursery: trio.Nursery, effects: list[RouterEffect]) -> None:
        for effect in effects:
            match effect:
                case Begin():
                    # Unbounded: the actor's loop must never block routing a reply while
                    # the turn waits on something else (a slow hook).
                    send, receive = trio.open_memory_channel[Routed](math.inf)
                    self._inbox = send
                    nursery.start_soon(self._drive, port, effect.turn, receive)
                case Route():
                    assert self._inbox is not None
                    # Unbounded: handed over without a yield (the turn's task runs at
                    # its next scheduler round, as it would after a yield here).
                    self._inbox.send_nowait(effect.message)
                case Acknowledge():
                    await port.send(effect.message, to=self.w.session_address)
                case _ as unreachable:
                    assert_never(unreachable)

    async def _drive(self, port: Port, running: RunningTurn, receive: trio.MemoryReceiveChannel[Routed]) -> None:
        try:
            await _Turn(port, self.w, running, receive, self._saver, self._builder).run()
        finally:
            self.router.finished(running)
