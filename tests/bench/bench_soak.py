"""The soak profile (``make bench PROFILE=soak``): a busy daemon over minutes, not hours.

1. **Many sessions.** One daemon in a process of its own (``bench_daemon --serve``, the
   scripted model stamping each chunk), ``SESSIONS`` sessions from ``CONNECTIONS``
   client connections, ``TURNS_EACH`` turns in each (10,000 turns in all), every session
   prompting again as soon as its turn ends. The daemon's RSS is sampled with the 100
   sessions loaded and idle, every 1,000 turns, and idle again at the end (target: at most
   100 MB, flat); the chunk -> client latency of the first and the last tenth of the
   turns shows whether the daemon slows as the sessions grow.
2. **One long session.** A fresh daemon, one session, ``LONG_TURNS`` turns one after the
   other (each prompt sends the whole history to the model). A turn's cost at turns 10,
   100 and 980 (the mean over the ``WINDOW`` turns from each): the client's wall from
   the prompt to ``TurnEnded``, the daemon's CPU, and the bytes its recording grew, each
   against turn 10's (target: at most 1.2x).

    python -m tests.bench.bench_soak [--sessions 100] [--turns-each 100] [--long-turns 1000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import trio

from tests.bench._table import record
from tests.bench.bench_daemon import STAMP, _cpu_s, _rss_kb
from tests.bench.bench_daemon import _script as daemon_script

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = 100
CONNECTIONS = 10
TURNS_EACH = 100
LONG_TURNS = 1000
WINDOW = 20
CHUNKS = 3
SAMPLE_EVERY = 1000
"""Turns (in all) between two RSS samples."""


def _script(path: Path, turns: int) -> Path:
    return daemon_script(path, turns, CHUNKS)


@contextmanager
def _daemon(root: Path) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(root / "home"), "GEMINI_CLI_HOME": str(root / "home")}
    (root / "home").mkdir(exist_ok=True)
    (root / "ws").mkdir(exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.bench.bench_daemon", "--serve", str(root / "run"), str(root / "data")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# -- many sessions -----------------------------------------------------------------------------
async def _many(root: Path, script: Path, sessions: int, connections: int, turns_each: int, pid: int) -> dict[str, Any]:
    from actors.frontends.daemon.client import open_client
    from actors.frontends.daemon.paths import DaemonPaths
    from bus import Envelope
    from bus.messages import TextStreamed, TurnEnded

    total = sessions * turns_each
    done = 0
    rss: list[tuple[int, float]] = []
    latencies: dict[str, list[float]] = {"first": [], "last": []}
    created = 0
    all_created = trio.Event()
    began: dict[str, float] = {}

    def sample() -> None:
        rss.append((done, _rss_kb(pid)[0] / 1024))

    async def connection(n: int) -> None:
        nonlocal created, done
        mine = range(n, sessions, connections)
        async with open_client(DaemonPaths(root / "run"), client=f"soak{n}", start=False) as client:
            sids = []
            for _ in mine:
                ready = await client.create_session(
                    str(root / "ws"), model="gemini-2.5-flash", fake_responses=str(script), fake_chunk_delay_ms=0
                )
                sids.append(ready.session_id)
                await client.subscribe(ready.session_id)
            created += len(sids)
            if created == sessions:
                await trio.sleep(1.0)  # idle, every session loaded
                sample()
                began["turns"] = time.monotonic()
                began["cpu"] = _cpu_s(pid)
                all_created.set()
            await all_created.wait()
            waiters: dict[str, trio.MemorySendChannel[None]] = {}

            async def read() -> None:
                nonlocal done
                async for event in client.events:
                    if not isinstance(event, Envelope):
                        continue
                    msg = event.message
                    if isinstance(msg, TextStreamed):
                        tenth = "first" if done < total // 10 else "last" if done >= total - total // 10 else ""
                        if tenth:
                            now = time.monotonic()
                            latencies[tenth].extend(now - float(t) for t in STAMP.findall(msg.text))
                    elif isinstance(msg, TurnEnded):
                        assert msg.stop_reason == "end_turn", msg
                        done += 1
                        if done % SAMPLE_EVERY == 0:
                            sample()
                        waiters[event.session_id].send_nowait(None)

            async def session(sid: str) -> None:
                send, receive = trio.open_memory_channel[None](1)
                waiters[sid] = send
                for turn in range(turns_each):
                    await client.prompt(sid, f"turn {turn}")
                    await receive.receive()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(read)
                async with trio.open_nursery() as turns:
                    for sid in sids:
                        turns.start_soon(session, sid)
                nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        for n in range(connections):
            nursery.start_soon(connection, n)
    wall = time.monotonic() - began["turns"]
    cpu = _cpu_s(pid) - began["cpu"]
    await trio.sleep(1.0)  # idle again
    idle_after = _rss_kb(pid)[0] / 1024
    return {"turns": done, "wall": wall, "cpu": cpu, "rss": rss, "idle_after": idle_after,
            "peak": _rss_kb(pid)[1] / 1024, "latencies": latencies}


def bench_soak_sessions(sessions: int = SESSIONS, connections: int = CONNECTIONS, turns_each: int = TURNS_EACH) -> None:
    with tempfile.TemporaryDirectory(prefix="absoak") as tmp:
        root = Path(tmp)
        script = _script(root / "soak.responses", turns_each)
        with _daemon(root) as proc:
            idle = _rss_kb(proc.pid)[0] / 1024
            r = trio.run(_many, root, script, sessions, connections, turns_each, proc.pid)
    total = sessions * turns_each
    label = f"soak: {sessions} sessions, {total:,} turns in all"
    record(f"{label} (wall)", r["wall"], "s", target=f"{r['turns'] / r['wall']:.0f} turns/s; {connections} conns")
    record("soak: ... daemon CPU per turn", r["cpu"] / max(1, r["turns"]) * 1000, "ms", target=f"{CHUNKS} chunks a turn")
    loaded = r["rss"][0][1]
    record(
        f"soak: RSS, {sessions} sessions loaded, idle (before the turns)",
        loaded,
        "MB",
        baseline=idle,
        target="target <= 100 MB; baseline: the daemon without sessions",
    )
    series = ", ".join(f"{n}: {mb:.0f}" for n, mb in r["rss"][1:])
    record(f"soak: RSS after {r['turns']:,} turns", r["rss"][-1][1], "MB", baseline=loaded, target=f"flat; MB by turns: {series}")
    record(
        f"soak: RSS idle after the turns, {sessions} sessions loaded",
        r["idle_after"],
        "MB",
        baseline=loaded,
        target=f"target <= 100 MB, flat; peak {r['peak']:.0f} MB",
    )
    first, last = (statistics.median(r["latencies"][k]) * 1000 for k in ("first", "last"))
    record(
        "soak: chunk -> client latency, last tenth of the turns, median",
        last,
        "ms",
        baseline=first,
        target="baseline: the first tenth's median; flat = 1x",
    )


# -- one long session ------------------------------------------------------------------------------
async def _long(root: Path, script: Path, turns: int, pid: int) -> list[tuple[float, float, int]]:
    """Per turn boundary: (client time, daemon CPU, recording bytes)."""
    from actors.frontends.daemon.client import open_client
    from actors.frontends.daemon.paths import DaemonPaths
    from bus import Envelope
    from bus.messages import TurnEnded

    async with open_client(DaemonPaths(root / "run"), client="long", start=False) as client:
        ready = await client.create_session(
            str(root / "ws"), model="gemini-2.5-flash", fake_responses=str(script), fake_chunk_delay_ms=0
        )
        sid = ready.session_id
        await client.subscribe(sid)
        recording = next((root / "data").rglob(f"{sid}.jsonl"))
        marks = [(time.perf_counter(), _cpu_s(pid), recording.stat().st_size)]
        for turn in range(turns):
            await client.prompt(sid, f"turn {turn}")
            async for event in client.events:
                if isinstance(event, Envelope) and isinstance(event.message, TurnEnded):
                    assert event.message.stop_reason == "end_turn", event.message
                    break
            marks.append((time.perf_counter(), _cpu_s(pid), recording.stat().st_size))
    return marks


def bench_soak_long(turns: int = LONG_TURNS) -> None:
    with tempfile.TemporaryDirectory(prefix="ablong") as tmp:
        root = Path(tmp)
        script = _script(root / "long.responses", turns)
        with _daemon(root) as proc:
            marks = trio.run(_long, root, script, turns, proc.pid)

    def per_turn(at: int) -> tuple[float, float, float]:
        """Mean wall (ms), daemon CPU (ms) and recording bytes of the WINDOW turns from ``at``."""
        (w0, c0, b0), (w1, c1, b1) = marks[at], marks[at + WINDOW]
        return (w1 - w0) / WINDOW * 1000, (c1 - c0) / WINDOW * 1000, (b1 - b0) / WINDOW

    points = sorted({10, 100, turns - WINDOW} & set(range(10, turns - WINDOW + 1)))
    base = per_turn(points[0])
    for at in points:
        last = at == points[-1]
        wall, cpu, written = per_turn(at)
        note = f"mean of the {WINDOW} turns from it; baseline: turn {points[0]}" + ("; target <= 1.2x" if last else "")
        of = None if at == points[0] else base
        record(f"soak: one session, turn {at}: wall", wall, "ms", baseline=of and of[0], target=note)
        record(f"soak: one session, turn {at}: daemon CPU", cpu, "ms", baseline=of and of[1])
        record(f"soak: one session, turn {at}: recording bytes", written, "B", baseline=of and of[2])


BENCHMARKS = [bench_soak_sessions, bench_soak_long]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--sessions", type=int, default=SESSIONS)
    p.add_argument("--connections", type=int, default=CONNECTIONS)
    p.add_argument("--turns-each", type=int, default=TURNS_EACH)
    p.add_argument("--long-turns", type=int, default=LONG_TURNS)
    args = p.parse_args()
    bench_soak_sessions(args.sessions, args.connections, args.turns_each)
    bench_soak_long(args.long_turns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
