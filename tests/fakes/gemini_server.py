"""A fake Gemini API server: real HTTP/1.1 on loopback, for the real google-genai SDK.

It speaks the three REST calls the gateway makes::

    POST /{version}/models/{model}:streamGenerateContent?alt=sse   (SSE, chunked)
    POST /{version}/models/{model}:generateContent
    POST /{version}/models/{model}:countTokens

and answers them from a Gemini CLI fake-responses file with exactly the matching rules
of ``FakeResponsesBackend`` (strict or non-strict). An exhausted or mismatched file is
answered with HTTP 400 and a Google error body whose ``ErrorInfo.reason`` is
``FAKE_RESPONSES`` (see ``FAKE_RESPONSES_REASON``), so a client can map it back to the
fake generator's own error.

Faults are injected per request, in order: ``faults`` is a queue, each generation or
countTokens request takes the next one (``None`` in the queue means "serve normally").
A fault that sends chunks first (reset, stall, malformed, error chunk after K chunks)
consumes the fixture entry it serves from, as a real answer would.

Every request is recorded (``requests``) with when it started, how many chunks it was
sent, whether its response completed and when the client went away before that
(``disconnected_at``, on the injected ``clock``). Disconnects are noticed promptly even
while the server is idle (stall, chunk delay): a watcher reads the socket while a
response is being written, and an empty read means the client closed.

Pure trio and the standard library; the HTTP parsing is the minimum a client that does
not pipeline needs.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import attrs
import trio

from actors.gateway import BackendError, FakeEntry, FakeResponsesBackend, load_fake_responses
from bus.messages import GenerateRequest

FAKE_RESPONSES_REASON = "FAKE_RESPONSES"
"""``ErrorInfo.reason`` of the 400 that carries a fake-responses error."""
FAKE_RESPONSES_DOMAIN = "agentbus.test"

GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
REASON_PHRASE = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    429: "Too Many Requests",
    499: "Client Closed Request",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
METHODS = {
    "streamGenerateContent": "generateContentStream",
    "generateContent": "generateContent",
    "countTokens": "countTokens",
}
MAX_HEADER_BYTES = 64 * 1024


def google_error_body(
    code: int, message: str, *, status: str | None = None, details: Sequence[Any] = ()
) -> dict[str, Any]:
    """A Google API error body: ``{"error": {"code", "message", "status", "details"?}}``."""
    error: dict[str, Any] = {
        "code": code,
        "message": message,
        "status": status or GOOGLE_STATUS.get(code, "UNKNOWN"),
    }
    if details:
        error["details"] = list(details)
    return {"error": error}


def retry_info(delay: str) -> dict[str, Any]:
    """A ``google.rpc.RetryInfo`` detail (``delay`` like ``"3s"`` or ``"900ms"``)."""
    return {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}


def error_info(reason: str, domain: str = "googleapis.com", **metadata: str) -> dict[str, Any]:
    """A ``google.rpc.ErrorInfo`` detail."""
    detail: dict[str, Any] = {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": reason,
        "domain": domain,
    }
    if metadata:
        detail["metadata"] = dict(metadata)
    return detail


@attrs.frozen
class Fault:
    """What to do instead of (or while) serving one request. Build with the class methods."""

    kind: str
    """``http_error``, ``reset``, ``stall``, ``malformed``, ``error_chunk``, ``no_candidates``."""
    status: int = 0
    body: Any = None
    """The error body: a JSON value (sent as ``application/json``) or text."""
    content_type: str = "application/json; charset=UTF-8"
    retry_after: str | None = None
    """A ``Retry-After`` header value."""
    after_chunks: int | None = None
    """Chunks sent before the fault; for ``reset`` ``None`` means before the status line."""
    text: str = ""

    @classmethod
    def http_error(
        cls,
        status: int,
        message: str | None = None,
        *,
        body: Any = None,
        google_status: str | None = None,
        details: Sequence[Any] = (),
        retry_after: str | None = None,
        content_type: str = "application/json; charset=UTF-8",
    ) -> Fault:
        """An HTTP error response with a Google error body (unless ``body`` is given)."""
        if body is None:
            body = google_error_body(
                status,
                message or f"fake server error {status}",
                status=google_status,
                details=details,
            )
        return cls("http_error", status=status, body=body, content_type=content_type, retry_after=retry_after)

    @classmethod
    def reset(cls, after_chunks: int | None = None) -> Fault:
        """Abort the connection (TCP RST): before any byte, or after K chunks."""
        return cls("reset", after_chunks=after_chunks)

    @classmethod
    def stall(cls, after_chunks: int = 0) -> Fault:
        """Send K chunks, then nothing until the client goes away."""
        return cls("stall", after_chunks=after_chunks)

    @classmethod
    def malformed(cls, after_chunks: int = 0, text: str = "this is not json") -> Fault:
        """Send K chunks, then an SSE event whose data is not JSON, then end."""
        return cls("malformed", after_chunks=after_chunks, text=text)

    @classmethod
    def error_chunk(cls, status: int, message: str | None = None, after_chunks: int = 0) -> Fault:
        """Send K chunks, then an in-stream ``{"error": ...}`` event, then end."""
        body = google_error_body(status, message or f"fake stream error {status}")
        return cls("error_chunk", status=status, body=body, after_chunks=after_chunks)

    @classmethod
    def no_candidates(cls) -> Fault:
        """A 200 answer whose only chunk has no candidates (a blocked prompt)."""
        return cls("no_candidates")


@attrs.define(eq=False)
class RecordedRequest:
    """One request the server saw, and what became of its response."""

    index: int
    method: str
    """``generateContentStream``, ``generateContent`` or ``countTokens``."""
    model: str
    path: str
    headers: dict[str, str]
    body: Any
    started_at: float
    fault: Fault | None = None
    chunks_sent: int = 0
    chunk_sent_at: list[float] = attrs.field(factory=list)
    completed: bool = False
    """The whole response was written."""
    disconnected_at: float | None = None
    """The client closed the connection before the response was complete."""
    disconnected: trio.Event = attrs.field(factory=trio.Event)


class _ClientGone(Exception):
    pass


@attrs.define(eq=False)
class _Conn:
    stream: trio.SocketStream
    buffer: bytearray = attrs.field(factory=bytearray)
    aborted: bool = False
    """The server reset this connection itself (not a client disconnect)."""


class FakeGeminiServer:
    """Serve a fake-responses file over HTTP on 127.0.0.1; inject faults; record requests."""

    def __init__(
        self,
        entries: Iterable[FakeEntry] = (),
        *,
        strict: bool = True,
        chunk_delay_s: float = 0.0,
        first_chunk_delay_s: float = 0.0,
        faults: Iterable[Fault | None] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fixture = FakeResponsesBackend(list(entries), strict=strict)
        self.chunk_delay_s = chunk_delay_s
        """Pause before each chunk after the first (per-chunk latency)."""
        self.first_chunk_delay_s = first_chunk_delay_s
        """Pause between the response headers and the first chunk."""
        self.faults: list[Fault | None] = list(faults)
        self.clock = clock
        self.requests: list[RecordedRequest] = []
        self._changed = trio.Event()
        self.port = 0
        self._listeners: list[trio.SocketListener] = []

    @classmethod
    def from_file(cls, path: str | Path, *, strict: bool = True, **kwargs: Any) -> FakeGeminiServer:
        return cls(load_fake_responses(path), strict=strict, **kwargs)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def remaining(self) -> int:
        return self._fixture.remaining

    async def wait_until(self, predicate: Callable[[FakeGeminiServer], bool]) -> None:
        """Wait until ``predicate(self)`` holds (checked after each request and chunk)."""
        while not predicate(self):
            await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def add_entries(self, entries: Iterable[FakeEntry]) -> None:
        """Append entries to the fixture (tests that build answers as they go)."""
        self._fixture._entries.extend(entries)

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen on 127.0.0.1 (an ephemeral port) until cancelled; hands back the port."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self._listeners = listeners
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, self._handle, listeners)
            task_status.started(self.port)

    # -- connections ---------------------------------------------------------------------
    async def _handle(self, stream: trio.SocketStream) -> None:
        conn = _Conn(stream)
        try:
            while True:
                head = await self._read_head(conn)
                if head is None:
                    return
                request_line, headers = head
                length = int(headers.get("content-length", "0") or 0)
                while len(conn.buffer) < length:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    conn.buffer += data
                raw = bytes(conn.buffer[:length])
                del conn.buffer[:length]
                keep = await self._dispatch(conn, request_line, headers, raw)
                if not keep:
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError, _ClientGone):
            return
        finally:
            with trio.move_on_after(1, shield=True):
                await stream.aclose()

    async def _read_head(self, conn: _Conn) -> tuple[str, dict[str, str]] | None:
        while b"\r\n\r\n" not in conn.buffer:
            if len(conn.buffer) > MAX_HEADER_BYTES:
                return None
            data = await conn.stream.receive_some(65536)
            if not data:
                return None
            conn.buffer += data
        end = conn.buffer.index(b"\r\n\r\n")
        lines = bytes(conn.buffer[:end]).decode("latin-1").split("\r\n")
        del conn.buffer[: end + 4]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return lines[0], headers

    async def _dispatch(self, conn: _Conn, request_line: str, headers: dict[str, str], raw: bytes) -> bool:
        parts = request_line.split(" ")
        target = parts[1] if len(parts) > 1 else "/"
        split = urlsplit(target)
        path = unquote(split.path)
        model, _, verb = path.rpartition("/")[2].partition(":")
        method = METHODS.get(verb)
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = raw.decode("utf-8", "replace")
        if parts[0] != "POST" or method is None:
            await self._send_json(conn, 404, google_error_body(404, f"unknown path {path}"))
            return True
        rec = RecordedRequest(
            index=len(self.requests),
            method=method,
            model=model,
            path=target,
            headers=headers,
            body=body,
            started_at=self.clock(),
        )
        self.requests.append(rec)
        self._notify()
        rec.fault = self.faults.pop(0) if self.faults else None
        fault = rec.fault
        if fault is not None and fault.kind == "http_error":
            await self._send_error(conn, rec, fault)
            return True
        if fault is not None and fault.kind == "reset" and fault.after_chunks is None:
            _abort(conn)
            raise _ClientGone
        if fault is not None and fault.kind == "no_candidates":
            chunk = {"promptFeedback": {"blockReason": "OTHER"}, "usageMetadata": {"promptTokenCount": 1, "totalTokenCount": 1}}
            if method == "generateContentStream":
                return await self._stream(conn, rec, [chunk], None)
            await self._send_json(conn, 200, chunk)
            rec.completed = True
            return True
        if fault is not None and fault.after_chunks == 0:
            return await self._stream(conn, rec, [], fault)  # nothing to serve from the fixture
        try:
            entry = self._fixture.take(_as_request(method, model, body))
        except BackendError as exc:
            err = google_error_body(
                400,
                exc.message,
                status="FAILED_PRECONDITION",
                details=[error_info(FAKE_RESPONSES_REASON, FAKE_RESPONSES_DOMAIN)],
            )
            await self._send_json(conn, 400, err)
            rec.completed = True
            return True
        if method == "generateContentStream":
            return await self._stream(conn, rec, list(entry.response), fault)
        await self._send_json(conn, 200, entry.response)
        rec.completed = True
        return True

    # -- responses -----------------------------------------------------------------------
    async def _send_error(self, conn: _Conn, rec: RecordedRequest, fault: Fault) -> None:
        if isinstance(fault.body, str):
            payload = fault.body.encode()
        else:
            payload = json.dumps(fault.body, indent=2).encode()
        extra = {"Retry-After": fault.retry_after} if fault.retry_after else {}
        await self._send_body(conn, fault.status, payload, fault.content_type, extra)
        rec.completed = True

    async def _send_json(self, conn: _Conn, status: int, value: Any) -> None:
        payload = json.dumps(value, ensure_ascii=False).encode()
        await self._send_body(conn, status, payload, "application/json; charset=UTF-8", {})

    async def _send_body(
        self, conn: _Conn, status: int, payload: bytes, content_type: str, extra: Mapping[str, str]
    ) -> None:
        head = _head(status, {"Content-Type": content_type, "Content-Length": str(len(payload)), **extra})
        await conn.stream.send_all(head + payload)

    async def _stream(self, conn: _Conn, rec: RecordedRequest, chunks: list[Any], fault: Fault | None) -> bool:
        """Write an SSE answer (chunked); returns whether the connection stays open."""
        limit = len(chunks)
        if fault is not None and fault.after_chunks is not None:
            limit = min(limit, fault.after_chunks)
        outcome = True
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_disconnect, conn, rec, nursery.cancel_scope)
            try:
                await conn.stream.send_all(
                    _head(200, {"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked"})
                )
                # Chunks keep their schedule (headers + first delay + k delays) however
                # long the writes take: a loaded server does not slow the model down.
                due = trio.current_time()
                for i, chunk in enumerate(chunks[:limit]):
                    delay = self.first_chunk_delay_s if i == 0 else self.chunk_delay_s
                    if delay:
                        due += delay
                        await trio.sleep_until(due)
                    data = json.dumps(chunk, ensure_ascii=False, separators=(",", ":"))
                    at = self.clock()  # before the write: send_all may yield to other streams after it
                    await conn.stream.send_all(_chunk(f"data: {data}\r\n\r\n".encode()))
                    rec.chunks_sent += 1
                    rec.chunk_sent_at.append(at)
                    self._notify()
                if fault is None or fault.kind == "no_candidates":
                    await conn.stream.send_all(b"0\r\n\r\n")
                    rec.completed = True
                elif fault.kind == "reset":
                    _abort(conn)
                    outcome = False
                elif fault.kind == "stall":
                    await trio.sleep_forever()
                elif fault.kind == "malformed":
                    await conn.stream.send_all(_chunk(f"data: {fault.text}\r\n\r\n".encode()))
                    await conn.stream.send_all(b"0\r\n\r\n")
                    rec.completed = True
                elif fault.kind == "error_chunk":
                    data = json.dumps(fault.body, separators=(",", ":"))
                    await conn.stream.send_all(_chunk(f"data: {data}\r\n\r\n".encode()))
                    await conn.stream.send_all(b"0\r\n\r\n")
                    rec.completed = True
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._gone(rec)
                outcome = False
            nursery.cancel_scope.cancel()
        if rec.disconnected_at is not None:
            return False
        return outcome

    async def _watch_disconnect(self, conn: _Conn, rec: RecordedRequest, scope: trio.CancelScope) -> None:
        """While a response is written, a read that returns (EOF or error) means the
        client went away: the client does not pipeline, so it sends nothing else."""
        try:
            data = await conn.stream.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        if conn.aborted:
            return
        if data:
            conn.buffer += data  # pipelined after all: keep it, stop watching
            return
        self._gone(rec)
        scope.cancel()

    def _gone(self, rec: RecordedRequest) -> None:
        if rec.disconnected_at is None and not rec.completed:
            rec.disconnected_at = self.clock()
            rec.disconnected.set()


def _as_request(method: str, model: str, body: Any) -> GenerateRequest:
    """The REST body as the gateway's request, for the fixture's matching and dumps."""
    contents = body.get("contents", ()) if isinstance(body, dict) else ()
    config = {k: v for k, v in body.items() if k != "contents"} if isinstance(body, dict) else {}
    return GenerateRequest(
        session_id="fake-server",
        request_id="fake-server",
        reply_to="fake-server",
        method=method,
        model=model,
        contents=tuple(contents),
        config=config,
    )


def _head(status: int, headers: Mapping[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {REASON_PHRASE.get(status, 'Error')}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _abort(conn: _Conn) -> None:
    """Close with a TCP RST (SO_LINGER 0), as a crashed peer or a middlebox does."""
    conn.aborted = True
    sock = conn.stream.socket
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()
