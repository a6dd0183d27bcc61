"""``run_shell_command`` with real subprocesses.

Expected texts were recorded from ``@google/gemini-cli@0.61.0`` (headless, yolo,
``GEMINI_PTY_INFO=child_process``) or taken from the conformance corpus; only paths and
PIDs are ours. No test sleeps: commands are short, or are killed by the code under test.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from actors.common import format_truncated_output
from actors.tools import _shell
from actors.tools._base import ToolEnv
from actors.tools._shell import SHELL_TOOLS, ShellTool
from actors.tools._shell_command import (
    INJECTION_DISPLAY,
    INJECTION_MESSAGE,
    detect_command_substitution,
    resolve_executable,
)
from actors.tools._shell_env import build_shell_env
from actors.tools._shell_output import read_log_output, user_cancelled_result
from actors.tools._shell_processes import BackgroundProcessRegistry, kill_background_processes
from actors.tools._untrusted import wrap_untrusted
from tests.conftest import SHARED

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups via /proc")

CALL_ID = "run_shell_command__run_shell_command_1795223355538_0"
BASH = resolve_executable("bash") or "bash"


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path.resolve() / "ws"
    ws.mkdir()
    return ws


def make_env(workspace: Path, **settings: Any) -> ToolEnv:
    return ToolEnv(
        workspace=workspace,
        project_temp_dir=workspace.parent / "home" / ".gemini" / "tmp" / "ws",
        session_id="sess-1",
        settings=settings,
    )


@pytest.fixture
def env(workspace: Path) -> ToolEnv:
    return make_env(workspace)


@pytest.fixture
async def registry() -> AsyncIterator[BackgroundProcessRegistry]:
    reg = BackgroundProcessRegistry()
    try:
        yield reg
    finally:
        await reg.kill()


@pytest.fixture
def tool(registry: BackgroundProcessRegistry) -> ShellTool:
    return ShellTool(background=registry)


def reap_group(pgid: int) -> None:
    """Reap (without blocking) the group's members that died as our children."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-pgid, os.WNOHANG)[0] > 0:
            pass


async def assert_group_gone(pgid: int, within: float = 10) -> None:
    """Reap the group's zombies; ``killpg(pgid, 0)`` must fail within ``within`` seconds
    (a bound against a hang only: how fast it goes is ``make bench``'s)."""
    deadline = time.monotonic() + within
    while True:
        reap_group(pgid)
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"process group {pgid} still alive after {within} s")
        await trio.lowlevel.checkpoint()


async def run(
    tool: ShellTool, env: ToolEnv, **args: Any
) -> tuple[dict[str, Any], int | None, list[str]]:
    """Execute; the result as a dict, the PGID reported, and the live output."""
    pids: list[int] = []
    live: list[str] = []

    async def sink(text: str) -> None:
        live.append(text)

    result = await tool.execute(args, env, sink, call_id=CALL_ID, on_pid=pids.append)
    as_dict = {
        "llm": result.llm_content,
        "display": result.return_display,
        "error_type": result.error_type,
        "error_message": result.error_message,
        "output_file": result.output_file,
        "data": json.loads(json.dumps(result.data)),
    }
    return as_dict, (pids[0] if pids else None), live


def read_text(path: str | Path) -> str:
    return Path(path).read_text(encoding="utf-8")


def wrapped(*lines: str) -> str:
    return "<untrusted_context>\n" + "\n".join(lines) + "\n</untrusted_context>"


# ---------------------------------------------------------------------------- contract


def test_declaration_matches_gemini_schema() -> None:
    (shell,) = SHELL_TOOLS
    assert isinstance(shell, ShellTool)
    assert (shell.name, shell.display_name, shell.kind) == ("run_shell_command", "Shell", "execute")
    decl = shell.declaration("gemini-2.5-flash")
    assert decl["name"] == "run_shell_command"
    schema = decl["parametersJsonSchema"]
    assert schema["required"] == ["command"]
    assert {k: v["type"] for k, v in schema["properties"].items()} == {
        "command": "string",
        "description": "string",
        "dir_path": "string",
        "is_background": "boolean",
        "delay_ms": "integer",
    }
    assert "bash -c <command>" in decl["description"]
    assert decl == shell.declaration("gemini-3-pro-preview")


