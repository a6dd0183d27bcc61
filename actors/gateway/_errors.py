"""What an API failure means, as Gemini CLI reads it (pure: no I/O, no SDK).

Three steps, each a fact carried over from Gemini CLI (reference §2.6):

1. ``sdk_message``: the text of the ``@google/genai`` ``ApiError`` Gemini CLI would hold
   for an HTTP error (``JSON.stringify`` of the JSON error body; a text body is wrapped
   as ``{"error": {"message", "code", "status": <reason phrase>}}``). Gemini CLI shows
   this text as ``[API Error: <text>]`` for errors it does not classify (400, 401, 403,
   500...).
2. ``classify`` (``classifyGoogleError``): 404 becomes ``ModelNotFoundError`` (its
   message is the API's own message; it carries no ``status``, so the exit code is 1);
   429/499/503 become ``RetryableQuotaError`` or ``TerminalQuotaError`` (their message is
   the API's own message, sometimes with a "Suggested retry after" line) with a retry
   delay taken from ``RetryInfo`` or "Please retry in Xs"; everything else is unchanged.
3. ``is_retryable`` (``isRetryableError``): network errors, 429, 499 and 5xx; 400 never.

The gateway also honours an HTTP ``Retry-After`` header (Gemini CLI reads only
``RetryInfo`` and the message; see docs/differences.md).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from actors.common import LazyPattern, is_network_retryable

from ._backend import BackendError

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
QUOTA_FAILURE = "type.googleapis.com/google.rpc.QuotaFailure"

MAX_RETRYABLE_DELAY_S = 300.0
"""A server delay longer than this makes a quota error terminal (Gemini CLI)."""
CLOUDCODE_DOMAINS = frozenset(
    {"cloudcode-pa.googleapis.com", "staging-cloudcode-pa.googleapis.com", "autopush-cloudcode-pa.googleapis.com"}
)
QUOTA_STATUSES = frozenset({429, 499, 503})
_LIMIT_ZERO = LazyPattern(r"limit:\s*0(?!\d|\.\d)")
_PLEASE_RETRY = LazyPattern(r"Please retry in ([0-9.]+(?:ms|s))")
_CAPACITY = LazyPattern(r"exhausted your capacity|capacity exceeded|MODEL_CAPACITY_EXHAUSTED", re.I)
CAPACITY_REASONS = frozenset({"MODEL_CAPACITY_EXHAUSTED", "MODEL_CAPACITY_EXCEEDED"})

FETCH_FAILED = "fetch failed"
STREAM_TERMINATED = "terminated"


@attrs.frozen
class GoogleError:
    """A Google API error body: ``{"error": {"code", "message", "status", "details"}}``."""

    code: int
    message: str
    status: str | None = None
    details: tuple[Mapping[str, Any], ...] = ()

    def detail(self, type_url: str) -> Mapping[str, Any] | None:
        return next((d for d in self.details if d.get("@type") == type_url), None)


def parse_google_error(value: Any) -> GoogleError | None:
    """The innermost Google error in ``value`` (a parsed body, or JSON text), following
    messages that are themselves JSON error bodies (up to 10 levels), as
    ``parseGoogleApiError`` does."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):  # RecursionError: nested past the parser
            return None
    if isinstance(value, list) and value:
        value = value[0]
    if not isinstance(value, Mapping):
        return None
    current = value.get("error") if isinstance(value.get("error"), Mapping) else None
    if current is None:
        return None
    status = current.get("status") if isinstance(current.get("status"), str) else None
    for _ in range(10):
        message = current.get("message")
        if not isinstance(message, str):
            break
        try:
            nested = json.loads(message.replace("\u00a0", "").replace("\n", " "))
        except (ValueError, RecursionError):
            break
        if not isinstance(nested, Mapping) or not isinstance(nested.get("error"), Mapping):
            break
        current = nested["error"]
        if isinstance(current.get("status"), str):
            status = current["status"]
    code, message = current.get("code"), current.get("message")
    if not isinstance(code, int) or not code or not isinstance(message, str) or not message:
        return None
    raw_details = current.get("details")
    details = tuple(
        {("@type" if k.strip() == "@type" else k): v for k, v in d.items()}
        for d in (raw_details if isinstance(raw_details, list) else ())
        if isinstance(d, Mapping) and any(k.strip() == "@type" for k in d)
    )
    return GoogleError(code=code, message=message, status=status, details=details)


