"""Where a model turn's time goes: one ``read_file`` call a turn, taken apart.

The same headless run (``-o stream-json``, a fake model calling ``read_file`` once a
turn, a file each) in four ways: as users run it; with the loop detector off
(``model.disableLoopDetection``); unrecorded (the recorder replaced, in the measured
process only, by one that records nothing); and both. The process's CPU time between
consecutive ``tool_result`` events, over the turns from 20 to the end, is a turn's cost;
the differences say what the loop detector and the recording cost a turn. Beside them:
the messages a turn sends (the recording's lines a turn) and the floor those messages
alone cost (that many hops through the bus, measured in the same run).
``python -m tests.bench.bench_turn`` runs only these rows.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

from tests.bench.bench_long_session import _probe, _responses, run_probed

CALLS = 200
FROM = 20
RUNS = 3


def _per_turn(probed: list[Any]) -> float:
    cpu = [float(c) * 1000 for c, _ in probed]
    return (cpu[-1] - cpu[FROM]) / (len(cpu) - 1 - FROM)


def _run(root: Path, fake: Path, *, loops: bool, recorded: bool) -> tuple[float, int]:
    """CPU ms a turn, and the recording's lines (0 when unrecorded)."""
    ws = root / "ws"
    settings = ws / ".gemini" / "settings.json"
    settings.parent.mkdir(exist_ok=True)
    settings.write_text(json.dumps({"model": {"disableLoopDetection": not loops}}))
    data = root / "data" / "sessions"
    for old in data.glob("*.jsonl") if data.exists() else ():
        old.unlink()
    _out, probed = run_probed(root, ws, fake, module="tests.bench.bench_turn", more=() if recorded else ("--unrecorded",))
    lines = sum(len(p.read_text().splitlines()) for p in data.glob("*.jsonl")) if recorded else 0
    return _per_turn(probed), lines


def bench_turn() -> None:
    from tests.bench.__main__ import _one_hop
    from tests.bench._table import record

    with tempfile.TemporaryDirectory(prefix="abturn") as tmp:
        root = Path(tmp)
        (root / "ws").mkdir()
        fake = root / "turns.responses"
        _responses(fake, root / "ws", CALLS)
        ways = {
            "all on": (True, True),
            "loop detector off": (False, True),
            "unrecorded": (True, False),
            "both off": (False, False),
        }
        cost: dict[str, list[float]] = {k: [] for k in ways}
        lines = 0
        for _ in range(RUNS):  # alternating, so that the machine's load falls on each alike
            for name, (loops, recorded) in ways.items():
                each, n = _run(root, fake, loops=loops, recorded=recorded)
                cost[name].append(each)
                lines = max(lines, n)
    med = {k: statistics.median(v) for k, v in cost.items()}
    per_turn = lines / CALLS
    hop_us = statistics.median(trio.run(_one_hop, 20_000) / 20_000 * 1e6 for _ in range(3))
    note = f"CPU between tool_results {FROM}..{CALLS}, median of {RUNS} alternating runs"
    record("turn: CPU of a read_file turn, as users run it", med["all on"], "ms", target=note)
    record("turn: ... with the loop detector off", med["loop detector off"], "ms", baseline=med["all on"],
           target=f"the detector's share: {med['all on'] - med['loop detector off']:.2f} ms a turn")
    record("turn: ... unrecorded", med["unrecorded"], "ms", baseline=med["all on"],
           target=f"the recording's share: {med['all on'] - med['unrecorded']:.2f} ms a turn")
    record("turn: ... both off", med["both off"], "ms", baseline=med["all on"],
           target="what the session's actors, the tool and the output cost")
    record("turn: messages a turn (recorded lines)", per_turn, "msg")
    record("floor: those messages, one bus hop each", per_turn * hop_us / 1000, "ms",
           target=f"{per_turn:.1f} x one hop ({hop_us:.1f} us, this run)")


class _Unrecorded:
    """The recorder's stand-in for the ``unrecorded`` way: it records nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()


BENCHMARKS = [bench_turn]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--probe"]:
        argv = sys.argv[4:]
        if "--unrecorded" in argv:
            argv.remove("--unrecorded")
            from actors.host import runtime

            setattr(runtime, "RecorderActor", _Unrecorded)  # noqa: B010 - this process only
        sys.exit(_probe(Path(sys.argv[2]), Path(sys.argv[3]), argv))
    bench_turn()