def test_validate(workspace: Path, env: ToolEnv) -> None:
    shell = ShellTool()
    assert shell.validate({"command": "  \n"}, env) == "Command cannot be empty."
    assert shell.validate({"command": "ls"}, env) is None
    (workspace / "sub").mkdir()
    assert shell.validate({"command": "ls", "dir_path": "sub"}, env) is None
    assert shell.validate({"command": "ls", "dir_path": "missing"}, env) is None  # spawn fails
    outside = (
        'Path not in workspace: Attempted path "/etc" resolves outside the allowed workspace '
        f"directories: {workspace} or the project temp directory: {env.project_temp_dir}"
    )
    assert shell.validate({"command": "ls", "dir_path": "/etc"}, env) == outside
    blocked = shell.validate({"command": "ls", "dir_path": "node_modules"}, env)
    assert blocked is not None
    assert blocked.startswith(f'Path not in workspace: Attempted path "{workspace}/node_modules"')


def test_describe(env: ToolEnv) -> None:
    shell = ShellTool()
    assert shell.describe({"command": "ls -la", "description": "List"}, env) == "ls -la"
    long = "echo " + "a" * 160
    assert shell.describe({"command": long, "description": " short "}, env) == "short"
    assert shell.describe({"command": long}, env) == long


# ---------------------------------------------------------------------------- results


async def test_simple_command(tool: ShellTool, env: ToolEnv) -> None:
    # policy-headless-shell-allowed-policy
    result, pgid, live = await run(tool, env, command="echo POLICY_TEST_ECHO_COMMAND")
    assert result == {
        "llm": wrapped("Output: POLICY_TEST_ECHO_COMMAND", f"Process Group PGID: {pgid}"),
        "display": "POLICY_TEST_ECHO_COMMAND",
        "error_type": None,
        "error_message": None,
        "output_file": None,
        "data": None,
    }
    assert "".join(live) == "POLICY_TEST_ECHO_COMMAND\n"


async def test_empty_output(tool: ShellTool, env: ToolEnv) -> None:
    # user-policy-allowed-tools-toml: ``ls -F`` in an empty workspace
    result, pgid, _ = await run(tool, env, command="ls -F")
    assert result["llm"] == wrapped("Output: (empty)", f"Process Group PGID: {pgid}")
    assert result["display"] == ""


async def test_non_zero_exit_is_a_success_with_exit_code(tool: ShellTool, env: ToolEnv) -> None:
    result, pgid, _ = await run(tool, env, command="echo out; echo err >&2; exit 3")
    assert result["llm"] == wrapped(
        "Output: out\nerr", "Exit Code: 3", f"Process Group PGID: {pgid}"
    )
    assert result["display"] == "out\nerr"
    assert result["error_type"] is None
    assert result["data"] == {"exitCode": 3, "isError": True}

    result, pgid, _ = await run(tool, env, command="exit 3")
    assert result["llm"] == wrapped(
        "Output: (empty)", "Exit Code: 3", f"Process Group PGID: {pgid}"
    )
    assert result["display"] == "Command exited with code: 3"


async def test_signal(tool: ShellTool, env: ToolEnv) -> None:
    result, pgid, _ = await run(tool, env, command="echo before; kill -TERM $$")
    assert result["llm"] == wrapped("Output: before", "Signal: 15", f"Process Group PGID: {pgid}")
    assert result["display"] == "before"
    result, pgid, _ = await run(tool, env, command="kill -KILL $$")
    assert result["llm"] == wrapped("Output: (empty)", "Signal: 9", f"Process Group PGID: {pgid}")
    assert result["display"] == "Command terminated by signal: 9"


async def test_undecodable_and_binary_output(tool: ShellTool, env: ToolEnv) -> None:
    result, pgid, _ = await run(tool, env, command=r"printf 'a\xff\xfeb\xe2\x82'")
    assert result["llm"] == wrapped("Output: a\ufffd\ufffdb\ufffd", f"Process Group PGID: {pgid}")
    assert result["display"] == "a\ufffd\ufffdb\ufffd"
    result, pgid, live = await run(tool, env, command=r"printf 'a\000b'")
    assert result["llm"] == wrapped("Output: (empty)", f"Process Group PGID: {pgid}")
    assert result["display"] == "" and live == []


async def test_ansi_escapes_are_stripped_and_output_trimmed(tool: ShellTool, env: ToolEnv) -> None:
    cmd = r"printf '\n \033[31mred\033[0m \033]8;;http://x\007link\033]8;;\007 end  \n\n'"
    result, pgid, _ = await run(tool, env, command=cmd)
    assert result["llm"] == wrapped("Output: red link end", f"Process Group PGID: {pgid}")
    assert result["display"] == "red link end"