def js_stringify(value: Any) -> str:
    """``JSON.stringify`` of a JSON value (compact, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def sdk_message(status: int, body_text: str, *, content_type: str = "", reason_phrase: str = "") -> str:
    """The ``@google/genai`` ``ApiError`` message for an HTTP error response."""
    if "application/json" in content_type.lower():
        try:
            return js_stringify(json.loads(body_text))
        except (ValueError, RecursionError):
            pass  # the JS SDK would fail differently; keep the body's text
    return js_stringify({"error": {"message": body_text, "code": status, "status": reason_phrase}})


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """An HTTP ``Retry-After`` value (seconds or an HTTP date) in seconds."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    import email.utils  # only for a dated Retry-After: keep start-up light

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def parse_duration(text: str) -> float | None:
    """``"34.07s"``, ``"900ms"`` -> seconds (Gemini CLI's ``parseDurationInSeconds``)."""
    try:
        if text.endswith("ms"):
            return float(text[:-2]) / 1000
        if text.endswith("s"):
            return float(text[:-1])
    except ValueError:
        return None
    return None


def http_error(
    status: int,
    body_text: str,
    *,
    content_type: str = "",
    reason_phrase: str = "",
    retry_after: str | None = None,
    phase: str = "connect",
) -> BackendError:
    """An HTTP error response as Gemini CLI would see and classify it."""
    try:
        body: Any = json.loads(body_text)
    except (ValueError, RecursionError):
        body = body_text
    google = parse_google_error(body)
    raw = BackendError(
        sdk_message(status, body_text, content_type=content_type, reason_phrase=reason_phrase),
        status=status,
        type="ApiError",
        http_status=status,
        phase=phase,
        api_status=google.status if google else None,
        api_message=google.message if google else None,
        reason=_error_info_reason(google),
        retry_after_s=parse_retry_after(retry_after),
    )
    return classify(raw, google)


def stream_error_chunk(chunk: Mapping[str, Any]) -> BackendError:
    """An ``{"error": ...}`` event inside a stream (the JS SDK's ``got status: ...``)."""
    error = chunk.get("error")
    error = error if isinstance(error, Mapping) else {}
    code = error.get("code") if isinstance(error.get("code"), int) else None
    google = parse_google_error(chunk)
    return BackendError(
        f"got status: {error.get('status', 'undefined')}. {js_stringify(chunk)}",
        status=code,
        type="ApiError",
        http_status=code,
        phase="stream",
        api_status=google.status if google else None,
        api_message=google.message if google else None,
        reason=_error_info_reason(google),
        retryable=code is not None and _status_retryable(code),
    )


def network_error(code: str, detail: str = "", *, phase: str = "connect") -> BackendError:
    """A transport failure. Before the response headers the JS SDK reports ``fetch
    failed``; while reading a body undici reports ``terminated``."""
    message = FETCH_FAILED if phase == "connect" else STREAM_TERMINATED
    if detail:
        message = f"{message} ({detail})"
    return BackendError(message, type="NetworkError", network_code=code, phase=phase, retryable=is_network_retryable(code))


def malformed_chunk(text: str, error: ValueError | None = None) -> BackendError:
    """A stream event whose data is not JSON (the JS SDK: ``exception parsing stream
    chunk <data>. SyntaxError: ...``); never retried."""
    pos = getattr(error, "pos", 0) or 0
    token = text[pos : pos + 1]
    if token:
        why = f'Unexpected token \'{token}\', "{_clip(text)}" is not valid JSON'
    else:
        why = "Unexpected end of JSON input"
    return BackendError(
        f"exception parsing stream chunk {text}. SyntaxError: {why}", type="SyntaxError", phase="stream"
    )


def _clip(text: str) -> str:
    return text if len(text) <= 30 else text[:10] + '"... "' + text[-10:]


def _status_retryable(status: int) -> bool:
    if status == 400:
        return False
    return status in (429, 499) or 500 <= status < 600


def is_retryable(err: BackendError) -> bool:
    """Gemini CLI's ``isRetryableError`` (with ``retryFetchErrors``, its default)."""
    if err.network_code is not None and is_network_retryable(err.network_code):
        return True
    lower = err.message.lower()
    if FETCH_FAILED in lower or "incomplete json segment" in lower:
        return True
    if err.status is not None:
        return _status_retryable(err.status)
    return err.retryable


