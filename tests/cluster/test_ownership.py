"""Never two owners appending to one session; every acknowledged line survives —
whatever the interleaving of nodes taking, renewing and losing leases, stale owners
writing on, acknowledgements lost and retried, and time passing (a hypothesis state
machine over the model of ``_model``, which ``test_model_agrees_with_the_server``
holds to a real server)."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from actors.cluster import Fenced, Journal, Lease, LeaseLost, NoQuorum, SessionLease, Taken
from actors.cluster._nats import open_link
from actors.cluster.journal import LINES, MSG_ID
from actors.cluster.servers import NatsServer
from tests.cluster._model import ModelBucket, ModelClock, ModelLog, run

TTL = 10.0
NODES = ("a", "b", "c")


@attrs.define
class Node:
    name: str
    lease: Lease | None = None
    journal: Journal | None = None
    pending: list[bytes] | None = None
    """Lines whose acknowledgement was lost: tried again before any other."""


class Ownership(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ModelClock()
        self.leases = SessionLease(ModelBucket(self.clock, TTL))
        self.log = ModelLog()
        self.nodes = {n: Node(n) for n in NODES}
        self.acked: list[bytes] = []
        self.count = 0

    def _line(self, node: Node) -> bytes:
        self.count += 1
        return b"%s:%d" % (node.name.encode(), self.count)

    @rule(name=st.sampled_from(NODES))
    def take(self, name: str) -> None:
        node = self.nodes[name]
        try:
            node.lease = run(self.leases.acquire("s", name))
        except Taken:
            return
        node.journal, node.pending = Journal(self.log, "u", "s"), None
        meta = b"meta:" + self._line(node)
        try:
            run(node.journal.take_over(meta))
        except NoQuorum:
            node.pending = [meta]
            return
        except Fenced:  # another node appended between its read and its meta
            node.journal = None
            return
        self.acked.append(meta)

    @rule(name=st.sampled_from(NODES))
    def renew(self, name: str) -> None:
        node = self.nodes[name]
        if node.lease is None:
            return
        try:
            node.lease = run(self.leases.renew(node.lease))
        except LeaseLost:
            node.lease = None  # told; a careless node still writes (its journal stays)

    @rule(name=st.sampled_from(NODES), many=st.integers(1, 3))
    def append(self, name: str, many: int) -> None:
        """A run of lines, one message (as a node's mirror appends what a wake-up found)."""
        node = self.nodes[name]
        if node.journal is None:
            return
        lines = node.pending if node.pending is not None else [self._line(node) for _ in range(many)]
        try:
            run(node.journal.append_batch(lines))
        except NoQuorum:
            node.pending = lines
            return
        except Fenced:
            node.journal, node.pending = None, None
            return
        node.pending = None
        self.acked.extend(lines)

    @rule(dt=st.sampled_from([1.0, 4.0, TTL]))
    def time_passes(self, dt: float) -> None:
        self.clock.now += dt

    @precondition(lambda self: not self.log.lose_next_ack)
    @rule()
    def lose_an_acknowledgement(self) -> None:
        self.log.lose_next_ack = True

    @invariant()
    def one_writer_after_each_takeover(self) -> None:
        writer = None
        for msg in self.log.messages:
            msg_writer = msg.headers[MSG_ID].split("/", 1)[0]
            if msg.data.startswith(b"meta:"):
                writer = msg_writer
            assert msg_writer == writer, f"{msg.data!r} appended by a writer that is not the session's owner"

    @invariant()
    def every_acknowledged_line_is_stored_once(self) -> None:
        stored = [line for m in self.log.messages for line in (m.data.split(b"\n") if LINES in m.headers else [m.data])]
        for line in self.acked:
            assert stored.count(line) == 1, (line, stored)


TestOwnership = Ownership.TestCase


async def test_model_agrees_with_the_server(nats_server: NatsServer, tmp_path: Path) -> None:
    """The operations the property relies on, on a real server and on the model:
    the same outcomes."""

    async def scenario(bucket: object, log: object) -> list[object]:
        out: list[object] = []
        leases = SessionLease(bucket)  # type: ignore[arg-type]
        a = await leases.acquire("s", "a")
        out.append(a.revision > 0)
        try:
            await leases.acquire("s", "b")
        except Taken as exc:
            out.append(("taken", exc.owner))
        ja, jb = Journal(log, "u", "s"), Journal(log, "u", "s")  # type: ignore[arg-type]
        await ja.open()
        out.append(await ja.take_over(b"meta:a"))
        out.append(await ja.append(b"a1"))
        await leases.acquire("t", "c")
        out.append(await leases.holders())
        await leases.release(a)
        await leases.acquire("s", "b")
        out.append(await leases.holders())
        try:
            await leases.renew(a)
        except LeaseLost:
            out.append("lost")
        out.append(await jb.take_over(b"meta:b"))
        try:
            await ja.append(b"a2")
        except Fenced:
            out.append("fenced")
        out.append(await jb.append(b"b1"))
        out.append([line for _, line in await jb.lines()])
        return out

    async with open_link(nats_server.url) as link:
        real = await scenario(await link.bucket("agree", ttl_s=60), link)

    async def model() -> list[object]:
        return await scenario(ModelBucket(ModelClock(), 60), ModelLog())

    assert real == run(model())
    assert real[-1] == [b"meta:a", b"a1", b"meta:b", b"b1"]
    assert real[4] == {"s.s": "a", "s.t": "c"} and real[5] == {"s.s": "b", "s.t": "c"}


def test_the_property_fails_without_fencing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The property can fail: with appends not fenced (no expected last sequence), a
    stale owner's line lands after another's takeover and it says so."""
    original = ModelLog.append

    async def unfenced(self: ModelLog, subject: str, data: bytes, *, expected_last: int | None, headers: dict[str, str] | None = None) -> int:
        return await original(self, subject, data, expected_last=None, headers=headers)

    monkeypatch.setattr(ModelLog, "append", unfenced)
    machine = Ownership()
    machine.take("a")
    machine.time_passes(TTL)
    machine.take("b")
    machine.append("a", 2)
    with pytest.raises(AssertionError, match="not the session's owner"):
        machine.one_writer_after_each_takeover()
