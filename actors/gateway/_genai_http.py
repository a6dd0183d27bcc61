"""The httpx client the live backend hands to google-genai: asyncio outside, trio inside.

google-genai's async client calls httpx from asyncio, which trio-asyncio runs inside trio:
every asyncio callback is one pass of trio-asyncio's loop, one trio checkpoint, often a
cancel scope with a deadline (anyio sets one for each socket read). Reading a streamed body
that way cost more than everything else a chunk goes through. So the client hands its
requests to a ``TrioTransport``: httpx's own transport and connection pool (httpcore),
driven from trio tasks on trio sockets. Crossing to trio happens once to send a request and
get its headers, and once to close its response; the body is read by a trio task that
leaves the bytes for the asyncio side (``BodyFromTrio``) without crossing back: setting an
asyncio future from trio is a plain call, as both run in the same thread. Everything the
SDK sees is httpx's: ``Response``, its exceptions (the transport maps httpcore's), its
timeouts (the request's, applied by httpcore in trio), proxies from the environment (one
such transport per proxy, as httpx builds them).

It also records every response an attempt opens (``Attempt``, through a context variable
that trio-asyncio copies into the asyncio tasks it creates), so that the attempt's end can
close any still open (``close_attempt``): a cancelled or failed stream always lets go of
its connection, and the server sees the client leave at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import ssl
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs
import httpx2
import trio
import trio_asyncio

CLOSE_GRACE_S = 2.0
"""Bound on closing a response in trio (shielded clean-up)."""
BODY_BUFFER = 16
"""Body pieces a response's trio reader may get ahead of the asyncio side."""
POOL_SHARE = 32
"""Requests in flight one connection pool takes before the next is used."""


@attrs.define(eq=False)
class Attempt:
    """The HTTP responses one attempt opened."""

    responses: list[httpx2.Response] = attrs.field(factory=list)

    @property
    def started(self) -> bool:
        """Response headers with status 200 arrived: the connection phase is over."""
        return any(r.status_code == 200 for r in self.responses)


ATTEMPT: contextvars.ContextVar[Attempt | None] = contextvars.ContextVar("agentbus_genai_attempt", default=None)


