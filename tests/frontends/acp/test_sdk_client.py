"""The official ACP Python SDK's client side (``agent-client-protocol``, import ``acp``)
driving real ``agentbus acp`` processes: a session whose agent process is killed in the
middle of a turn is loaded (and resumed) by a new process and goes on — Gemini CLI's
``session/load`` of such a session fails — and the schema's stable session methods
work through the SDK's own calls. (The SDK is asyncio: these tests run it with
``asyncio.run``; only the gateway's bridge may use asyncio in the project itself.)"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ._client import call_chunks, fake_responses, text_chunks

acp = pytest.importorskip("acp", reason="the ACP Python SDK is missing: pip install -e '.[test]'")
schema = pytest.importorskip("acp.schema")

MODEL = "gemini-2.5-flash"
TIMEOUT_S = 60


class Editor:
    """An ACP client as an editor is one: it shows every update and allows every call."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.seen = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        self.seen.set()

    async def request_permission(self, options: Any, session_id: str, tool_call: Any, **kwargs: Any) -> Any:
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(option_id="proceed_once", outcome="selected")
        )

    async def wait_for(self, found: Any) -> Any:
        while True:
            for update in self.updates:
                if found(update):
                    return update
            self.seen.clear()
            await self.seen.wait()

    def kinds(self) -> list[str]:
        return [u.session_update for u in self.updates]


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_MODEL", "XDG_DATA_HOME")}
    env.update(HOME=str(home), GEMINI_CLI_HOME=str(home), AGENTBUS_DATA_DIR=str(home / "data"))
    return env


@contextlib.asynccontextmanager
async def agent(editor: Editor, tmp_path: Path, script: Path, *flags: str) -> AsyncIterator[tuple[Any, Any]]:
    """A connected, initialized ``agentbus acp`` process (the SDK spawns it)."""
    args = ["-m", "actors.frontends", "acp", "-m", MODEL, "--fake-responses", str(script), *flags]
    async with acp.spawn_agent_process(editor, sys.executable, *args, env=_env(tmp_path), cwd=tmp_path) as (conn, proc):
        init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        assert init.agent_capabilities.session_capabilities.resume is not None
        yield conn, proc


@contextlib.asynccontextmanager
async def attached(editor: Editor, env: dict[str, str], cwd: Path, *fake: str) -> AsyncIterator[tuple[Any, Any]]:
    """A connected, initialized ``agentbus acp --attach`` process (the SDK spawns it;
    the daemon starts on demand); ``fake``: the model file of the sessions it creates
    (one it loads keeps its own)."""
    args = ["-m", "actors.frontends", "acp", "--attach", "-m", MODEL, "-y", *fake]
    async with acp.spawn_agent_process(editor, sys.executable, *args, env=env, cwd=cwd) as (conn, proc):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        yield conn, proc


def waiting_shell(tmp_path: Path, name: str) -> tuple[Path, Path, Path]:
    """The workspace, a FIFO its shell command writes its pid into once it runs, and a
    model file whose turn runs that command (``sleep 60``), then would say "never"."""
    ws = tmp_path / "ws"
    ws.mkdir()
    pid_file = ws / "shell.pid"
    os.mkfifo(pid_file)
    script = fake_responses(
        tmp_path / name,
        call_chunks(("run_shell_command", {"command": "echo $$ > shell.pid; sleep 60", "description": "wait"})),
        text_chunks("never"),
    )
    return ws, pid_file, script


