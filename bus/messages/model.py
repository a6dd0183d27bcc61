"""The model conversation: the turn (or a utility caller) and the model gateway.

Every ``GenerateRequest`` gets exactly one terminal reply: ``ModelFinished``,
``ModelFailed`` or ``GenerationCancelled``.
"""

from __future__ import annotations

from typing import TypeAlias

import attrs

from ._common import JsonValue, frozen_json, json_tuple, shared_methods, text_field
from .kinds import GenerateMethod, ModelRole


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class GenerateRequest:
    """Command to the gateway.

    ``method`` is ``generateContentStream``, ``generateContent`` or ``countTokens``,
    as in Gemini CLI's fake-responses files.
    """

    session_id: str
    request_id: str
    reply_to: str
    """Address that receives the chunks and the terminal reply."""
    method: GenerateMethod
    model: str
    contents: tuple[JsonValue, ...] = json_tuple()
    config: JsonValue = frozen_json({})
    """generationConfig, systemInstruction, tools (Gemini wire shape)."""
    role: ModelRole = "main"
    """Who asks."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ModelChunk:
    """Event: one streamed response chunk (a ``GenerateContentResponse``)."""

    session_id: str
    request_id: str
    index: int
    chunk: JsonValue = frozen_json({})


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ModelRetrying:
    """Event: the gateway will retry after ``delay_s`` (partial output is void)."""

    session_id: str
    request_id: str
    attempt: int
    delay_s: float
    reason: str
    mid_stream: bool = False


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ModelFinished:
    """Terminal reply: the response is complete."""

    session_id: str
    request_id: str
    model: str
    """The model that answered (after routing/fallback)."""
    latency_ms: int = 0


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ApiError:
    """What went wrong talking to the model."""

    message: str = text_field()
    status: int | None = None
    type: str = "unknown"
    retryable: bool = False
    invalid_stream: str | None = None
    """For an invalid stream that survived its retries: its type (``NO_FINISH_REASON``...)."""
    http_status: int | None = None
    """The HTTP status of the failed response (``status`` is what Gemini CLI reports,
    which is ``None`` for a 404)."""
    api_status: str | None = None
    """The Google error's status name (``INVALID_ARGUMENT``, ``RESOURCE_EXHAUSTED``...)."""
    reason: str | None = None
    """The Google error's ``ErrorInfo.reason`` (``API_KEY_INVALID``...)."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ModelFailed:
    """Terminal reply: the request failed for good (retries exhausted, fatal error)."""

    session_id: str
    request_id: str
    model: str
    error: ApiError


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class CancelGeneration:
    """Command: stop a request; the HTTP stream is closed."""

    session_id: str
    request_id: str
    reason: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class GenerationCancelled:
    """Terminal reply to a cancelled request (the acknowledgement)."""

    session_id: str
    request_id: str


ModelReply: TypeAlias = ModelChunk | ModelFinished | ModelFailed | GenerationCancelled
"""What the gateway sends a request's ``reply_to``: chunks, then one terminal reply."""
