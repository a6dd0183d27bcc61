"""``list_background_processes`` and ``read_background_output`` over real background calls."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from actors.tools._background import ListBackgroundProcessesTool, ReadBackgroundOutputTool
from actors.tools._base import ToolEnv
from actors.tools._shell import ShellTool
from actors.tools._shell_processes import BackgroundProcessRegistry

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups")


@pytest.fixture
async def registry() -> AsyncIterator[BackgroundProcessRegistry]:
    reg = BackgroundProcessRegistry()
    try:
        yield reg
    finally:
        await reg.kill()


def make_env(workspace: Path, session_id: str = "sess-1") -> ToolEnv:
    return ToolEnv(
        workspace=workspace,
        project_temp_dir=workspace.parent / "home" / ".gemini" / "tmp" / "ws",
        session_id=session_id,
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path.resolve() / "ws"
    ws.mkdir()
    return ws


async def start(registry: BackgroundProcessRegistry, env: ToolEnv, command: str) -> int:
    result = await ShellTool(background=registry).execute(
        {"command": command, "is_background": True, "delay_ms": 0}, env
    )
    assert result.data is not None
    pid = result.data["pid"]
    assert isinstance(pid, int)
    return pid


async def test_listing_says_what_runs_and_how_it_ended(
    workspace: Path, registry: BackgroundProcessRegistry
) -> None:
    env = make_env(workspace)
    listing = ListBackgroundProcessesTool(registry)
    assert (await listing.execute({}, env)).llm_content == "No background processes found."
    running = await start(registry, env, "sleep 30")
    ended = await start(registry, env, "exit 3")
    process = registry.entries()[1].process
    assert process is not None
    await process.wait()
    assert (await listing.execute({}, env)).llm_content == (
        f"- [PID {running}] RUNNING: `sleep 30`\n- [PID {ended}] EXITED: `exit 3` (Exit Code: 3)"
    )
    other = make_env(workspace, "another-session")
    assert (await listing.execute({}, other)).llm_content == "No background processes found."
    await registry.kill()
    assert (await listing.execute({}, env)).llm_content == "No background processes found."


async def test_reading_a_log_gives_its_last_lines(
    workspace: Path, registry: BackgroundProcessRegistry
) -> None:
    env = make_env(workspace)
    ready = workspace / "ready"
    os.mkfifo(ready)
    pid = await start(registry, env, "echo one; echo two; echo > ready; sleep 30")
    # The log has both lines once the command writes to the FIFO (no waiting on time).
    await trio.to_thread.run_sync(ready.read_text)
    reading = ReadBackgroundOutputTool(registry)
    whole = await reading.execute({"pid": pid}, env)
    assert whole.llm_content == whole.return_display == "Full Log Output:\none\ntwo"
    last = await reading.execute({"pid": pid, "lines": 1}, env)
    assert last.llm_content == "Showing last 1 of 2 lines:\ntwo"
    for unknown, in_env in ((pid + 1_000_000, env), (pid, make_env(workspace, "another"))):
        denied = await reading.execute({"pid": unknown}, in_env)
        assert denied.llm_content == (
            f"Access denied. Background process ID {unknown} not found in this session's "
            "history."
        )
        assert denied.error_type == "execution_failed"
