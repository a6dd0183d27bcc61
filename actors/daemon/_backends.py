"""One model backend for the daemon's one gateway, routing each request by session.

A session created with a fake-responses file is served from its own
``FakeResponsesBackend`` (each session reads its file from the first line, as a
headless process would); every other session shares the live backend (google-genai),
built and started the first time a session needs it, so a daemon that only ever serves
fake sessions never imports google-genai.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import trio

from bus.messages import GenerateRequest

from ..gateway import Backend, BackendError, ChunkSink, FakeResponsesBackend, open_backend

FakeFactory = Callable[[str, int], Backend]
"""(fake-responses path, chunk delay in ms) -> backend; raises ``FakeResponsesError``."""


def fake_backend(path: str, chunk_delay_ms: int) -> Backend:
    return FakeResponsesBackend.from_file(path, chunk_delay_s=chunk_delay_ms / 1000)


class SessionBackends:
    """The gateway's backend in the daemon (see the module doc)."""

    def __init__(self, live_factory: Callable[[], Backend] | None, fake_factory: FakeFactory = fake_backend) -> None:
        self.live_factory = live_factory
        self.fake_factory = fake_factory
        self._fake: dict[str, Backend] = {}
        self._live: Backend | None = None
        self._live_error: BackendError | None = None
        self._live_ready: trio.Event | None = None
        self._nursery: trio.Nursery | None = None
        self.retry_policy: Any = None

    def use_fake(self, session_id: str, path: str, chunk_delay_ms: int = 0) -> None:
        """Serve ``session_id`` from ``path`` (re-read from its first line)."""
        self._fake[session_id] = self.fake_factory(path, chunk_delay_ms)

    def forget(self, session_id: str) -> None:
        self._fake.pop(session_id, None)

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
        # A subagent's session (``<parent>.<agent>-<id>``) reads its parent's file, in
        # order with it, as a headless run's subagents do.
        backend = self._fake.get(request.session_id) or self._fake.get(request.session_id.split(".", 1)[0])
        if backend is None:
            backend = await self._live_backend()
        return await backend.generate(request, emit)

    async def _live_backend(self) -> Backend:
        if self._live_ready is None:
            self._live_ready = trio.Event()
            if self._nursery is None or self.live_factory is None:
                self._live_error = BackendError("this daemon has no live model backend", type="config")
                self._live_ready.set()
            else:
                self._nursery.start_soon(self._hold_live, self._live_ready)
        await self._live_ready.wait()
        if self._live is None:
            assert self._live_error is not None
            raise self._live_error.replace()
        return self._live

    async def _hold_live(self, ready: trio.Event) -> None:
        assert self.live_factory is not None
        try:
            backend = self.live_factory()
        except BackendError as exc:
            self._live_error = exc
            ready.set()
            return
        async with open_backend(backend):
            self._live = backend
            ready.set()
            await trio.sleep_forever()
