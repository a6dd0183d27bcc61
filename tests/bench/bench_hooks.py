"""Hook overheads (issue 8): an installed hook that does not match, and a trivial one that does.

Not registered in ``make bench`` by itself: add ``bench_hooks`` to ``EXTRA`` in
``tests/bench/__main__.py``. Runs alone with ``python -m tests.bench.bench_hooks``.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import trio

from actors.hooks import HookConfig, HookRunnerActor, load_hook_config
from bus import Bus
from bus.messages import HooksFinished, RunHooks

Record = Callable[..., None]


def _settings(command: str) -> dict[str, object]:
    definition = {"matcher": "write_file|replace", "hooks": [{"type": "command", "command": command}]}
    return {"hooks": {"BeforeTool": [definition], "AfterTool": [definition]}}


def _per_call_ns(fn: Callable[[], object], n: int = 200_000) -> float:
    """The median of 5 runs of ``n`` calls, per call."""
    runs = []
    for _ in range(5):
        started = time.perf_counter_ns()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter_ns() - started) / n)
    return statistics.median(runs)


def bench_has_hooks(record: Record) -> None:
    """``has_hooks`` per tool call / streamed chunk when hooks are installed but do not match."""
    config = load_hook_config(_settings("true"))
    empty = HookConfig()
    baseline = _per_call_ns(lambda: empty.has_hooks("BeforeTool", "read_file"))
    record(
        "hooks: has_hooks, installed but non-matching tool (per call)",
        _per_call_ns(lambda: config.has_hooks("BeforeTool", "read_file")),
        "ns",
        baseline=baseline,
        target="target ≈ 0 (< 1 µs); baseline: no hooks configured",
    )
    record(
        "hooks: has_hooks, event without hooks (AfterModel, per chunk)",
        _per_call_ns(lambda: config.has_hooks("AfterModel")),
        "ns",
        baseline=baseline,
        target="target ≈ 0 (< 1 µs); baseline: no hooks configured",
    )


async def _round_trips(n: int, command: str, cwd: str) -> float:
    bus = Bus()
    actor = HookRunnerActor(bus, session_id="bench", address="hooks", config=load_hook_config(_settings(command)), cwd=cwd)
    client = bus.connect("client")
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        runs = []
        for i in range(n):
            started = time.perf_counter()
            await client.send(
                RunHooks(
                    session_id="bench",
                    request_id=f"r{i}",
                    reply_to="client",
                    event="BeforeTool",
                    target="write_file",
                    input={"tool_name": "write_file", "tool_input": {"file_path": "a", "content": "x"}},
                ),
                to="hooks",
            )
            reply = (await client.receive()).message
            assert isinstance(reply, HooksFinished) and reply.ran == 1 and not reply.failed, reply
            runs.append(time.perf_counter() - started)
        nursery.cancel_scope.cancel(reason="bench over")
    return statistics.median(runs)


async def _spawn_only(n: int) -> float:
    runs = []
    for _ in range(n):
        started = time.perf_counter()
        await trio.run_process(["bash", "-c", "true"], stdin=b"")
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def bench_hook_round_trip(record: Record) -> None:
    """``RunHooks`` → ``HooksFinished`` with one trivial matching hook (median of 20)."""
    with tempfile.TemporaryDirectory() as cwd:
        baseline = trio.run(_spawn_only, 20)
        value = trio.run(_round_trips, 20, 'cat >/dev/null; echo \'{"decision":"allow"}\'', cwd)
    record(
        "hooks: one trivial matching hook, RunHooks -> HooksFinished (median of 20)",
        value * 1000,
        "ms",
        baseline=baseline * 1000,
        target="target: spawn cost + < 1 ms; baseline: bash -c true via trio.run_process",
    )


def bench_hooks() -> None:
    """Entry for ``tests/bench/__main__.py``'s ``EXTRA``."""
    from tests.bench._table import record

    bench_has_hooks(record)
    bench_hook_round_trip(record)


if __name__ == "__main__":

    def _print(name: str, value: float, unit: str, *, baseline: float | None = None, target: str = "") -> None:
        ratio = f"  ({value / baseline:.2f}x baseline {baseline:.4f} {unit})" if baseline else ""
        print(f"{name:64} {value:12.4f} {unit:4}{ratio}  {target}")

    print(f"hook benchmarks ({os.cpu_count()} cores, Python {sys.version.split()[0]})")
    bench_has_hooks(_print)
    bench_hook_round_trip(_print)
