"""Invariant 6 (a wave's calls run together) compares virtual times computed by
subtracting real-speed spans: two starts equal but for rounding are one instant (a run
under load was flagged for 0.01 vs 0.010000000000000002)."""

from __future__ import annotations

from types import SimpleNamespace

from actors.frontends.explore._invariants import _waves
from bus import Envelope
from bus.messages import ScheduleBatch, ToolCallRequest


def run_with_reads(*starts: float) -> SimpleNamespace:
    calls = tuple(ToolCallRequest(call_id=f"c{i}", name="read_file", args={"file_path": f"{i}.txt"}) for i in range(len(starts)))
    batch = ScheduleBatch(session_id="s", batch_id="b", reply_to="turn:s", approval_mode="default", calls=calls)
    spans = [
        SimpleNamespace(key=f"c{i}", start_t=t, end_t=t + 0.2, start_seq=10 + i, end_seq=20 + i) for i, t in enumerate(starts)
    ]
    return SimpleNamespace(
        envelopes=[Envelope(seq=1, session_id="s", sender="turn:s", recipient="scheduler:s", message=batch)],
        tools=SimpleNamespace(items=spans),
    )


def test_starts_equal_but_for_rounding_are_one_wave() -> None:
    assert list(_waves(run_with_reads(0.01, 0.010000000000000002))) == []  # type: ignore[arg-type]


def test_a_wave_whose_calls_start_apart_is_still_flagged() -> None:
    [violation] = list(_waves(run_with_reads(0.01, 0.02)))  # type: ignore[arg-type]
    assert violation.invariant == 6
