"""Daemon benchmark: N sessions on one daemon from M client connections, 3 turns each.

The daemon runs in a process of its own (``--serve``) with a scripted model: every
session answers from a fake-responses file, ``CHUNKS`` chunks per answer, ``CHUNK_MS``
apart. Its backend stamps each chunk's text with the monotonic time it emitted it (the
clock is shared by the processes), so the client measures the latency of each
``TextStreamed`` event from the model's chunk to the client (gateway, turn actor, bus,
connection actor, socket, decoding). The clients run in this process: M connections,
each creating its share of the N sessions, subscribing to them and running 3 prompts in
each, one after the other, all sessions at once. Reported: total wall (sessions
created and subscribed first, then 3 turns in every session at once), the median and p99 event latency, and the daemon's
RSS and peak RSS at the end.

    python -m tests.bench.bench_daemon [--sessions 200] [--connections 20]

``AGENTBUS_BENCH_PROFILE=FILE`` runs the daemon under cProfile and writes its stats to
FILE (``python -m pstats FILE``, CPU time per function) when it stops;
``AGENTBUS_BENCH_GC_LOG=FILE`` appends the collector's passes (count, time, longest, per
generation) to FILE; ``AGENTBUS_BENCH_GC_THRESHOLD=A,B,C`` runs the daemon with those
thresholds instead of ``tune_collector``'s; ``AGENTBUS_BENCH_STEPS=FILE`` counts the
daemon's task steps by task from one ``SIGUSR2`` to the next (``run(steps=True)`` sends
them as the turns start and end) and writes them to FILE as JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import trio

from tests.bench._table import record

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = 50
CONNECTIONS = 5
TURNS = 3
CHUNKS = 10
CHUNK_MS = 30
STAMP = re.compile(r"⟨(\d+\.\d+)⟩")


def _script(path: Path, turns: int = TURNS, chunk_count: int = CHUNKS) -> Path:
    """A fake-responses file: ``turns`` answers of ``chunk_count`` text chunks each."""
    lines = []
    for turn in range(turns):
        chunks: list[dict[str, Any]] = []
        for i in range(chunk_count):
            words = " ".join(hashlib.sha256(f"{turn}.{i}.{j}".encode()).hexdigest()[:8] for j in range(6))
            chunks.append({"candidates": [{"content": {"role": "model", "parts": [{"text": words + " "}]}}]})
        chunks[-1]["candidates"][0]["finishReason"] = "STOP"
        lines.append(json.dumps({"method": "generateContentStream", "response": chunks}))
    path.write_text("\n".join(lines) + "\n")
    return path


# -- the daemon process ----------------------------------------------------------------------
class _Steps(trio.abc.Instrument):
    """Task steps by the task's name (each a wake-up of an actor's task)."""

    def __init__(self) -> None:
        self.by_task: dict[str, int] = {}

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.by_task[task.name] = self.by_task.get(task.name, 0) + 1


async def _count_steps(path: str) -> None:
    """Count the task steps from one ``SIGUSR2`` to the next, then write them to ``path``."""
    with trio.open_signal_receiver(signal.SIGUSR2) as signals:
        await signals.__anext__()
        steps = _Steps()
        trio.lowlevel.add_instrument(steps)
        await signals.__anext__()
        trio.lowlevel.remove_instrument(steps)
    await trio.Path(path).write_text(json.dumps(steps.by_task))


def serve(runtime: str, data: str) -> None:
    import gc

    # As ``agentbus daemon`` (``actors.frontends.main``): no collection while importing,
    # and what the imports made frozen out of the collector's later passes.
    if not os.environ.get("AGENTBUS_BENCH_NO_FREEZE"):
        gc.disable()
    from actors.frontends.daemon import DaemonConfig, serve, tune_collector
    from actors.frontends.daemon.paths import DaemonPaths
    from actors.gateway import ChunkSink, FakeResponsesBackend
    from bus.messages import GenerateRequest

    class Stamping(FakeResponsesBackend):
        """Stamps each chunk's text with when it leaves the model."""

        async def generate(self, request: GenerateRequest, emit: ChunkSink) -> str:
            async def stamped(chunk: Any) -> None:
                parts = chunk["candidates"][0]["content"]["parts"]
                parts = [{**p, "text": p["text"] + f"⟨{time.monotonic():.6f}⟩ "} for p in parts]
                chunk = {**chunk, "candidates": [{**chunk["candidates"][0], "content": {"role": "model", "parts": parts}}]}
                await emit(chunk)

            return await super().generate(request, stamped)

    def factory(path: str, delay_ms: int) -> Any:
        return Stamping.from_file(path, chunk_delay_s=delay_ms / 1000)

    config = DaemonConfig(paths=DaemonPaths(Path(runtime)), data_dir=Path(data), fake_backend=factory, handle_signals=True)
    if not gc.isenabled():
        gc.freeze()
        gc.enable()
    if os.environ.get("AGENTBUS_BENCH_GC_THRESHOLD"):
        gc.set_threshold(*map(int, os.environ["AGENTBUS_BENCH_GC_THRESHOLD"].split(",")))
    else:
        tune_collector()  # as run_foreground
    paused: list[float] = []
    if os.environ.get("AGENTBUS_BENCH_GC_LOG"):

        by_gen: dict[int, list[float]] = {0: [], 1: [], 2: []}

        def note(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                paused.append(-time.perf_counter())
            else:
                paused[-1] += time.perf_counter()
                by_gen[info["generation"]].append(paused[-1])

        gc.callbacks.append(note)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            if os.environ.get("AGENTBUS_BENCH_STEPS"):
                nursery.start_soon(_count_steps, os.environ["AGENTBUS_BENCH_STEPS"])
            await nursery.start(serve, config)
            print("ready", flush=True)

    profile = os.environ.get("AGENTBUS_BENCH_PROFILE")
    if not profile:
        try:
            trio.run(main)
        finally:
            if paused:
                with open(os.environ["AGENTBUS_BENCH_GC_LOG"], "a") as log:
                    log.write(
                        " ".join(f"gen{g}: {len(v)} x, {sum(v) * 1000:.0f} ms, max {max(v, default=0) * 1000:.1f} ms;" for g, v in by_gen.items())
                        + "\n"
                    )
        return
    import cProfile

    # CPU time, not wall: on a loaded machine a wall-clock profile charges the time the
    # process waited for a core to whatever ran when it was preempted.
    with cProfile.Profile(time.process_time) as prof:
        trio.run(main)
    prof.dump_stats(profile)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_kb(pid: int) -> tuple[int, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


# -- the clients ------------------------------------------------------------------------------
async def _clients(
    runtime: Path,
    workspace: Path,
    script: Path,
    sessions: int,
    connections: int,
    pid: int,
    *,
    mark: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """The clients of the module's docstring; ``mark`` is called as the turns start and
    as they end."""
    from actors.frontends.daemon.client import DaemonClient, open_client
    from actors.frontends.daemon.paths import DaemonPaths
    from bus import Envelope
    from bus.messages import TextStreamed, TurnEnded, TurnStarted

    latencies: list[float] = []
    starts: list[float] = []
    """Each prompt's wait from its sending to its turn's ``TurnStarted`` at the client."""
    sent: dict[str, float] = {}
    ends: dict[str, int] = {}
    started = time.monotonic()
    created = 0
    all_created = trio.Event()
    phase: dict[str, float] = {}

    async def connection(n: int) -> None:
        nonlocal created
        mine = range(n, sessions, connections)
        async with open_client(DaemonPaths(runtime), client=f"bench{n}", start=False) as client:
            sids: list[str] = []
            waiters: dict[str, trio.MemorySendChannel[None]] = {}
            for _ in mine:
                ready = await client.create_session(
                    str(workspace), model="gemini-2.5-flash", fake_responses=str(script), fake_chunk_delay_ms=CHUNK_MS
                )
                sids.append(ready.session_id)
                await client.subscribe(ready.session_id)
            created += len(sids)
            if created == sessions:
                phase["setup"] = time.monotonic() - started
                phase["cpu"] = _cpu_s(pid)
                if mark is not None:
                    mark()
                all_created.set()
            await all_created.wait()  # every session exists before any turn starts

            async def read(client: DaemonClient) -> None:
                async for event in client.events:
                    if not isinstance(event, Envelope):
                        continue
                    msg = event.message
                    if isinstance(msg, TextStreamed):
                        now = time.monotonic()
                        latencies.extend(now - float(t) for t in STAMP.findall(msg.text))
                    elif isinstance(msg, TurnStarted):
                        starts.append(time.monotonic() - sent[event.session_id])
                    elif isinstance(msg, TurnEnded):
                        ends[msg.stop_reason] = ends.get(msg.stop_reason, 0) + 1
                        waiters[event.session_id].send_nowait(None)

            async def session(sid: str) -> None:
                send, receive = trio.open_memory_channel[None](1)
                waiters[sid] = send
                for turn in range(TURNS):
                    sent[sid] = time.monotonic()
                    await client.prompt(sid, f"turn {turn}")
                    await receive.receive()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(read, client)
                async with trio.open_nursery() as turns:
                    for sid in sids:
                        turns.start_soon(session, sid)
                nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        for n in range(connections):
            nursery.start_soon(connection, n)
    wall = time.monotonic() - started
    turns_cpu = _cpu_s(pid) - phase["cpu"]
    if mark is not None:
        mark()
    return {
        "wall": wall,
        "setup": phase["setup"],
        "turns": wall - phase["setup"],
        "turns_cpu": turns_cpu,
        "latencies": latencies,
        "starts": starts,
        "ends": ends,
    }


def run(sessions: int = SESSIONS, connections: int = CONNECTIONS, *, steps: bool = False) -> dict[str, Any]:
    """One run on a daemon of its own; ``steps``: the daemon also counts its task steps
    during the turns (an instrument called at every step: its CPU and latencies are not
    the others'), returned by task name as ``steps``."""
    with tempfile.TemporaryDirectory(prefix="abd") as tmp:
        root = Path(tmp)
        (root / "ws").mkdir()
        (root / "home").mkdir()
        script = _script(root / "bench.responses")
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "HOME": str(root / "home"),
            "GEMINI_CLI_HOME": str(root / "home"),
        }
        steps_file = root / "steps.json"
        if steps:
            env["AGENTBUS_BENCH_STEPS"] = str(steps_file)
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.bench.bench_daemon", "--serve", str(root / "run"), str(root / "data")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            idle_rss, _ = _rss_kb(proc.pid)
            mark = (lambda: os.kill(proc.pid, signal.SIGUSR2)) if steps else None
            result = trio.run(
                partial(_clients, root / "run", root / "ws", script, sessions, connections, proc.pid, mark=mark)
            )
            rss, peak = _rss_kb(proc.pid)
            deadline = time.monotonic() + 10
            while steps and not steps_file.exists() and time.monotonic() < deadline:
                time.sleep(0.01)  # the daemon writes them at the second signal
            counted = json.loads(steps_file.read_text()) if steps else None
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    lat = sorted(result["latencies"])
    starts = sorted(result["starts"])
    return {
        "sessions": sessions,
        "connections": connections,
        "wall_s": result["wall"],
        "setup_s": result["setup"],
        "turns_s": result["turns"],
        "turns_daemon_cpu_s": result["turns_cpu"],
        "events": len(lat),
        "latency_median_ms": statistics.median(lat) * 1000,
        "latency_p99_ms": lat[int(len(lat) * 0.99) - 1] * 1000,
        "turn_start_median_ms": statistics.median(starts) * 1000,
        "turn_start_p99_ms": starts[int(len(starts) * 0.99) - 1] * 1000,
        "idle_rss_mb": idle_rss / 1024,
        "rss_mb": rss / 1024,
        "peak_rss_mb": peak / 1024,
        "ends": result["ends"],
        "steps": counted,
    }


RUNS = 3


def median_run(sessions: int, connections: int, runs: int = RUNS) -> dict[str, Any]:
    """``run`` ``runs`` times (a fresh daemon each), every figure the median of the runs."""
    results = [run(sessions, connections) for _ in range(runs)]
    for r in results:
        assert r["ends"] == {"end_turn": sessions * TURNS}, r["ends"]
    out = {k: statistics.median(r[k] for r in results) for k, v in results[0].items() if isinstance(v, int | float)}
    out["runs"] = runs
    return out


async def _socket_round_trips(n: int) -> float:
    """Seconds per round trip of a 100-byte frame over a Unix socket pair, in one process
    (the floor of any frame the daemon sends: two syscalls and a wake-up each way)."""
    a, b = trio.socket.socketpair()
    sa, sb = trio.SocketStream(a), trio.SocketStream(b)
    frame = b"x" * 99 + b"\n"
    async with sa, sb, trio.open_nursery() as nursery:

        async def echo() -> None:
            for _ in range(n):
                await sb.send_all(await sb.receive_some(4096))

        nursery.start_soon(echo)
        began = time.perf_counter()
        for _ in range(n):
            await sa.send_all(frame)
            await sa.receive_some(4096)
        return (time.perf_counter() - began) / n


def floors() -> tuple[float, float]:
    """(a trio memory-channel hop, a Unix socket round trip), seconds, medians of 3."""
    from tests.bench.bench_startup import _channel_hops

    hop = statistics.median(trio.run(_channel_hops, 20_000) for _ in range(3))
    trip = statistics.median(trio.run(_socket_round_trips, 5_000) for _ in range(3))
    return hop, trip


def bench_daemon(sessions: int = SESSIONS, connections: int = CONNECTIONS) -> None:
    """Each row the median of ``RUNS`` runs (a fresh daemon each); the turns' baseline is
    one session's 3 turns on a daemon of its own, measured in the same invocation."""
    many = median_run(sessions, connections)
    alone = median_run(1, 1)

    def med(key: str, of: dict[str, Any] = many) -> float:
        return float(of[key])

    label = f"daemon: {sessions} sessions x {TURNS} turns, {connections} conns"
    note = f"median of {RUNS} runs"
    record(f"{label} (total wall)", med("wall_s"), "s", target=note)
    setup = med("setup_s")
    record("daemon: ... of which creating and subscribing", setup, "s", target=f"{sessions / setup:.0f} sessions/s; {note}")
    record(
        "daemon: ... of which the turns",
        med("turns_s"),
        "s",
        baseline=med("turns_s", alone),
        target=f"baseline: 1 session's {TURNS} turns alone ({CHUNKS} chunks {CHUNK_MS} ms apart); {note}",
    )
    record("daemon: ... daemon CPU during the turns", med("turns_daemon_cpu_s"), "s", target="close to the turns' wall: the daemon is CPU-bound")
    record("daemon: event latency model chunk -> client, median", med("latency_median_ms"), "ms", target=f"{many['events']:.0f} TextStreamed events a run; {note}")
    record("daemon: event latency model chunk -> client, p99", med("latency_p99_ms"), "ms", target=note)
    record(
        "daemon: prompt -> its TurnStarted at the client, median",
        med("turn_start_median_ms"),
        "ms",
        target=f"p99 {med('turn_start_p99_ms'):.1f} ms; a prompt lets the streams in flight go first (up to PROMPT_YIELD_ROUNDS scheduler rounds); {note}",
    )
    per_event = med("turns_daemon_cpu_s") / max(1.0, med("events")) * 1000
    record(
        "daemon: daemon CPU per event (turns' CPU / events)",
        per_event,
        "ms",
        target=f"every session's chunks come at once: the last of {sessions} waits ~{sessions * per_event:.0f} ms of CPU",
    )
    counted = run(sessions, connections, steps=True)
    by_task: dict[str, int] = {}
    for name, n in counted["steps"].items():
        short = ".".join(name.replace(".<locals>", "").rsplit(".", 2)[-2:])  # class (or function) and method
        by_task[short] = by_task.get(short, 0) + n
    chunks = max(1, counted["events"])
    top = sorted(by_task.items(), key=lambda item: -item[1])[:6]
    record(
        "daemon: task steps (wake-ups) per streamed chunk, all tasks",
        sum(by_task.values()) / chunks,
        "steps",
        target="; ".join(f"{name} {n / chunks:.1f}" for name, n in top) + "; one more run, with a trio instrument",
    )
    hop, trip = floors()
    record("floor: one trio memory-channel hop", hop * 1e6, "us")
    record("floor: one Unix socket round trip of a frame (one process)", trip * 1e6, "us")
    record(
        f"daemon: RSS after {sessions} sessions (peak)",
        med("peak_rss_mb"),
        "MB",
        baseline=med("idle_rss_mb"),
        target=f"baseline: the idle daemon; {note}",
    )


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--serve", nargs=2, metavar=("RUNTIME", "DATA"))
    p.add_argument("--sessions", type=int, default=SESSIONS)
    p.add_argument("--connections", type=int, default=CONNECTIONS)
    args = p.parse_args()
    if args.serve:
        serve(*args.serve)
        return 0
    bench_daemon(args.sessions, args.connections)
    return 0


if __name__ == "__main__":
    sys.exit(main())
