"""``run_shell_command`` through a ``TerminalAccess`` (the session's client runs the
command in its terminal, ACP ``terminal/*``): the same command line as our own shell,
the environment's changes only, and the same texts for the model from what the
terminal reports."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from actors.tools._base import OutputSink, TerminalRun, ToolEnv
from actors.tools._shell import ShellTool


class FakeTerminal:
    def __init__(self, run: TerminalRun, streamed: Sequence[str] = ()) -> None:
        self.run = run
        self.streamed = streamed
        self.asked: list[dict[str, Any]] = []

    async def run_in_terminal(
        self, *, call_id: str, command: str, args: Sequence[str], cwd: str, env: Mapping[str, str], output: OutputSink | None
    ) -> TerminalRun:
        self.asked.append({"call_id": call_id, "command": command, "args": list(args), "cwd": cwd, "env": dict(env)})
        for text in self.streamed:
            assert output is not None
            await output(text)
        return self.run


def env_with(tmp_path: Path, terminal: FakeTerminal) -> ToolEnv:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return attrs.evolve(ToolEnv(workspace=ws, project_temp_dir=tmp_path / "tmp", session_id="s"), terminal_access=terminal)


async def test_the_command_line_and_the_texts_are_our_shells(tmp_path: Path) -> None:
    terminal = FakeTerminal(TerminalRun(output="\x1b[31mout\x1b[0m\nerr\n", exit_code=3), streamed=("out\n",))
    env = env_with(tmp_path, terminal)
    live: list[str] = []

    async def sink(text: str) -> None:
        live.append(text)

    result = await ShellTool().execute({"command": "echo out; echo err >&2; exit 3"}, env, sink, call_id="c1")
    (asked,) = terminal.asked
    assert asked["call_id"] == "c1" and asked["cwd"] == str(env.workspace)
    assert asked["command"].endswith("bash") and asked["args"][0] == "-c"
    assert asked["args"][1].endswith("; echo out; echo err >&2; exit 3")  # the promptvars guard first
    assert asked["env"]["GEMINI_CLI"] == "1"
    assert all(os.environ.get(k) != v for k, v in asked["env"].items())  # changes only
    assert live == ["out\n"]
    assert result.error_type is None
    assert result.return_display == "out\nerr"
    assert "Output: out\nerr\nExit Code: 3" in str(result.llm_content)
    assert "Process Group PGID" not in str(result.llm_content)


@pytest.mark.parametrize(("signal", "number"), [("SIGTERM", 15), ("KILL", 9), ("9", 9), ("SIGNOPE", None)])
async def test_a_killed_terminal_reads_as_a_killed_command(tmp_path: Path, signal: str, number: int | None) -> None:
    env = env_with(tmp_path, FakeTerminal(TerminalRun(output="", signal=signal)))
    result = await ShellTool().execute({"command": "sleep 60"}, env, None, call_id="c1")
    if number is None:
        assert result.return_display == ""  # an unknown name: no number to report
    else:
        assert result.return_display == f"Command terminated by signal: {number}"
        assert f"Signal: {number}" in str(result.llm_content)


async def test_a_terminal_that_could_not_run_it_is_the_calls_error(tmp_path: Path) -> None:
    env = env_with(tmp_path, FakeTerminal(TerminalRun(error="The editor could not run the command: no shell")))
    result = await ShellTool().execute({"command": "echo hi"}, env, None, call_id="c1")
    assert result.error_type == "shell_execute_error"
    assert result.return_display == "Command failed: The editor could not run the command: no shell"
