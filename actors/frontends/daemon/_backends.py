"""One model backend for the daemon's one gateway, routing each request by session.

A session created with a fake-responses file is served from its own
``FakeResponsesBackend`` (each session reads its file from the first line, as a
headless process would). Every other session is served by a live backend (google-genai)
for its credentials: the auth environment its client sent (``use_live``), built as a
headless run builds its own (``live_backend`` with the auth type of the session's
settings or environment). Sessions with the same credentials share one backend; a
backend is opened the first time a request needs it and closed once no session routes
to it and no request of it is in flight. google-genai is imported in a worker thread
when the first live session starts (``prepare_live``): a daemon that only ever serves
fake sessions never imports it, and the others' turns do not stall on it. The gateway
retries a session's requests by the session's settings (``use_retry``,
``retry_policy_for``), as a headless run's gateway does by its own. A subagent's
session (``<parent>.<agent>-<id>``) goes where its parent goes.

Every failed attempt of a model request is logged (``agentbus.daemon``: the daemon's
log) with the session and the error, and with the traceback when it is not the API's
doing (an error of ours, wrapped by the backend).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import attrs
import trio

from actors.gateway import (
    Backend,
    BackendError,
    ChunkSink,
    FakeResponsesBackend,
    RetryPolicy,
    open_backend,
    preload_live_backend,
)
from bus.messages import GenerateRequest

log = logging.getLogger("agentbus.daemon")

FakeFactory = Callable[[str, int], Backend]
"""(fake-responses path, chunk delay in ms) -> backend; raises ``FakeResponsesError``."""
LiveFactory = Callable[[Mapping[str, str], "str | None"], Backend]
"""(auth environment, auth type or None) -> the live backend for those credentials;
raises ``BackendError`` when they cannot be used."""
LOGGED_MESSAGE = 500
"""Characters of an error message the log keeps (an API error may quote the request)."""
LiveKey = tuple[str | None, tuple[tuple[str, str], ...]]


def fake_backend(path: str, chunk_delay_ms: int) -> Backend:
    return FakeResponsesBackend.from_file(path, chunk_delay_s=chunk_delay_ms / 1000)


@attrs.define(eq=False)
class _Live:
    """One live backend: built, then opened by its holder task on first use."""

    backend: Backend
    ready: trio.Event | None = None
    """Set once opened (or failed to open); None: not asked for yet."""
    opened: bool = False
    error: BackendError | None = None
    in_flight: int = 0
    done: trio.Event = attrs.field(factory=trio.Event)
    """Set to close it (its holder task leaves ``open_backend``)."""


class SessionBackends:
    """The gateway's backend in the daemon (see the module doc)."""

    def __init__(self, live_factory: LiveFactory | None, fake_factory: FakeFactory = fake_backend) -> None:
        self.live_factory = live_factory
        self.fake_factory = fake_factory
        self._fake: dict[str, Backend] = {}
        self._routes: dict[str, LiveKey] = {}
        """Session id -> the credentials its model requests use."""
        self._live: dict[LiveKey, _Live] = {}
        self._retry: dict[str, RetryPolicy] = {}
        """Session id -> its retry constants (``general.maxAttempts`` of its settings)."""
        self._nursery: trio.Nursery | None = None
        self._preloaded = False
        self.retry_policy: Any = None

    def use_fake(self, session_id: str, path: str, chunk_delay_ms: int = 0) -> None:
        """Serve ``session_id`` from ``path`` (re-read from its first line)."""
        self._fake[session_id] = self.fake_factory(path, chunk_delay_ms)

    async def prepare_live(self) -> None:
        """Before the first ``use_live``: import the live backend's libraries in a worker
        thread, so that the daemon's sessions do not stall for the second it takes."""
        if self.live_factory is not None and not self._preloaded:
            await trio.to_thread.run_sync(preload_live_backend)
            self._preloaded = True

    def use_live(self, session_id: str, auth_env: Mapping[str, str], auth_type: str | None) -> None:
        """Serve ``session_id`` with the live backend of these credentials from its next
        request on; raises ``BackendError`` when they cannot be used (a bad base URL,
        google-genai missing, no live backend in this daemon)."""
        key: LiveKey = (auth_type, tuple(sorted(auth_env.items())))
        if key not in self._live:
            if self.live_factory is None:
                raise BackendError("this daemon has no live model backend", type="config")
            self._live[key] = _Live(self.live_factory(dict(auth_env), auth_type))
        old = self._routes.get(session_id)
        self._routes[session_id] = key
        if old is not None and old != key:
            self._close_if_unused(old)

    def use_retry(self, session_id: str, policy: RetryPolicy) -> None:
        """The gateway retries ``session_id``'s requests (and its subagents') by ``policy``."""
        self._retry[session_id] = policy

    def retry_policy_for(self, request: GenerateRequest) -> RetryPolicy | None:
        sid = request.session_id
        return self._retry.get(sid) or self._retry.get(sid.split(".", 1)[0])

    def forget(self, session_id: str) -> None:
        self._fake.pop(session_id, None)
        self._retry.pop(session_id, None)
        key = self._routes.pop(session_id, None)
        if key is not None:
            self._close_if_unused(key)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                yield
            finally:
                self._nursery = None
                nursery.cancel_scope.cancel(reason="the gateway stopped")

    async def generate(self, request: GenerateRequest, emit: ChunkSink) -> str:
        sid = request.session_id
        parent = sid.split(".", 1)[0]
        try:
            backend = self._fake.get(sid) or self._fake.get(parent)
            if backend is not None:
                return await backend.generate(request, emit)
            key = self._routes.get(sid) or self._routes.get(parent)
            live = self._live.get(key) if key is not None else None
            if live is None:
                raise BackendError(f"session {sid} has no model backend (it is not running)", type="config")
            live.in_flight += 1
            try:
                return await (await self._opened(live)).generate(request, emit)
            finally:
                live.in_flight -= 1
                assert key is not None
                self._close_if_unused(key)
        except BackendError as exc:
            _log_failure(request, exc)
            raise

    async def _opened(self, live: _Live) -> Backend:
        if live.ready is None:
            live.ready = trio.Event()
            if self._nursery is None:
                live.error = BackendError("the daemon's gateway is not running", type="config")
                live.ready.set()
            else:
                self._nursery.start_soon(self._hold, live)
        await live.ready.wait()
        if not live.opened:
            assert live.error is not None
            raise live.error.replace()  # a fresh exception per request
        return live.backend

    async def _hold(self, live: _Live) -> None:
        assert live.ready is not None
        try:
            async with open_backend(live.backend):
                live.opened = True
                live.ready.set()
                await live.done.wait()
        except Exception as exc:
            log.exception("the live model backend failed")
            live.error = BackendError(f"the live model backend failed: {type(exc).__name__}: {exc}", type="config")
        finally:
            live.opened = False
            live.ready.set()

    def _close_if_unused(self, key: LiveKey) -> None:
        live = self._live.get(key)
        if live is None or live.in_flight or key in self._routes.values():
            return
        del self._live[key]
        live.done.set()


def _log_failure(request: GenerateRequest, exc: BackendError) -> None:
    cause = exc.__cause__
    where = f"session {request.session_id}: {request.method} of {request.model} failed"
    message = exc.message if len(exc.message) <= LOGGED_MESSAGE else exc.message[:LOGGED_MESSAGE] + "…"
    if cause is not None and not isinstance(cause, BackendError):
        log.error("%s: %s", where, message, exc_info=cause)
    else:
        log.warning("%s: %s", where, message)
