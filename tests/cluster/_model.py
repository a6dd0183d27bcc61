"""A model of what leases and journals need of NATS (a key-value bucket with revisions
and a server-side TTL; a stream subject with expected-last-sequence appends), for the
ownership property. ``test_model_agrees_with_the_server`` runs the same operations on
it and on a real server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

import attrs

from actors.cluster import Fenced, LeaseLost, NoQuorum, Taken
from actors.cluster._nats import StoredMessage

_T = TypeVar("_T")


def run(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine that never suspends (the model's operations) to its end."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise AssertionError("a model operation suspended")


@attrs.define
class ModelClock:
    now: float = 0.0


@attrs.define
class ModelBucket:
    clock: ModelClock
    ttl_s: float
    entries: dict[str, tuple[bytes, int, float]] = attrs.field(factory=dict)
    revision: int = 0

    def _live(self, key: str) -> tuple[bytes, int, float] | None:
        entry = self.entries.get(key)
        if entry is not None and self.clock.now - entry[2] >= self.ttl_s:
            del self.entries[key]  # the server expired it
            return None
        return entry

    def _write(self, key: str, value: bytes) -> int:
        self.revision += 1
        self.entries[key] = (value, self.revision, self.clock.now)
        return self.revision

    async def get(self, key: str) -> tuple[bytes, int] | None:
        entry = self._live(key)
        return (entry[0], entry[1]) if entry else None

    async def create(self, key: str, value: bytes) -> int:
        entry = self._live(key)
        if entry is not None:
            raise Taken("held", owner=entry[0].decode())
        return self._write(key, value)

    async def update(self, key: str, value: bytes, *, last: int) -> int:
        entry = self._live(key)
        if entry is None or entry[1] != last:
            raise LeaseLost("changed")
        return self._write(key, value)

    async def delete(self, key: str, *, last: int) -> None:
        entry = self._live(key)
        if entry is None or entry[1] != last:
            raise LeaseLost("changed")
        del self.entries[key]

    async def items(self) -> dict[str, tuple[bytes, int]]:
        live = {key: self._live(key) for key in list(self.entries)}
        return {key: (entry[0], entry[1]) for key, entry in live.items() if entry is not None}


@attrs.define
class ModelLog:
    max_payload: int = 1 << 20
    messages: list[StoredMessage] = attrs.field(factory=list)
    seq: int = 0
    lose_next_ack: bool = False
    """The next append is stored but its acknowledgement lost (NoQuorum to the writer)."""

    async def ensure_stream(self, name: str, subjects: list[str], *, replicas: int = 1) -> None:
        return None

    async def append(self, subject: str, data: bytes, *, expected_last: int | None, headers: dict[str, str] | None = None) -> int:
        last = self.messages[-1].seq if self.messages else 0
        if expected_last is not None and expected_last != last:
            raise Fenced("wrong last sequence", actual=last)
        self.seq += 1
        self.messages.append(StoredMessage(self.seq, data, dict(headers or {})))
        if self.lose_next_ack:
            self.lose_next_ack = False
            raise NoQuorum("the acknowledgement was lost")
        return self.seq

    async def last_message(self, stream: str, subject: str) -> StoredMessage | None:
        return self.messages[-1] if self.messages else None

    async def read(self, stream: str, subject: str, from_seq: int = 1) -> AsyncIterator[StoredMessage]:
        for msg in self.messages:
            if msg.seq >= from_seq:
                yield msg
