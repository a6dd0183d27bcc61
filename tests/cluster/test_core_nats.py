"""Core NATS through the adapter (real ``nats-server``): publish/subscribe,
request/reply, and a bucket's entries listed in one pass."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
from nats import errors as nats_errors
from nats.js import errors as js_errors

from actors.cluster import NoQuorum, Unreachable, open_link
from actors.cluster._nats import UNAVAILABLE_RETRY_S, NatsLink, translate
from actors.cluster.servers import NatsServer


async def test_subscribe_receives_in_order_and_request_gets_the_answer(nats_server: NatsServer) -> None:
    async with open_link(nats_server.url) as a, open_link(nats_server.url) as b:
        inbox = await b.subscribe("t.frames")
        await b.flush()
        for i in range(50):
            await a.publish("t.frames", f"{i}".encode(), headers={"k": str(i)})
        got = [await inbox.receive() for _ in range(50)]
        assert [m.data for m in got] == [f"{i}".encode() for i in range(50)]
        assert got[7].headers == {"k": "7"} and got[0].subject == "t.frames"

        service = await b.subscribe("t.ask")
        await b.flush()

        async def answer() -> None:
            msg = await service.receive()
            await b.publish(msg.reply, msg.data.upper())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer)
            assert await a.request("t.ask", b"hello") == b"HELLO"
        await service.close()
        await inbox.close()


async def test_a_request_nobody_serves_is_unreachable(nats_server: NatsServer) -> None:
    async with open_link(nats_server.url) as a:
        with pytest.raises(Unreachable, match="nobody answers on t.none"):
            await a.request("t.none", b"x", wait_s=2)


async def test_bucket_items_lists_live_keys_only(nats_server: NatsServer) -> None:
    async with open_link(nats_server.url) as a:
        bucket = await a.bucket("T_ITEMS", ttl_s=60)
        assert await bucket.items() == {}
        r1 = await bucket.put("n.one", b"1")
        await bucket.put("n.two", b"2")
        await bucket.put("n.one", b"1b")
        rev = await bucket.create("n.three", b"3")
        await bucket.delete("n.three", last=rev)
        items = await bucket.items()
        assert {k: v for k, (v, _) in items.items()} == {"n.one": b"1b", "n.two": b"2"}
        assert items["n.one"][1] > r1


async def test_bucket_listings_at_once_see_every_key_and_leave_no_consumer(nats_server: NatsServer) -> None:
    """Listings read in more than one batch, eight at a time, each see every key; none
    leaves a consumer on the server (nats-py's watcher listed nothing now and then, and
    left one consumer per listing until the server's limit refused new ones)."""
    async with open_link(nats_server.url) as a:
        bucket = await a.bucket("T_MANY", ttl_s=60)
        keys = {f"n.{i}": str(i).encode() for i in range(300)}
        for key, value in keys.items():
            await bucket.put(key, value)
        seen: list[dict[str, bytes]] = []

        async def list_once() -> None:
            seen.append({k: v for k, (v, _) in (await bucket.items()).items()})

        for _ in range(15):
            async with trio.open_nursery() as nursery:
                for _ in range(8):
                    nursery.start_soon(list_once)
        assert len(seen) == 120 and all(listing == keys for listing in seen)
        info = json.loads(await a.request("$JS.API.STREAM.INFO.KV_T_MANY", b""))
        assert info["state"]["consumer_count"] == 0


class _Refusing:
    """A JetStream read the server refuses as "temporarily unavailable" ``times`` times."""

    def __init__(self, times: int) -> None:
        self.left = times
        self.asked: list[float] = []

    async def __call__(self) -> str:
        self.asked.append(trio.current_time())
        if self.left:
            self.left -= 1
            raise js_errors.ServiceUnavailableError()
        return "read"


def _link_answering_in_trio() -> NatsLink:
    """A link whose calls run in trio (what ``_call`` does besides the asyncio bridge)."""
    link = NatsLink(nc=None, js=None, loop=None, url="nats://x")

    async def call(what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except Exception as exc:
            raise translate(exc, what, link.url) from exc

    link._call = call  # type: ignore[method-assign]
    return link


async def test_a_read_refused_while_jetstream_chooses_its_leaders_is_asked_again(autojump_clock: trio.abc.Clock) -> None:
    # A cluster just started refused about one listing in fifty so (CI: "the cluster
    # cannot say where this goes now ... ServiceUnavailableError").
    link = _link_answering_in_trio()
    refusing = _Refusing(3)
    assert await link._read("listing B", refusing) == "read"
    assert len(refusing.asked) == 4 and refusing.asked[-1] - refusing.asked[0] < UNAVAILABLE_RETRY_S
    # Refused for longer: a NoQuorum naming what failed, after about UNAVAILABLE_RETRY_S.
    refusing = _Refusing(1000)
    with pytest.raises(NoQuorum, match="listing B: JetStream is not available now"):
        await link._read("listing B", refusing)
    assert UNAVAILABLE_RETRY_S - 0.5 <= refusing.asked[-1] - refusing.asked[0] <= UNAVAILABLE_RETRY_S
    # Any other failure is not asked again.
    asked: list[str] = []

    async def timing_out() -> None:
        asked.append("once")
        raise nats_errors.TimeoutError()

    with pytest.raises(NoQuorum, match="no JetStream answer in time"):
        await link._read("listing B", timing_out)
    assert asked == ["once"]
