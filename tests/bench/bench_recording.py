"""Recording and replay benchmarks.

- recording overhead per message: 20,000 ``TextStreamed`` published on a bus whose
  session has a ``RecorderActor`` (a real file) against the same bus without one;
- recording overhead per turn: a 20-prompt session (text answers) with and without a
  recording, divided by the turns; this includes the fsyncs at each turn's end;
- replay speed: a recorded session of more than 10,000 messages (one answer streamed
  in 5,000 chunks), replayed with ``--check`` on the virtual clock, in messages/s;
- a long session: 300 tool turns on the virtual clock; the bytes its recording grows by
  a turn at turns 290-300 against turns 10-20 (flat: each content is written once), and
  the time to load it and rebuild its history for a resume.

Run with ``python -m tests.bench`` (all) or ``python -m tests.bench.bench_recording``.
"""

from __future__ import annotations

import functools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import trio
import trio.testing

from actors.frontends.replay import ReplayOptions, replay_recording
from actors.recorder import RecorderActor
from actors.recording import load_recording
from bus import Bus
from bus.messages import TextStreamed
from tests.bench._table import record
from tests.frontends.replay._session import TOOLS, ClientScript, run_session, text_entry

MESSAGES = 20_000
TURNS = 20
STREAM_CHUNKS = 5_000


async def _publish(n: int, path: Path | None) -> float:
    bus = Bus()
    async with trio.open_nursery() as nursery:
        if path is not None:
            await nursery.start(RecorderActor(bus, session_id="s", path=path).run)
        port = bus.connect("a")
        msg = TextStreamed(session_id="s", turn_id="t", text="some streamed text of a typical length")
        started = time.perf_counter()
        for _ in range(n):
            await port.publish(msg)
        elapsed = time.perf_counter() - started
        nursery.cancel_scope.cancel()
    return elapsed


def _per_message() -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for i in range(3):
            base = trio.run(_publish, MESSAGES, None)
            rec = trio.run(_publish, MESSAGES, Path(tmp) / f"r{i}.jsonl")
            runs.append((base, rec))
    base = statistics.median(b for b, _ in runs)
    rec = statistics.median(r for _, r in runs)
    return base / MESSAGES * 1e6, rec / MESSAGES * 1e6


def _session(tmp: Path, recording: Path | None) -> float:
    prompts = tuple(f"prompt {i}" for i in range(TURNS))
    entries = [text_entry("An answer ", "in three ", "chunks.") for _ in range(TURNS)]
    started = time.perf_counter()
    trio.run(run_session, tmp, recording, entries, ClientScript(prompts=prompts))
    return time.perf_counter() - started


def _per_turn() -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        runs = [(_session(Path(tmp), None), _session(Path(tmp), Path(tmp) / f"t{i}.jsonl")) for i in range(5)]
    base = statistics.median(b for b, _ in runs)
    rec = statistics.median(r for _, r in runs)
    return base / TURNS * 1e3, rec / TURNS * 1e3


def _replay_speed() -> tuple[int, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.jsonl"
        entries = [text_entry(*[f"w{i} " for i in range(STREAM_CHUNKS)])]
        trio.run(
            functools.partial(run_session, Path(tmp), path, entries, ClientScript()),
            clock=trio.testing.MockClock(autojump_threshold=0),
        )
        rec = load_recording(path)
        options = ReplayOptions(
            check=True,
            tools=TOOLS,
            route_model=lambda m: m,
            classifier_choice=lambda c: c,
            request_config=lambda m: {"systemInstruction": "test"},
        )
        timings = []
        for _ in range(3):
            started = time.perf_counter()
            result: Any = trio.run(replay_recording, rec, options, clock=trio.testing.MockClock(autojump_threshold=0))
            timings.append(time.perf_counter() - started)
            assert result.divergence is None and result.messages == len(rec.envelopes)
    return len(rec.envelopes), len(rec.envelopes) / statistics.median(timings)


LONG_TURNS = 300


def _long_session() -> tuple[float, float, float, float]:
    """(bytes a turn at turns 10-20, at turns 290-300, the file's size in MB, seconds
    to load it and rebuild its history)."""
    from actors.host.sessions import resumable_history
    from tests.frontends.replay._session import calls_entry

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "long.jsonl"
        entries = []
        for i in range(LONG_TURNS):
            entries += [calls_entry(("probe", {"i": i, "pad": "x" * 200})), text_entry(f"answer {i} " + "y" * 200)]
        script = ClientScript(prompts=tuple(f"prompt {i}" for i in range(LONG_TURNS)))
        trio.run(
            functools.partial(run_session, Path(tmp), path, entries, script),
            clock=trio.testing.MockClock(autojump_threshold=0),
        )
        ends, offset = [], 0
        with path.open("rb") as fh:
            for line in fh:
                offset += len(line)
                if line.rstrip().endswith(b'"type":"TurnEnded"}}'):
                    ends.append(offset)
        timings = []
        for _ in range(3):
            started = time.perf_counter()
            resumable_history(load_recording(path))
            timings.append(time.perf_counter() - started)
        size = path.stat().st_size / 1e6
    return (ends[19] - ends[9]) / 10, (ends[299] - ends[289]) / 10, size, statistics.median(timings)


def bench_recording() -> None:
    base_us, recorded_us = _per_message()
    record("recorder: one publish with a recorder (median of 3)", recorded_us, "us", baseline=base_us,
           target=f"baseline: one publish without a recorder; overhead {recorded_us - base_us:.2f} us")
    base_ms, turn_ms = _per_turn()
    record("recorder: one 3-chunk text turn recorded (median of 5)", turn_ms, "ms", baseline=base_ms,
           target=f"incl. fsync at the turn's end; baseline: the turn unrecorded; overhead {turn_ms - base_ms:.2f} ms")
    n, rate = _replay_speed()
    record(f"replay --check: {n}-message session", rate, "msg/s", target="virtual clock, recorded tools")
    early, late, size, load_s = _long_session()
    record("recorder: bytes a tool turn at turn 300", late, "B", baseline=early,
           target=f"baseline: at turn 10-20; flat = linear file ({size:.1f} MB for {LONG_TURNS} turns)")
    record(f"resume: load a {LONG_TURNS}-tool-turn recording (median of 3)", load_s * 1e3, "ms",
           target="parse and rebuild the history, as --resume and LoadSession do")


if __name__ == "__main__":
    bench_recording()
