"""Explorer throughput: explored runs per second of a 3-turn session.

``agentbus explore`` on ``scenarios/explore/join`` (three prompts: a parallel wave of
reads and a write, a text answer, a read), every perturbation kind on, a fixed seed; each
run is a fresh copy of the workspace, the real actors and tools on a fresh virtual
clock, the replay of its recording (invariant 5) and the seven checks.

    python -m tests.bench.bench_explore
"""

from __future__ import annotations

from pathlib import Path

from actors.frontends.explore import explore, load_target
from tests.bench._table import record

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = 100


def bench_explore(examples: int = EXAMPLES) -> None:
    target = load_target(ROOT / "scenarios" / "explore" / "join")
    found = explore(target, examples=examples, seed=0, budget_s=600)
    assert found.failure is None, found.failure.problems() if found.failure else None
    record(
        "explore: runs/s of a 3-turn session (scenarios/explore/join)",
        found.examples / found.seconds,
        "run/s",
        target=f"{found.examples} runs, every perturbation kind, seed 0; each replayed and checked",
    )


if __name__ == "__main__":
    bench_explore()
    from tests.bench._table import RESULTS

    print(RESULTS[-1])
