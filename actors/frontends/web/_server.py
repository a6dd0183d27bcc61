"""The web server: a raw ASGI app served by hypercorn's trio worker on 127.0.0.1.

Two routes, both behind the same checks: ``GET /?token=T`` (the page) and the WebSocket
``/ws?token=T`` (the page's link to the daemon, ``_bridge``). Every request, whatever
its path or method, is checked first, in this order, and refused with ``403`` and a
one-line reason (nothing else: no page, no data) when a check fails:

1. ``Host`` names this server by a loopback name and its port (``127.0.0.1:P``,
   ``localhost:P``, ``[::1]:P``): a page of another site that rebinds its DNS name to
   127.0.0.1 sends its own name and is refused.
2. ``Origin``, when present, is this server's own origin (``http://`` and the Host):
   another site's script, a sandboxed frame (``null``) are refused. Browsers send it on
   every WebSocket handshake and every cross-origin request; a top-level navigation
   (the user opening the printed URL) carries none.
3. ``token`` in the query string equals the server's (compared in constant time).

Then: an unknown path is 404, a method other than GET/HEAD 405. The page is sent with a
Content-Security-Policy that allows only its own inline script and style (a nonce per
response) and connections to its own origin, no framing (``frame-ancestors 'none'``: no
other site can overlay the approve buttons), no referrer (the token is in the URL), no
caching.
"""

from __future__ import annotations

import hmac
import importlib.resources
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

import attrs
import trio

from actors.frontends.daemon.client import TcpAddress
from actors.frontends.daemon.paths import DaemonPaths
from actors.frontends.web._bridge import BridgeOptions, run_bridge

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
MAX_WS_MESSAGE = 16 << 20
"""A browser's frame (a prompt with pasted text) larger than this closes its socket
(1009, message too big); the page says so and reconnects."""

log = logging.getLogger("agentbus.web")


def new_token() -> str:
    return secrets.token_hex(24)


def page_template() -> str:
    return importlib.resources.files("actors.frontends.web").joinpath("page.html").read_text("utf-8")


@attrs.define
class WebApp:
    """The ASGI application (see the module doc)."""

    token: str
    bridge: BridgeOptions
    where: DaemonPaths | TcpAddress | None = None
    """The daemon (None: this user's default, started when absent)."""
    template: str = attrs.field(factory=page_template)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await _lifespan(receive, send)
            return
        refusal = self.refusal(scope)
        if kind == "http":
            await self._http(scope, receive, send, refusal)
        elif kind == "websocket":
            await self._websocket(scope, receive, send, refusal)

    # -- the checks -------------------------------------------------------------------------------------
    def refusal(self, scope: Scope) -> str | None:
        """Why this request is refused (403), or None."""
        headers = _headers(scope)
        server = scope.get("server") or ("", 0)
        port = server[1] if len(server) > 1 else 0
        host = headers.get("host", "")
        if host not in {f"{name}:{port}" for name in LOOPBACK_NAMES}:
            return f"Host {host!r} is not this server (127.0.0.1:{port})"
        origin = headers.get("origin")
        if origin is not None and origin != f"http://{host}":
            return f"a request from another origin ({origin}) is refused"
        given = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [""])[-1]
        if not given:
            return "a token is needed: open the URL agentbus web printed"
        if not hmac.compare_digest(given.encode("utf-8", "replace"), self.token.encode()):
            return "wrong token: open the URL agentbus web printed"
        return None

    # -- HTTP -------------------------------------------------------------------------------------------
    async def _http(self, scope: Scope, receive: Receive, send: Send, refusal: str | None) -> None:
        method = scope.get("method", "GET")
        if refusal is not None:
            await _respond(send, 403, f"403 Forbidden: {refusal}\n", head=method == "HEAD")
        elif scope.get("path") != "/":
            await _respond(send, 404, "404 Not Found\n", head=method == "HEAD")
        elif method not in ("GET", "HEAD"):
            await _respond(send, 405, "405 Method Not Allowed\n", extra=[(b"allow", b"GET, HEAD")])
        else:
            nonce = secrets.token_urlsafe(18)
            body = self.template.replace("{{nonce}}", nonce)
            csp = (
                f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
                "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
            )
            extra = [(b"content-security-policy", csp.encode()), (b"x-frame-options", b"DENY")]
            await _respond(send, 200, body, content_type="text/html; charset=utf-8", extra=extra, head=method == "HEAD")

    # -- WebSocket --------------------------------------------------------------------------------------
    async def _websocket(self, scope: Scope, receive: Receive, send: Send, refusal: str | None) -> None:
        first = await receive()
        if first.get("type") != "websocket.connect":
            return
        if refusal is None and scope.get("path") != "/ws":
            refusal = "404 Not Found"
        if refusal is not None:
            if "websocket.http.response" in scope.get("extensions", {}):
                status = 404 if refusal.startswith("404") else 403
                body = refusal if status == 404 else f"403 Forbidden: {refusal}"
                await send(
                    {"type": "websocket.http.response.start", "status": status, "headers": _plain_headers(len(body.encode()) + 1)}
                )
                await send({"type": "websocket.http.response.body", "body": (body + "\n").encode()})
            else:
                await send({"type": "websocket.close", "code": 1008})
            return
        await send({"type": "websocket.accept"})
        await run_bridge(receive, send, where=self.where, options=self.bridge)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        event = await receive()
        if event["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif event["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        key = name.decode("latin-1").lower()
        if key in out:  # a repeated Host or Origin is no origin we can trust
            out[key] = "\x00repeated"
        else:
            out[key] = value.decode("latin-1")
    return out


SECURITY_HEADERS = [
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
]


def _plain_headers(length: int, content_type: str = "text/plain; charset=utf-8") -> list[tuple[bytes, bytes]]:
    return [(b"content-type", content_type.encode()), (b"content-length", str(length).encode()), *SECURITY_HEADERS]


async def _respond(
    send: Send,
    status: int,
    body: str,
    *,
    content_type: str = "text/plain; charset=utf-8",
    extra: list[tuple[bytes, bytes]] | None = None,
    head: bool = False,
) -> None:
    data = body.encode("utf-8")
    headers = _plain_headers(len(data), content_type) + (extra or [])
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else data})


@attrs.frozen
class Serving:
    """A running server: its URL (with the token) and how to stop it."""

    url: str
    port: int
    token: str
    stop: trio.Event


async def serve(
    app: WebApp, *, port: int = 0, task_status: trio.TaskStatus[Serving] = trio.TASK_STATUS_IGNORED
) -> None:
    """Serve ``app`` on 127.0.0.1:``port`` (0: a free one) until cancelled or until the
    ``Serving.stop`` event handed to ``task_status`` is set."""
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    config.errorlog = log
    config.websocket_max_message_size = MAX_WS_MESSAGE
    config.graceful_timeout = 1.0
    stop = trio.Event()

    class _Status:
        def started(self, binds: list[str] | None = None) -> None:
            bound = int((binds or ["http://127.0.0.1:0"])[0].rsplit(":", 1)[1])
            task_status.started(
                Serving(url=f"http://127.0.0.1:{bound}/?token={app.token}", port=bound, token=app.token, stop=stop)
            )

    await hypercorn_serve(app, config, shutdown_trigger=stop.wait, task_status=_Status())  # type: ignore[arg-type]
