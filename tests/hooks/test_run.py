"""One command hook with real subprocesses: protocol, exit codes, failures, killing.

Expectations follow ``hookRunner.ts`` (and the conformance corpus where it has the
case). No test sleeps: hooks are short, or are killed by the code under test.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.hooks import CommandHook, parse_hook_output, run_command_hook
from actors.hooks._run import expand_command
from tests.frontends.daemon._procs import ends_within

from ._helpers import ENV, group_alive, py

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups via /proc")


def hook(command: str, **extra: Any) -> CommandHook:
    return CommandHook(command=command, **extra)


async def run(command: str, tmp_path: Path, *, hook_input: dict[str, Any] | None = None, **extra: Any) -> Any:
    base = {"session_id": "sess-1", "cwd": str(tmp_path), "hook_event_name": "BeforeTool"}
    return await run_command_hook(hook(command, **extra), {**base, **(hook_input or {})}, base_env=ENV)


# ---------------------------------------------------------------------------- exit codes


@pytest.mark.parametrize(
    ("script", "output", "success", "exit_code"),
    [
        ("echo 'all good'", {"decision": "allow", "systemMessage": "all good"}, True, 0),
        ("echo 'careful'; exit 1", {"decision": "allow", "systemMessage": "Warning: careful"}, False, 1),
        ("echo 'no way'; exit 2", {"decision": "deny", "reason": "no way"}, False, 2),
        ("echo 'odd'; exit 3", {"decision": "deny", "reason": "odd"}, False, 3),
        # exit 2: stdout first, stderr only when stdout is blank
        ("echo out; echo err >&2; exit 2", {"decision": "deny", "reason": "out"}, False, 2),
        ("echo '  ' ; echo 'from stderr' >&2; exit 2", {"decision": "deny", "reason": "from stderr"}, False, 2),
        # JSON wins whatever the exit code (hooks-block-tool-exit2-stderr)
        ("""printf '{"decision":"deny","reason":"File writing blocked"}' >&2; exit 2""", {"decision": "deny", "reason": "File writing blocked"}, False, 2),
        ("""echo '{"decision":"allow"}'; exit 7""", {"decision": "allow"}, False, 7),
        # a JSON string holding JSON is parsed twice
        ("""echo '"{\\"decision\\":\\"block\\"}"'""", {"decision": "block"}, True, 0),
        # a JSON string holding text is text
        ("""echo '"hello"'""", {"decision": "allow", "systemMessage": '"hello"'}, True, 0),
        # garbage: text, including a JSON line after other text (hooks-mixed-stdout-allows)
        ("""echo Pollution; echo '{"decision":"deny","reason":"Should be ignored"}'""", {"decision": "allow", "systemMessage": 'Pollution\n{"decision":"deny","reason":"Should be ignored"}'}, True, 0),
        ("printf '\\x00\\xff\\xfe garbage {'", {"decision": "allow", "systemMessage": "\x00\ufffd\ufffd garbage {"}, True, 0),
        # JSON scalars and no output answer nothing
        ("echo 42", None, True, 0),
        ("echo null", None, True, 0),
        ("true", None, True, 0),
        ("exit 1", None, False, 1),  # hooks-error-handling: fails, answers nothing
        ("echo NaN", {"decision": "allow", "systemMessage": "NaN"}, True, 0),
        ("echo '[1, 2]'", [1, 2], True, 0),
    ],
)
async def test_exit_codes_and_output_parsing(
    tmp_path: Path, script: str, output: Any, success: bool, exit_code: int
) -> None:
    result = await run(script, tmp_path)
    assert result.output == output
    assert result.success is success
    assert result.exit_code == exit_code
    assert result.error is None


def test_parse_rules_without_processes() -> None:
    assert parse_hook_output("\ufeff {\"a\": 1} \u00a0", "", 0) == ({"a": 1}, "json")  # JS trim
    assert parse_hook_output("", "oops", 1) == ({"decision": "allow", "systemMessage": "Warning: oops"}, "text")
    assert parse_hook_output("x", "", None) == ({"decision": "allow", "systemMessage": "x"}, "text")  # signal: exitCode || 0
    assert parse_hook_output("Infinity", "", 0)[1] == "text"
    # Nesting no message can carry (issue 17): text, not a hook runner that dies.
    for depth in (200, 100_000):
        assert parse_hook_output("[" * depth + "]" * depth, "", 0)[1] == "text"


async def test_missing_executable_denies_as_gemini_does(tmp_path: Path) -> None:
    # bash exits 127 with "command not found" on stderr: plain text, exit != 0/1 -> deny.
    result = await run("definitely-not-a-command-xyz --flag", tmp_path)
    assert result.exit_code == 127 and not result.success
    assert result.output == {
        "decision": "deny",
        "reason": "bash: line 1: definitely-not-a-command-xyz: command not found",
    }


async def test_spawn_failure_is_a_failure_without_output(tmp_path: Path) -> None:
    result = await run_command_hook(hook("true"), {"cwd": str(tmp_path / "missing")}, base_env=ENV)
    assert not result.success and result.output is None and result.exit_code is None
    assert result.error == "spawn bash ENOENT"
    result = await run_command_hook(
        hook("true"), {"cwd": str(tmp_path)}, base_env=ENV, executable=str(tmp_path / "no-bash")
    )
    assert result.error == f"spawn {tmp_path / 'no-bash'} ENOENT"


# ---------------------------------------------------------------------------- protocol


async def test_stdin_gets_the_input_as_compact_json_then_eof(tmp_path: Path) -> None:
    hook_input = {"tool_input": {"content": "héllo ✓", "n": 1.0, "x": [1.5, None]}}
    result = await run("cat > got.json", tmp_path, hook_input=hook_input)
    assert result.success
    raw = (tmp_path / "got.json").read_text(encoding="utf-8")
    assert raw == (
        '{"session_id":"sess-1","cwd":"' + str(tmp_path) + '","hook_event_name":"BeforeTool",'
        '"tool_input":{"content":"héllo ✓","n":1,"x":[1.5,null]}}'
    )


async def test_large_input_to_a_hook_that_never_reads_it(tmp_path: Path) -> None:
    result = await run("echo done", tmp_path, hook_input={"big": "x" * 2_000_000})
    assert result.output == {"decision": "allow", "systemMessage": "done"}


async def test_environment_and_command_expansion(tmp_path: Path) -> None:
    ws = tmp_path / "my ws"
    ws.mkdir()
    command = py(
        "import os, sys, json; print(json.dumps({'argv': sys.argv[1:], 'env': {k: os.environ.get(k) for k in "
        "['GEMINI_PROJECT_DIR','GEMINI_PLANS_DIR','GEMINI_CWD','GEMINI_SESSION_ID','CLAUDE_PROJECT_DIR','MINE','HOME']}, "
        "'cwd': os.getcwd()}))"
    ) + " $GEMINI_PROJECT_DIR $GEMINI_CWD $GEMINI_SESSION_ID $CLAUDE_PROJECT_DIR $GEMINI_PLANS_DIR \"${GEMINI_CWD}\""
    result = await run_command_hook(
        hook(command, env={"MINE": "yes", "HOME": "/elsewhere"}),
        {"session_id": "s 1", "cwd": str(ws)},
        base_env=ENV,
        plans_dir="/tmp/plans dir",
    )
    assert result.success, result
    got = result.output
    # Substituted tokens are quoted, so paths with spaces stay one argument; ${GEMINI_CWD}
    # is not a token (Gemini's regex needs "$G") and bash expands it from the environment.
    assert got["argv"] == [str(ws), str(ws), "s 1", str(ws), "/tmp/plans dir", str(ws)]
    assert got["env"] == {
        "GEMINI_PROJECT_DIR": str(ws),
        "GEMINI_PLANS_DIR": "/tmp/plans dir",
        "GEMINI_CWD": str(ws),
        "GEMINI_SESSION_ID": "s 1",
        "CLAUDE_PROJECT_DIR": str(ws),
        "MINE": "yes",
        "HOME": "/elsewhere",  # the hook's env comes last
    }
    assert got["cwd"] == str(ws)


def test_expand_command_order_and_empty_values() -> None:
    assert expand_command("a $GEMINI_PLANS_DIR b", cwd="/w", plans_dir="", session_id="s") == "a  b"
    assert expand_command("$GEMINI_CWDX", cwd="/w", plans_dir="", session_id="s") == "/wX"


def test_expand_command_quotes_as_gemini_does() -> None:
    # escapeShellArg's quirks reach the hook's command as in Gemini (tests/common has
    # the quoting itself): a ' with a ! is double-quoted with \!, a ~ stays bare.
    assert expand_command("cd $GEMINI_CWD", cwd="/w/it's!", plans_dir="", session_id="s") == (
        'cd "/w/it\'s\\!"'
    )
    assert expand_command("$GEMINI_PLANS_DIR", cwd="/w", plans_dir="~p", session_id="") == "~p"


# ---------------------------------------------------------------------------- limits


async def test_hanging_hook_is_killed_at_its_timeout(tmp_path: Path) -> None:
    started = trio.current_time()
    result = await run("echo $$ > pid; echo partial; sleep 30", tmp_path, timeout_ms=300)
    elapsed = trio.current_time() - started
    assert 0.3 <= elapsed < 2.0
    assert not result.success and result.output is None and result.exit_code is None
    assert result.error == "Hook timed out after 300ms"
    assert result.stdout == "partial\n"
    assert not group_alive(int((tmp_path / "pid").read_text()))


async def test_timeout_escalates_to_sigkill_after_the_grace(tmp_path: Path) -> None:
    started = trio.current_time()
    result = await run_command_hook(
        hook("trap '' TERM; echo $$ > pid; while :; do sleep 0.05; done", timeout_ms=200),
        {"cwd": str(tmp_path)},
        base_env=ENV,
        kill_grace_s=0.3,
    )
    assert 0.5 <= trio.current_time() - started < 2.5
    assert result.error == "Hook timed out after 200ms"
    assert not group_alive(int((tmp_path / "pid").read_text()))


async def test_huge_stdout_under_the_cap_is_used(tmp_path: Path) -> None:
    result = await run("head -c 3000000 /dev/zero | tr '\\0' x", tmp_path)
    assert result.success and result.output == {"decision": "allow", "systemMessage": "x" * 3_000_000}


async def test_stdout_over_the_cap_is_drained_and_reported(tmp_path: Path) -> None:
    result = await run_command_hook(
        hook("head -c 5000000 /dev/zero | tr '\\0' x; echo finished >&2"),
        {"cwd": str(tmp_path)},
        base_env=ENV,
        max_output_bytes=1024 * 1024,
    )
    assert not result.success and result.output is None and result.exit_code == 0
    assert result.error == (
        "Hook output exceeded 1 MiB on stdout; 3951424 bytes were discarded and the output was not used"
    )
    assert len(result.stdout) == 1024 * 1024 and result.stderr == "finished\n"


async def test_cancellation_kills_the_process_group_and_reraises(tmp_path: Path, pid_pipe: Any) -> None:
    pids = pid_pipe(tmp_path / "pid")
    with trio.move_on_after(5) as outer:
        async with trio.open_nursery() as nursery:

            async def cancel_when_started() -> None:
                await pids.wait()
                nursery.cancel_scope.cancel(reason="test")

            nursery.start_soon(cancel_when_started)
            await run("echo $$ > pid; sleep 30 & sleep 30; wait", tmp_path)
            pytest.fail("run_command_hook returned instead of raising Cancelled")
    assert not outer.cancelled_caught
    assert not group_alive(pids.pids[0])


async def test_a_timeout_kills_children_that_left_the_process_group(tmp_path: Path) -> None:
    # setsid takes a child out of the hook's process group; the shell tool killed such
    # descendants too, the hook runner left them running.
    result = await run("setsid sleep 30 & echo $! > escaped; sleep 30", tmp_path, timeout_ms=300)
    assert result.error == "Hook timed out after 300ms"
    escaped = int((tmp_path / "escaped").read_text())
    try:
        assert ends_within(escaped, 10)  # against a hang only: its pidfd says when it ends
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(escaped, signal.SIGKILL)


async def test_background_child_holding_stdout_delays_close_until_timeout(tmp_path: Path) -> None:
    # Gemini waits for 'close' (pipes at EOF), so a leftover writer keeps the hook open.
    result = await run("echo $$ > pid; sleep 30 & echo ok", tmp_path, timeout_ms=300)
    assert result.error == "Hook timed out after 300ms"
    assert not group_alive(int((tmp_path / "pid").read_text()))


async def test_background_child_with_redirected_output_is_left_alone(tmp_path: Path) -> None:
    # Gemini does not kill what a hook left running once its pipes closed; neither do we.
    result = await run("sleep 30 >/dev/null 2>&1 </dev/null & echo $! > bg; echo ok", tmp_path)
    bg = int((tmp_path / "bg").read_text())
    try:
        assert result.success and result.output == {"decision": "allow", "systemMessage": "ok"}
        os.kill(bg, 0)
    finally:
        os.kill(bg, 9)


async def test_corpus_style_node_hook(tmp_path: Path) -> None:
    node = __import__("shutil").which("node")
    if node is None:
        pytest.skip("node is not on PATH (the corpus hook scripts are Node programs)")
    (tmp_path / "h.cjs").write_text(
        "const input = JSON.parse(require('fs').readFileSync(0, 'utf-8'));\n"
        "console.log(JSON.stringify({decision: 'allow', hookSpecificOutput: {hookEventName: input.hook_event_name, tool_input: {seen: input.tool_name}}}));"
    )
    result = await run(f'node "{tmp_path}/h.cjs"', tmp_path, hook_input={"tool_name": "write_file"})
    assert result.output == {
        "decision": "allow",
        "hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input": {"seen": "write_file"}},
    }
    assert json.loads(result.stdout) == result.output
