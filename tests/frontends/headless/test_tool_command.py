"""``agentbus tool NAME --args JSON``: one tool, run as the user's call through a
session's scheduler, as a script would use it (real processes, real files)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from actors.recording import load_recording
from bus.messages import BatchSettled, ScheduleBatch, SessionClosed, ToolCallUpdated
from tests.frontends.daemon._procs import ends_within

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("remember the milk\n")
    return workspace


def env_for(ws: Path) -> dict[str, str]:
    home = ws.parent / "home"
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "GEMINI_CLI_HOME": str(home),
        "AGENTBUS_DATA_DIR": str(ws.parent / "data"),
        "PYTHONPATH": str(ROOT),
    }


def tool(ws: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actors.frontends", "tool", *args],
        cwd=ws,
        env=env_for(ws),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def write_settings(ws: Path, settings: dict[str, object]) -> None:
    path = ws / ".gemini" / "settings.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(settings))


def test_prints_the_result_as_text_and_records_the_users_call(ws: Path) -> None:
    done = tool(ws, "read_file", "--args", '{"file_path": "notes.txt"}')
    assert (done.returncode, done.stdout, done.stderr) == (0, "remember the milk\n", "")
    [recording] = (ws.parent / "data" / "sessions").glob("*.jsonl")
    messages = [env.message for env in load_recording(recording).envelopes]
    batch = next(m for m in messages if isinstance(m, ScheduleBatch))
    assert [(c.name, c.client_initiated) for c in batch.calls] == [("read_file", True)]
    assert [m.status for m in messages if isinstance(m, ToolCallUpdated)] == ["validating", "scheduled", "executing", "success"]
    assert isinstance(messages[-1], SessionClosed)


def test_json_output_is_one_document(ws: Path) -> None:
    done = tool(ws, "run_shell_command", "--args", '{"command": "echo out; exit 3"}', "-o", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["tool"] == "run_shell_command"
    assert doc["args"] == {"command": "echo out; exit 3"}
    assert doc["status"] == "success"
    assert doc["display"] == "out"
    assert "Exit Code: 3" in doc["llm_content"]
    assert doc["error"] is None
    assert isinstance(doc["duration_ms"], int) and doc["call_id"].startswith("run_shell_command__user_")
    assert set(doc) == {"session_id", "tool", "call_id", "args", "status", "llm_content", "display", "error", "duration_ms"}


def test_a_users_write_needs_no_approval_but_plan_mode_denies_it(ws: Path) -> None:
    args = '{"file_path": "new.txt", "content": "x\\n"}'
    denied = tool(ws, "write_file", "--args", args, "--approval-mode", "plan", "-o", "json")
    assert denied.returncode == 1
    assert json.loads(denied.stdout)["error"]["type"] == "policy_violation"
    assert not (ws / "new.txt").exists()
    written = tool(ws, "write_file", "--args", args)
    assert written.returncode == 0, written.stderr
    assert (ws / "new.txt").read_text() == "x\n"
    assert "+x" in written.stdout  # the edit's diff is what a user is shown


def test_a_call_that_would_ask_a_person_is_refused_with_the_non_interactive_wording(ws: Path) -> None:
    ask = f"{sys.executable} -c 'print(\"{{\\\"decision\\\": \\\"ask\\\"}}\")'"
    write_settings(ws, {"hooks": {"BeforeTool": [{"matcher": "read_file", "hooks": [{"type": "command", "command": ask}]}]}})
    done = tool(ws, "read_file", "--args", '{"file_path": "notes.txt"}')
    assert done.returncode == 1
    assert done.stderr == (
        'Tool execution for "ReadFile" requires user confirmation, which is not supported in non-interactive mode.\n'
    )
    assert done.stdout == ""


def test_a_tool_error_exits_1_with_its_message(ws: Path) -> None:
    done = tool(ws, "read_file", "--args", '{"file_path": "missing.txt"}')
    assert done.returncode == 1
    assert "missing.txt" in done.stderr and done.stdout == ""


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["read_fil", "--args", '{"file_path": "notes.txt"}'], 'Tool "read_fil" not found. Did you mean one of: "read_file"'),
        (["read_file", "--args", '{"file_path": '], "--args is not valid JSON: Expecting value (line 1, column 15)"),
        (["read_file", "--args", "[1]"], "--args must be a JSON object, not list"),
        (["read_file", "--args", '{"file_path": 3}'], "params/file_path must be string"),
        (["read_file"], "params must have required property 'file_path'"),
        (["read_file", "--args", '{"file_path": "/etc/hostname"}'], "Path not in workspace"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_42(ws: Path, argv: list[str], needle: str) -> None:
    done = tool(ws, *argv)
    assert done.returncode == 42, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("agentbus tool: ") and needle in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_bad_input_in_json_mode_still_prints_the_document(ws: Path) -> None:
    done = tool(ws, "nope", "-o", "json")
    assert done.returncode == 42
    assert json.loads(done.stdout)["error"]["type"] == "tool_not_registered"
    assert done.stderr.startswith('agentbus tool: Tool "nope" not found.')


def test_a_malformed_command_line_is_a_usage_error(ws: Path) -> None:
    assert tool(ws).returncode == 2
    assert tool(ws, "read_file", "-o", "yaml").returncode == 2


def test_arguments_can_come_from_stdin(ws: Path) -> None:
    done = tool(ws, "read_file", "--args", "-", stdin='{"file_path": "notes.txt"}')
    assert (done.returncode, done.stdout) == (0, "remember the milk\n")


def test_list_shows_each_tool_with_one_line(ws: Path) -> None:
    listed = tool(ws, "--list")
    assert listed.returncode == 0
    lines = dict(line.split(None, 1) for line in listed.stdout.splitlines())
    assert lines["read_file"] == "Returns the contents of one file."
    assert "run_shell_command" in lines
    as_json = json.loads(tool(ws, "--list", "-o", "json").stdout)
    read = next(t for t in as_json if t["name"] == "read_file")
    assert "file_path" in read["parameters"]["properties"]
    # The registry follows the approval mode: plan mode has no shell.
    assert "run_shell_command" not in tool(ws, "--list", "--approval-mode", "plan").stdout


def test_ctrl_c_cancels_the_call_and_kills_its_process_group(ws: Path) -> None:
    proc, sleeper = start_sleeper(ws, "")
    try:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert err == "Operation cancelled.\n"
    assert ends_within(sleeper, 5), "the command's process group outlived the cancel"
    [recording] = (ws.parent / "data" / "sessions").glob("*.jsonl")
    settled = [e.message for e in load_recording(recording).envelopes if isinstance(e.message, BatchSettled)]
    assert [c.status for c in settled[0].calls] == ["cancelled"]


def start_sleeper(ws: Path, prefix: str) -> tuple[subprocess.Popen[str], int]:
    """``agentbus tool run_shell_command`` with a background ``sleep 60``, once that runs:
    the process and the sleep's pid (which the command writes to a FIFO we wait on)."""
    fifo = ws.parent / "sleeper.pid"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    command = f"{prefix}sleep 60 & echo $! > {fifo}; wait"
    proc = subprocess.Popen(
        [sys.executable, "-m", "actors.frontends", "tool", "run_shell_command", "--args", json.dumps({"command": command})],
        cwd=ws,
        env=env_for(ws),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = b""
        deadline = time.monotonic() + 30
        while not line.endswith(b"\n"):
            ready, _, _ = select.select([reader], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                proc.kill()
                raise AssertionError("the command never started")
            line += os.read(reader, 64)
    finally:
        os.close(reader)
    return proc, int(line)


def test_a_second_ctrl_c_exits_at_once_and_still_kills_the_process_group(ws: Path) -> None:
    # A command that ignores SIGTERM: only the SIGKILL of the forced exit stops it.
    proc, sleeper = start_sleeper(ws, 'trap "" TERM; ')
    try:
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGINT)  # before the first cancel could kill anything
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert ends_within(sleeper, 5), "a forced exit left the command's process group running"
