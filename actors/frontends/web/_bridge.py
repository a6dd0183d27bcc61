"""One browser tab's WebSocket and its own connection to the daemon.

Each WebSocket gets a ``DaemonClient`` of its own (``client="web"``): the daemon sees
every tab as one more client, with its own subscriptions, so what it guarantees a
client (events in sequence order without gap or duplicate, catch-up from the recording,
approvals still waiting asked again to a newcomer, nothing of the session lost when a
client goes) holds for each tab. The tab resyncs by sequence number: after a dropped
socket it opens its sessions again from the sequence number after the last one it got.

**The page's frames** (JSON text, one object each; ``id`` is the page's, echoed):

=====================================================  ======================================
page -> server                                         answer
=====================================================  ======================================
``{"id", "op": "sessions"}``                           ``reply`` with ``sessions`` (this
                                                       workspace's, numbered as chat's)
``{"id", "op": "new"}``                                ``reply`` with ``session``: a new
                                                       session in the workspace
``{"id", "op": "open", "session_id", "from_seq"}``     ``reply`` with ``session`` and
                                                       ``next_seq``; its events follow
``{"id", "op": "close", "session_id"}``                ``reply``: its events stop
``{"id", "op": "prompt", "session_id", "text"}``       ``reply`` with ``prompt_id``
``{"id", "op": "answer", "session_id",                 ``reply`` (``outcome``: proceed_once,
"correlation_id", "outcome"}``                         proceed_always, cancel)
``{"id", "op": "cancel", "session_id"}``               ``reply``: the running turn is cancelled
=====================================================  ======================================

A refused frame (not JSON, not an object, an unknown ``op``, a missing or mistyped
field, a session not opened on this socket) or a request the daemon refuses is answered
``{"type": "error", "id", "message"}`` — one line — and the socket goes on. What the
server sends besides: ``{"type": "event", "t", "env"}`` (a session event as the
recording writes it; ``t``: when the server got it, ms since the epoch),
``caught_up`` (a session's events before the live point have all come), ``lagged``,
``ended`` (a subscription ended), ``daemon_stopping``, first of all ``{"type":
"hello", "address"}`` (this socket's daemon address: the ``answered_by`` of its
answers), and ``{"type": "closed",
"message"}`` before it closes the socket when the daemon connection ends.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from actors.frontends.daemon.client import DaemonClient, DaemonError, TcpAddress, open_client
from actors.frontends.daemon.paths import DaemonPaths
from actors.host.user_calls import shown_text
from bus import Envelope
from bus.codec import converter, encode_envelope
from bus.messages import (
    ApprovalOutcome,
    BatchSettled,
    CaughtUp,
    DaemonStopping,
    ObserverLagged,
    ProtocolError,
    SessionSummary,
    SubscriptionEnded,
)
from bus.session_ids import session_id_problem

OUTCOMES: tuple[ApprovalOutcome, ...] = ("proceed_once", "proceed_always", "cancel")
OPS = ("sessions", "new", "open", "close", "prompt", "answer", "cancel")
MAX_PROMPT = 8 << 20
SEND_TIMEOUT_S = 30.0
"""A tab that accepts nothing for this long is closed (its daemon connection with it)."""

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


@attrs.frozen(kw_only=True)
class BridgeOptions:
    """What new sessions get: the workspace (``agentbus web``'s directory), model,
    approval mode, and a fake-responses file for a scripted model."""

    workspace: Path
    model: str = ""
    approval_mode: str = ""
    fake_responses: str = ""
    fake_chunk_delay_ms: int = 0


class BadFrame(Exception):
    """A frame of the page that is refused (its message is the answer)."""


class _Closed(Exception):
    """The WebSocket closed."""


class Bridge:
    def __init__(self, client: DaemonClient, send: Send, options: BridgeOptions) -> None:
        self.client = client
        self._send = send
        self.options = options
        self.opened: set[str] = set()
        self._lock = trio.Lock()

    async def send(self, data: dict[str, Any] | str) -> None:
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, allow_nan=False)
        async with self._lock:
            with trio.move_on_after(SEND_TIMEOUT_S) as waited:
                try:
                    await self._send({"type": "websocket.send", "text": text})
                except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
                    raise _Closed() from None
                except Exception as exc:  # hypercorn: a send after the socket closed
                    if type(exc).__name__ in ("ClientDisconnected", "UnexpectedMessageError"):
                        raise _Closed() from None
                    raise
            if waited.cancelled_caught:
                raise _Closed()

    # -- daemon -> page -------------------------------------------------------------------------------
    async def forward_events(self) -> None:
        async for event in self.client.events:
            if isinstance(event, Envelope):
                # The recording's line for it, wrapped (no second parse and dump); a
                # settled batch with what the user is shown of each result (chat's text).
                shown = ""
                if isinstance(event.message, BatchSettled):
                    texts = {c.call_id: shown_text(c) for c in event.message.calls}
                    shown = ',"shown":' + json.dumps(texts, ensure_ascii=False)
                now = f"{time.time() * 1000:.0f}"
                await self.send(f'{{"type":"event","t":{now}{shown},"env":{encode_envelope(event)}}}')
            elif isinstance(event, CaughtUp):
                await self.send({"type": "caught_up", "session_id": event.session_id, "next_seq": event.next_seq})
            elif isinstance(event, ObserverLagged):
                await self.send({"type": "lagged", "session_id": event.session_id})
            elif isinstance(event, SubscriptionEnded):
                self.opened.discard(event.session_id)
                await self.send({"type": "ended", "session_id": event.session_id, "reason": event.reason})
            elif isinstance(event, DaemonStopping):
                await self.send({"type": "daemon_stopping", "reason": event.reason})
            elif isinstance(event, ProtocolError):
                await self.send({"type": "error", "id": None, "message": event.message})

    # -- page -> daemon -------------------------------------------------------------------------------
    async def handle(self, text: str) -> None:
        rid: Any = None
        try:
            frame = _parse(text)
            rid = frame.get("id")
            reply = await self.request(frame)
        except BadFrame as exc:
            await self.send({"type": "error", "id": rid, "message": str(exc)})
        except DaemonError as exc:
            await self.send({"type": "error", "id": rid, "message": exc.message})
        else:
            await self.send({"type": "reply", "id": rid, **reply})

    async def request(self, frame: dict[str, Any]) -> dict[str, Any]:
        op = frame.get("op")
        opts = self.options
        c = self.client
        match op:
            case "sessions":
                listed = (await c.list_sessions(os.fspath(opts.workspace))).sessions
                return {"sessions": [_summary(s) for s in listed]}
            case "new":
                ready = await c.create_session(
                    os.fspath(opts.workspace),
                    model=opts.model,
                    approval_mode=opts.approval_mode,
                    fake_responses=opts.fake_responses,
                    fake_chunk_delay_ms=opts.fake_chunk_delay_ms,
                )
                self.opened.add(ready.session_id)
                return {"session": _summary(ready.summary)}
            case "open":
                sid = _session_id(frame)
                from_seq = frame.get("from_seq", 1)
                if type(from_seq) is not int or from_seq < 1:
                    raise BadFrame("from_seq must be a whole number from 1")
                # (A running session keeps its model: no fake responses here.)
                ready = await c.load_session(sid)
                self.opened.add(sid)
                subscribed = await c.subscribe(sid, from_seq=from_seq)
                return {"session": _summary(ready.summary), "next_seq": subscribed.next_seq}
            case "close":
                sid = self._mine(frame)
                self.opened.discard(sid)
                await c.unsubscribe(sid)
                return {}
            case "prompt":
                sid = self._mine(frame)
                text = frame.get("text")
                if not isinstance(text, str) or not text.strip():
                    raise BadFrame("prompt: text must be a non-empty string")
                if len(text) > MAX_PROMPT:
                    raise BadFrame(f"prompt: {len(text)} characters is more than {MAX_PROMPT} this page sends")
                accepted = await c.prompt(sid, text)
                return {"prompt_id": accepted.prompt_id}
            case "answer":
                sid = self._mine(frame)
                cid, outcome = frame.get("correlation_id"), frame.get("outcome")
                if not isinstance(cid, str) or not cid:
                    raise BadFrame("answer: correlation_id must be a non-empty string")
                if outcome not in OUTCOMES:
                    raise BadFrame(f"answer: outcome must be one of {', '.join(OUTCOMES)}")
                await c.answer(sid, cid, outcome)
                return {}
            case "cancel":
                await c.cancel(self._mine(frame))
                return {}
            case _:
                raise BadFrame(f"unknown op {op!r} (one of {', '.join(OPS)})")

    def _mine(self, frame: dict[str, Any]) -> str:
        sid = _session_id(frame)
        if sid not in self.opened:
            raise BadFrame(f"{frame.get('op')}: session {sid!r} is not open on this page (open it first)")
        return sid


def _parse(text: str) -> dict[str, Any]:
    try:
        frame = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise BadFrame(f"not JSON: {exc}") from None
    if not isinstance(frame, dict):
        raise BadFrame(f"a frame must be a JSON object, got {type(frame).__name__}")
    rid = frame.get("id")
    if rid is not None and (type(rid) is not int or not math.isfinite(rid)) and not isinstance(rid, str):
        raise BadFrame("id must be a number or a string")
    return frame


def _session_id(frame: dict[str, Any]) -> str:
    sid = frame.get("session_id")
    if not isinstance(sid, str):
        raise BadFrame(f"{frame.get('op')}: session_id must be a string")
    problem = session_id_problem(sid)
    if problem is not None:
        raise BadFrame(f"{frame.get('op')}: {problem}")
    return sid


def _summary(s: SessionSummary) -> dict[str, Any]:
    out: dict[str, Any] = converter.unstructure(s)
    return out


async def run_bridge(
    receive: Receive, send: Send, *, where: DaemonPaths | TcpAddress | None, options: BridgeOptions
) -> None:
    """Serve one accepted WebSocket until the page or the daemon connection closes."""
    try:
        async with open_client(where, client="web") as client:
            bridge = Bridge(client, send, options)
            try:
                await bridge.send({"type": "hello", "address": client.address})
            except _Closed:
                return
            async with trio.open_nursery() as nursery:

                async def events() -> None:
                    try:
                        await bridge.forward_events()
                        await bridge.send({"type": "closed", "message": "the daemon closed the connection"})
                        await send({"type": "websocket.close", "code": 1011})
                    except _Closed:
                        pass
                    nursery.cancel_scope.cancel(reason="daemon connection ended")

                nursery.start_soon(events)
                try:
                    while True:
                        event = await receive()
                        kind = event.get("type")
                        if kind == "websocket.disconnect":
                            break
                        if kind != "websocket.receive":
                            continue
                        text = event.get("text")
                        if text is None:
                            await bridge.send({"type": "error", "id": None, "message": "binary frames are not understood: send JSON text"})
                            continue
                        await bridge.handle(text)
                except _Closed:
                    pass
                nursery.cancel_scope.cancel(reason="the page went away")
    except DaemonError as exc:
        # No daemon (and none could be started), or it refused this client: say so.
        try:
            await send({"type": "websocket.send", "text": json.dumps({"type": "closed", "message": exc.message})})
            await send({"type": "websocket.close", "code": 1011})
        except Exception:  # the page went away meanwhile
            pass
