"""A small HTTP/1.1 GET client for ``web_fetch``: trio sockets and TLS, ``h11`` framing.

Why this and not a library client: httpx/httpcore run on anyio (forbidden outside the
gateway's bridge), and the stdlib ``http.client`` in ``trio.to_thread`` cannot be
cancelled (an abandoned thread keeps its socket until its own timeout). ``h11`` is the
protocol state machine by trio's author, does no I/O, and is already installed with the
gateway's dependencies; the trio shell around it is a page of code. Everything runs in
the caller's task, so a cancelled tool call closes its connection at once.

What the client does, matching Node's ``fetch`` (undici) as Gemini CLI configures it:

- resolves the host itself (``Resolver``), and — unless ``allow_private`` — refuses to
  connect to internal names, private IP literals, or names that resolve to any private
  address (Gemini's "safe connector"), with Gemini's ``PrivateIpError`` messages;
- follows up to 20 redirects (301/302/303/307/308), each hop checked again;
- sends ``Accept-Encoding: gzip, deflate`` and decodes those encodings;
- ``timeout_s`` bounds everything up to the final response's headers (Gemini's
  ``fetchWithTimeout`` aborts ``fetch()``, which resolves at the headers); the body is
  then read with an idle timeout of ``body_idle_timeout_s`` per read (undici's
  ``bodyTimeout``) and a size cap; the body is read only for 2xx answers.

Errors are ``FetchError`` (``message``, ``code`` as Node's error codes, ``phase``
``connect`` or ``body``); ``BlockedAddressError`` for refused destinations.

Test-only DNS override: ``AGENTBUS_TEST_DNS_OVERRIDES="host=ip[,host=ip...]"`` makes
``Resolver.from_environ()`` answer those names without DNS (the corpus' DNS-shim
scenario resolves example.com to a public address offline). It is read only when set.
"""

from __future__ import annotations

import errno
import os
import socket
import ssl
import zlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ._url import (
    InvalidUrlError,
    Url,
    ip_literal,
    is_address_private,
    is_internal_hostname,
    join_url,
    parse_url,
    sanitize_hostname,
)

DNS_OVERRIDES_ENV = "AGENTBUS_TEST_DNS_OVERRIDES"
MAX_REDIRECTS = 20
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
BODY_IDLE_TIMEOUT_S = 300.0
_READ_SIZE = 65536

if TYPE_CHECKING:
    import h11
# h11 is imported by the code that fetches (some 5 ms): every session registers
# web_fetch, few fetch.


class FetchError(Exception):
    """A request failed; ``code`` is Node's error code where one applies."""

    def __init__(self, message: str, *, code: str | None = None, phase: str = "connect") -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.phase = phase


class BlockedAddressError(FetchError):
    """The destination is internal or private (Gemini's ``PrivateIpError``)."""


@attrs.frozen(kw_only=True)
class HttpResponse:
    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]
    """Lower-case names, in arrival order."""
    url: str
    """The final URL, after redirects."""
    body: bytes = b""
    """Decoded body (2xx only)."""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def header(self, name: str) -> str | None:
        """Node's ``headers.get``: repeated headers joined with ``", "``."""
        values = [v for k, v in self.headers if k == name.lower()]
        return ", ".join(values) if values else None


@attrs.frozen
class Resolver:
    """Host name → addresses, with optional fixed answers (tests only)."""

    overrides: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Resolver:
        raw = (os.environ if environ is None else environ).get(DNS_OVERRIDES_ENV, "")
        table: dict[str, list[str]] = {}
        for item in raw.split(","):
            host, sep, address = item.strip().partition("=")
            if sep and host and address:
                table.setdefault(host.strip().lower(), []).append(address.strip())
        return cls({k: tuple(v) for k, v in table.items()})

    async def resolve(self, host: str) -> list[str]:
        """Every address of ``host`` (IPv4 and IPv6); raises ``FetchError`` (ENOTFOUND...)."""
        name = sanitize_hostname(host).lower()
        if name in self.overrides:
            return list(self.overrides[name])
        if ip_literal(name) is not None:
            return [name]
        try:
            infos = await trio.socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            code = "EAI_AGAIN" if exc.errno == socket.EAI_AGAIN else "ENOTFOUND"
            raise FetchError(f"getaddrinfo {code} {name}", code=code) from None
        except UnicodeError:
            raise FetchError(f"getaddrinfo ENOTFOUND {name}", code="ENOTFOUND") from None
        out: list[str] = []
        for info in infos:
            address = str(info[4][0])
            if address not in out:
                out.append(address)
        return out


