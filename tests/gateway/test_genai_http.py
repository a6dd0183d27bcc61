"""The live backend's HTTP client (``_genai_http``): httpx for asyncio callers, with the
I/O in trio — bodies read by trio tasks, requests spread over connection pools by load."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
import trio
import trio.testing
import trio_asyncio

from actors.gateway._genai_http import BODY_BUFFER, POOL_SHARE, BodyFromTrio, TrioTransport


class Pieces(httpx2.AsyncByteStream):
    """A body that yields what it is fed (from trio), then ends or fails."""

    def __init__(self) -> None:
        self.send, self._receive = trio.open_memory_channel[bytes | Exception | None](100)
        self.read = 0
        self.closed = trio.Event()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for item in self._receive:
            if item is None:
                return
            if isinstance(item, Exception):
                raise item
            self.read += 1
            yield item

    async def aclose(self) -> None:
        self.closed.set()


async def collect(body: httpx2.AsyncByteStream) -> list[bytes]:
    """Asyncio side: read the body to its end."""
    return [piece async for piece in body]


async def test_a_body_read_in_trio_arrives_in_asyncio_and_is_closed_at_its_end() -> None:
    inner = Pieces()
    done: list[bool] = []
    async with trio_asyncio.open_loop() as loop, trio.open_nursery() as nursery:
        body = BodyFromTrio(inner, nursery, lambda: done.append(True))
        for piece in (b"a", b"b", None):
            inner.send.send_nowait(piece)
        assert await trio_asyncio.aio_as_trio(collect, loop=loop)(body) == [b"a", b"b"]
        await inner.closed.wait()
    assert done == [True]


async def test_an_error_while_reading_is_raised_to_the_asyncio_reader() -> None:
    inner = Pieces()
    async with trio_asyncio.open_loop() as loop, trio.open_nursery() as nursery:
        body = BodyFromTrio(inner, nursery, lambda: None)
        inner.send.send_nowait(b"a")
        inner.send.send_nowait(httpx2.ReadError("reset"))
        with pytest.raises(httpx2.ReadError, match="reset"):
            await trio_asyncio.aio_as_trio(collect, loop=loop)(body)
        assert inner.closed.is_set()


async def test_closing_early_stops_the_reader_and_closes_the_body() -> None:
    inner = Pieces()
    async with trio_asyncio.open_loop() as loop, trio.open_nursery() as nursery:
        body = BodyFromTrio(inner, nursery, lambda: None)
        inner.send.send_nowait(b"a")
        await trio.testing.wait_all_tasks_blocked()
        await trio_asyncio.aio_as_trio(body.aclose, loop=loop)()
        assert inner.closed.is_set()
        inner.send.send_nowait(b"b")
        await trio.testing.wait_all_tasks_blocked()
        assert inner.read == 1


async def test_the_reader_stays_at_most_a_buffer_ahead() -> None:
    inner = Pieces()
    async with trio_asyncio.open_loop() as loop, trio.open_nursery() as nursery:
        body = BodyFromTrio(inner, nursery, lambda: None)
        for i in range(BODY_BUFFER + 5):
            inner.send.send_nowait(b"%d" % i)
        inner.send.send_nowait(None)
        await trio.testing.wait_all_tasks_blocked()
        assert inner.read == BODY_BUFFER
        got = await trio_asyncio.aio_as_trio(collect, loop=loop)(body)
        assert len(got) == BODY_BUFFER + 5


async def test_requests_beyond_a_pools_share_go_to_another_pool() -> None:
    pools: list[list[str]] = []
    release = trio.Event()

    def new_pool() -> httpx2.AsyncBaseTransport:
        seen: list[str] = []
        pools.append(seen)

        async def handle(request: httpx2.Request) -> httpx2.Response:
            seen.append(request.url.path)
            await release.wait()  # trio: the transport calls its pools from trio
            return httpx2.Response(200, content=b"ok")

        return httpx2.MockTransport(handle)

    async with trio_asyncio.open_loop() as loop, trio.open_nursery() as nursery:
        client = httpx2.AsyncClient(transport=TrioTransport(new_pool, nursery))
        get = trio_asyncio.aio_as_trio(client.get, loop=loop)

        async def ask(path: str) -> Any:
            response = await get(f"http://x{path}")
            assert response.content == b"ok"

        assert len(pools) == 1  # the first pool is there from the start
        async with trio.open_nursery() as requests:
            for i in range(POOL_SHARE + 3):
                requests.start_soon(ask, f"/{i}")
            await trio.testing.wait_all_tasks_blocked()
            assert [len(p) for p in pools] == [POOL_SHARE, 3]
            release.set()
        await ask("/later")  # nothing in flight: back to the first pool
        assert pools[0][-1] == "/later" and len(pools) == 2
        await trio_asyncio.aio_as_trio(client.aclose, loop=loop)()
