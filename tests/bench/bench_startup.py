"""Where a headless run's start-up goes, phase by phase, with the floors beside it.

A fresh process (``python -m tests.bench.bench_startup --phases``, cwd a workspace, HOME
in a temporary directory) runs what ``agentbus -p hi --fake-responses F`` runs, in the
same order, and stamps the end of each phase:

- imports: the modules a headless run loads (the entry point, the host, the headless
  front end and what they import);
- settings: the user's and the workspace's settings read and merged;
- flags: the command line parsed;
- session setup: the tool registry, the policy engine (TOML policies, settings rules) and
  the hooks (``session_setup``), inside ``prepare``;
- the rest of ``prepare``: auth check, the model backend (the fake-responses file), the
  environment context (and the session setup again, warm);
- actors up and first turn: ``open_session`` (every actor of the session started, the
  recorder first), the prompt to the answer's ``TurnEnded``, the session closed.

Beside them, the floors: ``python -c pass`` (a process at all), ``python -c "import trio,
attrs, cattrs"`` (the libraries every run imports), one hop on a trio memory channel, one
``fsync`` of a small file. ``python -m tests.bench.bench_startup`` runs only
these rows.
"""

from __future__ import annotations

import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# trio and the bench table are imported where they are used: in ``--phases`` the
# imports phase starts before anything but the standard library is loaded.

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "scenarios" / "bench" / "hi.responses"
RUNS = 7
PHASES = ("imports", "settings", "flags", "session setup", "rest of prepare", "actors up and first turn")


def phases() -> dict[str, float]:
    """Run a headless ``-p hi`` in this process; each phase's seconds."""
    import gc

    stamps: list[tuple[str, float]] = [("start", time.perf_counter())]

    def stamp(name: str) -> None:
        stamps.append((name, time.perf_counter()))

    gc.disable()  # as `agentbus` (actors.frontends.main) imports
    import actors.frontends  # the entry point, as `agentbus` imports it

    actors.frontends.reuse_compiled_methods()  # as `agentbus` does before its imports
    actors.frontends.answer_pthread_lookup()  # likewise
    from actors.frontends.headless import prepare, run_prepared
    from actors.host.args import parse_headless
    from actors.host.settings import workspace_settings
    from actors.host.setup import approval_mode_from, model_from, session_setup

    gc.freeze()  # then on again, what the imports made frozen out of its passes
    gc.enable()
    stamp("imports")
    actors.frontends.reuse_parsed_policies()  # as `agentbus` does before the settings
    actors.frontends.reuse_declared_tools()  # likewise
    settings = workspace_settings()
    stamp("settings")
    args = parse_headless(["-p", "hi", "-m", "gemini-2.5-flash", "--fake-responses", str(FIXTURE), "-o", "json"])
    stamp("flags")
    # The registry, policy and hooks as prepare() makes them: the first time (what a run
    # pays); prepare() then makes them again, warm, with the rest.
    session_setup(
        workspace=Path(os.getcwd()).resolve(),
        settings=settings,
        session_id="bench",
        model=model_from(args.model, settings),
        approval_mode=approval_mode_from(args.approval_mode, args.yolo, settings),
        interactive=False,
    )
    stamp("session setup")
    prepared = prepare(args, settings, stdin_text=None)
    stamp("rest of prepare")
    import trio

    code = trio.run(run_prepared, prepared, io.StringIO(), io.StringIO())
    stamp("actors up and first turn")
    assert code == 0, code
    return {name: t - stamps[i][1] for i, (name, t) in enumerate(stamps[1:])}


def _run_phases(ws: Path, env: dict[str, str]) -> tuple[dict[str, float], float]:
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench.bench_startup", "--phases"],
        cwd=ws, env=env, capture_output=True, text=True, check=True,
    )
    wall = time.perf_counter() - began
    return json.loads(done.stdout.strip().splitlines()[-1]), wall


def _python_pass(ws: Path, env: dict[str, str], code: str = "pass") -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ws, env=env, check=True)
    return time.perf_counter() - began


LIBRARIES = "import trio, attrs, cattrs"
"""What every run imports before any of agentbus: the floor of the imports phase."""


async def _channel_hops(n: int) -> float:
    import trio

    send, receive = trio.open_memory_channel[int](1)
    began = time.perf_counter()
    async with trio.open_nursery() as nursery:

        async def drain() -> None:
            for _ in range(n):
                await receive.receive()

        nursery.start_soon(drain)
        for i in range(n):
            await send.send(i)
    return (time.perf_counter() - began) / n


def _fsync(path: Path) -> float:
    with open(path, "ab") as f:
        f.write(b"x" * 200 + b"\n")
        f.flush()
        began = time.perf_counter()
        os.fsync(f.fileno())
        return time.perf_counter() - began


def bench_startup() -> None:
    import trio

    from tests.bench._table import record

    with tempfile.TemporaryDirectory(prefix="abstart") as tmp:
        root = Path(tmp)
        ws = root / "ws"
        ws.mkdir()
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "HOME": str(root),
            "GEMINI_CLI_HOME": str(root),
            "AGENTBUS_DATA_DIR": str(root / "data"),
        }
        _run_phases(ws, env)  # warm the file cache
        # Each round runs the three, so a busy moment of a shared machine is in each.
        runs, floors, libraries_runs = [], [], []
        for _ in range(RUNS):
            runs.append(_run_phases(ws, env))
            floors.append(_python_pass(ws, env))
            libraries_runs.append(_python_pass(ws, env, LIBRARIES))
        floor = statistics.median(floors)
        libraries = statistics.median(libraries_runs)
        fsyncs = statistics.median(_fsync(root / "f") for _ in range(15))
    hop = statistics.median(trio.run(_channel_hops, 20_000) for _ in range(3))
    walls = [w for _, w in runs]
    for name in PHASES:
        record(f"start-up: {name} (median of {RUNS})", statistics.median(r[name] for r, _ in runs) * 1000, "ms")
    in_process = statistics.median(sum(r.values()) for r, _ in runs) * 1000
    record("start-up: all phases, in the process", in_process, "ms")
    record(
        "start-up: the process, wall (python + phases)",
        statistics.median(walls) * 1000,
        "ms",
        baseline=floor * 1000,
        target="baseline: python -c pass, the floor of any run",
    )
    record(
        "floor: python importing trio, attrs and cattrs",
        libraries * 1000,
        "ms",
        baseline=floor * 1000,
        target="the libraries every run imports, before any agentbus module",
    )
    record("floor: one trio memory-channel hop", hop * 1e6, "us")
    record("floor: one fsync of a small file", fsyncs * 1000, "ms")


BENCHMARKS = [bench_startup]


if __name__ == "__main__":
    if sys.argv[1:] == ["--phases"]:
        print(json.dumps(phases()))
        from actors.frontends import exit_without_teardown

        exit_without_teardown(0)  # as `agentbus` leaves after a headless run
        sys.exit(0)
    bench_startup()