def test_a_session_killed_mid_turn_is_loaded_and_resumed_by_a_new_process(tmp_path: Path) -> None:
    ws, pid_file, first = waiting_shell(tmp_path, "first.jsonl")
    later = fake_responses(tmp_path / "later.jsonl", text_chunks("Back again."))

    async def kill_mid_turn() -> str:
        editor = Editor()
        async with agent(editor, tmp_path, first, "-y") as (conn, proc):
            sid: str = (await conn.new_session(cwd=str(ws), mcp_servers=[])).session_id
            turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[acp.text_block("wait")]))
            await editor.wait_for(lambda u: u.session_update == "tool_call")
            # The shell writes its pid into a FIFO: read, it says the command runs.
            pid = int(await asyncio.to_thread(pid_file.read_text))
            proc.kill()  # SIGKILL: no clean-up, the recording ends mid-turn
            await proc.wait()
            turn.cancel()
            with contextlib.suppress(BaseException):
                await turn
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # what the dead agent left running
        return sid

    async def load(sid: str) -> tuple[list[Any], Editor]:
        editor = Editor()
        async with agent(editor, tmp_path, later) as (conn, _):
            loaded = await conn.load_session(cwd=str(ws), session_id=sid, mcp_servers=[])
            assert loaded.modes is not None
            replay = list(editor.updates)  # all of it comes before the answer
            answer = await conn.prompt(session_id=sid, prompt=[acp.text_block("again")])
            assert answer.stop_reason == "end_turn"
        return replay, editor

    async def resume(sid: str) -> Editor:
        editor = Editor()
        async with agent(editor, tmp_path, later) as (conn, _):
            resumed = await conn.resume_session(session_id=sid, cwd=str(ws), mcp_servers=[])
            assert resumed is not None
            before = [u.session_update for u in editor.updates]
            assert "user_message_chunk" not in before and "tool_call" not in before  # nothing replayed
            answer = await conn.prompt(session_id=sid, prompt=[acp.text_block("once more")])
            assert answer.stop_reason == "end_turn"
            listed = await conn.list_sessions(cwd=str(ws))
            assert [s.session_id for s in listed.sessions] == [sid]
            await conn.close_session(session_id=sid)
        return editor

    async def scenario() -> None:
        sid = await kill_mid_turn()
        replay, loaded = await load(sid)
        kinds = [u.session_update for u in replay]
        assert kinds[0] == "user_message_chunk" and replay[0].content.text == "wait"
        (call,) = [u for u in replay if u.session_update == "tool_call"]
        # The interrupted call is not left running in the editor: it ended with the process.
        assert call.status == "failed"
        assert "interrupted" in call.content[-1].content.text
        said = "".join(u.content.text for u in loaded.updates if u.session_update == "agent_message_chunk")
        assert said.endswith("Back again.")
        resumed = await resume(sid)
        assert "agent_message_chunk" in resumed.kinds()

    asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))


