"""Invariants 4 and 5, by property: random sessions (model scripts, tool outcomes and
durations, approvals, cancels, and trio's scheduling) are recorded; the recording
decodes to exactly the delivered messages, and replaying it with ``--check`` yields the
identical sequence."""

from __future__ import annotations

import functools
import random
import tempfile
from pathlib import Path
from typing import Any

import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from actors.frontends.replay import ReplayOptions, replay_recording
from actors.gateway import FakeEntry
from actors.recording import load_recording

from ._session import TOOLS, ClientScript, calls_entry, executor_of, run_session, text_entry

words = st.sampled_from(["alpha", "beta", "gamma", "delta", "done", "ok", "x", "hello world"])

tool_args = st.fixed_dictionaries(
    {
        "outcome": st.sampled_from(["ok", "ok", "ok", "error", "crash", "invalid"]),
        "ms": st.sampled_from([0, 0, 5, 50, 400]),
    },
    optional={"out": st.lists(words, max_size=2), "wait_for_previous": st.just(True)},
)

tool_call = st.tuples(st.sampled_from(["probe", "probe", "shell_probe", "ask_tool", "deny_tool", "no_such_tool"]), tool_args)

entry = st.one_of(
    st.lists(words, min_size=1, max_size=3).map(lambda ts: text_entry(*ts)),
    st.tuples(st.lists(tool_call, min_size=1, max_size=3), words).map(lambda ct: calls_entry(*ct[0], text=ct[1])),
    st.lists(words, min_size=1, max_size=2).map(lambda ts: text_entry(*ts, finish=False)),
)

client = st.builds(
    ClientScript,
    prompts=st.sampled_from([("go",), ("go", "again")]),
    approvals=st.lists(st.sampled_from(["proceed_once", "cancel", "proceed_always"]), max_size=3).map(tuple),
    cancel_after=st.one_of(st.none(), st.integers(min_value=1, max_value=40)),
)


class LiveDeadlock(Exception):
    """The live session itself hung (not the recording or the replay)."""


def record_then_replay(entries: list[FakeEntry], script: ClientScript, delay: float) -> tuple[Any, Any, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        recording = Path(tmp) / "rec.jsonl"
        try:
            cap, _ended = trio.run(
                functools.partial(run_session, Path(tmp), recording, entries, script, chunk_delay_s=delay),
                clock=trio.testing.MockClock(autojump_threshold=0),
            )
        except trio.TooSlowError:
            raise LiveDeadlock from None
        loaded = load_recording(recording)
        options = ReplayOptions(
            check=True,
            tools=TOOLS,
            route_model=lambda m: m,
            classifier_choice=lambda c: c,
            request_config=lambda m: {"systemInstruction": "test"},
        )
        result = trio.run(replay_recording, loaded, options, clock=trio.testing.MockClock(autojump_threshold=0))
        return cap, loaded, result


@given(
    entries=st.lists(entry, min_size=0, max_size=5),
    script=client,
    delay=st.sampled_from([0.0, 0.01]),
    seed=st.random_module(),
)
def test_recorded_sessions_replay_identically(
    entries: list[FakeEntry], script: ClientScript, delay: float, seed: Any
) -> None:
    assert_recorded_and_replayed(*record_then_replay(entries, script, delay))


def assert_recorded_and_replayed(cap: Any, loaded: Any, result: Any) -> None:
    # Invariant 4: the recording is exactly what was delivered, in order, gap-free.
    assert loaded.envelopes == cap.envelopes
    numbers = sorted([e.seq for e in loaded.envelopes] + [n for a, b in loaded.voids for n in range(a, b + 1)])
    assert numbers == list(range(1, len(numbers) + 1))  # voids: numbers nobody received
    # Invariant 5: the replay produces the same sequence (normalised as --check does).
    assert result.divergence is None, result.divergence.render(loaded.path)
    assert result.messages == len(loaded.envelopes)
    assert [type(e.message) for e in result.envelopes] == [type(e.message) for e in loaded.envelopes]


def test_executor_kinds_cover_both_executors() -> None:
    assert {executor_of(t) for t in TOOLS.values()} == {"files", "shell"}


def test_scheduler_cancel_race() -> None:
    """Found by the property above: a cancel landing while the batch's last call settles
    used to be lost (the turn then waited forever); the scheduler now acknowledges it."""
    entries = [
        calls_entry(("probe", {"outcome": "ok", "ms": 0, "out": ["alpha"]}), ("deny_tool", {"outcome": "ok"}), text="alpha")
    ]
    cap, loaded, result = record_then_replay(entries, ClientScript(cancel_after=20), 0.0)
    assert_recorded_and_replayed(cap, loaded, result)
    kinds = [type(e.message).__name__ for e in loaded.envelopes]
    assert "TurnCancelAcknowledged" in kinds and kinds[-1] == "SessionClosed"


def test_a_retry_the_cancelled_turn_never_took_reads_no_clock() -> None:
    """Found by the deep profile: the turn is cancelled before it takes a mid-stream retry
    (no ``StreamRetried``), so it reads the wall clock next for the following prompt's
    request; the replay gave that reading to the untaken retry (0) and the call ids of
    the next turn differed. Over several schedules, as the property does."""
    entries = [text_entry("alpha", finish=False), calls_entry(("probe", {"outcome": "ok", "ms": 0}), text="alpha")]
    script = ClientScript(prompts=("go", "again"), approvals=(), cancel_after=6)
    for seed in range(10):
        random.seed(seed)
        _, loaded, result = record_then_replay(entries, script, 0.0)
        assert result.divergence is None, result.divergence.render(loaded.path)
