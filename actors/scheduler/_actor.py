"""The tool scheduler actor: one batch of function calls at a time, in waves.

Accepts: ``ScheduleBatch`` and ``CancelBatch`` from a turn, ``ApprovalAnswered`` from
clients, ``ToolFinished`` from executors.
Emits: ``ToolCallUpdated`` for every state change (validating, scheduled,
awaiting_approval, executing, success, error, cancelled), ``ApprovalRequested``,
``ApprovalSettled``, ``RunTool``/``CancelTool`` to executors, and to the batch's
requester ``BatchSettled`` (every call, in request order) and, after a cancel,
``BatchCancelAcknowledged``.
Owns: the queue of batches (a batch that arrives while one runs waits, FIFO), the
running batch's calls, pending approvals. Policy decisions come from the policy engine
it is wired with; tools are known only as ``ToolSpec`` data.
Stops: when its inbox closes (a running batch is cancelled and acknowledged), or by its
supervisor's cancel.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, assert_never

import attrs
import trio

from bus import Bus, Port
from bus.messages import (
    ApprovalAnswered,
    ApprovalMode,
    ApprovalModeChanged,
    BatchCancelAcknowledged,
    CancelBatch,
    HooksFinished,
    ScheduleBatch,
    ToolFinished,
)

from ._wiring import DENIED_BY_POLICY, PolicyLike, SchedulerInbox, SchedulerWiring

if TYPE_CHECKING:
    from ._batch import RunningBatch

__all__ = ["DENIED_BY_POLICY", "PolicyLike", "SchedulerActor", "SchedulerWiring"]


class SchedulerActor:
    def __init__(self, bus: Bus, wiring: SchedulerWiring) -> None:
        self.bus = bus
        self.w = wiring
        self._queue: collections.deque[ScheduleBatch] = collections.deque()
        self._batch: RunningBatch | None = None
        self._wake = trio.Event()
        self._mode: ApprovalMode | None = None
        """The approval mode set mid-turn (``ApprovalModeChanged``): it holds for every
        later batch, also those the running turn still sends with its starting mode."""

    async def run(self, *, task_status: trio.TaskStatus[Port] = trio.TASK_STATUS_IGNORED) -> None:
        port = self.bus.connect(self.w.address)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._batches, port)
                task_status.started(port)
                async for env in port:
                    msg = env.message
                    if not isinstance(msg, SchedulerInbox):
                        continue  # no peer is wired to send it anything else
                    match msg:
                        case ScheduleBatch():
                            if self._mode is not None:
                                msg = attrs.evolve(msg, approval_mode=self._mode)
                            self._queue.append(msg)
                            self._wake.set()
                        case CancelBatch():
                            await self._cancel(port, msg, env.sender)
                        case ApprovalModeChanged():
                            self._mode = msg.approval_mode
                            self._queue = collections.deque(
                                q if q is _STOP else attrs.evolve(q, approval_mode=msg.approval_mode)
                                for q in self._queue
                            )
                            if self._batch is not None:
                                # Later decisions of the running batch use the new mode;
                                # its waiting calls are looked at again.
                                self._batch.batch = attrs.evolve(self._batch.batch, approval_mode=msg.approval_mode)
                                await self._batch.inbox_send.send(msg)
                        case ToolFinished() | ApprovalAnswered() | HooksFinished():
                            if self._batch is not None:
                                await self._batch.inbox_send.send(msg)
                        case _ as unreachable:
                            assert_never(unreachable)
                # Inbox closed: cancel what runs, drop the queue (acknowledging each).
                for queued in list(self._queue):
                    await self._cancel(
                        port,
                        CancelBatch(session_id=queued.session_id, batch_id=queued.batch_id, reason="shutdown"),
                        queued.reply_to,
                    )
                if self._batch is not None:
                    await self._batch.inbox_send.send(
                        CancelBatch(session_id=self.w.session_id, batch_id=self._batch.batch.batch_id, reason="shutdown")
                    )
                self._queue.append(_STOP)
                self._wake.set()
        finally:
            port.close()

    async def _cancel(self, port: Port, msg: CancelBatch, sender: str) -> None:
        # A batch's machinery is imported with the first batch (a session whose model
        # calls no tool never needs it).
        from ._batch import RunningBatch, send_quietly

        if self._batch is not None and self._batch.batch.batch_id == msg.batch_id:
            await self._batch.inbox_send.send(msg)
            return
        for queued in list(self._queue):
            if queued is not _STOP and queued.batch_id == msg.batch_id:
                # A queued batch never started: every call is cancelled as queued.
                self._queue.remove(queued)
                batch = RunningBatch(self, port, queued)
                for call in batch.calls:
                    await batch.cancel_call(call, "Operation cancelled")
                await batch.settle()
                await send_quietly(
                    port,
                    BatchCancelAcknowledged(session_id=queued.session_id, batch_id=queued.batch_id),
                    queued.reply_to,
                )
                return
        # Already settled (the cancel crossed its BatchSettled) or unknown: nothing runs.
        await send_quietly(
            port, BatchCancelAcknowledged(session_id=msg.session_id, batch_id=msg.batch_id), sender
        )

    async def _batches(self, port: Port) -> None:
        while True:
            while not self._queue:
                self._wake = trio.Event()
                await self._wake.wait()
            batch_msg = self._queue.popleft()
            if batch_msg is _STOP:
                return
            from ._batch import RunningBatch

            self._batch = RunningBatch(self, port, batch_msg)
            try:
                await self._batch.run()
            finally:
                self._batch = None


_STOP = ScheduleBatch(session_id="", batch_id="", reply_to="", approval_mode="default")
