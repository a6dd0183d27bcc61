"""The session flags at the command line: ``--resume``, ``--session-id``,
``--list-sessions``, ``--delete-session``, with Gemini CLI's texts and exit codes; and a
recording that cannot be written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from actors.recording import load_recording
from bus.messages import GenerateRequest, OpenSession

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "scenarios" / "bench" / "hi.responses"


def run(args: list[str], cwd: Path, data: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(cwd.parent),
        "GEMINI_CLI_HOME": str(cwd.parent),
        "AGENTBUS_DATA_DIR": str(data),
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        [sys.executable, "-m", "actors.frontends", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    ws = tmp_path / "project"
    ws.mkdir()
    return ws


def headless(prompt: str, *extra: str) -> list[str]:
    return ["-m", "gemini-2.5-flash", "--fake-responses", str(HELLO), *extra, "-p", prompt]


def test_resume_latest_continues_the_same_session_and_file(project: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = run(headless("hi", "-o", "stream-json"), project, data)
    assert first.returncode == 0, first.stderr
    sid = json.loads(first.stdout.splitlines()[0])["session_id"]
    second = run(headless("again", "-o", "stream-json", "--resume"), project, data)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout.splitlines()[0])["session_id"] == sid
    files = list((data / "sessions").iterdir())
    assert [f.name for f in files] == [f"{sid}.jsonl"]
    rec = load_recording(files[0])
    assert len(rec.segments) == 2
    assert [e.seq for e in rec.envelopes] == list(range(1, len(rec.envelopes) + 1))
    # The resumed process sent the first exchange (behind a fresh session context).
    opened = [e.message for e in rec.envelopes if isinstance(e.message, OpenSession)]
    texts = [c["parts"][0].get("text", "") for c in opened[1].history]
    assert texts[0].startswith("<session_context>") and texts[1:] == ["hi", "Hello! How can I help you today?"]
    request = [e.message for e in rec.envelopes if isinstance(e.message, GenerateRequest)][-1]
    assert request.contents[-1]["parts"][-1]["text"] == "again"


def test_resume_by_index_and_by_id_and_unknown_identifiers(project: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    run(headless("one"), project, data)
    run(headless("two"), project, data)
    listing = run(["--list-sessions"], project, data)
    assert listing.returncode == 0
    lines = listing.stdout.splitlines()
    assert lines[0] == "" and lines[1] == "Available sessions for this project (2):"
    m = re.fullmatch(r"  1\. one \(Just now\) \[([0-9a-f-]{36})\]", lines[2])
    assert m is not None, lines
    assert re.fullmatch(r"  2\. two \(Just now\) \[[0-9a-f-]{36}\]", lines[3])
    first_id = m.group(1)
    by_index = run(headless("more", "-o", "json", "--resume", "1"), project, data)
    assert json.loads(by_index.stdout)["session_id"] == first_id
    by_id = run(headless("more", "-o", "json", "--resume", first_id), project, data)
    assert json.loads(by_id.stdout)["session_id"] == first_id
    bad = run(headless("x", "--resume", "7"), project, data)
    assert bad.returncode == 42
    assert bad.stderr.startswith('Error resuming session: Invalid session identifier "7".\n  Searched for sessions in ')
    assert "use --resume {number}, --resume {uuid}, or --resume latest." in bad.stderr


def test_resume_latest_without_sessions_warns_and_starts_fresh(project: Path, tmp_path: Path) -> None:
    proc = run(headless("hi", "--resume", "latest"), project, tmp_path / "data")
    assert proc.returncode == 0
    assert proc.stderr == "No previous sessions found for this project.\n"
    other = run(headless("hi", "--resume", "3"), project, tmp_path / "empty")
    assert other.returncode == 42
    assert other.stderr == "Error resuming session: No previous sessions found for this project.\n"


def test_sessions_of_other_projects_are_not_listed(project: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    other = tmp_path / "elsewhere"
    other.mkdir()
    run(headless("theirs"), other, data)
    listing = run(["--list-sessions"], project, data)
    assert listing.stdout == "No previous sessions found for this project."


def test_session_id_flag(project: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    fresh = run(headless("hi", "-o", "json", "--session-id", "my_session-1"), project, data)
    assert fresh.returncode == 0 and json.loads(fresh.stdout)["session_id"] == "my_session-1"
    assert (data / "sessions" / "my_session-1.jsonl").is_file()
    again = run(headless("hi", "--session-id", "my_session-1"), project, data)
    assert again.returncode == 42
    assert again.stderr == (
        'Error starting session: Session ID "my_session-1" already exists. '
        "Use --resume to resume it, or provide a different ID.\n"
    )
    invalid = run(headless("hi", "--session-id", "a/b"), project, data)
    assert invalid.returncode == 1
    assert invalid.stderr.startswith(
        'Invalid session ID "a/b": Only alphanumeric characters, dashes, and underscores are allowed.\n'
    )
    both = run(headless("hi", "--session-id", "x", "--resume"), project, data)
    assert both.returncode == 1
    assert both.stderr.startswith(
        "The flags --resume, --session-id, and --session-file are mutually exclusive. Please provide only one.\n"
    )


def test_delete_session(project: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    # Gemini CLI's texts; its exit code is 0 even when nothing was deleted, ours 42
    # (docs/differences.md).
    empty = run(["--delete-session", "1"], project, data)
    assert (empty.returncode, empty.stdout, empty.stderr) == (42, "", "No sessions found for this project.")
    run(headless("keep"), project, data)
    run(headless("drop me"), project, data)
    bad = run(["--delete-session", "9"], project, data)
    assert (bad.returncode, bad.stderr) == (42, 'Invalid session identifier "9". Use --list-sessions to see available sessions.')
    # parseInt reads ASCII digits only: an Arabic-Indic two is no index (Python's \d took it).
    arabic = run(["--delete-session", "\u0662"], project, data)
    assert (arabic.returncode, arabic.stderr) == (
        42, 'Invalid session identifier "\u0662". Use --list-sessions to see available sessions.'
    )
    gone = run(["--delete-session", "2"], project, data)
    assert (gone.returncode, gone.stdout) == (0, "Deleted session 2: drop me (Just now)")
    listing = run(["--list-sessions"], project, data).stdout
    assert "keep" in listing and "drop me" not in listing
    assert len(list((data / "sessions").iterdir())) == 1


def test_a_recording_that_cannot_be_written_stops_the_run_with_a_clear_error(project: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("not a directory")
    proc = run(headless("hi"), project, blocker)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert re.search(
        r"agentbus: cannot open recording .*/data/sessions/[0-9a-f-]+\.jsonl: (Not a directory|File exists); the session was stopped",
        proc.stderr,
    ), proc.stderr
