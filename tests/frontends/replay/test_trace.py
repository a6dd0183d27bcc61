"""``agentbus replay FILE --trace OUT.json``: the recorded scenarios as Chrome trace
events — well-formed, one track per actor, the waves of a batch one after another with
the calls of a wave side by side — and the command's answers to bad input."""

from __future__ import annotations

import io
import json
import random
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.frontends.replay import main, trace_document, trace_events
from actors.recording import RecordedLine, Recording, Segment, load_recording
from bus import Envelope
from bus.messages import (
    ApiError,
    GenerateRequest,
    HookRan,
    HooksFinished,
    ModelFailed,
    ModelFinished,
    RunHooks,
    RunTool,
    StartTurn,
    ToolFinished,
    ToolResult,
)

ROOT = Path(__file__).resolve().parents[3]
RECORDED = ROOT / "scenarios" / "recorded"
SCENARIOS = sorted(p.name for p in RECORDED.iterdir() if (p / "recording.jsonl").is_file())
PHASES = {"M", "X", "B", "E", "i", "s", "f"}
REQUIRED = {
    "M": {"name", "pid", "args"},
    "X": {"name", "pid", "tid", "ts", "dur"},
    "B": {"name", "pid", "tid", "ts"},
    "E": {"pid", "tid", "ts"},
    "i": {"name", "pid", "tid", "ts", "s"},
    "s": {"id", "pid", "tid", "ts"},
    "f": {"id", "pid", "tid", "ts", "bp"},
}


def load(name: str) -> Recording:
    return load_recording(RECORDED / name / "recording.jsonl")


def assert_well_formed(events: list[dict[str, Any]]) -> None:
    """The structure Perfetto and chrome://tracing need: known phases with their keys,
    numeric non-negative times, B/E balanced and X slices nested per thread, flows paired."""
    json.dumps(events)  # plain JSON
    per_tid: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    open_b: dict[tuple[int, int], int] = defaultdict(int)
    flows: dict[int, list[str]] = defaultdict(list)
    named: set[tuple[int, int]] = set()
    for e in events:
        assert e.get("ph") in PHASES, e
        missing = REQUIRED[e["ph"]] - set(e)
        assert not missing, (missing, e)
        if "ts" in e:
            assert isinstance(e["ts"], int) and e["ts"] >= 0, e
        if e["ph"] == "M" and e["name"] == "thread_name":
            assert all(tid != e["tid"] for _, tid in named), f"tid {e['tid']} in two processes"
            named.add((e["pid"], e["tid"]))
        elif e["ph"] == "X":
            assert isinstance(e["dur"], int) and e["dur"] >= 0, e
            per_tid[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
        elif e["ph"] == "B":
            open_b[(e["pid"], e["tid"])] += 1
        elif e["ph"] == "E":
            open_b[(e["pid"], e["tid"])] -= 1
            assert open_b[(e["pid"], e["tid"])] >= 0, e
        elif e["ph"] in ("s", "f"):
            flows[e["id"]].append(e["ph"])
    assert all(n == 0 for n in open_b.values()), open_b
    assert all(sorted(p) == ["f", "s"] for p in flows.values()), flows
    for key, spans in per_tid.items():
        assert key in named, f"slices on unnamed thread {key}"
        stack: list[tuple[int, int]] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1][1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1][1], f"{(start, end)} overlaps {stack[-1]} on {key}"
            stack.append((start, end))


def threads(events: list[dict[str, Any]]) -> dict[tuple[int, int], str]:
    return {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e["ph"] == "M" and e["name"] == "thread_name"
    }


def slices(events: list[dict[str, Any]], track: str | None = None) -> list[dict[str, Any]]:
    names = threads(events)
    return [
        e
        for e in events
        if e["ph"] == "X" and (track is None or names[(e["pid"], e["tid"])].split(" (")[0] == track)
    ]


def shown(address: str, session_id: str) -> str:
    return address.removesuffix(f":{session_id}")


def addresses(segment: Segment) -> Iterable[str]:
    for rec in segment.lines:
        yield rec.env.sender
        if rec.env.recipient is not None:
            yield rec.env.recipient


