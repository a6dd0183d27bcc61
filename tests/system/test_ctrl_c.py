"""Ctrl-C end to end with real processes: SIGINT during a running shell tool."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.frontends.daemon._helpers import alive

ROOT = Path(__file__).resolve().parents[2]


def fixture_running(tmp_path: Path, fifo: Path) -> Path:
    command = f"echo $$ > {fifo}; exec sleep 30"
    lines = [
        {"method": "generateContentStream", "response": [{"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": {"command": command}}}]}, "finishReason": "STOP"}]}]},
        {"method": "generateContentStream", "response": [{"candidates": [{"content": {"role": "model", "parts": [{"text": "done"}]}, "finishReason": "STOP"}]}]},
    ]
    path = tmp_path / "sleep.responses"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_during_a_tool_cancels_everything_and_exits_130(tmp_path: Path, sig: int) -> None:
    fifo = tmp_path / "tool.pid"
    os.mkfifo(fifo)
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [sys.executable, "-m", "actors.frontends", "-p", "go", "-m", "gemini-2.5-flash", "-y", "-o", "stream-json",
         "--fake-responses", str(fixture_running(tmp_path, fifo))],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GEMINI_API_KEY": "fake",
             "AGENTBUS_DATA_DIR": str(data), "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        tool_pid = int(fifo.read_text())  # blocks until the tool's shell has started
        sent = time.monotonic()
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=30)
        exited = time.monotonic()
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert not alive(tool_pid)
    assert exited - sent < 2.0  # clean-up is bounded
    last = json.loads(out.strip().splitlines()[-1])
    assert last["type"] == "result" and last["status"] == "error"
    assert last["error"] == {"type": "FatalCancellationError", "message": "Operation cancelled."}
    recording = next((data / "sessions").glob("*.jsonl"))
    types = [json.loads(line)["msg"]["type"] for line in recording.read_text().splitlines() if '"msg"' in line]
    ended = [json.loads(line)["msg"] for line in recording.read_text().splitlines() if '"TurnEnded"' in line]
    assert ended and ended[-1]["stop_reason"] == "cancelled"
    assert "TurnCancelAcknowledged" in types