def test_attached_sessions_through_the_sdk_outlive_a_killed_front_end(tmp_path: Path) -> None:
    """``agentbus acp --attach`` (the daemon started on demand, a real process): the
    front end is killed in the middle of a turn; the turn goes on in the daemon, a new
    front end loads the session and sees it finish; config options, resume, close and
    delete through the SDK's own calls."""
    ws = tmp_path / "ws"
    ws.mkdir()
    pid_file, gate = ws / "shell.pid", ws / "gate"
    os.mkfifo(pid_file)
    os.mkfifo(gate)
    script = fake_responses(
        tmp_path / "attached.jsonl",
        call_chunks(("run_shell_command", {"command": "echo $$ > shell.pid; cat gate; echo through", "description": "wait"})),
        text_chunks("Done."),
        text_chunks("Resumed."),
    )
    env = {**_env(tmp_path), "AGENTBUS_RUNTIME_DIR": str(tmp_path / "run")}

    def front_end(editor: Editor, *fake: str) -> contextlib.AbstractAsyncContextManager[tuple[Any, Any]]:
        return attached(editor, env, tmp_path, *fake)

    async def scenario() -> None:
        first = Editor()
        async with front_end(first, "--fake-responses", str(script)) as (conn, proc):
            created = await conn.new_session(cwd=str(ws), mcp_servers=[])
            sid = created.session_id
            turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[acp.text_block("wait")]))
            await editor_sees(first, "tool_call")
            await asyncio.to_thread(pid_file.read_text)  # the daemon's shell runs the command
            proc.kill()
            await proc.wait()
            turn.cancel()
            with contextlib.suppress(BaseException):
                await turn
        second = Editor()
        async with front_end(second) as (conn, _):
            loaded = await conn.load_session(cwd=str(ws), session_id=sid, mcp_servers=[])
            assert loaded.modes is not None and loaded.modes.current_mode_id == "yolo"
            assert second.kinds()[0] == "user_message_chunk"
            await asyncio.to_thread(gate.write_text, "go\n")  # the command may end now
            done = await second.wait_for(lambda u: u.session_update == "agent_message_chunk")
            assert done.content.text == "Done."
            await conn.close_session(session_id=sid)
        third = Editor()
        async with front_end(third) as (conn, _):
            await conn.resume_session(session_id=sid, cwd=str(ws), mcp_servers=[])
            assert "user_message_chunk" not in third.kinds()
            answer = await conn.prompt(session_id=sid, prompt=[acp.text_block("again")])
            assert answer.stop_reason == "end_turn"
            # (A mode change restarts the daemon's session: its fake model file too.)
            changed = await conn.set_config_option(session_id=sid, config_id="mode", value="autoEdit")
            assert {o.id: o.current_value for o in changed.config_options}["mode"] == "autoEdit"
            listed = await conn.list_sessions(cwd=str(ws))
            assert [s.session_id for s in listed.sessions] == [sid]
            # SDK 0.12.1 has no call for session/delete (stable since schema 1.x): raw.
            assert await conn._conn.send_request("session/delete", {"sessionId": sid}) == {}
            assert (await conn.list_sessions(cwd=str(ws))).sessions == []

    async def editor_sees(editor: Editor, kind: str) -> None:
        await editor.wait_for(lambda u: u.session_update == kind)

    try:
        asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))
    finally:
        import subprocess

        subprocess.run(
            [sys.executable, "-m", "actors.frontends", "daemon", "stop"], env=env, capture_output=True, timeout=30, check=False
        )


def test_an_attached_session_whose_daemon_was_killed_mid_call_loads_with_the_call_failed(tmp_path: Path) -> None:
    """``agentbus acp --attach``: the daemon itself is killed while a call runs (its
    recording ends mid-turn); a new front end's ``session/load`` (a new daemon started on
    demand resumes the session) shows the call failed, not running for ever."""
    from actors.frontends.daemon.paths import DaemonPaths, read_pid

    ws, pid_file, script = waiting_shell(tmp_path, "attached.jsonl")
    env = {**_env(tmp_path), "AGENTBUS_RUNTIME_DIR": str(tmp_path / "run")}

    async def scenario() -> None:
        first = Editor()
        async with attached(first, env, tmp_path, "--fake-responses", str(script)) as (conn, _):
            sid = (await conn.new_session(cwd=str(ws), mcp_servers=[])).session_id
            turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[acp.text_block("wait")]))
            await first.wait_for(lambda u: u.session_update == "tool_call")
            shell = int(await asyncio.to_thread(pid_file.read_text))  # the command runs
            daemon = read_pid(DaemonPaths(tmp_path / "run"))
            assert daemon is not None
            os.kill(daemon, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell, signal.SIGKILL)  # what the dead daemon left running
            with contextlib.suppress(Exception):
                await turn  # (the front end says its daemon went away)
        second = Editor()
        async with attached(second, env, tmp_path) as (conn, _):
            await conn.load_session(cwd=str(ws), session_id=sid, mcp_servers=[])
            # All of the replay comes before the answer; a call's updates in it are one.
            (call,) = [u for u in second.updates if u.session_update.startswith("tool_call")]
            assert call.status == "failed"
            assert "interrupted" in call.content[-1].content.text

    try:
        asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))
    finally:
        import subprocess

        subprocess.run(
            [sys.executable, "-m", "actors.frontends", "daemon", "stop"], env=env, capture_output=True, timeout=30, check=False
        )