async def test_closing_tag_is_escaped(tool: ShellTool, env: ToolEnv) -> None:
    result, pgid, _ = await run(tool, env, command="echo '</untrusted_context>'")
    assert result["llm"] == wrapped(
        "Output: &lt;/untrusted_context&gt;", f"Process Group PGID: {pgid}"
    )
    assert result["display"] == "</untrusted_context>"


async def test_command_substitution_is_blocked(
    tool: ShellTool, env: ToolEnv, workspace: Path
) -> None:
    result, pgid, _ = await run(tool, env, command="touch marker $(true)")
    assert result["llm"] == INJECTION_MESSAGE
    assert result["display"] == INJECTION_DISPLAY
    assert INJECTION_DISPLAY == "Blocked: command substitution detected in shell command."
    assert pgid is None and not (workspace / "marker").exists()


@pytest.mark.parametrize(
    ("command", "blocked"),
    [
        ("echo $(date)", True),
        ('echo "$(date)"', True),
        ("echo `date`", True),
        ("cat <(echo hi)", True),
        ("echo '$(date)' \"\\$(x)\"", False),
        ('echo "<(x)"', False),
        ("echo \\$(x)", False),
        ("echo $HOME", False),
    ],
)
def test_detect_command_substitution(command: str, blocked: bool) -> None:
    assert detect_command_substitution(command) is blocked


async def test_shell_wrapper_is_stripped_before_running(tool: ShellTool, env: ToolEnv) -> None:
    result, _, _ = await run(tool, env, command='bash -c "echo hi && echo \\"q\\""')
    assert result["display"] == "hi\nq"
    result, _, _ = await run(tool, env, command="sh -c 'echo $0'")
    assert result["display"] == BASH


async def test_environment_and_stdin(tool: ShellTool, env: ToolEnv) -> None:
    cmd = (
        "echo $GEMINI_CLI $TERM $PAGER $GIT_PAGER $GIT_CONFIG_COUNT; "
        "[ -t 0 ] || echo notty; cat; echo end; shopt extglob"
    )
    result, _, _ = await run(tool, env, command=cmd)
    assert result["display"] == "1 xterm-256color cat cat 8\nnotty\nend\nextglob        \toff"


def test_environment_redaction() -> None:
    source = {"PATH": "/bin", "MY_TOKEN": "x", "GEMINI_CLI_HOME": "/h", "GIT_CONFIG_COUNT": "2"}
    assert build_shell_env(source)["MY_TOKEN"] == "x"
    redacted = build_shell_env(
        source, {"security": {"environmentVariableRedaction": {"enabled": True}}}
    )
    assert "MY_TOKEN" not in redacted
    assert redacted["GEMINI_CLI_HOME"] == "/h" and redacted["PATH"] == "/bin"
    assert redacted["GIT_CONFIG_KEY_2"] == "credential.helper"
    assert redacted["GIT_CONFIG_COUNT"] == "10"
    assert "MY_TOKEN" not in build_shell_env({**source, "GITHUB_SHA": "abc"})


async def test_dir_path(tool: ShellTool, env: ToolEnv, workspace: Path) -> None:
    (workspace / "sub").mkdir()
    result, _, _ = await run(tool, env, command="pwd", dir_path="sub")
    assert result["display"] == str(workspace / "sub")
    result, _, _ = await run(tool, env, command="pwd")
    assert result["display"] == str(workspace)


async def test_dir_path_outside_workspace(tool: ShellTool, env: ToolEnv) -> None:
    result, pgid, _ = await run(tool, env, command="pwd", dir_path="/etc")
    message = (
        'Path not in workspace: Attempted path "/etc" resolves outside the allowed workspace '
        f"directories: {env.workspace} or the project temp directory: {env.project_temp_dir}"
    )
    assert result["error_type"] == "path_not_in_workspace"
    assert result["error_message"] == result["llm"] == message
    assert result["display"] == "Path not in workspace."
    assert pgid is None


async def test_spawn_failure(tool: ShellTool, env: ToolEnv) -> None:
    result, pgid, _ = await run(tool, env, command="pwd", dir_path="missing")
    message = f"spawn {BASH} ENOENT"
    assert result["error_type"] == "shell_execute_error"
    assert result["error_message"] == message
    assert result["display"] == f"Command failed: {message}"
    assert result["llm"] == wrapped("Output: (empty)", f"Error: {message}", "Exit Code: 1")
    assert pgid is None


