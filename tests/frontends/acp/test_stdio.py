"""``agentbus acp`` as a process: bad input on stdin, end of input, SIGTERM mid-turn."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ._client import call_chunks, fake_responses, text_chunks


def _spawn(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "HOME": str(tmp_path), "GEMINI_CLI_HOME": str(tmp_path), "AGENTBUS_DATA_DIR": str(tmp_path / "data")}
    return subprocess.Popen(
        [sys.executable, "-m", "actors.frontends", "acp", "-m", "gemini-2.5-flash", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
        env=env,
    )


def _send(proc: subprocess.Popen[bytes], frame: dict[str, Any] | bytes) -> None:
    assert proc.stdin is not None
    proc.stdin.write(frame if isinstance(frame, bytes) else json.dumps(frame).encode() + b"\n")
    proc.stdin.flush()


def _read_until(proc: subprocess.Popen[bytes], done: Any) -> list[dict[str, Any]]:
    assert proc.stdout is not None
    frames = []
    while True:
        line = proc.stdout.readline()
        assert line, f"the agent closed its output after {frames}"
        frames.append(json.loads(line))
        if done(frames[-1]):
            return frames


def test_bad_input_is_answered_and_end_of_input_exits_cleanly(tmp_path: Path) -> None:
    with _spawn(tmp_path) as proc:
        _send(proc, b"garbage\n")
        _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "no/such"})
        _send(proc, {"jsonrpc": "2.0", "id": 3, "method": "session/list", "params": {}})
        frames = _read_until(proc, lambda f: f.get("id") == 3)
        by_id = {f.get("id"): f for f in frames}
        assert by_id[None]["error"]["code"] == -32700
        assert by_id[1]["result"]["protocolVersion"] == 1
        assert by_id[2]["error"]["code"] == -32601
        assert by_id[3]["result"] == {"sessions": []}
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0


def test_sigterm_mid_turn_cancels_records_and_exits_within_two_seconds(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    script = fake_responses(
        tmp_path / "sleep.jsonl",
        call_chunks(("run_shell_command", {"command": "sleep 60", "description": "wait"})),
        text_chunks("never"),
    )
    with _spawn(tmp_path, "-y", "--fake-responses", str(script)) as proc:
        _send(proc, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
        _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(ws), "mcpServers": []}})
        sid = _read_until(proc, lambda f: f.get("id") == 1)[-1]["result"]["sessionId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "wait"}]}
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt})
        _read_until(proc, lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate") == "tool_call")
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        frames = _read_until(proc, lambda f: f.get("id") == 2)
        assert frames[-1]["result"] == {"stopReason": "cancelled"}
        assert proc.wait(timeout=10) == 0
        assert time.monotonic() - start < 2.0
    recording = (tmp_path / "data" / "sessions" / f"{sid}.jsonl").read_text().splitlines()
    messages = [json.loads(line).get("msg", {}) for line in recording]
    ended = [m for m in messages if m.get("type") == "TurnEnded"]
    assert [m["stop_reason"] for m in ended] == ["cancelled"]
    assert messages[-1] == {"type": "SessionClosed", "session_id": sid, "reason": "agentbus acp stopped by a signal"}
