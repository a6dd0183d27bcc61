"""``agentbus explore TARGET``: re-run a session many times under perturbations
hypothesis chooses, on trio's virtual clock, and check the invariants on every run.

Exit status: 0 every run kept every invariant; 1 a run broke one (the shrunk
perturbation is printed and its recording written); 2 bad input (one line naming it).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs

from actors.frontends.explore._perturb import KINDS, Perturbation, perturbations
from actors.frontends.explore._target import ExploreInputError, Target, load_target
from actors.frontends.explore._world import TargetRun, UserInvariant, load_invariant, run_target

DEFAULT_EXAMPLES = 200
DEFAULT_BUDGET_S = 60.0
DEFAULT_OUT = "explore-failure.jsonl"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentbus explore",
        description=(
            "Re-run a session many times on trio's virtual clock while hypothesis varies tool "
            "durations and outcomes, chunk timing, API faults, cancels, approval answers and "
            "client disconnects; check DESIGN's seven invariants (and yours) on every run."
        ),
    )
    parser.add_argument("target", help="a recording (.jsonl), a scenario folder, or a fake-responses file (with -p)")
    parser.add_argument("-p", "--prompt", help="the prompt (a fake-responses file has none)")
    parser.add_argument("--workspace", type=Path, help="the folder the tools run in (copied for each run)")
    parser.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES, help=f"runs to try (default {DEFAULT_EXAMPLES})")
    parser.add_argument("--seed", type=int, help="hypothesis' seed (default: random, printed)")
    parser.add_argument(
        "--budget", type=float, default=DEFAULT_BUDGET_S, help=f"seconds to explore for (default {DEFAULT_BUDGET_S:g})"
    )
    parser.add_argument(
        "--perturb",
        default=",".join(KINDS),
        help=f"the kinds of perturbation, comma-separated (default all: {','.join(KINDS)})",
    )
    parser.add_argument(
        "--invariant",
        action="append",
        default=[],
        metavar="MODULE:FUNC",
        help="your own check (a module or .py file, and a function), called with each run (repeatable; the API: actors.frontends.explore.UserRun)",
    )
    parser.add_argument(
        "-o", "--out", type=Path, default=Path(DEFAULT_OUT), help=f"where a failing run's recording goes (default {DEFAULT_OUT})"
    )
    return parser


@attrs.define
class Exploration:
    """What one ``explore`` call found."""

    target: Target
    seed: int
    examples: int = 0
    seconds: float = 0.0
    failure: TargetRun | None = None
    recording: Path | None = None
    error: ExploreInputError | None = None
    """A user invariant that raised: the exploration stops there."""


def explore(
    target: Target,
    *,
    examples: int = DEFAULT_EXAMPLES,
    seed: int | None = None,
    budget_s: float = DEFAULT_BUDGET_S,
    kinds: Sequence[str] = KINDS,
    invariants: Sequence[tuple[str, UserInvariant]] = (),
    out: Path | None = None,
) -> Exploration:
    """Explore ``target``: the first failure found, shrunk (or None)."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st

    chosen = seed if seed is not None else random.SystemRandom().randrange(2**32)
    found = Exploration(target, chosen)
    started = time.monotonic()
    strategy = perturbations(target.calls, len(target.entries), kinds=kinds, hooks=target.hook_events)

    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        print_blob=False,
        verbosity=Verbosity.quiet,
    )
    @hypothesis_seed(chosen)
    @given(perturbation=strategy, scheduling=st.random_module())
    def one(perturbation: Perturbation, scheduling: Any) -> None:
        # Over the budget: explore no further (and shrink no further after 2x).
        elapsed = time.monotonic() - started
        if found.error is not None or elapsed > budget_s * (2 if found.failure is not None else 1):
            return
        found.examples += 1
        try:
            result = run_target(target, perturbation, invariants=invariants, keep_recording=out)
        except ExploreInputError as exc:
            found.error = exc
            return
        if result.failed:
            found.failure = result
            raise AssertionError("\n".join(result.problems()))

    try:
        one()
    except Exception:  # the failure hypothesis re-raises (or finds flaky): ours is in ``found``
        if found.failure is None:
            raise
    if found.error is not None:
        raise found.error
    if found.failure is not None:
        found.failure = _simplify(found, invariants, out, deadline=started + budget_s * 3)
    found.seconds = time.monotonic() - started
    found.recording = out if found.failure is not None else None
    return found


