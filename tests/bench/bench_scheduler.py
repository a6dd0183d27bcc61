"""Scheduler benchmarks: parallel shell waves, wave switch latency, 1,000 reads."""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import trio

from actors.host import runtime
from actors.scheduler import PolicyEngine
from actors.tools import ToolEnv, builtin_tools, executor_kind
from bus import Bus
from bus.messages import (
    BatchSettled,
    RunTool,
    ScheduleBatch,
    ToolCallRequest,
    ToolFinished,
)


async def _run_batch(workspace: Path, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Run one batch through a real scheduler and executors; time what happens."""
    bus = Bus()
    env = ToolEnv(workspace=workspace, project_temp_dir=workspace / ".tmp", session_id="bench")
    tools = {t.name: t for t in builtin_tools("gemini-2.5-flash")}
    policy, _ = PolicyEngine.build(approval_mode="yolo", interactive=False, settings={}, user_policy_dir=None, workspace_policy_dir=None)
    cfg = runtime.SessionConfig(
        session_id="bench",
        model="gemini-2.5-flash",
        approval_mode="yolo",
        env=env,
        tools=tools,
        executor_of=executor_kind,
        policy=policy,
        request_config=lambda m: {},
        route_model=lambda m: m,
        classifier_choice=lambda c: c,
        classifier_request=None,
    )
    events: list[tuple[float, Any]] = []
    peak_threads = threading.active_count()
    async with trio.open_nursery() as nursery:
        sub = bus.subscribe("bench", "bench", capacity=1_000_000)
        addrs = await nursery.start(runtime.supervise_session, bus, cfg)
        turn = bus.connect("turn")
        start = time.perf_counter()
        await turn.send(
            ScheduleBatch(
                session_id="bench",
                batch_id="b",
                reply_to="turn",
                approval_mode="yolo",
                calls=tuple(ToolCallRequest(call_id=f"c{i}", name=n, args=a) for i, (n, a) in enumerate(calls)),
            ),
            to=addrs.scheduler,
        )
        async for env_ in sub:
            events.append((time.perf_counter(), env_.message))
            peak_threads = max(peak_threads, threading.active_count())
            if isinstance(env_.message, BatchSettled):
                break
        elapsed = time.perf_counter() - start
        nursery.cancel_scope.cancel()
    return {"elapsed": elapsed, "events": events, "peak_threads": peak_threads}


def bench_parallel_shell() -> None:
    from tests.bench._table import record

    runs, ones = [], []
    with tempfile.TemporaryDirectory() as tmp:
        trio.run(_run_batch, Path(tmp), [("run_shell_command", {"command": "true"})])  # warm-up
        for _ in range(3):
            ones.append(trio.run(_run_batch, Path(tmp), [("run_shell_command", {"command": "sleep 1"})])["elapsed"])
            runs.append(trio.run(_run_batch, Path(tmp), [("run_shell_command", {"command": "sleep 1"})] * 8)["elapsed"])
    record(
        "scheduler: 8 x run_shell_command 'sleep 1', tool phase (median of 3)",
        statistics.median(runs),
        "s",
        baseline=statistics.median(ones),
        target="target <= 1.05 s; baseline: one 'sleep 1' call the same way (median of 3)",
    )


def bench_wave_switch() -> None:
    from tests.bench._table import record

    gaps: list[float] = []
    for _ in range(5):
        with tempfile.TemporaryDirectory() as tmp:
            ws = Path(tmp)
            (ws / "a.txt").write_text("a\n")
            calls = [
                ("read_file", {"file_path": "a.txt"}),
                ("read_file", {"file_path": "a.txt"}),
                ("write_file", {"file_path": "b.txt", "content": "b"}),
                ("read_file", {"file_path": "a.txt"}),
                ("read_file", {"file_path": "a.txt"}),
            ]
            result = trio.run(_run_batch, ws, calls)
        finished = {m.call_id: t for t, m in result["events"] if isinstance(m, ToolFinished)}
        started = {m.call_id: t for t, m in result["events"] if isinstance(m, RunTool)}
        gaps.append(started["c2"] - max(finished["c0"], finished["c1"]))
        gaps.append(started["c3"] - finished["c2"])
    gaps.sort()
    record(
        "scheduler: wave switch (last result -> next wave's first run), median",
        gaps[len(gaps) // 2] * 1000,
        "ms",
        target="target <= 5 ms",
    )


def bench_thousand_reads() -> None:
    from tests.bench._table import record

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "a.txt").write_text("hello\n")
        before = threading.active_count()
        results = [trio.run(_run_batch, ws, [("read_file", {"file_path": "a.txt"})] * 1000) for _ in range(3)]
    record("scheduler: 1,000 read_file calls in one batch (median of 3)", statistics.median(r["elapsed"] for r in results), "s")
    record(
        "scheduler: threads at peak during those 1,000 calls (most of 3 runs)",
        max(r["peak_threads"] for r in results) - before,
        "extra",
        target="bounded by trio's thread limiter, not one per call",
    )


BENCHMARKS = (bench_parallel_shell, bench_wave_switch, bench_thousand_reads)
