"""Helpers for tests (ours and users'): capture a session's messages, script a peer.

    async with trio.open_nursery() as nursery:
        capture = await nursery.start(capture_session, bus, "s1")
        ...
        assert [type(m) for m in capture.messages] == [...]
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import attrs
import trio

from . import ALL_SESSIONS, Bus, Envelope, Port
from .messages import Message

M = TypeVar("M")


@attrs.define
class Capture:
    """Every envelope of a session, in delivery order."""

    envelopes: list[Envelope] = attrs.field(factory=list)
    _changed: trio.Event = attrs.field(factory=trio.Event)

    @property
    def messages(self) -> list[Message]:
        return [e.message for e in self.envelopes]

    def of_type(self, cls: type[M]) -> list[M]:
        return [m for m in self.messages if isinstance(m, cls)]

    def _add(self, env: Envelope) -> None:
        self.envelopes.append(env)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, predicate: Callable[[Message], bool]) -> Message:
        """Wait until a message matching ``predicate`` has been captured; return it."""
        seen = 0
        while True:
            for env in self.envelopes[seen:]:
                if predicate(env.message):
                    return env.message
            seen = len(self.envelopes)
            await self._changed.wait()

    async def wait_for_type(self, cls: type[M]) -> M:
        msg = await self.wait_for(lambda m: isinstance(m, cls))
        assert isinstance(msg, cls)
        return msg


async def capture_session(
    bus: Bus,
    session_id: str = ALL_SESSIONS,
    *,
    task_status: trio.TaskStatus[Capture] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Observe a session (or all) until cancelled, keeping every envelope."""
    capture = Capture()
    sub = bus.subscribe(session_id, f"capture:{session_id}", policy="block", capacity=100_000)
    task_status.started(capture)
    try:
        async for env in sub:
            capture._add(env)
    finally:
        bus.unsubscribe(sub)


Reply = Callable[[Envelope, Port], Awaitable[None]]


async def scripted_peer(
    bus: Bus,
    address: str,
    script: dict[type, Reply],
    *,
    task_status: trio.TaskStatus[Port] = trio.TASK_STATUS_IGNORED,
) -> None:
    """A fake actor at ``address``: for each message whose type is in ``script``, run
    its reply (which may send through the given port). Other messages are ignored."""
    port = bus.connect(address)
    task_status.started(port)
    try:
        async with trio.open_nursery() as nursery:
            async for env in port:
                handler = script.get(type(env.message))
                if handler is not None:
                    nursery.start_soon(handler, env, port)
    finally:
        port.close()


def sequence_numbers(envelopes: Sequence[Envelope]) -> list[int]:
    return [e.seq for e in envelopes]


def assert_gap_free(envelopes: Sequence[Envelope]) -> None:
    seqs = sequence_numbers(envelopes)
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))) if seqs else True, seqs


__all__ = [
    "Capture",
    "assert_gap_free",
    "capture_session",
    "scripted_peer",
    "sequence_numbers",
]


