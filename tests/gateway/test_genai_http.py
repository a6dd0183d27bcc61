"""The live backend's HTTP client (``_genai_http``): httpx on top, HTTP/1.1 with h11 on trio
sockets underneath — keep-alive, early close, stale connections, errors as httpx's, TLS,
bodies read from trio or from asyncio, proxies through httpx's own transport."""

from __future__ import annotations

import ssl
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
import trio_asyncio
import trustme

from actors.gateway._fake import FakeEntry
from actors.gateway._genai import GenaiBackend, GenaiSettings
from actors.gateway._genai_http import HttpcoreInTrio, TrackingClient, TrioH11Transport
from bus.messages import GenerateRequest
from tests.fakes.gemini_server import FakeGeminiServer

Handler = Callable[[trio.abc.Stream, "RawServer"], Awaitable[None]]

CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class RawServer:
    """A loopback server that runs ``handler`` on each connection (TLS when given a
    context) and counts connections and their ends."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.connections = 0
        self.closed = 0
        self.port = 0
        self.changed = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        if self.tls is not None:
            listeners = [trio.SSLListener(one, self.tls, https_compatible=True) for one in listeners]  # type: ignore[misc]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, self._serve, listeners)
            task_status.started(self.port)

    async def _serve(self, stream: trio.abc.Stream) -> None:
        self.connections += 1
        self._notify()
        try:
            await self.handler(stream, self)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.closed += 1
            self._notify()
            await trio.aclose_forcefully(stream)

    def _notify(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def wait(self, predicate: Callable[[], bool]) -> None:
        with trio.fail_after(10):
            while not predicate():
                await self.changed.wait()


async def read_request(stream: trio.abc.Stream, buffer: bytearray) -> bytes | None:
    """One request's head and body (by content-length), or None at EOF."""
    while b"\r\n\r\n" not in buffer:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buffer += data
    end = buffer.index(b"\r\n\r\n") + 4
    head = bytes(buffer[:end])
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(buffer) < end + length:
        buffer += await stream.receive_some(65536)
    del buffer[: end + length]
    return head


def streaming_answers(pieces: list[bytes], *, close_after: bool = False) -> Handler:
    """Answer every request with ``pieces`` as chunks; optionally close after one."""

    async def handler(stream: trio.abc.Stream, server: RawServer) -> None:
        buffer = bytearray()
        while await read_request(stream, buffer) is not None:
            await stream.send_all(CHUNKED_HEAD + b"".join(chunk(p) for p in pieces) + b"0\r\n\r\n")
            if close_after:
                return

    return handler


async def asyncio_send(loop: Any, client: httpx2.AsyncClient, url: str, *, stream: bool) -> httpx2.Response:
    """As the SDK does it: from asyncio."""
    request = client.build_request("POST", url, content=b"{}")
    response: httpx2.Response = await trio_asyncio.aio_as_trio(client.send, loop=loop)(request, stream=stream)
    return response


def client() -> TrackingClient:
    return TrackingClient(read_timeout_s=5, connect_timeout_s=5)


async def test_a_stream_read_in_trio_keeps_its_connection_for_the_next_request() -> None:
    server = RawServer(streaming_answers([b"data: 1\n\n", b"data: 2\n\n"]))
    async with trio_asyncio.open_loop() as loop, trio.open_nursery() as nursery:
        port = await nursery.start(server.run)
        http = client()
        for _ in range(3):
            response = await asyncio_send(loop, http, f"http://127.0.0.1:{port}/s", stream=True)
            assert response.status_code == 200 and response.reason_phrase == "OK"
            assert [piece async for piece in response.aiter_bytes()] == [b"data: 1\n\n", b"data: 2\n\n"]
        assert server.connections == 1
        await http.aclose()
        await server.wait(lambda: server.closed == 1)
        nursery.cancel_scope.cancel()


async def test_a_body_read_from_asyncio_arrives_whole() -> None:
    server = RawServer(streaming_answers([b"ab", b"cd", b"ef"]))
    async with trio_asyncio.open_loop() as loop, trio.open_nursery() as nursery:
        port = await nursery.start(server.run)
        http = client()
        response = await asyncio_send(loop, http, f"http://127.0.0.1:{port}/x", stream=False)
        assert response.content == b"abcdef"
        await trio_asyncio.aio_as_trio(http.aclose, loop=loop)()
        nursery.cancel_scope.cancel()


