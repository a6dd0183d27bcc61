"""What a model backend is, to the gateway."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from bus.messages import GenerateRequest

ChunkSink = Callable[[Any], Awaitable[None]]
"""Receives each response chunk (a ``GenerateContentResponse`` as JSON data)."""


class BackendError(Exception):
    """A request (one attempt of it) failed.

    ``message`` is the text Gemini CLI would show inside ``[API Error: ...]``; ``status``
    the numeric status it would carry (its exit code in the JSON output modes; ``None``
    where Gemini CLI's error has none, e.g. a 404). The rest says what happened on the
    wire and drives the retries.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        type: str = "unknown",
        retryable: bool = False,
        phase: str = "connect",
        http_status: int | None = None,
        api_status: str | None = None,
        api_message: str | None = None,
        reason: str | None = None,
        network_code: str | None = None,
        quota: str | None = None,
        retry_delay_s: float | None = None,
        retry_after_s: float | None = None,
        replayed_delay_s: float | None = None,
        replayed_reason: str | None = None,
        replayed_final: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type
        """Gemini CLI's error class: ``ApiError``, ``RetryableQuotaError``,
        ``TerminalQuotaError``, ``ModelNotFoundError``, ``NetworkError``, ``SyntaxError``,
        or ``unknown``/``config`` for errors of our own."""
        self.retryable = retryable
        self.phase = phase
        """``connect`` (before the response headers: retried by the connection layer) or
        ``stream`` (while reading the body: retried by the mid-stream layer)."""
        self.http_status = http_status
        self.api_status = api_status
        """The Google status name (``INVALID_ARGUMENT``, ``RESOURCE_EXHAUSTED``...)."""
        self.api_message = api_message
        """The API's own error message, unwrapped."""
        self.reason = reason
        """``ErrorInfo.reason`` when the body has one."""
        self.network_code = network_code
        self.quota = quota
        """``retryable`` or ``terminal`` for a classified quota error."""
        self.retry_delay_s = retry_delay_s
        """The server's delay from ``RetryInfo`` or "Please retry in Xs"."""
        self.retry_after_s = retry_after_s
        """The server's HTTP ``Retry-After`` header."""
        self.replayed_delay_s = replayed_delay_s
        """A replay: the delay the recording waited before its next attempt (the jitter
        was drawn then, not now)."""
        self.replayed_reason = replayed_reason
        """A replay: the recorded retry reason (``503 UNAVAILABLE``...)."""
        self.replayed_final = replayed_final
        """A replay: the recording gave up after this error."""

    FIELDS = (
        "status",
        "type",
        "retryable",
        "phase",
        "http_status",
        "api_status",
        "api_message",
        "reason",
        "network_code",
        "quota",
        "retry_delay_s",
        "retry_after_s",
    )

    def replace(self, **changes: Any) -> BackendError:
        """A copy with ``changes`` (``message`` and any keyword of the constructor)."""
        values: dict[str, Any] = {name: getattr(self, name) for name in self.FIELDS}
        values.update(changes)
        message = values.pop("message", self.message)
        return BackendError(message, **values)

    def __repr__(self) -> str:
        return f"BackendError({self.message!r}, status={self.status!r}, type={self.type!r}, phase={self.phase!r})"


class Backend(Protocol):
    """Serves generation requests. Cancellation arrives as ``trio.Cancelled``.

    A backend that owns resources for its lifetime (an event loop, a connection pool)
    also has ``running()``, an async context manager the gateway holds while it runs
    (see ``open_backend``).
    """

    async def generate(self, request: GenerateRequest, emit: ChunkSink) -> str:
        """Stream the response chunks of ``request`` to ``emit``; return the model used.
        Raises ``BackendError``."""
        ...


@contextlib.asynccontextmanager
async def open_backend(backend: Backend) -> AsyncIterator[None]:
    """Hold ``backend.running()`` if the backend has one."""
    running = getattr(backend, "running", None)
    if running is None:
        yield
        return
    async with running():
        yield
