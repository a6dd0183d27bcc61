"""The live backend (google-genai over real HTTP, trio-asyncio) against the fake Gemini
server, fault by fault: attempts, what the requester sees, and the final error.

Real sockets and the real clock; the retry delays are Gemini CLI's scaled down 1000x
(``test_retry`` checks the unscaled schedule in virtual time).
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio

from actors.gateway import GatewayActor, RetryPolicy
from actors.gateway._fake import FakeEntry
from actors.gateway._genai import GenaiBackend, GenaiSettings
from bus import Bus, Port
from bus.json_values import thaw
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
from tests.fakes.gemini_server import (
    FakeGeminiServer,
    Fault,
    error_info,
    google_error_body,
    retry_info,
)

SCALE = 0.001
POLICY = RetryPolicy().scaled(SCALE)
SEED = 7


HI = ({"role": "user", "parts": [{"text": "hi"}]},)


def request(rid: str) -> GenerateRequest:
    return GenerateRequest(session_id="s", request_id=rid, reply_to="me", method="generateContentStream", model="m", contents=HI)


def stream(*texts: str, finish: bool = True) -> FakeEntry:
    chunks: list[dict[str, Any]] = [{"candidates": [{"content": {"role": "model", "parts": [{"text": t}]}}]} for t in texts]
    if finish:
        chunks[-1]["candidates"][0]["finishReason"] = "STOP"
        chunks[-1]["usageMetadata"] = {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5}
    return FakeEntry("generateContentStream", chunks, 0)


@attrs.define
class Live:
    server: FakeGeminiServer
    bus: Bus
    me: Port
    n: int = 0

    async def ask(
        self, method: str = "generateContentStream", *, model: str = "gemini-test", contents: Sequence[Any] | None = None
    ) -> list[Message]:
        self.n += 1
        await self.me.send(
            GenerateRequest(
                session_id="s",
                request_id=f"r{self.n}",
                reply_to="me",
                method=method,
                model=model,
                contents=tuple(contents or ({"role": "user", "parts": [{"text": "hi"}]},)),
                config={"systemInstruction": "sys", "temperature": 1, "thinkingConfig": {"includeThoughts": True}},
            ),
            to="gateway",
        )
        got: list[Message] = []
        async for env in self.me:
            got.append(env.message)
            if isinstance(env.message, ModelFinished | ModelFailed | GenerationCancelled):
                return got
        raise AssertionError("the gateway stopped")


@asynccontextmanager
async def live(
    entries: Sequence[FakeEntry] = (),
    faults: Sequence[Fault | None] = (),
    *,
    policy: RetryPolicy = POLICY,
    read_timeout_s: float = 30.0,
    capacity: int = 256,
    **server: Any,
) -> AsyncIterator[Live]:
    srv = FakeGeminiServer(entries, faults=faults, **server)
    bus = Bus()
    async with trio.open_nursery() as nursery:
        await nursery.start(srv.run)
        backend = GenaiBackend(GenaiSettings(api_key="test-key", base_url=srv.base_url), read_timeout_s=read_timeout_s)
        await nursery.start(GatewayActor(bus, backend, retry=policy, rng=random.Random(SEED)).run)
        yield Live(srv, bus, bus.connect("me", capacity=capacity))
        bus.disconnect("gateway")
        nursery.cancel_scope.cancel()


def texts(got: list[Message]) -> list[str]:
    return [p["text"] for m in got if isinstance(m, ModelChunk) for c in m.chunk.get("candidates", ()) for p in c["content"]["parts"]]


def retries(got: list[Message]) -> list[ModelRetrying]:
    return [m for m in got if isinstance(m, ModelRetrying)]


def failed(got: list[Message]) -> ModelFailed:
    assert isinstance(got[-1], ModelFailed), got[-1]
    return got[-1]


async def test_a_stream_arrives_as_rest_json_chunks() -> None:
    async with live([stream("Hello", " world")]) as h:
        got = await h.ask()
    assert texts(got) == ["Hello", " world"]
    assert isinstance(got[-1], ModelFinished)
    last = [m for m in got if isinstance(m, ModelChunk)][-1].chunk
    assert last["candidates"][0]["finishReason"] == "STOP"
    assert last["usageMetadata"] == {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5}
    [req] = h.server.requests
    assert req.path == "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
    assert req.headers["x-goog-api-key"] == "test-key"
    assert req.body["contents"] == [{"parts": [{"text": "hi"}], "role": "user"}]
    assert req.body["systemInstruction"]["parts"] == [{"text": "sys"}]
    gen = req.body["generationConfig"]
    # (this SDK writes thinkingConfig's fields in snake_case; the API accepts both)
    assert gen["temperature"] == 1.0 and list(gen["thinkingConfig"].values()) == [True]


async def test_thought_signatures_and_function_calls_round_trip() -> None:
    sig = "AbC+/w=="
    chunk = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"path": "a"}}, "thoughtSignature": sig}]},
                "finishReason": "STOP",
            }
        ]
    }
    history = [
        {"role": "user", "parts": [{"text": "hi"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"path": "a"}}, "thoughtSignature": sig}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {"output": "x"}}}]},
    ]
    async with live([FakeEntry("generateContentStream", [chunk], 0)]) as h:
        got = await h.ask(contents=history)
    part = [m for m in got if isinstance(m, ModelChunk)][0].chunk["candidates"][0]["content"]["parts"][0]
    assert part == {"functionCall": {"name": "read_file", "args": {"path": "a"}}, "thoughtSignature": sig}
    sent = h.server.requests[0].body["contents"][1]["parts"][0]["thoughtSignature"]
    assert sent.translate(str.maketrans("-_", "+/")) == sig


async def test_generate_content_and_count_tokens() -> None:
    answer = {"candidates": [{"content": {"role": "model", "parts": [{"text": '{"model_choice":"flash"}'}]}, "finishReason": "STOP"}]}
    entries = [FakeEntry("generateContent", answer, 0), FakeEntry("countTokens", {"totalTokens": 42}, 1)]
    async with live(entries) as h:
        one = await h.ask("generateContent")
        two = await h.ask("countTokens")
    assert [thaw(m.chunk) for m in one if isinstance(m, ModelChunk)] == [answer]
    assert [thaw(m.chunk) for m in two if isinstance(m, ModelChunk)] == [{"totalTokens": 42}]
    assert [r.path.split(":")[-1] for r in h.server.requests] == ["generateContent", "countTokens"]


async def test_429_with_retry_info_waits_the_servers_delay() -> None:
    fault = Fault.http_error(429, "Quota exceeded.", details=[retry_info("60ms")])
    async with live([stream("ok")], [fault]) as h:
        got = await h.ask()
    [r] = retries(got)
    assert not r.mid_stream and 0.06 <= r.delay_s <= 0.06 * 1.2
    assert r.reason == "429 RESOURCE_EXHAUSTED"
    assert texts(got) == ["ok"] and len(h.server.requests) == 2
    assert h.server.requests[1].started_at - h.server.requests[0].started_at >= 0.06


async def test_429_with_retry_after_header_is_honoured() -> None:
    fault = Fault.http_error(429, "Too many requests", retry_after="0.05")
    async with live([stream("ok")], [fault]) as h:
        got = await h.ask()
    [r] = retries(got)
    assert 0.05 <= r.delay_s <= 0.06
    assert texts(got) == ["ok"]


async def test_500_and_503_back_off_then_succeed() -> None:
    async with live([stream("ok")], [Fault.http_error(500), Fault.http_error(503)]) as h:
        got = await h.ask()
    first, second = retries(got)
    assert (first.attempt, second.attempt) == (1, 2)
    assert 0.0035 <= first.delay_s <= 0.0065 and 0.007 <= second.delay_s <= 0.013  # 5 s, 10 s ±30 %, scaled
    assert texts(got) == ["ok"] and len(h.server.requests) == 3


async def test_503_until_attempts_run_out() -> None:
    faults = [Fault.http_error(503, "The model is overloaded.")] * 3
    async with live([], faults, policy=RetryPolicy(max_attempts=3).scaled(SCALE)) as h:
        got = await h.ask()
    err = failed(got).error
    assert len(h.server.requests) == 3 and len(retries(got)) == 2
    # a 503 is a RetryableQuotaError for Gemini CLI: its own message, status 503
    assert (err.message, err.status, err.type, err.http_status) == ("The model is overloaded.", 503, "RetryableQuotaError", 503)


async def test_reset_before_the_first_byte_is_retried() -> None:
    async with live([stream("ok")], [Fault.reset()]) as h:
        got = await h.ask()
    [r] = retries(got)
    assert not r.mid_stream and r.reason == "ECONNRESET"
    assert texts(got) == ["ok"]


async def test_reset_after_k_chunks_fails_the_response_unretried_as_gemini_cli_does() -> None:
    # Gemini CLI 0.61 against this server: ``TypeError: terminated``, caused by
    # ``SocketError: other side closed`` (UND_ERR_SOCKET), which it does not retry.
    async with live([stream("a", "b", "c"), stream("A", "B", "C")], [Fault.reset(after_chunks=2)]) as h:
        got = await h.ask()
    assert retries(got) == [] and len(h.server.requests) == 1
    assert texts(got) == ["a", "b"]
    err = failed(got).error
    assert err.message.startswith("terminated") and err.type == "NetworkError"


async def test_a_retryable_error_after_k_chunks_retries_mid_stream_and_voids_the_partial_output() -> None:
    async with live([stream("a", "b", "c"), stream("A", "B", "C")], [Fault.error_chunk(503, after_chunks=2)]) as h:
        got = await h.ask()
    [r] = retries(got)
    assert r.mid_stream and r.delay_s == pytest.approx(1.0 * SCALE)
    kinds = [type(m).__name__ for m in got]
    assert kinds == ["ModelChunk", "ModelChunk", "ModelRetrying", "ModelChunk", "ModelChunk", "ModelChunk", "ModelFinished"]
    assert texts(got) == ["a", "b", "A", "B", "C"]
    assert h.server.requests[0].chunks_sent == 2


async def test_a_stall_times_out_and_is_retried_mid_stream() -> None:
    async with live([stream("a", "b"), stream("A", "B")], [Fault.stall(after_chunks=1)], read_timeout_s=0.2) as h:
        got = await h.ask()
    [r] = retries(got)
    assert r.mid_stream and r.reason == "UND_ERR_BODY_TIMEOUT"
    assert texts(got) == ["a", "A", "B"]
    stalled = h.server.requests[0]
    assert stalled.disconnected_at is not None and stalled.disconnected_at - stalled.started_at >= 0.2


async def test_per_chunk_latency() -> None:
    async with live([stream("a", "b", "c", "d")], chunk_delay_s=0.03) as h:
        got: list[float] = []
        await h.me.send(request("x"), to="gateway")
        async for env in h.me:
            if isinstance(env.message, ModelChunk):
                got.append(time.monotonic())
            if isinstance(env.message, ModelFinished | ModelFailed):
                break
    gaps = [b - a for a, b in zip(got, got[1:], strict=False)]
    assert len(gaps) == 3 and all(g >= 0.02 for g in gaps)


async def test_in_stream_error_event_is_retried_mid_stream() -> None:
    async with live([stream("a", "b"), stream("ok")], [Fault.error_chunk(503, "overloaded", after_chunks=1)]) as h:
        got = await h.ask()
    [r] = retries(got)
    assert r.mid_stream and r.reason == "503 UNAVAILABLE"
    assert texts(got) == ["a", "ok"]


async def test_malformed_chunk_fails_without_retry() -> None:
    async with live([stream("a", "b")], [Fault.malformed(after_chunks=1, text="this is not json")]) as h:
        got = await h.ask()
    err = failed(got).error
    assert not retries(got) and len(h.server.requests) == 1
    assert err.message.startswith("exception parsing stream chunk this is not json. SyntaxError: ")
    assert err.status is None and err.type == "SyntaxError"


async def test_wrong_api_key() -> None:
    body = google_error_body(
        400,
        "API key not valid. Please pass a valid API key.",
        details=[error_info("API_KEY_INVALID", metadata="x")],
    )
    async with live([], [Fault.http_error(400, body=body)]) as h:
        got = await h.ask()
    err = failed(got).error
    assert err.message == json.dumps(body, separators=(",", ":"))
    assert (err.status, err.api_status, err.reason) == (400, "INVALID_ARGUMENT", "API_KEY_INVALID")
    assert not retries(got) and len(h.server.requests) == 1


async def test_permission_denied() -> None:
    async with live([], [Fault.http_error(403, "Method doesn't allow unregistered callers.")]) as h:
        got = await h.ask()
    err = failed(got).error
    assert err.status == 403 and err.api_status == "PERMISSION_DENIED" and not retries(got)


async def test_unknown_model() -> None:
    msg = "models/gemini-nope is not found for API version v1beta, or is not supported for generateContent."
    async with live([], [Fault.http_error(404, msg)]) as h:
        got = await h.ask(model="gemini-nope")
    err = failed(got).error
    assert (err.message, err.status, err.type, err.http_status) == (msg, None, "ModelNotFoundError", 404)
    assert not retries(got)


async def test_400_with_a_google_error_body_as_text() -> None:
    body = json.dumps(google_error_body(400, "Request contains an invalid argument."), indent=2)
    async with live([], [Fault.http_error(400, body=body, content_type="text/plain")]) as h:
        got = await h.ask()
    err = failed(got).error
    assert json.loads(err.message) == {"error": {"message": body, "code": 400, "status": "Bad Request"}}
    assert err.api_status == "INVALID_ARGUMENT"


async def test_no_candidates_is_an_invalid_stream_after_four_attempts() -> None:
    async with live([], [Fault.no_candidates()] * 4) as h:
        got = await h.ask()
    err = failed(got).error
    assert err.invalid_stream == "NO_FINISH_REASON"
    assert [r.delay_s for r in retries(got)] == pytest.approx([0.001, 0.002, 0.004])
    assert len(h.server.requests) == 4


async def test_fixture_exhaustion_comes_back_as_a_marked_400() -> None:
    async with live([]) as h:
        got = await h.ask()
    err = failed(got).error
    assert err.reason == "FAKE_RESPONSES" and err.status == 400
    assert json.loads(err.message)["error"]["message"].startswith("No more mock responses for generateContentStream, got request:\n")


async def test_cancel_closes_the_stream() -> None:
    async with live([stream("a", "b")], [Fault.stall(after_chunks=1)]) as h:
        await h.me.send(request("c"), to="gateway")
        first = await h.me.receive()
        assert isinstance(first.message, ModelChunk)
        await h.me.send(CancelGeneration(session_id="s", request_id="c", reason="test"), to="gateway")
        reply = await h.me.receive()
        assert isinstance(reply.message, GenerationCancelled)
        req = h.server.requests[0]
        with trio.fail_after(10):  # against a hang only: the server stalls, so only our close ends it
            await req.disconnected.wait()
        assert not req.completed


async def test_shutdown_while_a_chunk_waits_for_delivery_still_closes_the_stream() -> None:
    """The gateway is blocked delivering a chunk (the requester's inbox is full), not
    reading the socket, when it is told to stop: the connection must close at once."""
    many = stream(*[f"c{i}" for i in range(50)])
    async with live([many], chunk_delay_s=0.005, capacity=1) as h:
        await h.me.send(request("c"), to="gateway")
        await h.server.wait_until(lambda s: bool(s.requests) and s.requests[0].chunks_sent >= 3)
        h.bus.disconnect("gateway")  # its inbox closes: requests in flight are cancelled
        req = h.server.requests[0]
        with trio.fail_after(10):  # against a hang only
            await req.disconnected.wait()
        assert not req.completed
        while True:  # the acknowledgement still comes after the chunk that was waiting
            if isinstance((await h.me.receive()).message, GenerationCancelled):
                break


async def test_concurrent_streams_share_one_thread() -> None:
    before = threading.active_count()
    entries = [stream("x", "y", "z") for _ in range(30)]
    async with live(entries, chunk_delay_s=0.01) as h:
        results: list[list[Message]] = []

        async def one(i: int) -> None:
            port = h.bus.connect(f"p{i}")
            await port.send(attrs.evolve(request(f"q{i}"), reply_to=f"p{i}"), to="gateway")
            got = []
            async for env in port:
                got.append(env.message)
                if isinstance(env.message, ModelFinished | ModelFailed):
                    break
            results.append(got)

        async with trio.open_nursery() as nursery:
            for i in range(30):
                nursery.start_soon(one, i)
        during = threading.active_count()
    assert len(results) == 30 and all(isinstance(r[-1], ModelFinished) for r in results)
    assert during <= before + 2
