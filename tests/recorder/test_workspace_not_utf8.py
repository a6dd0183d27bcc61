"""A workspace whose own path is not UTF-8 (issue 17, defect 7): the recorder wrote its
meta line with the path's ``surrogateescape`` characters and failed, so no session
could run there. The path is written with JSON escapes that read back as the same
string, so the session lists and resumes in that directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from actors.recording import load_recording

ROOT = Path(__file__).resolve().parents[2]
HI = ROOT / "scenarios" / "bench" / "hi.responses"


def agentbus(cwd: bytes, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTBUS_DATA_DIR": str(home / "data"), "GEMINI_CLI_HOME": str(home), "HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "actors.frontends", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_session_runs_lists_and_resumes_in_a_workspace_whose_path_is_not_utf8(tmp_path: Path) -> None:
    workspace = os.fsencode(tmp_path) + b"/ws\xff-\xed\xa0\x80"
    os.mkdir(workspace)
    run = ["-m", "gemini-2.5-flash", "--fake-responses", str(HI)]
    first = agentbus(workspace, tmp_path, "-p", "hi", *run)
    assert first.returncode == 0, first.stderr
    assert "Hello" in first.stdout
    listed = agentbus(workspace, tmp_path, "--list-sessions")
    assert listed.returncode == 0 and "1. hi" in listed.stdout, listed.stdout + listed.stderr
    again = agentbus(workspace, tmp_path, "--resume", "latest", "-p", "again", *run)
    assert again.returncode == 0, again.stderr
    [path] = (tmp_path / "data" / "sessions").glob("*.jsonl")
    recording = load_recording(path)
    assert recording.meta["workspace"] == os.fsdecode(workspace)
    assert len(recording.segments) == 2
