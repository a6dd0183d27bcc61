"""``session/new`` of ``agentbus acp``, in phases.

``agentbus acp`` answers ``initialize`` before trio and the actors are imported (they
load in a thread meanwhile), so the first ``session/new`` an editor sends at once waits
for those imports, then starts the session. Three rows, each the median of ``RUNS``
fresh processes (fake responses, an empty workspace):

- ``session/new`` sent as soon as ``initialize`` is answered (what an editor sees);
- ``session/new`` sent once the imports are surely done (``SETTLE_S`` later): the first
  session's start alone;
- a second ``session/new`` in the same process: a session's start, warm.

The first minus the second is the imports the client waited for.
``python -m tests.bench.bench_acp`` runs only these rows.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
AGENTBUS = ROOT / ".venv" / "bin" / "agentbus"
FIXTURE = ROOT / "scenarios" / "bench" / "hi.responses"
RUNS = 5
SETTLE_S = 3.0


def _session_new(settle_s: float) -> tuple[float, float]:
    """One fresh ``agentbus acp``: seconds of its first ``session/new`` (sent
    ``settle_s`` after ``initialize`` was answered) and of a second one."""
    with tempfile.TemporaryDirectory(prefix="abacp") as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        env = {**os.environ, "HOME": tmp, "GEMINI_CLI_HOME": tmp, "AGENTBUS_DATA_DIR": str(Path(tmp) / "data")}
        with subprocess.Popen(
            [str(AGENTBUS), "acp", "-m", "gemini-2.5-flash", "--fake-responses", str(FIXTURE)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ws, env=env,
        ) as proc:
            assert proc.stdin is not None and proc.stdout is not None

            def call(rid: int, method: str, params: dict[str, Any]) -> float:
                assert proc.stdin is not None and proc.stdout is not None
                began = time.perf_counter()
                proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n").encode())
                proc.stdin.flush()
                while True:
                    frame = json.loads(proc.stdout.readline())
                    if frame.get("id") == rid:
                        assert "result" in frame, frame
                        return time.perf_counter() - began

            call(0, "initialize", {"protocolVersion": 1})
            time.sleep(settle_s)
            first = call(1, "session/new", {"cwd": str(ws), "mcpServers": []})
            second = call(2, "session/new", {"cwd": str(ws), "mcpServers": []})
            proc.stdin.close()
            proc.wait(timeout=30)
    return first, second


def bench_acp_session_new() -> None:
    from tests.bench._table import record

    _session_new(0.0)  # warm the file cache
    at_once = [_session_new(0.0) for _ in range(RUNS)]
    settled = [_session_new(SETTLE_S) for _ in range(RUNS)]
    first = statistics.median(a for a, _ in at_once) * 1000
    started = statistics.median(a for a, _ in settled) * 1000
    warm = statistics.median(b for _, b in at_once + settled) * 1000
    note = f"median of {RUNS} processes"
    record("acp: session/new right after initialize (wall)", first, "ms", target=f"target <= 200 ms; {note}")
    record(
        "acp: ... the first session's start alone",
        started,
        "ms",
        baseline=warm,
        target=f"sent {SETTLE_S:g} s after initialize (imports done); baseline: a second session/new; {note}",
    )
    record("acp: ... imports the client waited for", first - started, "ms", target="the first row minus the second")


BENCHMARKS = [bench_acp_session_new]


if __name__ == "__main__":
    bench_acp_session_new()
