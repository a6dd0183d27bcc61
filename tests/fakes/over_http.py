"""A fake-responses file served over HTTP and reached through the real SDK, in-process.

``agentbus --fake-responses F`` with ``AGENTBUS_FAKE_RESPONSES_OVER_HTTP=1`` uses this
backend: while the gateway runs, a ``FakeGeminiServer`` serves ``F`` on 127.0.0.1 and a
``GenaiBackend`` (google-genai, trio-asyncio, httpx) talks to it. The fake generator's
own errors ("No more mock responses...", "Unexpected response type...") travel as a 400
marked ``FAKE_RESPONSES`` and are turned back into the same error the in-process fake
backend raises, so both ways print the same outputs.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trio

from actors.gateway import BackendError, ChunkSink, GenaiBackend, GenaiSettings, RetryPolicy
from bus.messages import GenerateRequest

from .gemini_server import FAKE_RESPONSES_REASON, FakeGeminiServer


class OverHttpBackend:
    """Serve ``path`` from a fake Gemini server; call it through ``GenaiBackend``."""

    def __init__(
        self, path: str | Path, *, strict: bool = True, retry_policy: RetryPolicy | None = None, **server: Any
    ) -> None:
        self.server = FakeGeminiServer.from_file(path, strict=strict, **server)
        self.retry_policy = retry_policy
        self.live: GenaiBackend | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.server.run)
            self.live = GenaiBackend(GenaiSettings(api_key="fake", base_url=self.server.base_url))
            try:
                async with self.live.running():
                    yield
            finally:
                nursery.cancel_scope.cancel()

    async def generate(self, request: GenerateRequest, emit: ChunkSink) -> str:
        assert self.live is not None, "OverHttpBackend.running() is not entered"
        try:
            return await self.live.generate(request, emit)
        except BackendError as exc:
            if exc.reason == FAKE_RESPONSES_REASON and exc.api_message is not None:
                raise BackendError(exc.api_message) from None
            raise
