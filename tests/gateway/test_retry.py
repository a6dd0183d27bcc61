"""Gemini CLI's retry layers: the pure schedule, then the gateway in virtual time with a
scripted transport (exact delays, attempts and what the requester sees)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

import attrs
import pytest
import trio

from actors.gateway import BackendError, ChunkSink, ConnectBackoff, GatewayActor, RetryPolicy
from actors.gateway._errors import http_error, network_error
from bus import Bus
from bus.messages import (
    CancelGeneration,
    GenerateRequest,
    GenerationCancelled,
    Message,
    ModelChunk,
    ModelFailed,
    ModelFinished,
    ModelRetrying,
)
from tests.fakes.gemini_server import error_info, google_error_body, retry_info

SEED = 1234


def e500() -> BackendError:
    return http_error(500, '{"error":{"code":500,"message":"boom","status":"INTERNAL"}}', content_type="application/json")


def e429(delay: str | None = None, reason: str | None = None) -> BackendError:
    details: list[Any] = []
    if delay:
        details.append(retry_info(delay))
    if reason:
        details.append(error_info(reason))
    return http_error(429, json.dumps(google_error_body(429, "slow down", details=details)), content_type="application/json")


# -- the connection layer, pure ---------------------------------------------------------------
def schedule(errors: Sequence[BackendError], policy: RetryPolicy | None = None) -> list[float | None]:
    backoff = ConnectBackoff(policy or RetryPolicy(), random.Random(SEED))
    out: list[float | None] = []
    for err in errors:
        backoff.attempt()
        out.append(backoff.delay_after(err))
    return out


def test_5xx_backs_off_5s_doubling_to_30s_with_30_percent_jitter() -> None:
    rng = random.Random(SEED)
    expected: list[float | None] = []
    delay = 5.0
    for _ in range(9):
        expected.append(max(0.0, delay + delay * 0.3 * (rng.random() * 2 - 1)))
        delay = min(30.0, delay * 2)
    expected.append(None)  # the 10th attempt is the last
    got = schedule([e500()] * 10)
    assert got == pytest.approx(expected)
    assert all(d is not None and 3.5 <= d <= 39 for d in got[:9])


def test_server_delay_is_a_floor_with_up_to_20_percent_more() -> None:
    rng = random.Random(SEED)
    first = 7.0 + 7.0 * 0.2 * rng.random()
    second = 14.0 + 14.0 * 0.2 * rng.random()  # currentDelay doubled from max(5, 7)
    assert schedule([e429("7s"), e429("7s")]) == pytest.approx([first, second])


def test_retry_after_header_counts_as_a_server_delay() -> None:
    err = http_error(503, "{}", content_type="application/json", retry_after="12")
    [delay] = schedule([err])
    assert delay is not None and 12.0 <= delay <= 12.0 * 1.2


def test_capacity_errors_are_retried_silently_twice() -> None:
    rng = random.Random(SEED)
    err = e429(reason="MODEL_CAPACITY_EXHAUSTED")
    first = 1.0 + 1.0 * 0.2 * rng.random()
    second = 3.0 + 3.0 * 0.2 * rng.random()
    assert schedule([err, err, err]) == pytest.approx([first, second, None])


@pytest.mark.parametrize(
    "err",
    [
        http_error(400, '{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}', content_type="application/json"),
        http_error(403, '{"error":{"code":403,"message":"no","status":"PERMISSION_DENIED"}}', content_type="application/json"),
        http_error(404, '{"error":{"code":404,"message":"no model","status":"NOT_FOUND"}}', content_type="application/json"),
        e429("900s"),  # longer than 5 minutes: terminal
        BackendError("No more mock responses for generateContentStream, got request:\n{}"),
    ],
)
def test_errors_that_are_not_retried(err: BackendError) -> None:
    assert schedule([err]) == [None]


def test_network_errors_back_off_with_jitter() -> None:
    rng = random.Random(SEED)
    assert schedule([network_error("ECONNREFUSED")]) == pytest.approx([5.0 + 5.0 * 0.3 * (rng.random() * 2 - 1)])


def test_attempts_follow_the_setting_capped_at_10() -> None:
    assert RetryPolicy.from_settings(3).max_attempts == 3
    assert RetryPolicy.from_settings(50).max_attempts == 10
    assert RetryPolicy.from_settings(None).max_attempts == 10
    assert schedule([e500()] * 3, RetryPolicy(max_attempts=3))[2] is None
    assert schedule([e500()], RetryPolicy(max_attempts=1)) == [None]


def test_mid_stream_delays() -> None:
    p = RetryPolicy()
    assert [p.mid_stream_delay(a) for a in range(4)] == [1.0, 2.0, 4.0, None]
    assert [RetryPolicy(max_attempts=2).mid_stream_delay(a) for a in range(2)] == [1.0, None]


# -- the gateway with a scripted transport, in virtual time --------------------------------------
@attrs.frozen
class Step:
    """One backend call: emit ``chunks``, then raise ``error`` (or finish)."""

    chunks: tuple[Any, ...] = ()
    error: BackendError | None = None


def text(t: str, finish: str | None = None) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": t}]}}
    if finish:
        cand["finishReason"] = finish
    return {"candidates": [cand]}


OK = Step((text("hello", "STOP"),))


class Scripted:
    def __init__(self, steps: Sequence[Step]) -> None:
        self.steps = list(steps)
        self.calls: list[tuple[float, GenerateRequest]] = []

    async def generate(self, request: GenerateRequest, emit: ChunkSink) -> str:
        self.calls.append((trio.current_time(), request))
        step = self.steps.pop(0)
        for chunk in step.chunks:
            await emit(chunk)
        if step.error is not None:
            raise step.error
        return request.model


def stream_error() -> BackendError:
    return network_error("ECONNRESET", phase="stream")


async def run(steps: Sequence[Step], *, method: str = "generateContentStream", policy: RetryPolicy | None = None, config: Any = None) -> tuple[Scripted, list[Message], float]:
    backend = Scripted(steps)
    bus = Bus()
    got: list[Message] = []
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        await nursery.start(GatewayActor(bus, backend, retry=policy, rng=random.Random(SEED)).run)
        me = bus.connect("me")
        await me.send(
            GenerateRequest(
                session_id="s",
                request_id="r",
                reply_to="me",
                method=method,
                model="m",
                contents=({"role": "user", "parts": [{"text": "hi"}]},),
                config=config or {},
            ),
            to="gateway",
        )
        async for env in me:
            got.append(env.message)
            if isinstance(env.message, ModelFinished | ModelFailed | GenerationCancelled):
                break
        elapsed = trio.current_time() - start
        bus.disconnect("gateway")
    return backend, got, elapsed


def retries(got: list[Message]) -> list[ModelRetrying]:
    return [m for m in got if isinstance(m, ModelRetrying)]


async def test_connection_retries_wait_exactly_the_schedule(autojump_clock: trio.abc.Clock) -> None:
    backend, got, elapsed = await run([Step(error=e500())] * 3 + [OK])
    expected = schedule([e500()] * 3)
    announced = retries(got)
    assert [(r.attempt, r.mid_stream) for r in announced] == [(1, False), (2, False), (3, False)]
    assert [r.delay_s for r in announced] == pytest.approx(expected)
    times = [t for t, _ in backend.calls]
    assert [b - a for a, b in zip(times, times[1:], strict=False)] == pytest.approx(expected)
    assert isinstance(got[-1], ModelFinished)
    assert elapsed == pytest.approx(sum(d for d in expected if d is not None))


async def test_connection_retries_give_up_after_max_attempts(autojump_clock: trio.abc.Clock) -> None:
    backend, got, _ = await run([Step(error=e500())] * 10)
    assert len(backend.calls) == 10 and len(retries(got)) == 9
    failed = got[-1]
    assert isinstance(failed, ModelFailed)
    assert failed.error.status == 500 and failed.error.message.startswith('{"error":{"code":500')


async def test_a_400_fails_at_once(autojump_clock: trio.abc.Clock) -> None:
    err = http_error(400, '{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}', content_type="application/json")
    backend, got, elapsed = await run([Step(error=err)])
    assert len(backend.calls) == 1 and elapsed == 0 and not retries(got)
    assert isinstance(got[-1], ModelFailed) and got[-1].error.status == 400
    assert got[-1].error.api_status == "INVALID_ARGUMENT" and got[-1].error.http_status == 400


async def test_mid_stream_errors_retry_1_2_4_s_then_fail(autojump_clock: trio.abc.Clock) -> None:
    partial = Step((text("par"),), stream_error())
    backend, got, elapsed = await run([partial] * 4)
    assert [(r.attempt, r.delay_s, r.mid_stream) for r in retries(got)] == [(1, 1.0, True), (2, 2.0, True), (3, 4.0, True)]
    assert elapsed == 7 and len(backend.calls) == 4
    assert isinstance(got[-1], ModelFailed) and got[-1].error.message.startswith("terminated")
    # each retry is announced after the partial output it voids
    kinds = [type(m).__name__ for m in got]
    assert kinds == ["ModelChunk", "ModelRetrying"] * 3 + ["ModelChunk", "ModelFailed"]


async def test_mid_stream_retry_then_success(autojump_clock: trio.abc.Clock) -> None:
    backend, got, elapsed = await run([Step((text("par"),), stream_error()), OK])
    assert elapsed == 1
    assert [m.index for m in got if isinstance(m, ModelChunk)] == [0, 1]
    assert isinstance(got[-1], ModelFinished)


async def test_invalid_streams_and_stream_errors_share_one_counter(autojump_clock: trio.abc.Clock) -> None:
    no_finish = Step((text("x"),))
    backend, got, elapsed = await run([no_finish, Step((text("y"),), stream_error()), no_finish, no_finish])
    assert [r.reason for r in retries(got)] == ["NO_FINISH_REASON", "ECONNRESET", "NO_FINISH_REASON"]
    assert elapsed == 7 and len(backend.calls) == 4
    assert isinstance(got[-1], ModelFailed) and got[-1].error.invalid_stream == "NO_FINISH_REASON"


async def test_each_mid_stream_attempt_reconnects_with_the_connection_layer(autojump_clock: trio.abc.Clock) -> None:
    backend, got, elapsed = await run([Step((text("x"),), stream_error()), Step(error=e500()), OK])
    first_retry, second_retry = retries(got)
    assert first_retry.mid_stream and not second_retry.mid_stream
    assert elapsed == pytest.approx(1 + schedule([e500()])[0])
    assert isinstance(got[-1], ModelFinished)


async def test_a_connection_failure_on_a_retry_is_not_retried_mid_stream(autojump_clock: trio.abc.Clock) -> None:
    err = http_error(400, '{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}', content_type="application/json")
    backend, got, _ = await run([Step((text("x"),), stream_error()), Step(error=err)])
    assert len(backend.calls) == 2
    assert isinstance(got[-1], ModelFailed) and got[-1].error.status == 400


async def test_stream_errors_of_non_streaming_calls_are_not_retried(autojump_clock: trio.abc.Clock) -> None:
    backend, got, _ = await run([Step((text("x"),), stream_error())], method="generateContent")
    assert len(backend.calls) == 1 and isinstance(got[-1], ModelFailed)


async def test_the_thinking_only_nudge_goes_into_the_retry(autojump_clock: trio.abc.Clock) -> None:
    thought = Step(({"candidates": [{"content": {"parts": [{"text": "hmm", "thought": True}]}, "finishReason": "STOP"}]},))
    backend, got, _ = await run([thought, OK], config={"systemInstruction": "be brief"})
    first, second = (req.config["systemInstruction"] for _, req in backend.calls)
    assert first == "be brief"
    assert second.startswith("be brief\n[System: You previously generated thoughts")
    assert isinstance(got[-1], ModelFinished)


async def test_cancel_during_a_backoff_is_acknowledged_at_once(autojump_clock: trio.abc.Clock) -> None:
    backend = Scripted([Step(error=e500()), OK])
    bus = Bus()
    async with trio.open_nursery() as nursery:
        await nursery.start(GatewayActor(bus, backend, rng=random.Random(SEED)).run)
        me = bus.connect("me")
        req = GenerateRequest(session_id="s", request_id="r", reply_to="me", method="generateContentStream", model="m")
        await me.send(req, to="gateway")
        assert isinstance((await me.receive()).message, ModelRetrying)
        start = trio.current_time()
        await me.send(CancelGeneration(session_id="s", request_id="r", reason="test"), to="gateway")
        assert isinstance((await me.receive()).message, GenerationCancelled)
        assert trio.current_time() == start
        assert len(backend.calls) == 1
        bus.disconnect("gateway")
