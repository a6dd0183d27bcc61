"""Gemini CLI's two retry layers, as pure decisions (reference §2.6).

**Connection layer** (``retryWithBackoff``) wraps opening a stream and every
``generateContent``: up to ``max_attempts`` attempts (``min(general.maxAttempts, 10)``),
delay 5 s doubling to 30 s. A retryable quota error (429/499/503) or any 5xx with a
server delay waits ``max(delay, server delay)`` plus 0..20 %; other retryable errors wait
the delay ±30 %. A model-capacity error is retried silently twice (1 s, then 3 s, or the
server's delay); other terminal quota errors and 404 are not retried; 400 never is.

**Mid-stream layer** (``streamWithRetries``) retries errors raised while reading a
stream, and invalid streams, on one attempt counter: attempt ``n`` (from 0) may be
retried while ``n < min(max_attempts, 4) - 1``, after ``1 s * 2**n`` (1 s, 2 s, 4 s), no
jitter. Each retry is announced so the consumer drops the partial output.

``ConnectBackoff`` is the connection layer's state for one call; the gateway sleeps
what it returns. Randomness comes from an injected ``random.Random``. ``retry_notice``
is the line a front end shows for a connection-layer retry.
"""

from __future__ import annotations

import random

import attrs

from actors.common import LazyPattern

from ._backend import BackendError
from ._errors import is_capacity, is_retryable

DEFAULT_MAX_ATTEMPTS = 10
MAX_SILENT_CAPACITY_ATTEMPTS = 3


@attrs.frozen
class RetryPolicy:
    """The constants of both layers (Gemini CLI's values by default)."""

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    """Connection-layer attempts; also bounds the mid-stream layer."""
    initial_delay_s: float = 5.0
    max_delay_s: float = 30.0
    mid_stream_max_attempts: int = 4
    mid_stream_initial_delay_s: float = 1.0
    capacity_delays_s: tuple[float, float] = (1.0, 3.0)
    """Silent retries of a model-capacity error without a server delay."""

    @classmethod
    def from_settings(cls, max_attempts: object) -> RetryPolicy:
        """``general.maxAttempts`` capped at 10, as Gemini CLI's ``Config``."""
        if isinstance(max_attempts, int) and not isinstance(max_attempts, bool) and max_attempts > 0:
            return cls(max_attempts=min(max_attempts, DEFAULT_MAX_ATTEMPTS))
        return cls()

    def scaled(self, factor: float) -> RetryPolicy:
        """The same schedule with every delay multiplied by ``factor`` (tests on real
        sockets and a real clock)."""
        return attrs.evolve(
            self,
            initial_delay_s=self.initial_delay_s * factor,
            max_delay_s=self.max_delay_s * factor,
            mid_stream_initial_delay_s=self.mid_stream_initial_delay_s * factor,
            capacity_delays_s=(self.capacity_delays_s[0] * factor, self.capacity_delays_s[1] * factor),
        )

    def mid_stream_delay(self, attempt: int) -> float | None:
        """The pause before retrying mid-stream attempt ``attempt`` (0-based), or
        ``None`` when that attempt was the last."""
        limit = min(self.max_attempts, self.mid_stream_max_attempts)
        if attempt < limit - 1:
            return float(self.mid_stream_initial_delay_s * 2**attempt)
        return None


@attrs.define
class ConnectBackoff:
    """One call's connection-layer state: ``attempt()`` before each try, then
    ``delay_after(error)`` -> seconds to wait, or ``None`` to give up."""

    policy: RetryPolicy
    rng: random.Random
    attempts: int = 0
    current_delay: float = attrs.field(init=False)
    capacity_attempts: int = 0

    def __attrs_post_init__(self) -> None:
        self.current_delay = self.policy.initial_delay_s

    def attempt(self) -> int:
        self.attempts += 1
        return self.attempts

    def delay_after(self, err: BackendError) -> float | None:
        if err.replayed_final:
            return None
        if err.replayed_delay_s is not None:
            return err.replayed_delay_s
        server_delay = err.retry_delay_s
        quota = err.quota
        if err.type == "ModelNotFoundError":
            return None  # model fallback is not modelled: Gemini CLI then throws
        if quota == "terminal":
            if not is_capacity(err):
                return None
            self.capacity_attempts += 1
            if self.capacity_attempts >= MAX_SILENT_CAPACITY_ATTEMPTS:
                return None
            if server_delay is None:
                server_delay = self.policy.capacity_delays_s[self.capacity_attempts - 1]
            self.current_delay = server_delay
            quota = "retryable"
        if server_delay is None:
            server_delay = err.retry_after_s  # HTTP Retry-After: honoured like RetryInfo
        is_5xx = err.http_status is not None and 500 <= err.http_status < 600
        if quota == "retryable" or is_5xx:
            if self.attempts >= self.policy.max_attempts:
                return None
            if server_delay is not None:
                self.current_delay = max(self.current_delay, server_delay)
                wait = self.current_delay + self.current_delay * 0.2 * self.rng.random()
            else:
                wait = self._jittered()
            self.current_delay = min(self.policy.max_delay_s, self.current_delay * 2)
            return wait
        if self.attempts >= self.policy.max_attempts or not is_retryable(err):
            return None
        wait = self._jittered()
        self.current_delay = min(self.policy.max_delay_s, self.current_delay * 2)
        return wait

    def _jittered(self) -> float:
        jitter = self.current_delay * 0.3 * (self.rng.random() * 2 - 1)
        return max(0.0, self.current_delay + jitter)


_STATUS_REASON = LazyPattern(r"(\d{3}) ")


def retry_notice(attempt: int, delay_s: float, reason: str, *, max_attempts: int | None = None) -> str:
    """The warning headless Gemini CLI writes to stderr before a connection-layer retry
    (``retryWithBackoff``: "Attempt N failed[ with status S]. Retrying with backoff..."
    followed by the error and its stack), on one line: the error as the gateway's short
    reason (``ModelRetrying.reason``: "503 UNAVAILABLE", "ECONNREFUSED"), then which
    attempt comes next and when."""
    m = _STATUS_REASON.match(reason)
    status = f" with status {m.group(1)}" if m else ""
    after = f"attempt {attempt + 1}" + (f" of {max_attempts}" if max_attempts else "")
    return f"Attempt {attempt} failed{status}. Retrying with backoff... ({reason}; {after} in {delay_s:.1f}s)"
