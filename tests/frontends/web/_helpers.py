"""Shared pieces of the web tests: a daemon and ``agentbus web``'s server in this trio
run, on real sockets, and what a browser does with them — plain HTTP requests and a
WebSocket (wsproto over a trio socket) that sends the page's frames."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)

from actors.frontends.daemon.paths import DaemonPaths
from actors.frontends.web import BridgeOptions, Serving, WebApp, serve
from tests.frontends.daemon._helpers import running_daemon


def stream_response(*chunks: str, call: tuple[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """A fake model response streaming ``chunks`` of text, then ``call`` (a function
    call) if given."""
    parts: list[dict[str, Any]] = [{"text": c} for c in chunks]
    if call is not None:
        parts.append({"functionCall": {"name": call[0], "args": call[1]}})
    last = len(parts) - 1
    return {
        "method": "generateContentStream",
        "response": [
            {"candidates": [{"content": {"role": "model", "parts": [p]}, **({"finishReason": "STOP"} if i == last else {})}]}
            for i, p in enumerate(parts)
        ],
    }


@asynccontextmanager
async def web_server(home: Path, fake_responses: Path | None = None) -> AsyncIterator[Serving]:
    """A daemon and the web server (new sessions serve the model from ``fake_responses``)."""
    options = BridgeOptions(workspace=home / "ws", fake_responses=str(fake_responses or ""), model="gemini-2.5-flash")
    async with running_daemon(home), trio.open_nursery() as nursery:
        app = WebApp(token="t0ken-" + "x" * 20, bridge=options, where=DaemonPaths(home / "run"))
        serving: Serving = await nursery.start(_serve, app)
        try:
            yield serving
        finally:
            serving.stop.set()


async def _serve(app: WebApp, *, task_status: trio.TaskStatus[Serving] = trio.TASK_STATUS_IGNORED) -> None:
    await serve(app, task_status=task_status)


@attrs.frozen
class HttpReply:
    status: int
    headers: dict[str, str]
    body: bytes


async def http(port: int, target: str, *, method: str = "GET", headers: dict[str, str] | None = None) -> HttpReply:
    """One HTTP/1.1 request on a fresh connection, as a browser would send it."""
    hdrs = {"Host": f"127.0.0.1:{port}", "Connection": "close", **(headers or {})}
    head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(head.encode("latin-1"))
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
    raw_head, _, body = data.partition(b"\r\n\r\n")
    lines = raw_head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    parsed = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return HttpReply(status, parsed, body)


class Refused(Exception):
    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"{status}: {body!r}")
        self.status = status
        self.body = body


class Page:
    """A browser tab's WebSocket to the server: send the page's frames, read the
    server's (``frames`` keeps all that were read)."""

    def __init__(self, stream: trio.SocketStream, ws: WSConnection) -> None:
        self.stream = stream
        self.ws = ws
        self.frames: list[dict[str, Any]] = []
        self._pending: list[dict[str, Any]] = []
        self._text = ""
        self.closed: int | None = None
        self._next_id = 1
        self._seen = 0
        """Frames ``event`` has looked at."""

    async def send_text(self, text: str) -> None:
        await self.stream.send_all(self.ws.send(TextMessage(data=text)))

    async def send_bytes(self, data: bytes) -> None:
        await self.stream.send_all(self.ws.send(BytesMessage(data=data)))

    async def frame(self) -> dict[str, Any]:
        """The server's next frame (raises ``EOFError`` once the socket closed)."""
        while not self._pending:
            if self.closed is not None:
                raise EOFError(f"closed ({self.closed})")
            data = await self.stream.receive_some(65536)
            self.ws.receive_data(data or None)
            if not data:
                self.closed = self.closed or 1006
            for event in self.ws.events():
                if isinstance(event, TextMessage):
                    self._text += event.data
                    if event.message_finished:
                        self._pending.append(json.loads(self._text))
                        self._text = ""
                elif isinstance(event, Ping):
                    await self.stream.send_all(self.ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    self.closed = event.code
        got = self._pending.pop(0)
        self.frames.append(got)
        return got

    async def until(self, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        while True:
            got = await self.frame()
            if done(got):
                return got

    async def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one request; its ``reply`` or ``error`` frame (events read meanwhile are
        kept in ``frames``)."""
        rid = self._next_id
        self._next_id += 1
        await self.send_text(json.dumps({"id": rid, "op": op, **fields}))
        return await self.until(lambda f: f.get("type") in ("reply", "error") and f.get("id") == rid)

    async def ok(self, op: str, **fields: Any) -> dict[str, Any]:
        got = await self.request(op, **fields)
        assert got["type"] == "reply", got
        return got

    async def event(self, msg_type: str) -> dict[str, Any]:
        """The next session event of this type after the last one this returned (among
        the frames read already, then those to come); its envelope."""
        while True:
            while self._seen < len(self.frames):
                f = self.frames[self._seen]
                self._seen += 1
                if f.get("type") == "event" and f["env"]["msg"]["type"] == msg_type:
                    return dict(f["env"])
            await self.frame()

    def events(self) -> list[dict[str, Any]]:
        return [f["env"] for f in self.frames if f.get("type") == "event"]

    async def aclose(self) -> None:
        await self.stream.aclose()


async def handshake(port: int, target: str, *, origin: str | None = "same", host: str | None = None) -> Page:
    """Open a WebSocket as a browser does (its ``Origin``: this server's unless given;
    None: no Origin header). Raises ``Refused`` with the server's status and body."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    ws = WSConnection(ConnectionType.CLIENT)
    host = host or f"127.0.0.1:{port}"
    extra = [] if origin is None else [(b"origin", (f"http://{host}" if origin == "same" else origin).encode())]
    await stream.send_all(ws.send(Request(host=host, target=target, extra_headers=extra)))
    status, body = 0, b""
    while True:
        data = await stream.receive_some(65536)
        ws.receive_data(data or None)
        for event in ws.events():
            if isinstance(event, AcceptConnection):
                return Page(stream, ws)
            if isinstance(event, RejectConnection):
                status = event.status_code
                if not event.has_body:
                    await stream.aclose()
                    raise Refused(status, body)
            if isinstance(event, RejectData):
                body += event.data
                if event.body_finished:
                    await stream.aclose()
                    raise Refused(status, body)
        if not data:
            await stream.aclose()
            raise Refused(status, body)


@asynccontextmanager
async def page(serving: Serving, **kw: Any) -> AsyncIterator[Page]:
    p = await handshake(serving.port, f"/ws?token={serving.token}", **kw)
    try:
        yield p
    finally:
        await p.aclose()
