"""Crash safety with real processes: ``kill -9`` a headless run at 50 random moments
across its turns; every recording loads, no line is torn except possibly the last, and
``--resume`` continues each session with a valid history."""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from actors.host.sessions import history_problems
from actors.recording import TornLine, load_recording
from bus.json_values import thaw
from bus.messages import GenerateRequest, OpenSession, SubmitPrompt, TurnEnded

ROOT = Path(__file__).resolve().parents[3]
RUNS = 50
WORKERS = 4


def _chunk(*parts: dict[str, Any], finish: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"candidates": [{"content": {"role": "model", "parts": list(parts)}, "index": 0}]}
    if finish:
        c["candidates"][0]["finishReason"] = "STOP"
    return c


def _shell(command: str) -> dict[str, Any]:
    return {"functionCall": {"name": "run_shell_command", "args": {"command": command, "description": "step"}}}


FIXTURE = [
    [_chunk({"text": "Starting: "}), _chunk({"text": "two steps at once."}),
     _chunk(_shell("sleep 0.05; echo a"), _shell("sleep 0.05; echo b"), finish=True)],
    [_chunk({"text": "Now one more, "}), _chunk({"text": "then a read."}),
     _chunk(_shell("sleep 0.05; echo c > c.txt"), {"functionCall": {"name": "read_file", "args": {"file_path": "c.txt"}}},
            finish=True)],
    [_chunk({"text": "All "}), _chunk({"text": "done."}, finish=True)],
]
RESUMED = [[_chunk({"text": "Resumed and carrying on."}, finish=True)]]


def _write_fixture(path: Path, streams: list[list[dict[str, Any]]]) -> None:
    path.write_text("".join(json.dumps({"method": "generateContentStream", "response": s}) + "\n" for s in streams))


def _env(home: Path, data: Path) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "GEMINI_CLI_HOME": str(home),
        "AGENTBUS_DATA_DIR": str(data),
        "PYTHONPATH": str(ROOT),
    }


def _headless(fixture: Path, prompt: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "actors.frontends", "-m", "gemini-2.5-flash", "--approval-mode", "yolo",
            "--fake-responses", str(fixture), *extra, "-p", prompt, "-o", "json"]


def _recording_started(data: Path) -> bool:
    sessions = data / "sessions"
    return sessions.is_dir() and any(sessions.iterdir())


def _one_run(index: int, delay: float, base: Path, fixture: Path, resumed: Path) -> dict[str, Any]:
    ws, home, data = base / f"ws{index}", base / f"home{index}", base / f"data{index}"
    for d in (ws, home):
        d.mkdir()
    env = _env(home, data)
    proc = subprocess.Popen(_headless(fixture, "work"), cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The moment is taken from when the session starts (its recording appears), so the
    # kills spread over the turns rather than over the interpreter's start-up.
    while proc.poll() is None and not _recording_started(data):
        time.sleep(0.002)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    files = list((data / "sessions").glob("*.jsonl")) if (data / "sessions").is_dir() else []
    out: dict[str, Any] = {"recording": bool(files), "torn": 0, "ended": False, "prompted": False}
    if files:
        torn: list[TornLine] = []
        rec = load_recording(files[0], on_torn=torn.append)  # raises on anything but a torn last line
        lines = files[0].read_bytes().count(b"\n") + (0 if files[0].read_bytes().endswith(b"\n") else 1)
        assert all(t.line == lines for t in torn), (torn, lines)
        out["torn"] = len(torn)
        out["messages"] = len(rec.envelopes)
        out["ended"] = any(isinstance(e.message, TurnEnded) for e in rec.envelopes)
        out["prompted"] = any(isinstance(e.message, SubmitPrompt) for e in rec.envelopes)
        out["closed"] = bool(rec.segments) and rec.segments[-1].closed
    resume = subprocess.run(_headless(resumed, "continue", "--resume", "latest"), cwd=ws, env=env,
                            capture_output=True, text=True, timeout=60)
    assert resume.returncode == 0, resume.stderr
    resumed_id = json.loads(resume.stdout)["session_id"]
    out["resumed_same_id"] = out["prompted"] and resumed_id == files[0].stem
    # A session killed before its prompt was recorded has nothing to resume (Gemini CLI
    # does not list it either): --resume latest then starts a new session.
    assert out["resumed_same_id"] or not out["prompted"]
    rec = load_recording(data / "sessions" / f"{resumed_id}.jsonl", on_torn=lambda t: None)
    opened = [e.message for e in rec.envelopes if isinstance(e.message, OpenSession)][-1]
    history = [thaw(c) for c in opened.history]
    assert history_problems(history) == [], history
    request = [e.message for e in rec.envelopes if isinstance(e.message, GenerateRequest)][-1]
    assert history_problems([thaw(c) for c in request.contents]) == []
    assert rec.segments[-1].closed
    out["history_contents"] = len(history)
    out["dangling_closed"] = any(
        "[Operation Cancelled] Reason: The session was interrupted" in json.dumps(c) for c in history
    )
    return out


@pytest.mark.slow
def test_kill_minus_nine_at_random_moments_then_resume(tmp_path: Path) -> None:
    fixture, resumed = tmp_path / "work.responses", tmp_path / "resume.responses"
    _write_fixture(fixture, FIXTURE)
    _write_fixture(resumed, RESUMED)
    # How long a session lasts here (from its recording's first line to the end), to
    # spread the kills across it.
    (tmp_path / "cal").mkdir()
    cal_data = tmp_path / "cal-data"
    proc = subprocess.Popen(_headless(fixture, "work"), cwd=tmp_path / "cal", env=_env(tmp_path, cal_data),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while proc.poll() is None and not _recording_started(cal_data):
        time.sleep(0.002)
    started = time.monotonic()
    assert proc.wait(timeout=60) == 0
    full = time.monotonic() - started
    rng = random.Random(20260101)
    delays = [rng.uniform(0.0, full * 1.5) for _ in range(RUNS)]
    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(lambda a: _one_run(a[0], a[1], tmp_path, fixture, resumed), enumerate(delays)))
    counts = collections.Counter()
    for r in results:
        counts["runs"] += 1
        counts["killed before the recording existed" if not r["recording"] else "recordings loaded"] += 1
        if r["recording"] and not r["prompted"]:
            counts["killed before the prompt was recorded (new session on resume)"] += 1
        if r["prompted"]:
            counts["killed mid-turn" if not r["ended"] else "killed after the turn ended"] += 1
            counts["torn last line"] += r["torn"]
            counts["resumed with the same id"] += r["resumed_same_id"]
            counts["dangling calls closed on resume"] += r["dangling_closed"]
    report = ", ".join(f"{k}: {v}" for k, v in counts.items())
    print(f"\ncrash test (a session lasts {full:.2f} s): {report}")
    assert counts["runs"] == RUNS
    assert counts["recordings loaded"] == counts["resumed with the same id"] + counts[
        "killed before the prompt was recorded (new session on resume)"
    ]
    assert counts["killed mid-turn"] > 0