def _smaller(p: Perturbation) -> list[Perturbation]:
    """Each perturbation with one thing fewer (or plainer) than ``p``."""
    out: list[Perturbation] = []
    for i, twist in enumerate(p.tools):
        out.append(attrs.evolve(p, tools=p.tools[:i] + p.tools[i + 1 :]))
        for plainer in (attrs.evolve(twist, ms=0), attrs.evolve(twist, outcome="ok"), attrs.evolve(twist, bg=False)):
            if plainer != twist:
                out.append(attrs.evolve(p, tools=(*p.tools[:i], plainer, *p.tools[i + 1 :])))
    for i in range(len(p.hooks)):
        out.append(attrs.evolve(p, hooks=p.hooks[:i] + p.hooks[i + 1 :]))
    for i in range(len(p.faults)):
        out.append(attrs.evolve(p, faults=p.faults[:i] + p.faults[i + 1 :]))
    for i in range(len(p.cancels)):
        out.append(attrs.evolve(p, cancels=p.cancels[:i] + p.cancels[i + 1 :]))
    if p.chunk_ms:
        out.append(attrs.evolve(p, chunk_ms=0))
    if p.answers is not None:
        out.append(attrs.evolve(p, answers=None))
    if p.close is not None:
        out.append(attrs.evolve(p, close=None))
    if p.follower is not None:
        out.append(attrs.evolve(p, follower=None))
    return out


def _simplify(
    found: Exploration, invariants: Sequence[tuple[str, UserInvariant]], out: Path | None, *, deadline: float
) -> TargetRun:
    """Hypothesis' shrinking stops when a run does not fail the same way twice (real
    tools run at real speed): then take away what the failure does not need, one thing
    at a time, while it still fails (a few tries each)."""
    assert found.failure is not None
    best = found.failure
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        for candidate in _smaller(best.perturbation):
            if time.monotonic() >= deadline:
                break
            for _ in range(3):
                found.examples += 1
                result = run_target(found.target, candidate, invariants=invariants, keep_recording=out)
                if result.failed:
                    best, changed = result, True
                    break
            if changed:
                break
    # The last failing run wrote ``out``: it is ``best``'s recording.
    return best


def report(found: Exploration, stream: TextIO) -> None:
    target = found.target
    rate = found.examples / found.seconds if found.seconds else 0.0
    stream.write(
        f"explored {target.name} ({target.kind}): {found.examples} run(s) in {found.seconds:.1f} s"
        f" ({rate:.1f}/s), seed {found.seed}\n"
    )
    for note in target.notes:
        stream.write(f"note: {note}\n")
    failure = found.failure
    if failure is None:
        stream.write("every run kept every invariant\n")
        return
    stream.write("FAILED: a run broke an invariant\n")
    for problem in failure.problems()[:12]:
        stream.write(f"- {problem}\n")
    words = failure.perturbation.words()
    stream.write("the perturbation (shrunk):\n")
    for said in words or ["none: the session as it is (the interleaving alone)"]:
        stream.write(f"  - {said}\n")
    stream.write(f"reproduce the exploration: --seed {found.seed}\n")
    if found.recording is not None:
        stream.write(
            f"the failing run's recording: {found.recording} (agentbus replay {found.recording} --check replays it)\n"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        sys.stderr.write("agentbus explore: needs hypothesis (pip install 'agentbus[explore]')\n")
        return 2
    try:
        kinds = [k.strip() for k in args.perturb.split(",") if k.strip()]
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown:
            raise ExploreInputError(f"--perturb: unknown kind(s) {', '.join(unknown)}; known: {', '.join(KINDS)}")
        if args.examples < 1:
            raise ExploreInputError("--examples: must be at least 1")
        if args.budget <= 0:
            raise ExploreInputError("--budget: must be more than 0 seconds")
        invariants = [load_invariant(spec) for spec in args.invariant]
        target = load_target(Path(args.target), prompt=args.prompt, workspace=args.workspace)
        found = explore(
            target,
            examples=args.examples,
            seed=args.seed,
            budget_s=args.budget,
            kinds=kinds,
            invariants=invariants,
            out=args.out,
        )
    except ExploreInputError as exc:
        sys.stderr.write(f"agentbus explore: {exc}\n")
        return 2
    report(found, sys.stdout)
    return 1 if found.failure is not None else 0