async def test_jobs_left_running_are_listed_and_tracked(
    tool: ShellTool, env: ToolEnv, registry: BackgroundProcessRegistry, subreaper: None
) -> None:
    result, pgid, _ = await run(tool, env, command="sleep 30 > /dev/null 2>&1 & echo started")
    assert pgid is not None
    (entry,) = registry.entries("sess-1")
    (job,) = entry.member_pids
    assert result["llm"] == wrapped(
        "Output: started", f"Background PIDs: {job}", f"Process Group PGID: {pgid}"
    )
    assert entry.pid == pgid and entry.is_running()
    assert await registry.kill("sess-1") == 1
    await assert_group_gone(pgid)
    assert registry.entries() == ()


# ---------------------------------------------------------------------------- live output


async def test_live_output_arrives_while_the_command_runs(
    tool: ShellTool, env: ToolEnv, subreaper: None
) -> None:
    """The sink sees the first line while the command still runs; cancelling kills it."""
    seen: list[str] = []
    pgid: list[int] = []

    with trio.CancelScope() as scope:

        async def sink(text: str) -> None:
            seen.append(text)
            if "\n" in "".join(seen):
                scope.cancel()

        await tool.execute(
            {"command": "echo $$; sleep 30"}, env, sink, call_id=CALL_ID, on_pid=pgid.append
        )
    assert scope.cancelled_caught
    assert "".join(seen) == f"{pgid[0]}\n"
    await assert_group_gone(pgid[0])


# ---------------------------------------------------------------------------- cancellation


@pytest.mark.parametrize(
    "command",
    [
        "echo $$; sleep 30",
        # Members that ignore SIGTERM get SIGKILL after the grace period.
        "trap '' TERM; echo $$; sleep 30 & sleep 30",
    ],
)
async def test_cancel_kills_the_whole_process_group(
    tool: ShellTool, env: ToolEnv, subreaper: None, command: str
) -> None:
    started = trio.Event()
    pgids: list[int] = []

    async def sink(text: str) -> None:
        pgids.append(int(text.split()[0]))
        started.set()

    async with trio.open_nursery() as nursery:

        async def call() -> None:
            await tool.execute({"command": command}, env, sink, call_id=CALL_ID)
            pytest.fail("the call returned instead of being cancelled")

        nursery.start_soon(call)
        await started.wait()
        os.killpg(pgids[0], 0)  # running
        nursery.cancel_scope.cancel()
    await assert_group_gone(pgids[0])


async def test_user_cancelled_result() -> None:
    result = user_cancelled_result("\x1b[1mpartial\x1b[0m\n")
    assert result.llm_content == wrap_untrusted(
        "Command was cancelled by user before it could complete. "
        "Below is the output before it was cancelled:\npartial"
    )
    assert result.return_display == (
        "Command cancelled by user.\n\nOutput before cancellation:\npartial"
    )
    assert user_cancelled_result("  ").llm_content == wrap_untrusted(
        "Command was cancelled by user before it could complete. "
        "There was no output before it was cancelled."
    )


# ---------------------------------------------------------------------------- inactivity timeout


async def test_inactivity_timeout(workspace: Path, tool: ShellTool, subreaper: None) -> None:
    env = make_env(workspace, tools={"shell": {"inactivityTimeout": 0.2}})
    result, pgid, _ = await run(tool, env, command="sleep 5")
    message = (
        "Command was automatically cancelled because it exceeded the timeout of 0.0 minutes "
        "without output."
    )
    assert result["llm"] == wrapped(f"{message} There was no output before it was cancelled.")
    assert result["display"] == message
    assert result["error_type"] is None
    assert pgid is not None
    await assert_group_gone(pgid)

    result, _, _ = await run(tool, env, command="echo partial; sleep 5")
    assert result["llm"] == wrapped(
        f"{message} Below is the output before it was cancelled:\npartial"
    )
    assert result["display"] == f"{message}\n\nOutput before cancellation:\npartial"


async def test_output_resets_the_inactivity_timer(workspace: Path, tool: ShellTool) -> None:
    env = make_env(workspace, tools={"shell": {"inactivityTimeout": 0.4}})
    cmd = "for i in 1 2 3 4 5 6; do echo $i; sleep 0.1; done"
    result, pgid, _ = await run(tool, env, command=cmd)
    assert result["llm"] == wrapped("Output: 1\n2\n3\n4\n5\n6", f"Process Group PGID: {pgid}")