async def check_destination(url: Url, resolver: Resolver) -> list[str]:
    """Gemini's safe lookup: the addresses to connect to, or ``BlockedAddressError``."""
    host = sanitize_hostname(url.hostname)
    if is_internal_hostname(host):
        raise BlockedAddressError(f"Access to internal host {host} is blocked")
    if ip_literal(host) is not None:
        if is_address_private(host):
            raise BlockedAddressError(f"Access to private IP {host} is blocked")
        return [host]
    addresses = await resolver.resolve(host)
    if not addresses:
        raise FetchError(f"getaddrinfo ENOTFOUND {host}", code="ENOTFOUND")
    for address in addresses:
        if is_address_private(address):
            raise BlockedAddressError(
                f"Access to private IP {address} (resolved from {host}) is blocked"
            )
    return addresses


def _fetch_failed(cause: str, code: str | None = None) -> FetchError:
    """undici's ``TypeError: fetch failed`` (its cause named, for a precise message)."""
    return FetchError(f"fetch failed ({cause})", code=code)


async def _connect(addresses: Sequence[str], port: int) -> trio.SocketStream:
    last: OSError | None = None
    for address in addresses:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = trio.socket.socket(family, socket.SOCK_STREAM)
        try:
            await sock.connect((address, port))
        except OSError as exc:
            sock.close()
            last = exc
            continue
        except BaseException:
            sock.close()
            raise
        return trio.SocketStream(sock)
    assert last is not None
    code = errno.errorcode.get(last.errno or 0, "ECONNRESET")
    target = f"[{addresses[-1]}]" if ":" in addresses[-1] else addresses[-1]
    raise _fetch_failed(f"connect {code} {target}:{port}", code)


