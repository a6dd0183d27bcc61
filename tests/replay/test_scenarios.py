"""Every recorded scenario in ``scenarios/recorded/`` replays with ``--check`` and meets
the expectations its ``scenario.json`` states; the replay never touches the file."""

from __future__ import annotations

import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from actors.recorder import load_recording
from actors.replay import replay_file
from bus.messages import (
    ApprovalRequested,
    ApprovalSettled,
    Message,
    StreamRetried,
    TextStreamed,
    ThoughtStreamed,
    ToolCallUpdated,
    TurnEnded,
)

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(p.parent for p in (ROOT / "scenarios" / "recorded").glob("*/scenario.json"))


def test_there_are_at_least_twelve_recorded_scenarios() -> None:
    assert len(SCENARIOS) >= 12
    for folder in SCENARIOS:
        assert (folder / "recording.jsonl").is_file(), folder


def outcome(messages: list[Message], segments: int) -> dict[str, Any]:
    statuses: dict[str, set[str]] = defaultdict(set)
    waves: dict[tuple[str, int], list[str]] = {}
    for m in messages:
        if isinstance(m, ToolCallUpdated):
            if m.status in ("success", "error", "cancelled"):
                statuses[m.name].add(m.status)
            if m.status == "executing":
                waves.setdefault((m.batch_id, m.wave), []).append(m.name)
    return {
        "stop_reasons": [m.stop_reason for m in messages if isinstance(m, TurnEnded)],
        "text": "".join(m.text for m in messages if isinstance(m, TextStreamed)),
        "tool_status": {k: sorted(v) for k, v in statuses.items()},
        "waves": list(waves.values()),
        "approvals": [m.outcome for m in messages if isinstance(m, ApprovalSettled) and m.outcome],
        "approvals_asked": sum(isinstance(m, ApprovalRequested) for m in messages),
        "retries": sum(isinstance(m, StreamRetried) for m in messages),
        "thoughts": [m.subject for m in messages if isinstance(m, ThoughtStreamed)],
        "processes": segments,
    }


@pytest.mark.parametrize("folder", SCENARIOS, ids=lambda p: p.name)
def test_scenario_replays_identically_with_its_expected_outcome(folder: Path) -> None:
    scenario = json.loads((folder / "scenario.json").read_text())
    path = folder / scenario.get("recording", "recording.jsonl")
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    recording = load_recording(path)
    out, err = io.StringIO(), io.StringIO()
    code, result = replay_file(
        recording, check=True, tools_mode="recorded", workspace=None, fmt="human", out=out, err=err
    )
    assert code == 0, err.getvalue()
    assert result.messages == len(recording.envelopes)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before, "replay must not write to its input"
    got = outcome([e.message for e in result.envelopes], result.segments)
    expect = scenario["expect"]
    assert got["stop_reasons"] == expect["stop_reasons"]
    if "text_endswith" in expect:
        assert got["text"].endswith(expect["text_endswith"]), got["text"]
    for name, status in expect.get("tool_status", {}).items():
        assert got["tool_status"].get(name) == [status], (name, got["tool_status"])
    for key in ("waves", "approvals", "approvals_asked", "retries", "thoughts", "processes"):
        if key in expect:
            assert got[key] == expect[key], key
    # What a person following the replay sees: the prompt and the end of each turn.
    shown = out.getvalue()
    assert "[turn ended: " + expect["stop_reasons"][-1] in shown
