"""A local HTTP/1.1 server for tests: pages, slow answers, redirects, raw bytes.

    server = PageServer({"/a": Page(body=b"hi", content_type="text/plain")})
    async with trio.open_nursery() as nursery:
        base = await nursery.start(server.run)      # "http://127.0.0.1:<port>"
        ...
        nursery.cancel_scope.cancel()

Runs in the test's trio loop (``h11`` on the server side), on 127.0.0.1 only.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from http import HTTPStatus

import attrs
import h11
import trio


@attrs.frozen(kw_only=True)
class Page:
    status: int = 200
    reason: str | None = None
    """Reason phrase; None: the standard phrase of the status."""
    content_type: str | None = "text/html; charset=utf-8"
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0
    """Wait before answering (a slow server)."""
    hang: bool = False
    """Never answer."""
    gzip: bool = False
    raw: bytes | None = None
    """Send these bytes as the whole response instead (then close)."""


PageSource = Page | Callable[[str], Page]


@attrs.define
class PageServer:
    pages: dict[str, PageSource]
    requests: list[tuple[str, dict[str, str]]] = attrs.field(factory=list)
    """(target, lower-cased headers) of every request received, in order."""

    def hits(self, target: str) -> int:
        return sum(1 for t, _ in self.requests if t == target)

    async def run(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, self._handle, listeners)
            task_status.started(f"http://127.0.0.1:{port}")

    async def _handle(self, stream: trio.SocketStream) -> None:
        try:
            await self._serve(stream)
        except (trio.BrokenResourceError, h11.ProtocolError):
            pass
        finally:
            await trio.aclose_forcefully(stream)

    async def _serve(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        request: h11.Request | None = None
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                if not data:
                    return
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                request = event
            if isinstance(event, h11.EndOfMessage):
                break
        assert request is not None
        target = request.target.decode()
        self.requests.append((target, {k.decode().lower(): v.decode() for k, v in request.headers}))
        source = self.pages.get(target.split("?", 1)[0])
        page = source(target) if callable(source) else source
        if page is None:
            page = Page(status=404, content_type="text/plain", body=b"not here")
        if page.hang:
            await trio.sleep_forever()
        if page.delay_s:
            await trio.sleep(page.delay_s)
        if page.raw is not None:
            await stream.send_all(page.raw)
            return
        body = gzip.compress(page.body) if page.gzip else page.body
        headers = list(page.headers)
        if page.content_type is not None:
            headers.append(("Content-Type", page.content_type))
        if page.gzip:
            headers.append(("Content-Encoding", "gzip"))
        headers.append(("Content-Length", str(len(body))))
        response = h11.Response(
            status_code=page.status,
            headers=headers,
            reason=(
                page.reason if page.reason is not None else HTTPStatus(page.status).phrase
            ).encode(),
        )
        await stream.send_all(conn.send(response) or b"")
        await stream.send_all(conn.send(h11.Data(data=body)) or b"")
        await stream.send_all(conn.send(h11.EndOfMessage()) or b"")


def redirect(location: str, status: int = 302) -> Page:
    return Page(status=status, reason="Found", content_type=None, headers=(("Location", location),))
