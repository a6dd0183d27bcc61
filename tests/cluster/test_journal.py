"""A session's recording on a real JetStream server: lines in, the same file out; a
line over the server's message limit as parts; fenced appends; leases."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from actors.cluster import Fenced, Journal, LeaseLost, SessionLease, Taken
from actors.cluster._nats import Credentials, open_link
from actors.cluster.errors import ClusterError, Unauthorized, Unreachable
from actors.cluster.journal import subject_of
from actors.cluster.servers import NatsServer, free_port
from tests.cluster.conftest import binary_or_skip


def meta(node: str) -> bytes:
    return b'{"v": 1, "kind": "meta", "node": "%s"}' % node.encode()


async def test_lines_in_the_same_file_out_and_a_large_line_in_parts(nats_server: NatsServer, tmp_path: Path) -> None:
    async with open_link(nats_server.url) as link:
        journal = Journal(link, "ann", "s-1")
        await journal.open()
        big = b'{"v": 1, "seq": 2, "msg": "' + b"x" * (3 * link.max_payload) + b'"}'
        lines = [meta("a"), big, b'{"v": 1, "seq": 3}']
        await journal.take_over(lines[0])
        for line in lines[1:]:
            await journal.append(line)
        assert [line for _, line in await journal.lines()] == lines
        assert await journal.export(tmp_path / "s-1.jsonl") == 3
    assert (tmp_path / "s-1.jsonl").read_bytes() == b"".join(line + b"\n" for line in lines)


async def test_a_stale_owner_is_fenced_by_the_stream(nats_server: NatsServer) -> None:
    async with open_link(nats_server.url) as a_link, open_link(nats_server.url) as b_link:
        a = Journal(a_link, "ann", "s-1")
        await a.open()
        await a.take_over(meta("a"))
        acked = await a.append(b"a1")
        b = Journal(b_link, "ann", "s-1")
        await b.take_over(meta("b"))  # A is not told: it still thinks it owns the session
        with pytest.raises(Fenced):
            await a.append(b"a2")
        await b.append(b"b1")
        lines = await b.lines()
    assert [line for _, line in lines] == [meta("a"), b"a1", meta("b"), b"b1"]
    assert acked in [seq for seq, _ in lines]


async def test_sessions_with_odd_ids_and_users_stay_apart(nats_server: NatsServer) -> None:
    ids = ["a.b", "a_2Eb", "*", ">", "sp ace", "\udcff"]
    assert len({subject_of("u.1", i) for i in ids}) == len(ids)
    async with open_link(nats_server.url) as link:
        for i, sid in enumerate(ids):
            journal = Journal(link, "u.1", sid)
            await journal.open()
            await journal.take_over(meta(str(i)))
        for i, sid in enumerate(ids):
            assert [line for _, line in await Journal(link, "u.1", sid).lines()] == [meta(str(i))]


async def test_one_owner_per_session_and_a_lost_lease_is_told(nats_server: NatsServer) -> None:
    async with open_link(nats_server.url) as link:
        leases = SessionLease(await link.bucket("leases", ttl_s=60))
        held = await leases.acquire("s-1", "node-a")
        with pytest.raises(Taken) as taken:
            await leases.acquire("s-1", "node-b")
        assert taken.value.owner == "node-a" and "node-a" in str(taken.value)
        held = await leases.renew(held)
        await leases.release(held)
        other = await leases.acquire("s-1", "node-b")
        assert await leases.owner("s-1") == "node-b"
        with pytest.raises(LeaseLost):
            await leases.renew(held)
        await leases.renew(other)


async def test_a_lease_not_renewed_is_expired_by_the_server(nats_server: NatsServer) -> None:
    """The server's clock decides (a node's clock plays no part): node B gets the
    session once A's lease has not been written for the bucket's TTL."""
    async with open_link(nats_server.url) as link:
        leases = SessionLease(await link.bucket("short", ttl_s=1))
        held = await leases.acquire("s-1", "node-a")
        with trio.fail_after(15):
            while True:  # the server expires the entry: B's attempts fail until it does
                try:
                    await leases.acquire("s-1", "node-b")
                    break
                except Taken:
                    await trio.sleep(0.25)
        with pytest.raises(LeaseLost):
            await leases.renew(held)


async def test_a_url_that_does_not_answer_and_wrong_credentials_are_clear_errors(tmp_path: Path, nursery: trio.Nursery) -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    with pytest.raises(Unreachable, match="127.0.0.1"):
        async with open_link(url):
            pass
    binary_or_skip()
    guarded = NatsServer(name="guarded", store=tmp_path / "g", extra=("--user", "ann", "--pass", "s3cret"))
    await guarded.start(nursery)
    with pytest.raises(Unauthorized, match="refused the credentials"):
        async with open_link(guarded.url, Credentials(user="ann", password="wrong")):
            pass
    async with open_link(guarded.url, Credentials(user="ann", password="s3cret")) as link:
        journal = Journal(link, "ann", "s")
        await journal.open()
        await journal.take_over(meta("a"))
    await guarded.stop()


async def test_a_stream_deleted_under_a_session_is_a_clear_error(nats_server: NatsServer) -> None:
    async with open_link(nats_server.url) as link:
        journal = Journal(link, "ann", "s-1")
        await journal.open()
        await journal.take_over(meta("a"))
        await link.delete_stream(journal.stream)
        with pytest.raises(ClusterError, match="was the stream deleted"):
            await journal.append(b"after")


async def test_runs_of_lines_go_as_one_message_each_and_come_out_as_the_lines(nats_server: NatsServer, tmp_path: Path) -> None:
    """``batches`` cuts lines into runs that fit a message (a line too big for one is a
    run of its own, sent as parts); ``append_batch`` stores a run as one message and
    ``lines``/``export`` give the lines back, in order, as the local file has them."""
    async with open_link(nats_server.url) as link:
        journal = Journal(link, "ann", "batched")
        await journal.open()
        await journal.take_over(b'{"kind":"meta"}')
        room = link.max_payload - 1024
        small = [b'{"seq":%d}' % i for i in range(50)]
        huge = b"h" * (room * 2 + 7)
        lines = small[:20] + [huge] + small[20:]
        runs = journal.batches(lines)
        assert [len(run) for run in runs] == [20, 1, 30]
        before = (await link.last_message(journal.stream, journal.subject)).seq  # type: ignore[union-attr]
        for run in runs:
            await journal.append_batch(run)
        after = (await link.last_message(journal.stream, journal.subject)).seq  # type: ignore[union-attr]
        assert after - before == 1 + 3 + 1  # a message a run; the huge line in three parts
        assert [line for _, line in await journal.lines()] == [b'{"kind":"meta"}', *lines]
        await journal.export(tmp_path / "out.jsonl")
        assert (tmp_path / "out.jsonl").read_bytes() == b"".join(line + b"\n" for line in [b'{"kind":"meta"}', *lines])
