"""The httpx client the live backend hands to google-genai: the SDK's calls on top, HTTP/1.1
in trio underneath.

google-genai's async client calls httpx from asyncio, which trio-asyncio runs inside trio:
every asyncio callback is one pass of trio-asyncio's loop, one trio checkpoint, often a
cancel scope (anyio sets one for each socket read). Reading a streamed body that way cost
more than everything else a chunk goes through, and httpcore's own layers (its pool looks
at every connection on each request's start and end; several wrappers a body piece) cost
as much again. So the client's requests go to a ``TrioH11Transport``: HTTP/1.1 spoken with
h11 on trio sockets (trio's TLS for https), a keep-alive pool per origin. Crossing from
asyncio to trio happens once a request, to send it and get its headers. A body is a
``TrioBody``: read directly by a trio task (the backend iterates a stream's chunks in trio,
through the SDK's generators, which await nothing but the body), or from asyncio one bridge
crossing a piece (``aread`` of an error or a non-streamed answer). Everything the SDK sees
is httpx's: ``Response``, its exceptions (``ConnectError``, ``ReadTimeout``,
``RemoteProtocolError`` ...), its timeouts (the request's ``timeout`` extension). A proxy
from the environment goes through httpx's own transport (httpcore), run in trio the same
way (``HttpcoreInTrio``).

It also records every response an attempt opens (``Attempt``, through a context variable
that trio-asyncio copies into the asyncio tasks it creates), so that the attempt's end can
close any still open (``close_attempt``): a cancelled or failed stream always lets go of
its connection, and the server sees the client leave at once.
"""

from __future__ import annotations

import contextlib
import contextvars
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, NoReturn, TypeVar

import attrs
import h11
import httpx2
import sniffio
import trio
import trio_asyncio

READ_SIZE = 65536
"""Bytes asked of the socket at a time."""
MAX_HEAD_BYTES = 100 * 1024
"""The largest response head (or chunk header) accepted, as httpx's own transport."""
MAX_IDLE = 256
"""Idle keep-alive connections kept per origin (the newest)."""
KEEPALIVE_EXPIRY_S = 5.0
"""An idle connection older than this is closed rather than reused (httpx's default)."""
DEFAULT_PORTS = {"http": 80, "https": 443}
DEFAULT_LIMITS = httpx2.Limits()
T = TypeVar("T")


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
    timeouts where the SDK sets none, and does its I/O in trio."""

    def __init__(self, *, read_timeout_s: float, connect_timeout_s: float) -> None:
        super().__init__(timeout=httpx2.Timeout(read_timeout_s, connect=connect_timeout_s, pool=None))
        self._timeouts = {"connect": connect_timeout_s, "read": read_timeout_s, "write": read_timeout_s, "pool": None}

    # httpx's hooks for building the transport and each proxy's.
    def _init_transport(
        self,
        verify: ssl.SSLContext | str | bool = True,
        cert: Any = None,
        trust_env: bool = True,
        http1: bool = True,
        http2: bool = False,
        limits: httpx2.Limits = DEFAULT_LIMITS,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> httpx2.AsyncBaseTransport:
        if transport is not None:
            return transport
        if http2:  # not ours to speak: httpx's own transport, in trio
            return HttpcoreInTrio(super()._init_transport(verify, cert, trust_env, http1, http2, limits))
        return TrioH11Transport(_ssl_context(verify, cert, trust_env))

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        return HttpcoreInTrio(super()._init_proxy_transport(*args, **kwargs))

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
    """Close the responses of an attempt that are still open (from trio or asyncio)."""
    for response in attempt.responses:
        if not response.is_closed:
            with contextlib.suppress(Exception):
                await response.aclose()


def _ssl_context(verify: ssl.SSLContext | str | bool, cert: Any, trust_env: bool) -> ssl.SSLContext:
    """httpx's context for these settings, offering HTTP/1.1 alone in ALPN (all we speak)."""
    context: ssl.SSLContext = verify if isinstance(verify, ssl.SSLContext) else httpx2.create_ssl_context(verify, cert, trust_env)
    context.set_alpn_protocols(["http/1.1"])
    return context


def _in_asyncio() -> bool:
    try:
        return sniffio.current_async_library() == "asyncio"
    except sniffio.AsyncLibraryNotFoundError:
        return False


