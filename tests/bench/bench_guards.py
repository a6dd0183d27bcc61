"""Turn-guard benchmarks: the loop detector per streamed chunk and per tool call (pure
core), its bus round trip per chunk (bare, and with the session recorder writing), and
what it adds to a whole streamed turn."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from actors.gateway import FakeEntry, FakeResponsesBackend, GatewayActor
from actors.loops import LoopDetector, LoopDetectorActor, LoopWiring
from actors.recorder import RecorderActor
from bus import Bus
from bus.messages import (
    CheckLoop,
    CloseSession,
    ResetLoopDetection,
    SessionClosed,
    SubmitPrompt,
    TurnEnded,
)
from tests.bench._table import record

CHUNK_CHARS = 80
"""A typical streamed text chunk of a Gemini answer."""


def _prose(chars: int) -> str:
    return " ".join(f"word{i}" for i in range(chars // 5 + 1))[:chars]


def _chunks(n: int) -> list[str]:
    text = _prose(n * CHUNK_CHARS)
    return [text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)]


def bench_core() -> None:
    chunks = _chunks(5_000)  # 400 000 characters: the 5 000-character window is full
    runs = []
    for _ in range(5):
        d = LoopDetector()
        d.reset("p")
        started = time.perf_counter()
        for c in chunks:
            d.check_content(c)
        runs.append((time.perf_counter() - started) / len(chunks) * 1e6)
    record("loops: content check per 80-char chunk (core)", statistics.median(runs), "us", target="target <= 50 us")

    calls = [("read_file", {"file_path": f"src/module_{i}.py", "start_line": i}) for i in range(20_000)]
    runs = []
    for _ in range(5):
        d = LoopDetector()
        d.reset("p")
        started = time.perf_counter()
        for name, args in calls:
            d.check_tool_call(name, args)
        runs.append((time.perf_counter() - started) / len(calls) * 1e6)
    record("loops: tool-call check per call (core)", statistics.median(runs), "us", target="target <= 50 us")


async def _round_trips(n: int, recording: Path | None) -> float:
    bus = Bus()
    chunks = _chunks(n)
    async with trio.open_nursery() as nursery:
        if recording is not None:
            await nursery.start(RecorderActor(bus, session_id="b", path=recording).run)
        await nursery.start(LoopDetectorActor(bus, LoopWiring(session_id="b", address="loops", gateway_address="gw")).run)
        turn = bus.connect("turn", capacity=1024)
        await turn.send(ResetLoopDetection(session_id="b", prompt_id="p"), to="loops")
        started = time.perf_counter()
        for i, text in enumerate(chunks):
            await turn.send(
                CheckLoop(session_id="b", request_id=str(i), reply_to="turn", prompt_id="p", kind="content", text=text),
                to="loops",
            )
            await turn.receive()
        elapsed = time.perf_counter() - started
        bus.disconnect("loops")
        nursery.cancel_scope.cancel()
    return elapsed / n * 1e6


def bench_round_trip() -> None:
    n = 5_000
    bare = statistics.median(trio.run(_round_trips, n, None) for _ in range(3))
    record("loops: CheckLoop -> LoopVerdict round trip per chunk", bare, "us", target="target <= 100 us")
    with tempfile.TemporaryDirectory() as tmp:
        recorded = statistics.median(trio.run(_round_trips, n, Path(tmp) / f"r{i}.jsonl") for i in range(3))
    record("loops: same, with the session recorder writing", recorded, "us", baseline=bare)


def _stream(n: int) -> FakeEntry:
    chunks: list[dict[str, Any]] = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": t}]}}]} for t in _chunks(n)
    ]
    chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    return FakeEntry("generateContentStream", chunks, 1)


async def _turn(n: int, loop_detection: bool) -> float:
    from actors.host import runtime
    from tests.turn._session import config

    with tempfile.TemporaryDirectory() as tmp:
        bus = Bus()
        # Recorded, as users run it (the recorder is the session's first observer).
        cfg = config(Path(tmp), loop_detection=loop_detection, recording=Path(tmp) / "s1.jsonl")
        async with trio.open_nursery() as nursery:
            await nursery.start(GatewayActor(bus, FakeResponsesBackend([_stream(n)])).run)
            client = bus.connect("client")
            sub = bus.subscribe("s1", "bench", capacity=1_000_000)
            addrs = await nursery.start(runtime.supervise_session, bus, cfg)
            await client.send(runtime.open_session_message(cfg), to=addrs.session)
            started = time.perf_counter()
            await client.send(SubmitPrompt(session_id="s1", prompt_id="p", parts=[{"text": "go"}]), to=addrs.session)
            async for env in sub:
                if isinstance(env.message, TurnEnded):
                    break
            elapsed = time.perf_counter() - started
            await client.send(CloseSession(session_id="s1", reason="bench"), to=addrs.session)
            async for env in sub:
                if isinstance(env.message, SessionClosed):
                    break
            bus.disconnect("gateway")
            nursery.cancel_scope.cancel()
    return elapsed


def bench_turn() -> None:
    n = 2_000
    without = statistics.median(trio.run(_turn, n, False) for _ in range(3))
    with_loops = statistics.median(trio.run(_turn, n, True) for _ in range(3))
    record(
        "loops: streamed turn of 2,000 chunks, detector on (wall)",
        with_loops,
        "s",
        baseline=without,
        target="baseline: detector off",
    )
    record("loops: added per streamed chunk in a whole turn", (with_loops - without) / n * 1e6, "us")


BENCHMARKS = (bench_core, bench_round_trip, bench_turn)

if __name__ == "__main__":
    for bench in BENCHMARKS:
        bench()