@pytest.mark.parametrize("name", SCENARIOS)
def test_each_recorded_scenario_is_a_well_formed_trace_with_a_track_per_actor(name: str) -> None:
    recording = load(name)
    events = trace_events(recording)
    assert_well_formed(events)
    names = threads(events)
    for pid, segment in enumerate(recording.segments, start=1):
        actors = {shown(a, recording.session_id) for a in addresses(segment)}
        lane_one = [
            n for (p, _), n in names.items() if p == pid and " (" not in n and " · " not in n
        ]
        assert sorted(lane_one) == sorted(actors)
    turns = [e for e in slices(events, "turn") if e["name"].startswith("turn ")]
    started = [r for r in recording.lines if type(r.env.message).__name__ == "StartTurn"]
    assert len(turns) == len(started)
    requests = [r for r in recording.lines if type(r.env.message).__name__ == "GenerateRequest"]
    assert len(slices(events, "gateway")) >= len(requests)
    runs = [r for r in recording.lines if type(r.env.message).__name__ == "RunTool"]
    assert sum(
        len(slices(events, t))
        for t in {n.split(" (")[0] for n in names.values() if n.startswith("exec.")}
    ) == len(runs)


def call_slices(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names = threads(events)
    return [
        e
        for e in events
        if e["ph"] == "X" and " · calls" in names[(e["pid"], e["tid"])] and "call_id" in e["args"]
    ]


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_calls_of_a_wave_start_after_the_previous_wave_ended(name: str) -> None:
    events = trace_events(load(name))
    waves: dict[str, dict[int, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for e in call_slices(events):
        if e["args"].get("wave") is not None:
            waves[e["args"]["batch_id"]][e["args"]["wave"]].append(e)
    for batch in waves.values():
        numbers = sorted(batch)
        for before, after in zip(numbers, numbers[1:], strict=False):
            ended = max(e["ts"] + e["dur"] for e in batch[before])
            assert min(e["ts"] for e in batch[after]) >= ended


def test_waves_read_write_shows_three_waves_the_first_two_calls_side_by_side() -> None:
    events = trace_events(load("waves-read-write"))
    batch = [e for e in slices(events, "scheduler") if e["name"].startswith("batch")]
    assert [b["name"] for b in batch] == ["batch · 4 calls"]
    children = [e["name"] for e in slices(events, "scheduler") if not e["name"].startswith("batch")]
    assert children == ["validate", "wave 0 · 2 calls", "wave 1 · 1 call", "wave 2 · 1 call"]
    calls = sorted(call_slices(events), key=lambda e: e["ts"])
    assert [(c["name"], c["args"]["wave"], c["args"]["status"]) for c in calls] == [
        ("read_file", 0, "success"),
        ("read_file", 0, "success"),
        ("write_file", 1, "success"),
        ("read_file", 2, "success"),
    ]
    first, second = calls[0], calls[1]
    assert (
        second["ts"] < first["ts"] + first["dur"] and first["tid"] != second["tid"]
    )  # side by side
    phases = [
        e["name"]
        for e in events
        if e["ph"] == "X" and e["tid"] == first["tid"] and e["name"] in ("scheduled", "executing")
    ]
    assert "executing" in phases
    turn = slices(events, "turn")
    assert [t["name"] for t in turn] == [
        "turn 1 · Join a.txt and b.txt into c.txt.",
        "model",
        "tools",
        "model",
    ]
    assert {e["name"] for e in events if e["ph"] == "s"} >= {
        "StartTurn",
        "RunTool",
        "ToolFinished",
        "BatchSettled",
    }


def test_a_retried_request_has_its_attempts_and_the_retry_as_an_instant() -> None:
    events = trace_events(load("retry-invalid-stream"))
    gateway = [e["name"] for e in slices(events, "gateway")]
    assert gateway == ["model · main", "attempt 1", "attempt 2"]
    chunks = [
        r
        for r in load("retry-invalid-stream").lines
        if type(r.env.message).__name__ == "ModelChunk"
    ]
    request = slices(events, "gateway")[0]
    assert request["args"]["chunks"] == len(chunks) > 0
    assert 0 < request["args"]["first_chunk_after_ms"] * 1000 <= request["dur"]
    assert any(e["ph"] == "i" and e["name"] == "retry 1 · NO_FINISH_REASON" for e in events)


def test_a_shell_run_counts_its_output_lines() -> None:
    recording = load("shell-output")
    streamed = [r for r in recording.lines if type(r.env.message).__name__ == "ToolOutputStreamed"]
    (run,) = slices(trace_events(recording), "exec.shell")
    assert run["args"]["output_lines"] == len(streamed) > 0


def test_a_cancel_mid_tool_shows_the_cancels_until_their_acknowledgements() -> None:
    events = trace_events(load("cancel-mid-tool"))
    assert [e["name"] for e in slices(events, "session") if e["name"] == "cancel turn"] == [
        "cancel turn"
    ]
    assert [e["name"] for e in slices(events, "turn") if e["name"] == "cancel turn"] == [
        "cancel turn"
    ]
    assert [e["name"] for e in slices(events, "scheduler") if e["name"] == "cancel batch"] == [
        "cancel batch"
    ]
    first_turn = next(e for e in slices(events, "turn") if e["name"].startswith("turn 1"))
    assert first_turn["args"]["stop_reason"] == "cancelled"
    (run,) = slices(events, "exec.shell")
    assert run["args"]["status"] == "cancelled"
    assert any(e["ph"] == "i" and e["name"] == "cancel tool" for e in events)
    (cancel,) = [e for e in slices(events, "turn") if e["name"] == "cancel turn"]
    assert cancel["ts"] < run["ts"] + run["dur"] <= cancel["ts"] + cancel["dur"]


def test_approvals_wait_until_settled_or_until_the_call_moves_on() -> None:
    events = trace_events(load("approval-always"))
    approvals = slices(events, "scheduler · approvals")
    assert [
        (a["name"], a["args"]["outcome"]) for a in sorted(approvals, key=lambda a: a["ts"])
    ] == [
        ("approval · run_shell_command", "proceed_always"),
        ("approval · run_shell_command", "(call scheduled)"),  # the "always" rule answered it
    ]
    cancelled = slices(trace_events(load("cancel-awaiting-approval")), "scheduler · approvals")
    assert [a["args"]["outcome"] for a in cancelled] == ["(call cancelled)"]


def test_a_resumed_session_is_one_trace_process_per_process() -> None:
    events = trace_events(load("resume-two-processes"))
    processes = [e for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    assert [p["pid"] for p in processes] == [1, 2]
    assert "resumed" not in processes[0]["args"]["name"]
    assert {e["pid"] for e in slices(events, "turn")} == {1, 2}
    ts_of_pid = {
        pid: [e["ts"] for e in events if e["ph"] == "X" and e["pid"] == pid] for pid in (1, 2)
    }
    assert max(ts_of_pid[1]) < min(ts_of_pid[2])


# -- robustness: missing, equal and backward stamps, cut-off parts ---------------------------

ALL_LINES = {name: load(name).lines for name in SCENARIOS}


@given(
    name=st.sampled_from(SCENARIOS),
    seed=st.integers(0, 2**32 - 1),
    drop=st.sampled_from([0.0, 0.1, 0.5]),
    stamps=st.sampled_from(["as recorded", "missing", "equal", "shuffled", "mixed"]),
    parts=st.integers(1, 3),
)
def test_any_subset_of_a_recording_with_any_stamps_is_well_formed(
    name: str, seed: int, drop: float, stamps: str, parts: int
) -> None:
    rng = random.Random(seed)
    lines = [r for r in ALL_LINES[name] if rng.random() >= drop]
    walls = [r.wall for r in lines]
    if stamps == "missing":
        walls = [None] * len(lines)
    elif stamps == "equal":
        walls = [walls[0] if walls else None] * len(lines)
    elif stamps == "shuffled":
        rng.shuffle(walls)
    elif stamps == "mixed":
        walls = [rng.choice([w, None, "not a time", walls[0]]) for w in walls]
    rebuilt = [RecordedLine(r.line, r.env, w) for r, w in zip(lines, walls, strict=True)]
    cuts = sorted(rng.sample(range(len(rebuilt) + 1), k=min(parts - 1, len(rebuilt) + 1)))
    bounds = [0, *cuts, len(rebuilt)]
    segments = tuple(
        Segment(meta={"pid": 1, "resumed": i > 0}, meta_line=None, lines=tuple(rebuilt[a:b]))
        for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False))
    )
    events = trace_events(Recording(path=Path(name), segments=segments))
    assert_well_formed(events)


# -- the command -----------------------------------------------------------------------------


def replay(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_trace_writes_the_file_and_does_not_replay(tmp_path: Path) -> None:
    target = tmp_path / "waves.json"
    code, out, err = replay(str(RECORDED / "waves-read-write"), "--trace", str(target))
    assert (code, out) == (0, "")
    assert err.startswith(f"agentbus replay: wrote {target}: ") and err.count("\n") == 1
    document = json.loads(target.read_text())
    assert document["traceEvents"] == json.loads(
        json.dumps(trace_document(load("waves-read-write"))["traceEvents"])
    )
    assert_well_formed(document["traceEvents"])
    assert [p.name for p in tmp_path.iterdir()] == ["waves.json"]


def test_trace_to_stdout(tmp_path: Path) -> None:
    code, out, _ = replay(str(RECORDED / "text-hello" / "recording.jsonl"), "--trace", "-")
    assert code == 0
    assert_well_formed(json.loads(out)["traceEvents"])


def test_trace_with_check_writes_the_trace_and_checks(tmp_path: Path) -> None:
    target = tmp_path / "t.json"
    code, _, err = replay(
        str(RECORDED / "cancel-mid-tool"), "--trace", str(target), "--check", "-o", "none"
    )
    assert code == 0
    assert "check OK: 48 messages in 1 process" in err
    assert target.is_file()


def test_trace_with_check_of_a_diverging_recording_still_writes_the_trace(tmp_path: Path) -> None:
    source = RECORDED / "text-hello" / "recording.jsonl"
    lines = source.read_text().splitlines()
    n = next(i for i, t in enumerate(lines) if '"type":"TextStreamed"' in t)
    original = json.loads(lines[n])
    changed = dict(original, msg=dict(original["msg"], text="something else"))
    lines[n] = json.dumps(changed, separators=(",", ":"))
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(lines) + "\n")
    target = tmp_path / "t.json"
    code, _, err = replay(str(path), "--trace", str(target), "--check", "-o", "none")
    assert code == 1, err
    assert target.is_file()


def test_trace_to_an_unwritable_place_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for target in (tmp_path / "missing" / "t.json", tmp_path):
        code, out, err = replay(str(RECORDED / "text-hello"), "--trace", str(target))
        assert (code, out) == (2, "")
        assert (
            err.startswith(f"agentbus replay: {target}: cannot write the trace: ")
            and err.count("\n") == 1
        )
    assert [p.name for p in tmp_path.iterdir()] == []


def test_trace_to_an_empty_name_or_a_bare_directory_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = replay(str(RECORDED / "waves-read-write"), "--trace", "")
    assert (code, out, err) == (2, "", "agentbus replay: --trace needs a file to write (- for stdout)\n")
    for target in (".", "/"):
        code, out, err = replay(str(RECORDED / "waves-read-write"), "--trace", target)
        assert (code, out, err) == (2, "", f"agentbus replay: {target}: cannot write the trace: Is a directory\n")
    assert list(tmp_path.iterdir()) == []


def test_trace_of_what_is_not_a_recording(tmp_path: Path) -> None:
    code, _, err = replay(str(ROOT / "README.md"), "--trace", str(tmp_path / "t.json"))
    assert code == 2 and err.count("\n") == 1 and "not JSON" in err
    fake = RECORDED / "text-hello" / "fake.responses"
    code, _, err = replay(str(fake), "--trace", str(tmp_path / "t.json"))
    assert (code, err) == (
        2,
        f"agentbus replay: {fake}: --trace needs a recording, not a fake-responses file\n",
    )
    assert not (tmp_path / "t.json").exists()


def test_trace_of_a_scenario_folder_without_a_recording(tmp_path: Path) -> None:
    folder = ROOT / "scenarios" / "demo-fix-mean"
    code, _, err = replay(str(folder), "--trace", str(tmp_path / "t.json"))
    assert code == 2
    assert err == (
        f"agentbus replay: {folder}: --trace needs a recording "
        f"({folder / 'recording.jsonl'} does not exist)\n"
    )


def test_trace_of_a_recording_with_a_torn_last_line(tmp_path: Path) -> None:
    text = (RECORDED / "text-hello" / "recording.jsonl").read_text()
    path = tmp_path / "r.jsonl"
    path.write_text(text + '{"v":1,"seq":99,"sess')
    target = tmp_path / "t.json"
    code, _, err = replay(str(path), "--trace", str(target))
    assert code == 0
    assert f"{path}:{text.count(chr(10)) + 1}: torn last line" in err
    assert_well_formed(json.loads(target.read_text())["traceEvents"])


# -- what the recorded scenarios do not have: hooks, concurrent requests, a crash ------------

SID = "s1"


def synthetic(*steps: tuple[str, str | None, Any]) -> Recording:
    """Lines stamped 1 ms apart: (sender, recipient, message)."""
    lines = tuple(
        RecordedLine(
            line=i + 2,
            env=Envelope(seq=i + 1, session_id=SID, sender=sender, recipient=to, message=message),
            wall=f"2026-11-25T10:00:00.{i:03d}Z",
        )
        for i, (sender, to, message) in enumerate(steps)
    )
    return Recording(
        path=Path("synthetic"), segments=(Segment(meta={"pid": 7}, meta_line=1, lines=lines),)
    )


def test_hooks_concurrent_requests_and_a_crash_mid_turn() -> None:
    turn, gw, loops, hooks, ex = (
        f"turn:{SID}",
        "gateway",
        f"loops:{SID}",
        f"hooks:{SID}",
        f"exec.shell:{SID}",
    )
    recording = synthetic(
        (
            f"session:{SID}",
            turn,
            StartTurn(session_id=SID, turn_id="t1", prompt_id="p", model="m", approval_mode="yolo"),
        ),
        (
            turn,
            hooks,
            RunHooks(session_id=SID, request_id="h1", reply_to=turn, event="BeforeModel"),
        ),
        (
            hooks,
            None,
            HookRan(
                session_id=SID, request_id="h1", event="BeforeModel", name="audit", success=True
            ),
        ),
        (hooks, turn, HooksFinished(session_id=SID, request_id="h1", event="BeforeModel", ran=1)),
        (
            turn,
            gw,
            GenerateRequest(
                session_id=SID,
                request_id="r1",
                reply_to=turn,
                method="generateContentStream",
                model="m",
            ),
        ),
        (
            loops,
            gw,
            GenerateRequest(
                session_id=SID,
                request_id="r2",
                reply_to=loops,
                method="generateContent",
                model="m",
                role="loop_detector",
            ),
        ),
        (gw, turn, ModelFinished(session_id=SID, request_id="r1", model="m")),
        (
            f"scheduler:{SID}",
            ex,
            RunTool(session_id=SID, call_id="c1", reply_to=f"scheduler:{SID}", name="sh"),
        ),
        (
            f"scheduler:{SID}",
            ex,
            RunTool(session_id=SID, call_id="c2", reply_to=f"scheduler:{SID}", name="sh"),
        ),
        (ex, f"scheduler:{SID}", ToolFinished(session_id=SID, call_id="c1", result=ToolResult())),
        (
            gw,
            loops,
            ModelFailed(
                session_id=SID, request_id="r2", model="m", error=ApiError(message="quota")
            ),
        ),
        # the process dies here: the turn, the second run and nothing else are unfinished
    )
    events = trace_events(recording)
    assert_well_formed(events)
    names = set(threads(events).values())
    assert {
        "turn",
        "gateway",
        "gateway (2)",
        "hooks",
        "exec.shell",
        "exec.shell (2)",
        "loops",
    } <= names
    assert [(e["name"], e["args"].get("ran")) for e in slices(events, "hooks")] == [
        ("hooks · BeforeModel", 1)
    ]
    assert any(e["ph"] == "i" and e["name"] == "hook ran · audit" for e in events)
    waits = [e["name"] for e in slices(events, "turn")]
    assert waits == ["turn 1 (unfinished)", "hooks · BeforeModel", "model"]
    failed = next(e for e in slices(events, "gateway") if e["args"]["request_id"] == "r2")
    assert (failed["name"], failed["args"]["outcome"], failed["args"]["error"]) == (
        "model · loop_detector",
        "failed",
        "quota",
    )
    unfinished = [e for e in events if e["ph"] == "X" and e["args"].get("unfinished")]
    assert sorted(e["name"] for e in unfinished) == ["sh (unfinished)", "turn 1 (unfinished)"]
    last = max(e["ts"] + e.get("dur", 0) for e in events if "ts" in e)
    assert all(e["ts"] + e["dur"] == last for e in unfinished)
    (process,) = [e for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    assert process["args"]["name"] == "agentbus session s1 · process 1 (pid 7)"