async def _in_trio(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run the trio function ``fn``: as it is from trio, through the bridge from asyncio."""
    if _in_asyncio():
        result: T = await trio_asyncio.trio_as_aio(fn)(*args)
        return result
    return await fn(*args)


# -- bodies -------------------------------------------------------------------------------------
class TrioBody(httpx2.AsyncByteStream):
    """A response body whose I/O is trio's: iterated directly in a trio task, or one
    bridge crossing a piece from asyncio. Subclasses say how to get the next piece
    (``None`` at the end) and how to let go of the connection."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if _in_asyncio():
            step = trio_asyncio.trio_as_aio(self.next_piece)
            while (piece := await step()) is not None:
                yield piece
        else:
            while (piece := await self.next_piece()) is not None:
                yield piece

    async def next_piece(self) -> bytes | None:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError


# -- HTTP/1.1 with h11 on trio sockets ----------------------------------------------------------
Origin = tuple[str, str, int]


@attrs.define(eq=False)
class _Connection:
    """One HTTP/1.1 connection: a trio stream and h11's state of it."""

    origin: Origin
    stream: trio.SocketStream | trio.SSLStream[trio.SocketStream]
    protocol: h11.Connection = attrs.field(
        factory=lambda: h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
    )
    idle_since: float = 0.0
    closed: bool = False

    @property
    def socket(self) -> trio.socket.SocketType:
        stream = self.stream
        if isinstance(stream, trio.SSLStream):
            stream = stream.transport_stream
        return stream.socket

    def close(self) -> None:
        """Close at once, from any task (a read blocked on the socket is woken)."""
        if not self.closed:
            self.closed = True
            self.socket.close()

    async def send(self, request: httpx2.Request, timeout_s: float | None) -> None:
        protocol = self.protocol
        parts = [
            protocol.send(h11.Request(method=request.method, target=request.url.raw_path, headers=request.headers.raw))
        ]
        async for piece in _request_body(request):
            if piece:
                parts.append(protocol.send(h11.Data(data=piece)))
        parts.append(protocol.send(h11.EndOfMessage()))
        with _mapped(request, httpx2.WriteError, httpx2.WriteTimeout, timeout_s):
            await self.stream.send_all(b"".join(p for p in parts if p))

    async def next_event(self, request: httpx2.Request, timeout_s: float | None) -> Any:
        protocol = self.protocol
        while True:
            try:
                event = protocol.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx2.RemoteProtocolError(str(exc) or "the server broke HTTP/1.1", request=request) from exc
            if event is not h11.NEED_DATA:
                return event
            with _mapped(request, httpx2.ReadError, httpx2.ReadTimeout, timeout_s):
                data = await self.stream.receive_some(READ_SIZE)
            protocol.receive_data(bytes(data))

    def reusable(self) -> bool:
        return self.protocol.our_state is h11.DONE and self.protocol.their_state is h11.DONE


async def _request_body(request: httpx2.Request) -> AsyncIterator[bytes]:
    stream = request.stream
    if isinstance(stream, httpx2.AsyncByteStream):
        async for piece in stream:
            yield piece
    else:  # a sync-only body (built for a sync client): read it as it is
        for piece in stream:
            yield piece


@contextlib.contextmanager
def _mapped(
    request: httpx2.Request, error: type[httpx2.TransportError], timeout_error: type[httpx2.TimeoutException], timeout: float | None
) -> Iterator[None]:
    """trio's and h11's failures as httpx's exceptions, with the timeout applied."""
    try:
        if timeout is None:
            yield
        else:
            with trio.fail_after(timeout):
                yield
    except trio.TooSlowError:
        raise timeout_error("timed out", request=request) from None
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
        raise error(_reason(exc), request=request) from exc


def _reason(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    text = str(exc)
    if cause is not None and str(cause) and str(cause) not in text:
        text = f"{text}: {cause}" if text else str(cause)
    return text or type(exc).__name__


class TrioH11Transport(httpx2.AsyncBaseTransport):
    """HTTP/1.1 (http and https) with h11 on trio sockets, a keep-alive pool per origin.

    Called from asyncio (the SDK) it crosses to trio for the request's head; called from
    trio it runs as it is. A connection goes back to the pool when its response was read
    to the end and both sides keep it alive; a response closed before its end closes its
    connection (that is how a cancelled stream reaches the server). An idle connection
    that has expired, or that the server closed meanwhile (readable while idle), is
    dropped rather than reused.
    """

    def __init__(self, ssl_context: ssl.SSLContext, *, max_idle: int = MAX_IDLE, keepalive_expiry_s: float = KEEPALIVE_EXPIRY_S) -> None:
        self._ssl_context = ssl_context
        self._max_idle = max_idle
        self._expiry = keepalive_expiry_s
        self._idle: dict[Origin, list[_Connection]] = {}
        self._closed = False

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await _in_trio(self._handle, request)

    async def _handle(self, request: httpx2.Request) -> httpx2.Response:
        if self._closed:
            raise httpx2.ConnectError("the HTTP client is closed", request=request)
        url = request.url
        scheme = url.scheme
        if scheme not in DEFAULT_PORTS:
            raise httpx2.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}", request=request)
        origin: Origin = (scheme, url.host, url.port or DEFAULT_PORTS[scheme])
        timeouts = request.extensions.get("timeout") or {}
        conn = self._take_idle(origin) or await self._connect(request, origin, timeouts.get("connect"))
        read_timeout = timeouts.get("read")
        try:
            await conn.send(request, timeouts.get("write"))
            while True:
                event = await conn.next_event(request, read_timeout)
                if isinstance(event, h11.Response):
                    break
                if not isinstance(event, h11.InformationalResponse):
                    raise httpx2.RemoteProtocolError(f"unexpected {type(event).__name__} before the response", request=request)
        except BaseException:
            conn.close()
            raise
        return httpx2.Response(
            event.status_code,
            headers=event.headers.raw_items(),
            stream=_H11Body(self, conn, request, read_timeout),
            extensions={"http_version": b"HTTP/" + event.http_version, "reason_phrase": event.reason},
        )

    async def _connect(self, request: httpx2.Request, origin: Origin, timeout_s: float | None) -> _Connection:
        scheme, host, port = origin
        with _mapped(request, httpx2.ConnectError, httpx2.ConnectTimeout, timeout_s):
            tcp = await trio.open_tcp_stream(host, port)
            if scheme != "https":
                return _Connection(origin, tcp)
            tls = trio.SSLStream(tcp, self._ssl_context, server_hostname=host, https_compatible=True)
            try:
                await tls.do_handshake()
            except BaseException:
                tcp.socket.close()
                raise
            return _Connection(origin, tls)
        raise AssertionError("unreachable")  # for mypy: _mapped raises or the block returns

    def _take_idle(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        now = trio.current_time()
        while idle:
            conn = idle.pop()  # the newest first
            if now - conn.idle_since > self._expiry or conn.socket.is_readable():
                conn.close()  # expired, or the server closed it (or broke protocol) while idle
                continue
            return conn
        return None

    def release(self, conn: _Connection) -> None:
        """A response read to its end: keep its connection for the next request."""
        if self._closed or not conn.reusable():
            conn.close()
            return
        conn.protocol.start_next_cycle()
        conn.idle_since = trio.current_time()
        idle = self._idle.setdefault(conn.origin, [])
        idle.append(conn)
        if len(idle) > self._max_idle:
            idle.pop(0).close()

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()


class _H11Body(TrioBody):
    def __init__(self, transport: TrioH11Transport, conn: _Connection, request: httpx2.Request, timeout: float | None) -> None:
        self._transport = transport
        self._conn = conn
        self._request = request
        self._timeout = timeout
        self._done = False

    async def next_piece(self) -> bytes | None:
        while not self._done:
            try:
                event = await self._conn.next_event(self._request, self._timeout)
            except BaseException:
                self._fail()
                raise
            if isinstance(event, h11.Data):
                if event.data:
                    return bytes(event.data)
                continue
            if isinstance(event, h11.EndOfMessage):
                self._done = True
                self._transport.release(self._conn)
                return None
            self._fail()
            _protocol_error(self._request, event)
        return None

    def _fail(self) -> None:
        self._done = True
        self._conn.close()

    async def aclose(self) -> None:
        if not self._done:
            self._fail()  # unread: the connection cannot be reused


def _protocol_error(request: httpx2.Request, event: Any) -> NoReturn:
    if isinstance(event, h11.ConnectionClosed):
        raise httpx2.RemoteProtocolError("the server closed the connection before the response's end", request=request)
    raise httpx2.RemoteProtocolError(f"unexpected {type(event).__name__} in a response body", request=request)


# -- httpx's own transport, run in trio (proxies, HTTP/2) -------------------------------------
class HttpcoreInTrio(httpx2.AsyncBaseTransport):
    """httpx's transport for the cases we do not speak ourselves, its I/O in trio like
    ``TrioH11Transport``'s (httpcore picks trio's backend there)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await _in_trio(self._handle, request)

    async def _handle(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        body = response.stream
        assert isinstance(body, httpx2.AsyncByteStream)
        response.stream = _HttpcoreBody(body)
        return response

    async def aclose(self) -> None:
        await _in_trio(self._inner.aclose)


class _HttpcoreBody(TrioBody):
    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner
        self._pieces = inner.__aiter__()
        self._closed = False

    async def next_piece(self) -> bytes | None:
        try:
            piece: bytes = await self._pieces.__anext__()
        except StopAsyncIteration:
            return None
        return piece

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        await _in_trio(self._inner.aclose)
