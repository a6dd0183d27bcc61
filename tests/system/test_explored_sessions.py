"""Whole sessions under explored schedules: DESIGN §5's seven invariants, on every example.

hypothesis generates a session (what the model says, what the tools do, what the
client does; see ``actors.frontends.explore.Session``) and drives trio's scheduler through
``seed=st.random_module()`` on a fresh ``MockClock``. Each example runs the real
actors wired by ``runtime.supervise_session``, replays its recording, and is checked
against all seven invariants; a failure shrinks to a readable session, and hypothesis
prints the ``@reproduce_failure`` line that replays it.

The suite must be able to fail: for each invariant a planted bug (``bus/planted.py``)
is switched on and the suite must find it within its CI budget.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, event, given, settings
from hypothesis import strategies as st
from hypothesis.errors import FlakyFailure

from actors.frontends.explore import (
    FIXED_RUNTIME_BUGS,
    KNOWN_RUNTIME_BUGS,
    Call,
    Fault,
    InvariantViolation,
    Junk,
    Prompt,
    Reply,
    Session,
    Text,
    When,
    check,
    run_session,
    sessions,
)
from bus.planted import SWITCHES, planting

ROOT = Path(__file__).resolve().parents[2]

PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
"""No ``explain`` phase: on whole sessions it costs a minute and says little."""
CI_EXAMPLES = 300
"""Examples in the CI profile (about 30 ms each); ``make proptest`` runs the deep
profile's 10,000."""
EXAMPLES = max(settings.default.max_examples, CI_EXAMPLES)


@settings(print_blob=True, phases=PHASES, max_examples=EXAMPLES)
@given(session=sessions(), seed=st.random_module())
def test_explored_sessions_keep_the_seven_invariants(session: Session, seed: Any) -> None:
    run = run_session(session)
    for feature in run.features():
        event(feature)
    violations = check(run)
    if violations:
        raise InvariantViolation(violations, session, seed)


# -- the suite can fail: planted bugs ------------------------------------------------------------
PLANTED = [
    ("scheduler.completion_order", 1),
    ("turn.end_before_tools", 2),
    ("executor.two_results", 3),
    ("recorder.drop_line", 4),
    ("scheduler.shuffled_dispatch", 5),
    ("scheduler.barrier_joins_wave", 6),
    ("executor.skip_close", 7),
]


def test_every_planted_bug_has_one_hook_and_a_test() -> None:
    assert sorted(s for s, _ in PLANTED) == sorted(SWITCHES)
    sources = "\n".join(p.read_text() for p in (ROOT / "actors").rglob("*.py"))
    for switch in SWITCHES:
        assert sources.count(f'planted("{switch}")') == 1, switch


@pytest.mark.property
@pytest.mark.parametrize(("switch", "invariant"), PLANTED)
def test_the_suite_finds_a_planted_bug(switch: str, invariant: int) -> None:
    tried: list[Session] = []
    found: list[InvariantViolation] = []

    @settings(
        database=None,
        derandomize=True,  # the same examples every run: a plant is found always or never
        phases=(Phase.generate,),
        max_examples=CI_EXAMPLES,
        report_multiple_bugs=False,
        print_blob=False,
        deadline=None,
    )
    @given(session=sessions(), seed=st.random_module())
    def explore(session: Session, seed: Any) -> None:
        tried.append(session)
        violations = check(run_session(session))
        if violations:
            found.append(InvariantViolation(violations, session, seed))
            # A plant may break another invariant first in some interleavings (a turn
            # that ends before its tools leaves calls without responses, too): go on
            # until one breaks the invariant it was planted for.
            if invariant in found[-1].invariants:
                raise found[-1]

    with planting(switch), contextlib.suppress(InvariantViolation, FlakyFailure):
        explore()
    assert found, f"{switch}: the suite ran {len(tried)} sessions without noticing"
    hits = [f for f in found if invariant in f.invariants]
    assert hits, "\n".join(str(f) for f in found)
    print(f"{switch}: invariant {invariant} broken in example {tried.index(hits[0].session) + 1}")


# -- runtime bugs the suite found -----------------------------------------------------------------
KNOWN_REPRODUCTIONS = {
    "invalid_chunk_with_call": Session(
        model=(Reply(chunks=((Text("alpha"),), (Text(""), Call("probe")))), Reply(chunks=((Text("done"),),)))
    ),
    "nameless_call_ids": Session(model=(Reply(chunks=((Junk("nameless_call"),),)), Reply(chunks=((Text("done"),),)))),
    "start_turn_during_cancel_ack": Session(
        model=(), prompts=(Prompt("go"), Prompt("again", queued=True)), cancels=(When(at_ms=0),)
    ),
    "stale_ack_closes_session": Session(model=(), cancels=(When(after_messages=1),), close=When(at_ms=0)),
    "replay_wall_clock_after_retry": Session(model=(Reply(chunks=((Text(""), Junk("args_not_object")),)),)),
    "replayed_api_error": Session(model=(Fault(400),)),
}
"""The smallest session that shows each known runtime bug (``KNOWN_RUNTIME_BUGS``)."""


def test_every_found_bug_has_its_reproduction() -> None:
    assert set(KNOWN_REPRODUCTIONS) == set(KNOWN_RUNTIME_BUGS) | set(FIXED_RUNTIME_BUGS)


def _found_bug(name: str) -> Any:
    """A found bug as a test case: one still open (``KNOWN_RUNTIME_BUGS``) is a strict xfail."""
    if name in KNOWN_RUNTIME_BUGS:
        reason = f"reported: {KNOWN_RUNTIME_BUGS[name].what}"
        return pytest.param(name, marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason))
    return pytest.param(name)


@pytest.mark.property
@pytest.mark.parametrize("name", [_found_bug(name) for name in KNOWN_REPRODUCTIONS])
def test_found_runtime_bug_is_fixed(name: str) -> None:
    """Every runtime bug the suite found (fixed, or still open): its reproduction runs
    clean on every explored schedule. An open bug fails here, as expected; once it is
    fixed, strict xfail turns the pass into a failure: then move it from
    ``KNOWN_RUNTIME_BUGS`` to ``FIXED_RUNTIME_BUGS``."""
    session = KNOWN_REPRODUCTIONS[name]
    what = {**FIXED_RUNTIME_BUGS, **KNOWN_RUNTIME_BUGS}[name].what

    @settings(database=None, derandomize=True, phases=(Phase.generate,), max_examples=20, deadline=None)
    @given(seed=st.random_module())
    def reproduce(seed: Any) -> None:
        run = run_session(session)
        assert run.crash is None, what
        assert check(run, excuse_known=False) == []

    reproduce()