async def test_default_inactivity_timeout_is_five_minutes(
    mock_clock: trio.testing.MockClock, tool: ShellTool, env: ToolEnv, subreaper: None
) -> None:
    # Virtual time: the clock jumps whenever every task has waited 0.1 s of real time.
    mock_clock.autojump_threshold = 0.1
    start = trio.current_time()
    result, pgid, _ = await run(tool, env, command="sleep 30")
    assert trio.current_time() - start >= 300
    assert result["display"] == (
        "Command was automatically cancelled because it exceeded the timeout of 5.0 minutes "
        "without output."
    )
    assert pgid is not None
    await assert_group_gone(pgid)


async def test_inactivity_timeout_zero_disables(workspace: Path, tool: ShellTool) -> None:
    env = make_env(workspace, tools={"shell": {"inactivityTimeout": 0}})
    result, _, _ = await run(tool, env, command="sleep 0.3; echo done")
    assert result["display"] == "done"


# ---------------------------------------------------------------------------- background


async def test_background_call_returns_and_leaves_the_process_running(
    tool: ShellTool, env: ToolEnv, registry: BackgroundProcessRegistry, subreaper: None
) -> None:
    # shell-background-headless-turn1
    result, pgid, live = await run(
        tool, env, command="echo hello-from-background; sleep 30", is_background=True
    )
    text = f"Command moved to background (PID: {pgid}). Output hidden. Press Ctrl+B to view."
    assert result["llm"] == wrapped(text)
    assert result["display"] == text
    assert result["data"] == {
        "pid": pgid,
        "command": "echo hello-from-background; sleep 30",
        "initialOutput": "hello-from-background",
    }
    assert live == []
    assert pgid is not None
    os.killpg(pgid, 0)  # still running after the call returned
    (entry,) = registry.entries("sess-1")
    assert entry.pid == pgid and entry.is_running()
    assert entry.log_path == env.project_temp_dir.parent / (
        f"background-processes/background-{pgid}.log"
    )
    assert entry.log_path.read_text() == "hello-from-background\n"
    assert await kill_background_processes("other-session", registry=registry) == 0
    assert await kill_background_processes("sess-1", registry=registry) == 1
    await assert_group_gone(pgid)