async def test_closing_a_response_before_its_end_closes_its_connection() -> None:
    async def slow(stream: trio.abc.Stream, server: RawServer) -> None:
        await read_request(stream, bytearray())
        await stream.send_all(CHUNKED_HEAD + chunk(b"first"))
        assert await stream.receive_some(65536) == b""  # the client went away

    server = RawServer(slow)
    async with trio_asyncio.open_loop() as loop, trio.open_nursery() as nursery:
        port = await nursery.start(server.run)
        http = client()
        response = await asyncio_send(loop, http, f"http://127.0.0.1:{port}/x", stream=True)
        pieces = response.aiter_raw()
        assert await pieces.__anext__() == b"first"
        await pieces.aclose()
        await response.aclose()
        await server.wait(lambda: server.closed == 1)  # the server's read saw the end
        # the next request cannot reuse it: a new connection
        server.handler = streaming_answers([b"ok"])
        response = await asyncio_send(loop, http, f"http://127.0.0.1:{port}/x", stream=False)
        assert response.content == b"ok" and server.connections == 2
        await http.aclose()
        nursery.cancel_scope.cancel()


async def test_an_idle_connection_the_server_closed_is_not_reused() -> None:
    server = RawServer(streaming_answers([b"ok"], close_after=True))
    async with trio_asyncio.open_loop() as loop, trio.open_nursery() as nursery:
        port = await nursery.start(server.run)
        http = client()
        for n in (1, 2):
            response = await asyncio_send(loop, http, f"http://127.0.0.1:{port}/x", stream=False)
            assert response.content == b"ok"
            await server.wait(lambda n=n: server.closed == n)  # closed while idle in our pool
        assert server.connections == 2
        await http.aclose()
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("answer", "error", "text"),
    [
        (b"garbage\r\n\r\n", httpx2.RemoteProtocolError, ""),
        (CHUNKED_HEAD + chunk(b"half"), httpx2.RemoteProtocolError, "closed"),
        (b"", httpx2.RemoteProtocolError, ""),
    ],
    ids=["not-http", "closed-mid-body", "closed-before-answer"],
)
async def test_a_server_that_breaks_http_is_an_httpx_protocol_error(answer: bytes, error: type[Exception], text: str) -> None:
    async def broken(stream: trio.abc.Stream, server: RawServer) -> None:
        await read_request(stream, bytearray())
        await stream.send_all(answer)

    server = RawServer(broken)
    async with trio_asyncio.open_loop() as loop, trio.open_nursery() as nursery:
        port = await nursery.start(server.run)
        http = client()
        with pytest.raises(error) as caught:
            response = await asyncio_send(loop, http, f"http://127.0.0.1:{port}/x", stream=True)
            async for _ in response.aiter_raw():  # read in trio, as the backend does
                pass
        assert text in str(caught.value)
        await http.aclose()
        nursery.cancel_scope.cancel()


async def test_timeouts_and_refused_connections_are_httpx_errors() -> None:
    async def silent(stream: trio.abc.Stream, server: RawServer) -> None:
        await read_request(stream, bytearray())
        await trio.sleep_forever()

    server = RawServer(silent)
    async with trio_asyncio.open_loop() as loop, trio.open_nursery() as nursery:
        port = await nursery.start(server.run)
        http = TrackingClient(read_timeout_s=0.05, connect_timeout_s=5)
        with pytest.raises(httpx2.ReadTimeout):
            await asyncio_send(loop, http, f"http://127.0.0.1:{port}/x", stream=True)
        free = trio.socket.socket()
        await free.bind(("127.0.0.1", 0))
        closed_port = free.getsockname()[1]
        free.close()
        with pytest.raises(httpx2.ConnectError):
            await asyncio_send(loop, http, f"http://127.0.0.1:{closed_port}/x", stream=True)
        await http.aclose()
        nursery.cancel_scope.cancel()


