"""What a model backend is, to the gateway."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from bus.messages import GenerateRequest

ChunkSink = Callable[[Any], Awaitable[None]]
"""Receives each response chunk (a ``GenerateContentResponse`` as JSON data)."""


class BackendError(Exception):
    """A request failed for good. ``status`` is the HTTP status when there was one."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        type: str = "unknown",
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type
        self.retryable = retryable


class Backend(Protocol):
    """Serves generation requests. Cancellation arrives as ``trio.Cancelled``."""

    async def generate(self, request: GenerateRequest, emit: ChunkSink) -> str:
        """Stream the response chunks of ``request`` to ``emit``; return the model used."""
        ...
