"""What a busy daemon's memory grows by: the soak's workload in one process, measured by
``tracemalloc`` (not by RSS: it does not move with the machine's load or the allocator).

A daemon (``serve``, the soak's scripted model stamping each chunk) and its clients run
in one trio run: ``--sessions`` sessions from up to 10 connections, every session one
turn a round. After ``--warm`` rounds a snapshot, after ``--rounds`` more another; the
difference is grouped by traceback and each group named by the first of ``COMPONENTS``
its project frames match, then printed per 1,000 turns (bytes and objects), largest
first. ``-v`` shows each group's biggest tracebacks. Minutes, not hours: tracemalloc
makes the daemon some 10x slower.

    python -m tests.bench.soak_memory [--sessions 50] [--warm 10] [--rounds 20] [-v]
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import gc
import tempfile
import time
import tracemalloc
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import trio

from tests.bench.bench_daemon import _script as daemon_script

ROOT = str(Path(__file__).resolve().parents[2]) + "/"
COMPONENTS = (
    ("recorder: content table (ContentTable)", "actors/recording/_refs.py:ContentTable"),
    ("recorder: other", "actors/recorder.py"),
    ("recorder: other", "actors/recording/"),
    ("turn: request forms (RequestForms)", "actors/turn/_logic.py:RequestForms"),
    ("history: model content", "actors/turn/_logic.py:ModelTurnBuilder"),
    ("history: user content", "actors/turn/_logic.py:user_content"),
    ("history: prompt parts (SubmitPrompt)", "actors/frontends/daemon/_connection.py:ConnectionActor._dispatch_here"),
    ("session: history", "actors/session/"),
    ("turn: other", "actors/turn/"),
    ("gateway", "actors/gateway/"),
    ("daemon", "actors/frontends/daemon/"),
    ("bus", "bus/"),
)
"""(name, the start of a project frame "path:function"): the first in this order that
matches one of a traceback's frames names its group (the recorder writes in its sender's
task, so its frames come first)."""


@functools.cache
def _functions(path: str) -> list[tuple[int, int, str]]:
    """(first line, last line, qualified name) of each function in ``path``, innermost last."""
    out: list[tuple[int, int, str]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    out.append((child.lineno, child.end_lineno or child.lineno, name))
                walk(child, f"{name}.")

    with contextlib.suppress(OSError, SyntaxError):
        walk(ast.parse(Path(path).read_text()), "")
    return out


def _frame(filename: str, lineno: int) -> str:
    inside = [name for first, last, name in _functions(filename) if first <= lineno <= last]
    return f"{filename.removeprefix(ROOT)}:{inside[-1] if inside else lineno}"


def _component(frames: list[str]) -> str:
    for name, prefix in COMPONENTS:
        if any(f.startswith(prefix) for f in reversed(frames)):
            return name
    return f"other: {frames[-1]}" if frames else "other"


def report(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, turns: int, verbose: bool) -> None:
    size: Counter[str] = Counter()
    count: Counter[str] = Counter()
    examples: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for stat in after.compare_to(before, "traceback"):
        frames = [
            _frame(f.filename, f.lineno)
            for f in stat.traceback
            if f.filename.startswith(ROOT) and "/.venv/" not in f.filename and "soak_memory" not in f.filename
        ]
        name = _component(frames)
        size[name] += stat.size_diff
        count[name] += stat.count_diff
        examples[name][" < ".join(reversed(frames[-4:]))] += stat.size_diff
    total = sum(size.values())
    print(f"tracemalloc: {total / turns:.0f} B a turn ({total / turns * 1000 / 1024:.0f} KiB per 1,000 turns)")
    for name, grown in size.most_common():
        if abs(grown) / turns < 1:
            continue
        print(f"{grown / turns * 1000 / 1024:8.0f} KiB/1000 turns {count[name] / turns:6.1f} objects a turn  {name}")
        if verbose:
            for where, n in examples[name].most_common(3):
                print(f"{'':12}{n / turns:6.0f} B a turn  {where}")


async def _soak(root: Path, sessions: int, warm: int, rounds: int, verbose: bool) -> None:
    from actors.frontends.daemon import DaemonConfig, serve, tune_collector
    from actors.frontends.daemon.client import DaemonClient, open_client
    from actors.frontends.daemon.paths import DaemonPaths
    from actors.gateway import ChunkSink, FakeResponsesBackend
    from bus import Envelope
    from bus.messages import GenerateRequest, TurnEnded

    class Stamping(FakeResponsesBackend):
        """As the soak's daemon: each chunk's text stamped with when it left."""

        async def generate(self, request: GenerateRequest, emit: ChunkSink) -> str:
            async def stamped(chunk: Any) -> None:
                parts = [{**p, "text": p["text"] + f"⟨{time.monotonic():.6f}⟩ "} for p in chunk["candidates"][0]["content"]["parts"]]
                content = {"role": "model", "parts": parts}
                await emit({**chunk, "candidates": [{**chunk["candidates"][0], "content": content}]})

            return await super().generate(request, stamped)

    script = daemon_script(root / "soak.responses", warm + rounds, 3)
    (root / "ws").mkdir()
    paths = DaemonPaths(root / "run")
    config = DaemonConfig(
        paths=paths, data_dir=root / "data", fake_backend=lambda path, ms: Stamping.from_file(path, chunk_delay_s=ms / 1000)
    )
    tune_collector()
    async with trio.open_nursery() as nursery, contextlib.AsyncExitStack() as stack:
        daemon = await nursery.start(serve, config)
        conns: list[tuple[DaemonClient, list[str]]] = []
        for n in range(min(10, sessions)):
            client = await stack.enter_async_context(open_client(paths, client=f"mem{n}", start=False))
            sids = []
            for _ in range(n, sessions, 10):
                ready = await client.create_session(
                    str(root / "ws"), model="gemini-2.5-flash", fake_responses=str(script), fake_chunk_delay_ms=0
                )
                await client.subscribe(ready.session_id)
                sids.append(ready.session_id)
            conns.append((client, sids))

        async def turns(client: DaemonClient, sids: list[str], turn: int) -> None:
            left = set(sids)
            for sid in sids:
                await client.prompt(sid, f"turn {turn}")
            async for event in client.events:
                if isinstance(event, Envelope) and isinstance(event.message, TurnEnded):
                    left.discard(event.session_id)
                    if not left:
                        return

        async def run(first: int, count: int) -> None:
            for turn in range(first, first + count):
                async with trio.open_nursery() as each:
                    for client, sids in conns:
                        each.start_soon(turns, client, sids, turn)

        def snapshot() -> tracemalloc.Snapshot:
            gc.collect()
            return tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])

        await run(0, warm)
        before = snapshot()
        await run(warm, rounds)
        after = snapshot()
        print(f"{sessions} sessions, turns {warm * sessions:,} to {(warm + rounds) * sessions:,}:")
        report(before, after, rounds * sessions, verbose)
        daemon.stop()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sessions", type=int, default=50)
    p.add_argument("--warm", type=int, default=10, help="rounds before the first snapshot")
    p.add_argument("--rounds", type=int, default=20, help="rounds between the snapshots")
    p.add_argument("--frames", type=int, default=25)
    p.add_argument("-v", action="store_true", help="each group's biggest tracebacks")
    args = p.parse_args()
    tracemalloc.start(args.frames)
    with tempfile.TemporaryDirectory(prefix="soakmem") as tmp:
        trio.run(_soak, Path(tmp), args.sessions, args.warm, args.rounds, args.v)


if __name__ == "__main__":
    main()