async def test_https_is_spoken_with_trios_tls_and_the_certificate_checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(server_context)
    server_context.set_alpn_protocols(["h2", "http/1.1"])
    answer = streaming_answers([b"secret"])
    alpn: list[str | None] = []

    async def handler(stream: trio.abc.Stream, server: RawServer) -> None:
        assert isinstance(stream, trio.SSLStream)
        await stream.do_handshake()
        alpn.append(stream.selected_alpn_protocol())
        await answer(stream, server)

    server = RawServer(handler, tls=server_context)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(server.run)
        # as the backend builds it: the CA comes from SSL_CERT_FILE
        ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
        http = client()
        for _ in range(2):
            response = await http.post(f"https://127.0.0.1:{port}/x", content=b"{}")
            assert response.content == b"secret"
        assert server.connections == 1 and alpn == ["http/1.1"]  # we offer what we speak
        await http.aclose()
        other_ca = ssl.create_default_context(cadata=trustme.CA().cert_pem.bytes().decode())
        untrusting = httpx2.AsyncClient(transport=TrioH11Transport(other_ca))
        with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await untrusting.post(f"https://127.0.0.1:{port}/x", content=b"{}")
        await untrusting.aclose()
        nursery.cancel_scope.cancel()


def stream_request(text: str) -> GenerateRequest:
    return GenerateRequest(
        session_id="s",
        request_id=text,
        reply_to="t",
        method="generateContentStream",
        model="gemini-x",
        contents=({"role": "user", "parts": [{"text": text}]},),
    )


def answer(text: str, index: int) -> FakeEntry:
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "!"}]}, "finishReason": "STOP"}]},
    ]
    return FakeEntry("generateContentStream", chunks, index)


async def streamed_texts(base_url: str, *prompts: str, during: Callable[[GenaiBackend], None] = lambda b: None) -> list[str]:
    """Each prompt as a streamed request through a live backend at ``base_url`` (``during``
    sees the backend running); the chunks' texts, in order."""
    backend = GenaiBackend(GenaiSettings(api_key="k", base_url=base_url))
    got: list[Any] = []

    async def emit(item: Any) -> None:
        got.append(item)

    async with backend.running():
        during(backend)
        for text in prompts:
            await backend.generate(stream_request(text), emit)
    return [c["candidates"][0]["content"]["parts"][0]["text"] for c in got]


async def test_a_proxy_from_the_environment_goes_through_httpx_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    server = FakeGeminiServer([answer("via proxy", 0)])
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        monkeypatch.setenv("HTTP_PROXY", server.base_url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        def through_httpx(backend: GenaiBackend) -> None:
            assert backend._http is not None
            assert any(isinstance(t, HttpcoreInTrio) for t in backend._http._mounts.values())

        assert await streamed_texts("http://gemini.invalid", "hi", during=through_httpx) == ["via proxy", "!"]
        # the proxy (our server) was asked for the whole URL
        assert server.requests[0].path.startswith("http://gemini.invalid/")
        nursery.cancel_scope.cancel()


async def test_an_event_cut_across_body_pieces_arrives_whole_on_one_kept_connection() -> None:
    """The SDK's reader over our body, request after request."""
    event = b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"abc"}]},"finishReason":"STOP"}]}\r\n\r\n'
    pieces = [event[:7], event[7:30], event[30:-1], event[-1:]]
    server = RawServer(streaming_answers(pieces))
    async with trio.open_nursery() as nursery:
        port = await nursery.start(server.run)
        texts = await streamed_texts(f"http://127.0.0.1:{port}", *(f"r{i}" for i in range(5)))
        assert texts == ["abc"] * 5
        assert server.connections == 1
        nursery.cancel_scope.cancel()


async def test_a_gzip_stream_is_decoded_piece_by_piece() -> None:
    """Google's servers compress when asked (httpx asks); each event flushed as it goes."""
    events = [
        b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"one "}]}}]}\r\n\r\n',
        b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"two"}]},"finishReason":"STOP"}]}\r\n\r\n',
    ]
    seen: list[bytes] = []

    async def gzipped(stream: trio.abc.Stream, server: RawServer) -> None:
        head = await read_request(stream, bytearray())
        assert head is not None
        seen.append(head)
        compressor = zlib.compressobj(wbits=31)  # the gzip format
        pieces = [compressor.compress(e) + compressor.flush(zlib.Z_SYNC_FLUSH) for e in events]
        pieces.append(compressor.flush())
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\n"
            b"transfer-encoding: chunked\r\n\r\n" + b"".join(chunk(p) for p in pieces) + b"0\r\n\r\n"
        )

    server = RawServer(gzipped)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(server.run)
        assert await streamed_texts(f"http://127.0.0.1:{port}", "zip") == ["one ", "two"]
        assert b"gzip" in seen[0].lower()  # the client asked for it
        nursery.cancel_scope.cancel()