class TrackingClient(httpx2.AsyncClient):
    """The SDK's HTTP client: records each response in the current attempt, applies our
    timeouts where the SDK sets none, and does its I/O in trio (``nursery`` runs the body
    readers)."""

    def __init__(self, *, read_timeout_s: float, connect_timeout_s: float, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        super().__init__(
            limits=httpx2.Limits(max_connections=None, max_keepalive_connections=256),
            timeout=httpx2.Timeout(read_timeout_s, connect=connect_timeout_s, pool=None),
        )
        self._timeouts = {"connect": connect_timeout_s, "read": read_timeout_s, "write": read_timeout_s, "pool": None}

    # httpx's hooks for building the transport and each proxy's: the same, run in trio,
    # in as many pools as the load needs (one SSL context for all).
    def _init_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        build = super()._init_transport
        return TrioTransport(functools.partial(build, *args, **_one_ssl_context(kwargs)), self._nursery)

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        build = super()._init_proxy_transport
        return TrioTransport(functools.partial(build, *args, **_one_ssl_context(kwargs)), self._nursery)

    async def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
        timeout = request.extensions.get("timeout")
        if not timeout or all(v is None for v in timeout.values()):
            request.extensions["timeout"] = dict(self._timeouts)
        response = await super().send(request, **kwargs)
        attempt = ATTEMPT.get()
        if attempt is not None:
            attempt.responses.append(response)
        return response


async def close_attempt(attempt: Attempt) -> None:
    """Asyncio side: close the responses of an attempt that are still open."""
    for response in attempt.responses:
        if not response.is_closed:
            with contextlib.suppress(Exception):
                await response.aclose()


def _one_ssl_context(kwargs: dict[str, Any]) -> dict[str, Any]:
    """httpx's transport arguments with ``verify`` made the SSL context it stands for, so
    that the pools of one transport share it (making one reads the CA store)."""
    if "verify" not in kwargs or isinstance(kwargs["verify"], ssl.SSLContext):
        return kwargs
    verify = httpx2.create_ssl_context(kwargs["verify"], kwargs.get("cert"), kwargs.get("trust_env", True))
    return {**kwargs, "verify": verify, "cert": None}


class TrioTransport(httpx2.AsyncBaseTransport):
    """An httpx transport for asyncio callers whose I/O runs in trio (see the module doc).

    httpcore's connection pool looks at each of its connections whenever a request starts
    or ends: at 200 concurrent streams in one pool that was a fifth of the gateway's time.
    So a request goes to the first of several pools (``new_pool`` makes them, the first at
    once) with fewer than ``POOL_SHARE`` requests in flight. Below that many concurrent
    requests every request goes to the first pool and reuses its idle connections, as
    with one pool.
    """

    def __init__(self, new_pool: Callable[[], httpx2.AsyncBaseTransport], nursery: trio.Nursery) -> None:
        self._new_pool = new_pool
        self._nursery = nursery
        self._pools = [new_pool()]
        self._in_flight = [0]

    def _pool(self) -> int:
        for i, n in enumerate(self._in_flight):
            if n < POOL_SHARE:
                return i
        self._pools.append(self._new_pool())
        self._in_flight.append(0)
        return len(self._pools) - 1

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        i = self._pool()
        self._in_flight[i] += 1
        try:
            response: httpx2.Response = await trio_asyncio.trio_as_aio(self._pools[i].handle_async_request)(request)
        except BaseException:
            self._in_flight[i] -= 1
            raise
        body = response.stream
        assert isinstance(body, httpx2.AsyncByteStream)
        response.stream = BodyFromTrio(body, self._nursery, functools.partial(self._done, i))
        return response

    def _done(self, i: int) -> None:
        self._in_flight[i] -= 1

    async def aclose(self) -> None:
        for pool in self._pools:
            await trio_asyncio.trio_as_aio(pool.aclose)()


class BodyFromTrio(httpx2.AsyncByteStream):
    """A response body read by a trio task, iterated by asyncio.

    The trio task (``_read``) appends each piece and wakes the asyncio side if it waits;
    it pauses while ``BODY_BUFFER`` pieces are unread. It ends by closing the body in trio:
    at its end (the connection goes back to the pool), on an error (kept and raised to the
    reader), or when ``aclose`` cancels it (an unfinished response closes its connection).
    """

    def __init__(self, inner: httpx2.AsyncByteStream, nursery: trio.Nursery, closed: Callable[[], None]) -> None:
        self._inner = inner
        self._on_closed = closed
        self._pieces: deque[bytes] = deque()
        self._ended = False
        self._error: Exception | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._room = trio.Event()
        self._scope = trio.CancelScope()
        self._closed = trio.Event()
        nursery.start_soon(self._read)

    async def _read(self) -> None:
        try:
            with self._scope:
                async for piece in self._inner:
                    self._pieces.append(piece)
                    self._wake()
                    while len(self._pieces) >= BODY_BUFFER:
                        self._room = trio.Event()
                        await self._room.wait()
        except Exception as exc:
            self._error = exc
        finally:
            self._ended = True
            self._wake()
            with trio.move_on_after(CLOSE_GRACE_S, shield=True):
                await self._inner.aclose()
            self._closed.set()
            self._on_closed()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            if self._pieces:
                piece = self._pieces.popleft()
                self._room.set()
                yield piece
            elif self._ended:
                if self._error is not None:
                    raise self._error
                return
            else:
                self._waiter = asyncio.get_running_loop().create_future()
                try:
                    await self._waiter
                finally:
                    self._waiter = None

    async def aclose(self) -> None:
        self._scope.cancel(reason="response closed before its end")
        if not self._closed.is_set():
            await trio_asyncio.trio_as_aio(self._closed.wait)()