async def test_a_background_calls_log_is_read_off_the_event_loop(
    tool: ShellTool, env: ToolEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Up to 16 MiB of log; it was read in the executor's trio task.
    threads: list[threading.Thread] = []

    def recording(path: Path) -> str:
        threads.append(threading.current_thread())
        return read_log_output(path)

    monkeypatch.setattr(_shell, "read_log_output", recording)
    result, _, _ = await run(tool, env, command="echo hi", is_background=True, delay_ms=300)
    assert result["data"]["initialOutput"] == "hi"
    assert threads and threads[0] is not threading.main_thread()


async def test_background_call_that_finishes_quickly(
    tool: ShellTool, env: ToolEnv, registry: BackgroundProcessRegistry
) -> None:
    result, pgid, _ = await run(tool, env, command="echo hi", is_background=True, delay_ms=300)
    assert result["display"] == (
        f"Command moved to background (PID: {pgid}). Output hidden. Press Ctrl+B to view."
    )
    assert result["data"]["initialOutput"] == "hi"
    (entry,) = registry.entries()
    assert not entry.is_running()
    assert await registry.kill() == 0


async def test_background_spawn_failure(tool: ShellTool, env: ToolEnv) -> None:
    result, pgid, _ = await run(tool, env, command="ls", dir_path="missing", is_background=True)
    text = "Command moved to background (PID: undefined). Output hidden. Press Ctrl+B to view."
    assert result["display"] == text and result["llm"] == wrapped(text)
    assert result["error_type"] == "shell_execute_error"
    assert result["error_message"] == f"spawn {BASH} ENOENT"
    assert pgid is None


async def test_cancelling_during_the_background_delay_kills_it(
    tool: ShellTool, env: ToolEnv, registry: BackgroundProcessRegistry, subreaper: None
) -> None:
    pgids: list[int] = []
    with trio.CancelScope() as scope:

        def on_pid(pid: int) -> None:
            pgids.append(pid)
            scope.cancel()

        await tool.execute(
            {"command": "sleep 30", "is_background": True, "delay_ms": 60_000},
            env,
            call_id=CALL_ID,
            on_pid=on_pid,
        )
    assert scope.cancelled_caught
    await assert_group_gone(pgids[0])
    assert registry.entries() == ()


# ---------------------------------------------------------------------------- truncation


async def test_large_output_is_truncated_like_gemini(workspace: Path, tool: ShellTool) -> None:
    # Recorded from gemini 0.61 with tools.truncateToolOutputThreshold = 50.
    env = make_env(workspace, tools={"truncateToolOutputThreshold": 50})
    command = "python3 -c \"print('x'*100 + '\\U0001F600'*10)\""
    result, pgid, _ = await run(tool, env, command=command)
    path = env.project_temp_dir / "tool-outputs" / "session-sess-1" / f"{CALL_ID}.txt"
    assert result["output_file"] == str(path)
    output = "x" * 100 + "\U0001f600" * 10
    full = wrapped(f"Output: {output}", f"Process Group PGID: {pgid}")
    # Gemini's recording had a 5-digit PGID: "s Group PGID: 18096\n</untrusted_context>".
    omitted = 145 + len(str(pgid)) - 5
    assert result["llm"] == (
        "Output too large. Showing first 10 and last 40 characters. For full output see: "
        f"{path}\n<untrusted\n\n... [{omitted} characters omitted] ...\n\n{full[-40:]}"
    )
    assert result["display"] == output
    assert path.read_text() == full


async def test_the_truncated_outputs_file_is_written_off_the_event_loop(
    workspace: Path, tool: ShellTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Up to 16 M characters go to that file; it was written in the executor's trio task.
    threads: list[threading.Thread] = []

    class Recording(_shell.TruncatingWriter):
        def write(self, text: str) -> None:
            threads.append(threading.current_thread())
            super().write(text)

    monkeypatch.setattr(_shell, "TruncatingWriter", Recording)
    env = make_env(workspace, tools={"truncateToolOutputThreshold": 50})
    result, _, _ = await run(tool, env, command="yes | head -n 3000")
    assert result["output_file"] is not None
    assert threads and threading.main_thread() not in threads


async def test_truncation_disabled(workspace: Path, tool: ShellTool) -> None:
    env = make_env(workspace, tools={"truncateToolOutputThreshold": 0})
    result, pgid, _ = await run(tool, env, command="yes | head -n 30000")
    assert result["output_file"] is None
    assert result["llm"] == wrapped(
        "Output: " + "y\n" * 29_999 + "y", f"Process Group PGID: {pgid}"
    )


async def test_perf_high_volume_shell_golden(workspace: Path, tool: ShellTool) -> None:
    session = SHARED / "conformance/scenarios/perf-high-volume-shell/expected/session.json"
    if not session.exists():
        pytest.skip("conformance corpus not available")
    (call,) = [
        c for m in json.loads(session.read_text())["messages"] for c in m.get("toolCalls", [])
    ]
    env = ToolEnv(
        workspace=workspace,
        project_temp_dir=workspace.parent / "project_tmp",
        session_id="61b39fcf-41bf-413e-9977-0a21e553b759",
    )
    result = await tool.execute(call["args"], env, call_id=call["id"])
    expected = call["result"][0]["functionResponse"]["response"]["output"]
    got = result.llm_content.replace(str(env.project_temp_dir), "{project_tmp}")
    pgid = got.rsplit("Process Group PGID: ", 1)[1].split("\n", 1)[0]
    full = wrapped("Output: " + "y\n" * 999_999 + "y", f"Process Group PGID: {pgid}")
    assert result.output_file is not None
    assert read_text(result.output_file) == full
    assert result.llm_content == format_truncated_output(full, result.output_file, 40_000)
    if len(pgid) == 5:  # the recording's PGID had 5 digits: then it is the same text
        assert got == expected.replace("PGID: 18155", f"PGID: {pgid}")
    assert result.return_display == call["resultDisplay"]


async def test_output_beyond_16_mib_keeps_the_tail(workspace: Path, tool: ShellTool) -> None:
    env = make_env(workspace)
    cmd = "printf 'HEAD'; head -c 17000000 /dev/zero | tr '\\0' 'a'; printf 'TAIL'"
    result, _, _ = await run(tool, env, command=cmd)
    warning = "\n[GEMINI_CLI_WARNING: Output truncated. The buffer is limited to 16MB.]"
    display = result["display"]
    assert display == "a" * (16 * 1024 * 1024 - 4) + "TAIL" + warning
    assert result["output_file"] is not None
    assert result["llm"].endswith(
        f"{warning}\nProcess Group PGID: {_pgid_of(result)}\n</untrusted_context>"
    )


def _pgid_of(result: dict[str, Any]) -> str:
    return str(result["llm"]).rsplit("Process Group PGID: ", 1)[1].split("\n", 1)[0]