def _error_info_reason(google: GoogleError | None) -> str | None:
    info = google.detail(ERROR_INFO) if google else None
    reason = info.get("reason") if info else None
    return reason if isinstance(reason, str) else None


def _quota(
    err: BackendError, kind: str, message: str, code: int | None, delay: float | None = None, reason: str | None = None
) -> BackendError:
    return err.replace(
        message=message,
        type="TerminalQuotaError" if kind == "terminal" else "RetryableQuotaError",
        status=code,
        quota=kind,
        retry_delay_s=delay if delay else None,
        reason=reason if reason is not None else err.reason,
        retryable=kind == "retryable",
    )


def classify(err: BackendError, google: GoogleError | None) -> BackendError:
    """Gemini CLI's ``classifyGoogleError``; an error it does not classify comes back
    unchanged (with ``retryable`` set)."""
    err = err.replace(retryable=is_retryable(err))
    status = google.code if google else err.status
    message = (google.message if google else "") or err.message
    if status == 404:
        return err.replace(
            type="ModelNotFoundError", message=message.strip() or "Model not found", status=None, retryable=False
        )
    lower = message.lower()
    if status in QUOTA_STATUSES and _LIMIT_ZERO.search(lower):
        return _quota(err, "terminal", message, status)
    if google is None or google.code not in QUOTA_STATUSES or not google.details:
        m = _PLEASE_RETRY.search(message)
        if m:
            delay = parse_duration(m.group(1))
            if delay is not None:
                kind = "terminal" if delay > MAX_RETRYABLE_DELAY_S else "retryable"
                return _quota(err, kind, message, google.code if google else (status or 429), delay)
        elif status in QUOTA_STATUSES:
            kind = "terminal" if _CAPACITY.search(message) else "retryable"
            return _quota(err, kind, message, status)
        return err
    quota_failure = google.detail(QUOTA_FAILURE)
    info = google.detail(ERROR_INFO)
    retry = google.detail(RETRY_INFO)
    violations: Sequence[Any] = (quota_failure or {}).get("violations") or ()
    for v in violations:
        quota_id = str((v or {}).get("quotaId") or "")
        if "PerDay" in quota_id or "Daily" in quota_id:
            return _quota(err, "terminal", "You have exhausted your daily quota on this model.", google.code)
    retry_delay = retry.get("retryDelay") if retry else None
    delay = parse_duration(retry_delay) if isinstance(retry_delay, str) else None
    delay = delay or None
    if info:
        reason = info.get("reason")
        if reason in CAPACITY_REASONS or reason == "INSUFFICIENT_G1_CREDITS_BALANCE":
            return _quota(err, "terminal", google.message, google.code, delay, str(reason))
        domain = re.sub(r"[^a-zA-Z0-9.-]", "", str(info.get("domain") or ""))
        if domain in CLOUDCODE_DOMAINS:
            if reason == "RATE_LIMIT_EXCEEDED":
                if delay is None or delay > MAX_RETRYABLE_DELAY_S:
                    return _quota(err, "terminal", google.message, google.code, delay, str(reason))
                return _quota(err, "retryable", google.message, google.code, delay)
            if reason == "QUOTA_EXHAUSTED":
                return _quota(err, "terminal", google.message, google.code, delay, str(reason))
    if isinstance(retry_delay, str) and delay:
        text = f"{google.message}\nSuggested retry after {retry_delay}."
        kind = "terminal" if delay > MAX_RETRYABLE_DELAY_S else "retryable"
        return _quota(err, kind, text, google.code, delay)
    for v in violations:
        if "PerMinute" in str((v or {}).get("quotaId") or ""):
            return _quota(err, "retryable", f"{google.message}\nSuggested retry after 60s.", google.code, 60.0)
    if info:
        metadata = info.get("metadata") or {}
        if "PerMinute" in str(metadata.get("quota_limit") or ""):
            return _quota(err, "retryable", f"{info.get('reason')}\nSuggested retry after 60s.", google.code, 60.0)
    if _CAPACITY.search(message):
        return _quota(err, "terminal", message, google.code)
    return _quota(err, "retryable", message, google.code)


def is_capacity(err: BackendError) -> bool:
    """A terminal quota error that only says the model is busy (retried silently)."""
    return err.quota == "terminal" and (err.reason in CAPACITY_REASONS or bool(_CAPACITY.search(err.message)))
