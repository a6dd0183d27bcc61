"""A call that did not run is never reported as a success (issue 17, defect 13).

Gemini CLI 0.61 blocks a *model's* shell command with command substitution (``$(…)``,
backticks, ``<(…)``) inside the shell tool and returns the block as an ordinary result,
so every front end shows it as a success. Here the block is the call's error on every
front end. A command the *user* typed (shell mode ``!`` in Gemini CLI, here the user's
own calls) is not guarded: Gemini CLI's shell mode runs ``echo $(date)``, so do ours.
Each front end is driven as a process, as a user or a script runs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from actors.recording import load_recording
from bus.messages import ToolCallUpdated
from tests.frontends.daemon._helpers import call_response, text_response, write_responses
from tests.frontends.daemon._procs import env_for

AGENTBUS = str(Path(sys.executable).with_name("agentbus"))
SUBSTITUTED = "echo $(echo substituted) > proof.txt"
BLOCKED = "Blocked: command substitution detected in shell command."


def workspace(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir(exist_ok=True)
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return ws


def run(tmp_path: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AGENTBUS, *args],
        cwd=workspace(tmp_path),
        env=env_for(tmp_path),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def model_substitutes(tmp_path: Path) -> Path:
    return write_responses(
        tmp_path / "substitutes.responses",
        call_response("run_shell_command", {"command": SUBSTITUTED}),
        text_response("Done."),
    )


def test_a_models_blocked_command_is_an_error_in_stream_json(tmp_path: Path) -> None:
    script = model_substitutes(tmp_path)
    done = run(tmp_path, "-p", "go", "-y", "-m", "gemini-2.5-flash", "--fake-responses", str(script), "-o", "stream-json")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    [result] = [e for e in events if e["type"] == "tool_result"]
    assert result["status"] == "error"
    assert result["error"]["message"].startswith("Command injection detected: command substitution syntax")
    assert result["output"] == BLOCKED
    assert not (tmp_path / "ws" / "proof.txt").exists()
    [recording] = (tmp_path / "data" / "sessions").glob("*.jsonl")
    updates = [e.message for e in load_recording(recording).envelopes if isinstance(e.message, ToolCallUpdated)]
    assert [u.status for u in updates] == ["validating", "scheduled", "executing", "error"]


def test_a_models_blocked_command_counts_as_failed_in_json(tmp_path: Path) -> None:
    script = model_substitutes(tmp_path)
    done = run(tmp_path, "-p", "go", "-y", "-m", "gemini-2.5-flash", "--fake-responses", str(script), "-o", "json")
    assert done.returncode == 0, done.stderr
    tools = json.loads(done.stdout)["stats"]["tools"]
    assert (tools["totalCalls"], tools["totalSuccess"], tools["totalFail"]) == (1, 0, 1)


def test_the_users_own_command_with_substitution_runs(tmp_path: Path) -> None:
    done = run(tmp_path, "tool", "run_shell_command", "--args", json.dumps({"command": "echo $(echo substituted)"}))
    assert (done.returncode, done.stdout, done.stderr) == (0, "substituted\n", "")


def _acp_frames(proc: subprocess.Popen[bytes], until: Any) -> list[dict[str, Any]]:
    assert proc.stdout is not None
    frames: list[dict[str, Any]] = []
    while not frames or not until(frames[-1]):
        line = proc.stdout.readline()
        assert line, f"the agent closed its output after {frames}"
        frames.append(json.loads(line))
    return frames


def test_acp_fails_the_models_blocked_call_and_runs_the_users_shell_command(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    script = model_substitutes(tmp_path)
    argv = [AGENTBUS, "acp", "-m", "gemini-2.5-flash", "-y", "--fake-responses", str(script)]
    with subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ws, env=env_for(tmp_path)
    ) as proc:
        assert proc.stdin is not None

        def send(frame_id: int, method: str, params: dict[str, Any]) -> list[dict[str, Any]]:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": frame_id, "method": method, "params": params}).encode() + b"\n")
            proc.stdin.flush()
            return _acp_frames(proc, lambda f: f.get("id") == frame_id)

        send(0, "initialize", {"protocolVersion": 1})
        sid = send(1, "session/new", {"cwd": str(ws), "mcpServers": []})[-1]["result"]["sessionId"]

        def final_status(frames: list[dict[str, Any]]) -> tuple[str, Any]:
            updates = [f["params"]["update"] for f in frames if f.get("method") == "session/update"]
            calls = [u for u in updates if u["sessionUpdate"] in ("tool_call", "tool_call_update") and "status" in u]
            return calls[-1]["status"], calls[-1].get("content")

        shell = send(2, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/shell echo $(echo mine)"}]})
        assert final_status(shell) == ("completed", [{"type": "content", "content": {"type": "text", "text": "mine"}}])
        model = send(3, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
        status, content = final_status(model)
        assert status == "failed"
        assert "Command injection detected: command substitution syntax" in json.dumps(content)
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
    assert not (ws / "proof.txt").exists()
