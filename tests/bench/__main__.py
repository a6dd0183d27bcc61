"""``make bench``: every benchmark, printed as a table of ratios measured in one run.

Each row is a median of several runs; where there is a baseline it is measured in the
same invocation and the ratio is printed. When ``gemini`` (Gemini CLI) is on PATH, the
system scenarios (``bench_system``) run it too, in the same invocation, and the row shows
its value and our ratio to it; without it those columns stay empty. ``make bench`` puts
``GEMINI_CLI`` (default ``/tmp/gemini-cli/node_modules/.bin``) on PATH. Results, with
the machine they were measured on, also go to ``bench-results.json``. Targets are
printed beside the numbers; benchmarks never fail the build.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import trio

from bus import Bus
from bus.messages import TextStreamed
from tests.bench._table import RESULTS, record

ROOT = Path(__file__).resolve().parents[2]
AGENTBUS = ROOT / ".venv" / "bin" / "agentbus"
def median_of(fn: Callable[[], float], runs: int) -> float:
    return statistics.median(fn() for _ in range(runs))


# -- bus -------------------------------------------------------------------------------------
async def _one_hop(n: int) -> float:
    bus = Bus()
    a = bus.connect("a", capacity=1024)
    b = bus.connect("b", capacity=1024)
    msg = TextStreamed(session_id="s", turn_id="t", text="x")
    started = time.perf_counter()
    async with trio.open_nursery() as nursery:

        async def drain() -> None:
            for _ in range(n):
                await b.receive()

        nursery.start_soon(drain)
        for _ in range(n):
            await a.send(msg, to="b")
    del a
    return time.perf_counter() - started


def bench_bus() -> None:
    n = 50_000
    elapsed = median_of(lambda: trio.run(_one_hop, n), 3)
    record("bus: messages/s through one hop", n / elapsed, "msg/s")


# -- headless start-up -----------------------------------------------------------------------
def _wall(cmd: list[str], cwd: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def bench_headless() -> None:
    fixture = ROOT / "scenarios" / "bench" / "hi.responses"
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GEMINI_CLI_HOME": tmp, "AGENTBUS_DATA_DIR": tmp}
        cmd = [str(AGENTBUS), "-p", "hi", "-m", "gemini-2.5-flash", "--fake-responses", str(fixture)]
        _wall(cmd, tmp, env)  # warm the file cache
        base = median_of(lambda: _wall([sys.executable, "-c", "pass"], tmp, env), 7)
        ours = median_of(lambda: _wall(cmd, tmp, env), 7)
    record(
        "headless: agentbus -p hi --fake-responses F (wall, median of 7)",
        ours,
        "s",
        baseline=base,
        target="target <= 0.3 s; baseline: python -c pass (Gemini CLI: the system rows, measured)",
    )


def _acp_initialize(cwd: str, env: dict[str, str]) -> float:
    request = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
    started = time.perf_counter()
    with subprocess.Popen(
        [str(AGENTBUS), "acp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd, env=env
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(request.encode() + b"\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        elapsed = time.perf_counter() - started
        proc.stdin.close()
        proc.wait(timeout=30)
    assert answer["result"]["protocolVersion"] == 1, answer
    return elapsed


def bench_acp_initialize() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GEMINI_CLI_HOME": tmp, "AGENTBUS_DATA_DIR": tmp}
        _acp_initialize(tmp, env)  # warm the file cache
        base = median_of(lambda: _wall([sys.executable, "-c", "pass"], tmp, env), 7)
        ours = median_of(lambda: _acp_initialize(tmp, env), 7)
    record(
        "acp: agentbus acp start -> initialize answered (wall, median of 7)",
        ours,
        "s",
        baseline=base,
        target="target <= 0.3 s; baseline: python -c pass",
    )


def machine() -> dict[str, object]:
    """What the numbers were measured on."""
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")), "")
    meminfo = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else ""
    mem_kb = next((int(line.split()[1]) for line in meminfo.splitlines() if line.startswith("MemTotal:")), 0)
    return {
        "platform": platform.platform(),
        "nproc": os.cpu_count(),
        "cpu": cpu or platform.processor(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "gemini_cli": gemini_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main(argv: list[str] | None = None) -> int:
    """``--profile soak``: only the soak benchmarks (``bench_soak``; minutes), results in
    ``bench-results-soak.json``."""
    args = sys.argv[1:] if argv is None else argv
    profile = args[1] if args[:1] == ["--profile"] and len(args) > 1 else ""
    if profile not in ("", *PROFILES):
        print(f"unknown bench profile {profile!r}; known: {', '.join(PROFILES)}", file=sys.stderr)
        return 2
    about = machine()
    gemini = f"Gemini CLI {about['gemini_cli']}" if about["gemini_cli"] else "no Gemini CLI on PATH"
    print(
        f"agentbus benchmarks on {about['cpu']} ({about['nproc']} cores, {about['memory_gib']} GiB), "
        f"Python {about['python']}, {gemini}\n"
    )
    for bench in PROFILES[profile] if profile else (bench_bus, bench_headless, bench_acp_initialize, *EXTRA):
        bench()
    about["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    out = ROOT / (f"bench-results-{profile}.json" if profile else "bench-results.json")
    out.write_text(json.dumps({"machine": about, "results": RESULTS}, indent=2) + "\n")
    print(f"\nresults written to {out}")
    return 0


from tests.bench.bench_acp import BENCHMARKS as ACP  # noqa: E402
from tests.bench.bench_cluster import bench_cluster  # noqa: E402
from tests.bench.bench_daemon import bench_daemon  # noqa: E402
from tests.bench.bench_explore import bench_explore  # noqa: E402
from tests.bench.bench_fuzz import bench_fuzz  # noqa: E402
from tests.bench.bench_gateway import bench_gateway  # noqa: E402
from tests.bench.bench_guards import BENCHMARKS as GUARDS  # noqa: E402
from tests.bench.bench_hooks import bench_hooks  # noqa: E402
from tests.bench.bench_long_session import BENCHMARKS as LONG  # noqa: E402
from tests.bench.bench_mcp import BENCHMARKS as MCP  # noqa: E402
from tests.bench.bench_recording import bench_recording  # noqa: E402
from tests.bench.bench_scheduler import BENCHMARKS as SCHEDULER  # noqa: E402
from tests.bench.bench_soak import BENCHMARKS as SOAK  # noqa: E402
from tests.bench.bench_startup import BENCHMARKS as STARTUP  # noqa: E402
from tests.bench.bench_system import BENCHMARKS as SYSTEM  # noqa: E402
from tests.bench.bench_system import gemini_version  # noqa: E402
from tests.bench.bench_turn import BENCHMARKS as TURN  # noqa: E402

EXTRA: list[Callable[[], None]] = [
    *ACP,
    *STARTUP,
    *SCHEDULER,
    *MCP,
    bench_hooks,
    bench_gateway,
    bench_recording,
    bench_explore,
    *GUARDS,
    *LONG,
    *TURN,
    bench_daemon,
    bench_fuzz,
    bench_cluster,
    *SYSTEM,
]

PROFILES: dict[str, list[Callable[[], None]]] = {"soak": SOAK}
"""``make bench PROFILE=NAME``: a set of benchmarks run instead of the default ones."""

if __name__ == "__main__":
    sys.exit(main())
