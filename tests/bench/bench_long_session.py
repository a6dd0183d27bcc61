"""A long session's cost per turn: turn N against turn 10.

One headless run (``agentbus -p … -o stream-json``) whose model calls ``read_file`` a
thousand times, one call a turn (a file each: the same call again would trip the loop
detector), then answers. The time between consecutive ``tool_result`` events is a turn's
cost; its mean over the twenty turns from turn 10, 100, 500 and near the last is recorded, each
against the one at turn 10 (target: the last ≤ 1.2× turn 10). The loop detector's own
model check takes answers from the same file now and then, so fewer than a thousand
calls run. ``python -m tests.bench.bench_long_session`` runs only these rows.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import tempfile
from pathlib import Path

CALLS = 1000


def _responses(path: Path, ws: Path) -> None:
    lines = []
    for i in range(CALLS):
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
    from tests.bench.__main__ import AGENTBUS
    from tests.bench._table import record

    with tempfile.TemporaryDirectory(prefix="ablong") as tmp:
        root = Path(tmp)
        ws = root / "ws"
        ws.mkdir()
        fake = root / "long.responses"
        _responses(fake, ws)
        env = {**os.environ, "HOME": str(root), "GEMINI_CLI_HOME": str(root), "AGENTBUS_DATA_DIR": str(root / "data")}
        out = subprocess.run(
            [str(AGENTBUS), "-p", "read them", "-m", "gemini-2.5-flash", "--fake-responses", str(fake),
             "-o", "stream-json", "--approval-mode", "yolo"],
            cwd=ws, env=env, capture_output=True, text=True, check=True, timeout=600,
        ).stdout
    stamps = [
        datetime.datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()
        for event in map(json.loads, out.splitlines())
        if event.get("type") == "tool_result"
    ]
    def around(turn: int) -> float:
        """The mean turn over the 20 turns from ``turn`` (the stamps are milliseconds)."""
        return (stamps[turn + 20] - stamps[turn]) / 20 * 1000

    base = around(10)
    last = len(stamps) - 21
    for turn in (10, 100, 500, last):
        record(
            f"long session: cost of turn {turn} (mean of the 20 from it)",
            around(turn),
            "ms",
            baseline=base if turn != 10 else None,
            target=f"baseline: turn 10; target: turn {last} <= 1.2x; {len(stamps)} calls ran" if turn == last else "",
        )


BENCHMARKS = [bench_long_session]


if __name__ == "__main__":
    bench_long_session()
