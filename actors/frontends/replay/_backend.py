"""The model backend of a replay: each request is answered as it was recorded.

The real gateway runs (its stream checks and invalid-stream retries are re-driven);
only the model is replaced. A request is matched to the recorded request the gate
paired it with; each attempt streams that attempt's recorded chunks, then ends as the
attempt did: normally (the gateway judges the stream, as it did), with the recorded
error, or not at all (a request that was cancelled, or cut off by a crash, waits to be
cancelled).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import trio

from actors.gateway import BackendError, ChunkSink
from actors.recording import RecordedLine
from bus.messages import (
    GenerateRequest,
    GenerationCancelled,
    Message,
    ModelChunk,
    ModelFailed,
    ModelFinished,
    ModelRetrying,
)

INVALID_STREAM_TYPES = frozenset(
    {
        "NO_FINISH_REASON",
        "MALFORMED_FUNCTION_CALL",
        "UNEXPECTED_TOOL_CALL",
        "MAX_TOKENS_EXCEEDED",
        "SAFETY_BLOCKED",
        "RECITATION_BLOCKED",
        "OTHER_BLOCKED",
        "THINKING_ONLY_RESPONSE",
        "NO_RESPONSE_TEXT",
    }
)


@attrs.define
class Attempt:
    chunks: list[Any] = attrs.field(factory=list)
    retried: ModelRetrying | None = None
    terminal: Message | None = None


@attrs.define
class RequestPlan:
    request: GenerateRequest
    attempts: list[Attempt] = attrs.field(factory=lambda: [Attempt()])
    served: int = 0


def request_plans(lines: Sequence[RecordedLine]) -> dict[str, RequestPlan]:
    plans: dict[str, RequestPlan] = {}
    for rec in lines:
        msg = rec.env.message
        match msg:
            case GenerateRequest():
                plans[msg.request_id] = RequestPlan(msg)
            case ModelChunk() if msg.request_id in plans:
                plans[msg.request_id].attempts[-1].chunks.append(msg.chunk)
            case ModelRetrying() if msg.request_id in plans:
                plan = plans[msg.request_id]
                plan.attempts[-1].retried = msg
                plan.attempts.append(Attempt())
            case ModelFinished() | ModelFailed() | GenerationCancelled() if msg.request_id in plans:
                plans[msg.request_id].attempts[-1].terminal = msg
            case _:
                pass
    return plans


def backend_error(message: str, **fields: Any) -> BackendError:
    """A ``BackendError`` with whichever of ``fields`` this build's class accepts."""
    accepted = inspect.signature(BackendError.__init__).parameters
    return BackendError(message, **{k: v for k, v in fields.items() if k in accepted and v is not None})


class ReplayBackend:
    def __init__(self, plans: dict[str, RequestPlan], recorded_id: Callable[[str], str | None]) -> None:
        self.plans = plans
        self.recorded_id = recorded_id
        """Maps the replay's request id to the recorded one (the gate's pairing)."""

    async def generate(self, request: GenerateRequest, emit: ChunkSink) -> str:
        rid = self.recorded_id(request.request_id)
        plan = self.plans.get(rid) if rid is not None else None
        if plan is None or plan.served >= len(plan.attempts):
            # Not in the recording: the replay has diverged; the gate will say where.
            await trio.sleep_forever()
            raise AssertionError("unreachable")
        attempt = plan.attempts[plan.served]
        plan.served += 1
        for chunk in attempt.chunks:
            await emit(chunk)
        if attempt.retried is not None:
            if attempt.retried.reason in INVALID_STREAM_TYPES:
                return request.model  # the gateway finds the stream invalid again
            raise backend_error(
                attempt.retried.reason,
                retryable=True,
                phase="stream" if attempt.retried.mid_stream else "connect",
                replayed_delay_s=attempt.retried.delay_s,
                replayed_reason=attempt.retried.reason,
            )
        end = attempt.terminal
        if isinstance(end, ModelFinished):
            return end.model
        if isinstance(end, ModelFailed):
            if end.error.invalid_stream is not None:
                return end.model
            err = end.error
            raise backend_error(
                err.message,
                status=err.status,
                type=err.type,
                retryable=err.retryable,
                http_status=err.http_status,
                api_status=err.api_status,
                reason=err.reason,
                replayed_final=True,
            )
        await trio.sleep_forever()  # cancelled when recorded, or cut off: wait for the cancel
        raise AssertionError("unreachable")
