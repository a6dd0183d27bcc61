"""The turn guards through the real command line: exit codes and printed warnings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TURN_LIMIT = (
    "Reached max session turns for this session. Increase the number of turns by specifying "
    "maxSessionTurns in settings.json."
)


def _call(name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    part = {"functionCall": {"name": name, "args": args}}
    return [{"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}]}]


def _fixture(path: Path, streams: list[list[dict[str, Any]]]) -> Path:
    path.write_text("".join(json.dumps({"method": "generateContentStream", "response": s}) + "\n" for s in streams))
    return path


def run(tmp_path: Path, settings: dict[str, Any], streams: list[list[dict[str, Any]]], fmt: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / ".gemini").mkdir(exist_ok=True)
    (tmp_path / ".gemini" / "settings.json").write_text(json.dumps(settings))
    fixture = _fixture(tmp_path / "f.responses", streams)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "GEMINI_CLI_HOME": str(tmp_path),
        "AGENTBUS_DATA_DIR": str(tmp_path / "data"),
        "GEMINI_API_KEY": "fake",
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        [sys.executable, "-m", "actors.frontends", "-m", "gemini-2.5-flash", "--fake-responses", str(fixture),
         "-p", "list it", "-o", fmt],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_max_session_turns_exits_53(tmp_path: Path) -> None:
    streams = [_call("list_directory", {"dir_path": "."}), _call("list_directory", {"dir_path": "."})]
    proc = run(tmp_path, {"model": {"maxSessionTurns": 1}}, streams, "text")
    assert proc.returncode == 53, proc.stderr
    assert f"{TURN_LIMIT}\n[ERROR] {TURN_LIMIT}\n" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_max_session_turns_stream_json_result(tmp_path: Path) -> None:
    streams = [_call("list_directory", {"dir_path": "."}), _call("list_directory", {"dir_path": "."})]
    proc = run(tmp_path, {"model": {"maxSessionTurns": 1}}, streams, "stream-json")
    assert proc.returncode == 53, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["status"] == "error"
    assert result["error"] == {"type": "FatalTurnLimitedError", "message": TURN_LIMIT}


def test_a_loop_exits_0_with_the_warning(tmp_path: Path) -> None:
    streams = [_call("list_directory", {"dir_path": "."}) for _ in range(6)]
    proc = run(tmp_path, {}, streams, "stream-json")
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    errors = [e for e in events if e["type"] == "error"]
    assert [(e["severity"], e["message"]) for e in errors] == [("warning", "Loop detected, stopping execution")]
    assert events[-1]["type"] == "result" and events[-1]["status"] == "success"
    assert sum(e["type"] == "tool_use" for e in events) == 4


def test_loop_detection_can_be_turned_off(tmp_path: Path) -> None:
    streams = [_call("list_directory", {"dir_path": "."}) for _ in range(6)]
    streams.append([{"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}]}])
    proc = run(tmp_path, {"model": {"disableLoopDetection": True}}, streams, "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["response"] == "ok"
    assert "warnings" not in doc
