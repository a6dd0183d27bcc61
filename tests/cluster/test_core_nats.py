"""Core NATS through the adapter (real ``nats-server``): publish/subscribe,
request/reply, and a bucket's entries listed in one pass."""

from __future__ import annotations

import pytest
import trio

from actors.cluster import Unreachable, open_link
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
