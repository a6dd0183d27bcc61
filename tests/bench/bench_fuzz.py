"""Daemon benchmark: a legitimate session's turn latency while its socket is fuzzed.

The daemon runs as ``agentbus daemon`` in its own process, its session answering from a
fake-responses file. This process runs the legitimate client: ``TURNS`` turns one after
the other, first alone, then while ``FUZZERS`` processes of their own send the seeded
adversarial frames of ``tests.frontends.daemon._fuzz`` to the daemon's Unix socket as fast as it
answers them (each must get exactly one error). Reported: the median and p90 turn
latency (prompt to ``TurnEnded``) quiet and under the fuzz (ratio against quiet), and
the bad frames the daemon answered per second meanwhile and the daemon's CPU each cost
(its CPU during the fuzzed turns beyond the quiet ones'). The fuzzers share the
machine's cores with the daemon, as an abusive local client would.

    python -m tests.bench.bench_fuzz [--turns 40] [--fuzzers 2]

``AGENTBUS_BENCH_PROFILE=FILE`` runs the daemon under cProfile (stats in FILE when it stops).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from tests.bench._table import record
from tests.frontends.daemon._procs import env_for

ROOT = Path(__file__).resolve().parents[2]
TURNS = 40
FUZZERS = 2


def _script(path: Path, turns: int) -> Path:
    answer = {"candidates": [{"content": {"role": "model", "parts": [{"text": "ok."}]}, "finishReason": "STOP"}]}
    path.write_text("".join(json.dumps({"method": "generateContentStream", "response": [answer]}) + "\n" for _ in range(turns)))
    return path


# -- a fuzzing process ---------------------------------------------------------------------------
def fuzz_process(home: str, victim: str, seed: int) -> None:
    """Fuzz the daemon under ``home`` until stdin closes; print the frames answered."""
    from tests.frontends.daemon._fuzz import Tally, fuzz

    tally = Tally()

    async def main() -> None:
        stop = trio.Event()

        async def until_stdin_closes() -> None:
            stdin = trio.lowlevel.FdStream(os.dup(0))
            while await stdin.receive_some(1024):
                pass
            stop.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(until_stdin_closes)
            await fuzz(Path(home), None, random.Random(seed), victim, stop, tally)
            nursery.cancel_scope.cancel()

    trio.run(main)
    print(json.dumps({"frames": tally.frames}), flush=True)


# -- the legitimate client -------------------------------------------------------------------------
async def _turns(home: Path, turns: int, fuzzers: int, daemon_pid: int) -> dict[str, Any]:
    from actors.frontends.daemon.client import open_client
    from actors.frontends.daemon.paths import DaemonPaths
    from bus import Envelope
    from bus.messages import TurnEnded, TurnStarted

    script = _script(home / "bench.responses", 2 * turns)
    async with open_client(DaemonPaths(home / "run"), client="legit", start=False) as client:
        sid = (await client.create_session(str(home / "ws"), model="gemini-2.5-flash", fake_responses=str(script))).session_id
        await client.subscribe(sid)

        async def timed(n: int) -> list[float]:
            out = []
            for i in range(n):
                started = time.perf_counter()
                accepted = await client.prompt(sid, f"turn {i}")
                turn = None
                async for event in client.events:
                    if not isinstance(event, Envelope):
                        continue
                    if isinstance(event.message, TurnStarted) and event.message.prompt_id == accepted.prompt_id:
                        turn = event.message.turn_id
                    if isinstance(event.message, TurnEnded) and event.message.turn_id == turn:
                        break
                out.append(time.perf_counter() - started)
            return out

        cpu = _cpu_s(daemon_pid)
        quiet = await timed(turns)
        quiet_cpu = _cpu_s(daemon_pid) - cpu
        procs = [
            await trio.lowlevel.open_process(
                [sys.executable, "-m", "tests.bench.bench_fuzz", "--fuzz", str(home), sid, str(seed)],
                env=env_for(home),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            for seed in range(fuzzers)
        ]
        await trio.sleep(0.5)  # the fuzzers are up and sending
        started, cpu = time.perf_counter(), _cpu_s(daemon_pid)
        busy = await timed(turns)
        wall, busy_cpu = time.perf_counter() - started, _cpu_s(daemon_pid) - cpu
        frames = 0
        for proc in procs:
            assert proc.stdin is not None and proc.stdout is not None
            await proc.stdin.aclose()
            out = b""
            while chunk := await proc.stdout.receive_some(4096):
                out += chunk
            await proc.wait()
            frames += json.loads(out.decode().strip().splitlines()[-1])["frames"]
    rate = frames / (wall + 0.5)
    # The daemon's CPU beyond what the turns took alone, per bad frame answered.
    extra_cpu = busy_cpu - quiet_cpu
    return {"quiet": quiet, "busy": busy, "frames_per_s": rate, "cpu_per_frame_ms": 1000 * extra_cpu / (rate * wall)}


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ms(latencies: list[float], q: float) -> float:
    ordered = sorted(latencies)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bench_fuzz(turns: int = TURNS, fuzzers: int = FUZZERS) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        for d in ("home", "ws", "run", "data"):
            (home / d).mkdir()
        os.chmod(home / "run", 0o700)
        profile = os.environ.get("AGENTBUS_BENCH_PROFILE")
        under = ["-m", "cProfile", "-o", profile] if profile else []
        daemon = subprocess.Popen(
            [sys.executable, *under, "-m", "actors.frontends", "daemon"],
            env=env_for(home),
            cwd=home / "ws",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            assert daemon.stderr is not None
            log = b""
            while b"listening on" not in log:
                line = daemon.stderr.readline()
                assert line, f"the daemon exited: {log.decode(errors='replace')}"
                log += line
            result = trio.run(_turns, home, turns, fuzzers, daemon.pid)
            alive = daemon.poll() is None
        finally:
            daemon.terminate()
            daemon.wait(timeout=10)
    quiet, busy = result["quiet"], result["busy"]
    note = f"{turns} turns each, {fuzzers} fuzzing processes on the Unix socket; daemon {'up' if alive else 'DOWN'} after"
    record("daemon fuzz: legitimate turn latency quiet, median", 1000 * statistics.median(quiet), "ms", target=note)
    record("daemon fuzz: legitimate turn latency quiet, p90", _ms(quiet, 0.9), "ms")
    record(
        "daemon fuzz: legitimate turn latency under fuzz, median",
        1000 * statistics.median(busy),
        "ms",
        baseline=1000 * statistics.median(quiet),
        target="reported, not a gate",
    )
    record("daemon fuzz: legitimate turn latency under fuzz, p90", _ms(busy, 0.9), "ms", baseline=_ms(quiet, 0.9))
    record("daemon fuzz: bad frames answered meanwhile", result["frames_per_s"], "frame/s", target="each with exactly one error")
    record(
        "daemon fuzz: daemon CPU per bad frame",
        result["cpu_per_frame_ms"],
        "ms",
        target="its CPU under the fuzz beyond the quiet turns', per frame (connections included)",
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--turns", type=int, default=TURNS)
    p.add_argument("--fuzzers", type=int, default=FUZZERS)
    p.add_argument("--fuzz", nargs=3, metavar=("HOME", "SESSION", "SEED"))
    args = p.parse_args()
    if args.fuzz:
        home, victim, seed = args.fuzz
        fuzz_process(home, victim, int(seed))
    else:
        bench_fuzz(args.turns, args.fuzzers)


if __name__ == "__main__":
    main()
