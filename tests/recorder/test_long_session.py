"""A long session: 300 tool turns. The recording grows by about the same number of
bytes each turn (each content is written once), and resuming it stays quick."""

from __future__ import annotations

import time
from pathlib import Path

import trio
import trio.testing

from actors.host.sessions import history_problems, resumable_history
from actors.recording import load_recording
from bus.messages import SubmitPrompt, TurnEnded
from tests.frontends.replay._session import ClientScript, calls_entry, run_session, text_entry

TURNS = 300
RESUME_DEADLINE_S = 60.0
"""Against a hang only (it takes well under a second)."""


def _turn_ends(path: Path) -> list[int]:
    """The byte offset just past each ``TurnEnded`` line."""
    ends, offset = [], 0
    with path.open("rb") as fh:
        for line in fh:
            offset += len(line)
            if line.rstrip().endswith(b'"type":"TurnEnded"}}'):
                ends.append(offset)
    return ends


def test_300_tool_turns_grow_the_recording_linearly_and_resume(tmp_path: Path) -> None:
    rec = tmp_path / "s.jsonl"
    entries = []
    for i in range(TURNS):
        # Each turn: a call with a sizeable argument, its result, then an answer.
        entries += [calls_entry(("probe", {"i": i, "pad": "x" * 200})), text_entry(f"answer {i} " + "y" * 200)]
    script = ClientScript(prompts=tuple(f"prompt {i}" for i in range(TURNS)))
    _, ended = trio.run(run_session, tmp_path, rec, entries, script, clock=trio.testing.MockClock(autojump_threshold=0))
    assert [e.stop_reason for e in ended] == ["end_turn"] * TURNS
    ends = _turn_ends(rec)
    assert len(ends) == TURNS
    early = ends[19] - ends[9]
    late = ends[299] - ends[289]
    # Written whole each time, the history made turn 300 cost ~17 times turn 20.
    assert late < 1.5 * early, (early, late)

    started = time.monotonic()
    history = resumable_history(load_recording(rec))
    assert time.monotonic() - started < RESUME_DEADLINE_S
    assert len(history) == 4 * TURNS and history_problems(history) == []
    assert history[-1]["parts"][0]["text"].startswith(f"answer {TURNS - 1} ")

    # The next process continues the file: its part is read back with the first.
    trio.run(
        run_session, tmp_path, rec, [text_entry("more")], ClientScript(prompts=("again",)),
        clock=trio.testing.MockClock(autojump_threshold=0),
    )
    both = load_recording(rec)
    assert len(both.segments) == 2
    assert [type(e.message) for e in both.segments[1].envelopes].count(TurnEnded) == 1
    prompts = [e.message.display_text for e in both.envelopes if isinstance(e.message, SubmitPrompt)]
    assert prompts[-1] == "again" and len(prompts) == TURNS + 1
