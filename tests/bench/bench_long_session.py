"""A long session's cost per turn: turn N against turn 10.

One headless run (``agentbus -p … -o stream-json``) whose model calls ``read_file`` a
thousand times, one call a turn (a file each: the same call again would trip the loop
detector), then answers. The time between consecutive ``tool_result`` events is a turn's
cost; its mean over the twenty turns from turn 10, 100, 500 and near the last is recorded
(the median of three runs), each against the one at turn 10 (target: the last ≤ 1.2×
turn 10). The same is recorded for
the process's CPU time and for the bytes its recording grew by, read at each
``tool_result`` line as it is written (the run goes through ``--probe``, which wraps the
CLI's stdout in the same process): the wall rows move with the machine's load, the CPU
and byte rows much less. The loop detector's own model check takes answers from the
same file now and then, so fewer than a thousand calls run.
``python -m tests.bench.bench_long_session`` runs only these rows.
"""

from __future__ import annotations

import atexit
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CALLS = 1000
RUNS = 3
"""Runs of the session; each row is the median of the runs' figures (one run's 20-turn
window near the end measured 1.03x to 1.36x turn 10's in three runs of one tree)."""


def _responses(path: Path, ws: Path, calls: int = CALLS) -> None:
    lines = []
    for i in range(calls):
        (ws / f"n{i}.txt").write_text(f"line {i}\n")
        call = {"functionCall": {"name": "read_file", "args": {"file_path": f"n{i}.txt"}}}
        lines.append(
            {
                "method": "generateContentStream",
                "response": [
                    {
                        "candidates": [{"content": {"role": "model", "parts": [call]}, "finishReason": "STOP"}],
                        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12},
                    }
                ],
            }
        )
    done = {"candidates": [{"content": {"role": "model", "parts": [{"text": "done"}]}, "finishReason": "STOP"}]}
    lines.append({"method": "generateContentStream", "response": [done]})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def bench_long_session() -> None:
    from tests.bench._table import record

    runs: list[tuple[list[float], list[float], list[float]]] = []
    with tempfile.TemporaryDirectory(prefix="ablong") as tmp:
        root = Path(tmp)
        ws = root / "ws"
        ws.mkdir()
        fake = root / "long.responses"
        _responses(fake, ws)
        for _ in range(RUNS):
            for old in (root / "data" / "sessions").glob("*.jsonl"):
                old.unlink()
            out, probed = run_probed(root, ws, fake)
            stamps = [
                datetime.datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp() * 1000
                for event in map(json.loads, out.splitlines())
                if event.get("type") == "tool_result"
            ]
            runs.append((stamps, [c * 1000 for c, _ in probed], [float(b) for _, b in probed]))
    calls = min(len(stamps) for stamps, _, _ in runs)
    last = calls - 21
    for index, what, unit in ((0, "cost", "ms"), (1, "CPU", "ms"), (2, "bytes recorded", "B")):

        def at(turn: int, index: int = index) -> float:
            return statistics.median(_around(run[index], turn) for run in runs)

        base = at(10)
        for turn in (10, 100, 500, last):
            record(
                f"long session: {what} of turn {turn} (mean of the 20 from it, median of {RUNS} runs)",
                at(turn),
                unit,
                baseline=base if turn != 10 else None,
                target=f"baseline: turn 10; target: turn {last} <= 1.2x; {calls} calls ran" if turn == last else "",
            )


def run_probed(
    root: Path, ws: Path, fake: Path, *, module: str = "tests.bench.bench_long_session", more: tuple[str, ...] = ()
) -> tuple[str, list[Any]]:
    """The headless run of ``fake`` in ``ws`` through ``--probe`` (``python -m module``):
    its stdout, and the CPU time and recording size at each ``tool_result``."""
    from tests.bench.__main__ import AGENTBUS, ROOT

    probe = root / "probe.json"
    env = {**os.environ, "HOME": str(root), "GEMINI_CLI_HOME": str(root), "AGENTBUS_DATA_DIR": str(root / "data")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    out = subprocess.run(
        [sys.executable, "-m", module, "--probe", str(probe), str(root / "data"), str(AGENTBUS), "-p", "read them", "-m", "gemini-2.5-flash", "--fake-responses", str(fake),
         "-o", "stream-json", "--approval-mode", "yolo", *more],
        cwd=ws, env=env, capture_output=True, text=True, check=True, timeout=600,
    ).stdout
    return out, json.loads(probe.read_text())


def _around(series: list[float], turn: int) -> float:
    """The mean step of ``series`` over the 20 turns from ``turn``."""
    return (series[turn + 20] - series[turn]) / 20


class _Tap:
    """The CLI's stdout, noting the process's CPU time and its recording's size at each
    ``tool_result`` line (``--probe``)."""

    def __init__(self, out: Any, data_dir: Path) -> None:
        self.out = out
        self.sessions = data_dir / "sessions"
        self.noted: list[tuple[float, int]] = []

    def write(self, text: str) -> int:
        if '"type":"tool_result"' in text:
            size = sum(p.stat().st_size for p in self.sessions.glob("*.jsonl"))
            self.noted.append((time.process_time(), size))
        return int(self.out.write(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.out, name)


def _probe(out: Path, data_dir: Path, argv: list[str]) -> int:
    from actors.frontends import main

    tap = _Tap(sys.stdout, data_dir)
    sys.stdout = tap  # type: ignore[assignment]
    sys.argv = argv
    # At exit: a headless run of its own leaves with os._exit once its atexit functions
    # ran (actors/frontends/_exit.py), as the real command does.
    atexit.register(lambda: out.write_text(json.dumps(tap.noted)))
    return int(main() or 0)


BENCHMARKS = [bench_long_session]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--probe"]:
        sys.exit(_probe(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]))
    bench_long_session()
