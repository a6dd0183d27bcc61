"""Core NATS through the adapter (real ``nats-server``): publish/subscribe,
request/reply, and a bucket's entries listed in one pass."""

from __future__ import annotations

import json

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