class _Connection:
    """One HTTP/1.1 exchange over one stream (``Connection: close``)."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        import h11

        self.stream = stream
        self.h11 = h11.Connection(our_role=h11.CLIENT)

    async def send_request(self, url: Url, headers: Mapping[str, str]) -> None:
        import h11

        target = url.path + (f"?{url.query}" if url.query is not None else "")
        host = url.hostname + (f":{url.port}" if url.port is not None else "")
        all_headers = [("Host", host), *headers.items(), ("Connection", "close")]
        data = self.h11.send(h11.Request(method="GET", target=target, headers=all_headers))
        data = (data or b"") + (self.h11.send(h11.EndOfMessage()) or b"")
        await self.stream.send_all(data)

    async def next_event(self, idle_timeout: float | None = None) -> Any:
        import h11

        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise _fetch_failed(f"invalid HTTP response: {exc}") from None
            if event is not h11.NEED_DATA:
                return event
            if idle_timeout is None:
                chunk = await self.stream.receive_some(_READ_SIZE)
            else:
                with trio.move_on_after(idle_timeout) as scope:
                    chunk = await self.stream.receive_some(_READ_SIZE)
                if scope.cancelled_caught:
                    raise FetchError(
                        "terminated (body timeout)", code="UND_ERR_BODY_TIMEOUT", phase="body"
                    )
            self.h11.receive_data(bytes(chunk))

    async def response_head(self) -> h11.Response:
        import h11

        while True:
            event = await self.next_event()
            if isinstance(event, h11.Response):
                return event
            if isinstance(event, h11.ConnectionClosed):
                raise _fetch_failed("other side closed", "UND_ERR_SOCKET")


async def _open_stream(url: Url, addresses: Sequence[str]) -> trio.abc.Stream:
    port = url.port or (443 if url.scheme == "https" else 80)
    stream: trio.abc.Stream = await _connect(addresses, port)
    if url.scheme == "https":
        tls = trio.SSLStream(
            stream, ssl.create_default_context(), server_hostname=sanitize_hostname(url.hostname)
        )
        try:
            await tls.do_handshake()
        except (trio.BrokenResourceError, ssl.SSLError) as exc:
            await trio.aclose_forcefully(tls)
            cause = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) else exc
            raise _fetch_failed(str(cause or exc), "EPROTO") from None
        stream = tls
    return stream


def _decoder(encoding: str | None) -> Any:
    enc = (encoding or "").strip().lower()
    if enc in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if enc == "deflate":
        return _DeflateDecoder()
    return None


class _DeflateDecoder:
    """``deflate`` as servers send it: zlib-wrapped, or (wrongly but often) raw."""

    def __init__(self) -> None:
        self._inner: Any = None
        self._head = b""

    def decompress(self, data: bytes) -> bytes:
        if self._inner is None:
            self._head += data
            if len(self._head) < 2:
                return b""
            wrapped = (self._head[0] & 0x0F) == 8 and (self._head[0] << 8 | self._head[1]) % 31 == 0
            self._inner = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
            data, self._head = self._head, b""
        out: bytes = self._inner.decompress(data)
        return out

    def flush(self) -> bytes:
        if self._inner is None:
            return b""
        out: bytes = self._inner.flush()
        return out


async def http_get(
    url: str,
    *,
    headers: Mapping[str, str],
    resolver: Resolver,
    allow_private: bool = False,
    timeout_s: float = 10.0,
    body_idle_timeout_s: float = BODY_IDLE_TIMEOUT_S,
    max_body_bytes: int,
) -> HttpResponse:
    """GET ``url`` following redirects; the body is read (and decoded) for 2xx only."""
    try:
        current = parse_url(url)
    except InvalidUrlError:
        raise _fetch_failed(f"Invalid URL: {url}") from None
    send_headers = {"Accept": "*/*", "Accept-Encoding": "gzip, deflate", **headers}
    redirects = 0
    conn: _Connection | None = None
    try:
        with trio.move_on_after(timeout_s) as deadline:
            while True:
                if current.scheme not in ("http", "https"):
                    raise _fetch_failed("URL scheme must be a HTTP(S) scheme")
                if allow_private:
                    addresses = await resolver.resolve(current.hostname)
                else:
                    addresses = await check_destination(current, resolver)
                stream = await _open_stream(current, addresses)
                conn = _Connection(stream)
                try:
                    await conn.send_request(current, send_headers)
                except trio.BrokenResourceError as exc:
                    raise _fetch_failed(f"other side closed: {exc}", "ECONNRESET") from None
                head = await conn.response_head()
                location = _header(head.headers, "location")
                if head.status_code in REDIRECT_STATUSES and location is not None:
                    redirects += 1
                    if redirects > MAX_REDIRECTS:
                        raise _fetch_failed("redirect count exceeded")
                    await trio.aclose_forcefully(conn.stream)
                    conn = None
                    try:
                        current = join_url(current, location)
                    except InvalidUrlError:
                        raise _fetch_failed(f"invalid redirect location {location}") from None
                    continue
                break
        if deadline.cancelled_caught:
            raise FetchError(f"Request timed out after {int(timeout_s * 1000)}ms", code="ETIMEDOUT")
        assert conn is not None
        decoded_headers = tuple(
            (k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in head.headers
        )
        response = HttpResponse(
            status=head.status_code,
            reason=head.reason.decode("latin-1"),
            headers=decoded_headers,
            url=current.href,
        )
        if not response.ok:
            return response
        body = await _read_body(conn, response, body_idle_timeout_s, max_body_bytes)
        return attrs.evolve(response, body=body)
    except (OSError, trio.BrokenResourceError) as exc:
        raise _fetch_failed(str(exc) or type(exc).__name__, "ECONNRESET") from None
    finally:
        if conn is not None:
            await trio.aclose_forcefully(conn.stream)


def _header(headers: Sequence[tuple[bytes, bytes]], name: str) -> str | None:
    for key, value in headers:
        if key.decode("latin-1").lower() == name:
            return value.decode("latin-1")
    return None


def _too_large(limit: int) -> FetchError:
    return FetchError(f"Content exceeds size limit of {limit} bytes", phase="body")


async def _read_body(
    conn: _Connection, response: HttpResponse, idle_timeout: float, limit: int
) -> bytes:
    import h11

    length = response.header("content-length")
    if length is not None and length.strip().isdigit() and int(length.strip()) > limit:
        raise _too_large(limit)
    decoder = _decoder(response.header("content-encoding"))
    chunks: list[bytes] = []
    total = 0

    def add(data: bytes) -> None:
        nonlocal total
        if not data:
            return
        total += len(data)
        if total > limit:
            raise _too_large(limit)
        chunks.append(data)

    try:
        while True:
            event = await conn.next_event(idle_timeout)
            if isinstance(event, h11.Data):
                raw = bytes(event.data)
                add(decoder.decompress(raw) if decoder is not None else raw)
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                break
        if decoder is not None:
            add(decoder.flush())
    except zlib.error as exc:
        raise FetchError(f"terminated (invalid compressed body: {exc})", phase="body") from None
    except FetchError as exc:
        exc.phase = "body"
        raise
    except (OSError, trio.BrokenResourceError) as exc:
        raise FetchError(f"terminated ({exc})", phase="body") from None
    return b"".join(chunks)


__all__ = [
    "BlockedAddressError",
    "DNS_OVERRIDES_ENV",
    "FetchError",
    "HttpResponse",
    "Resolver",
    "check_destination",
    "http_get",
]
