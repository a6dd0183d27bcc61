"""``agentbus acp --attach``: the same ACP front end, its sessions in a daemon (in this
process, on a real Unix socket in a tmp dir)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.frontends.acp._session import AcpOptions
from actors.frontends.daemon import Daemon, DaemonConfig, serve
from actors.frontends.daemon.client import open_client
from actors.frontends.daemon.paths import DaemonPaths

from ._client import Client, call_chunks, connected, fake_responses, text_chunks
from .test_server import MODEL, new_session, prompt


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    for name, value in (("HOME", home), ("GEMINI_CLI_HOME", home), ("AGENTBUS_DATA_DIR", tmp_path / "data")):
        monkeypatch.setenv(name, str(value))
    for name in ("GEMINI_MODEL", "XDG_RUNTIME_DIR", "AGENTBUS_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "hello.py").write_text("def add(a, b):\n    return a + b\n")
    return workspace.resolve()


@asynccontextmanager
async def daemon(root: Path) -> AsyncIterator[Daemon]:
    config = DaemonConfig(paths=DaemonPaths(root / "run"), data_dir=root / "data")
    async with trio.open_nursery() as nursery:
        running: Daemon = await nursery.start(serve, config)
        try:
            yield running
        finally:
            running.stop("test over")


def attached(root: Path, script: Path) -> AcpOptions:
    return AcpOptions(
        model=MODEL,
        fake_responses=str(script),
        data_dir=root / "data",
        attach=True,
        daemon_paths=DaemonPaths(root / "run"),
    )


async def test_an_attached_session_prompts_asks_and_outlives_the_connection(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(
        tmp_path / "write.jsonl",
        call_chunks(("write_file", {"file_path": "out.txt", "content": "from the daemon\n"})),
        text_chunks("Wrote it.", prompt_tokens=7, output_tokens=3),
        text_chunks("Hello again."),
    )
    async with daemon(tmp_path):
        async with connected(attached(tmp_path, script)) as (client, _):
            await client.initialize()
            sid = await new_session(client, ws)
            client.clear()
            result = await prompt(client, sid, "Create out.txt")
            assert result["stopReason"] == "end_turn"
            assert client.sequence() == [
                "tool_call:pending:edit",
                "session/request_permission",
                "tool_call_update:in_progress",
                "tool_call_update:completed:edit",
                "agent_message_chunk",
            ]
            # The daemon's tools wrote its disk.
            assert (ws / "out.txt").read_text() == "from the daemon\n"
            assert await client.call("session/set_mode", {"sessionId": sid, "modeId": "yolo"}) == {}
            assert {"sessionUpdate": "current_mode_update", "currentModeId": "yolo"} in client.updates()
        # The ACP connection is gone; the session still runs in the daemon.
        async with open_client(DaemonPaths(tmp_path / "run"), start=False) as other:
            listed = await other.list_sessions()
            assert [(s.session_id, s.state, s.approval_mode) for s in listed.sessions] == [(sid, "running", "yolo")]
        # Another ACP connection loads it: the replay, then the session goes on.
        async with connected(attached(tmp_path, script)) as (client, _):
            await client.initialize()
            loaded = await client.call("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
            assert loaded["modes"]["currentModeId"] == "yolo"
            await client.wait_for(lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate") == "available_commands_update")
            kinds = [u["sessionUpdate"] for u in client.updates()]
            assert kinds[:4] == ["user_message_chunk", "tool_call", "agent_message_chunk", "available_commands_update"]
            client.clear()
            assert (await prompt(client, sid, "again"))["stopReason"] == "end_turn"
            # The replacement fake file starts at its first line: a write_file, no
            # permission asked in yolo mode.
            assert "session/request_permission" not in client.sequence()


async def test_cancel_reaches_the_daemons_turn(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(
        tmp_path / "sleep.jsonl",
        call_chunks(("run_shell_command", {"command": "sleep 30", "description": "wait"})),
        text_chunks("never"),
    )
    async with daemon(tmp_path), connected(attached(tmp_path, script)) as (client, _):
        await client.initialize()
        client.permission = lambda params: None
        sid = await new_session(client, ws)
        results: list[Any] = []

        async def run_prompt(c: Client) -> None:
            results.append(await prompt(c, sid, "Wait"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_prompt, client)
            asked = await client.wait_for(lambda f: f.get("method") == "session/request_permission")
            await client.notify("session/cancel", {"sessionId": sid})
            await client.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "cancelled"}}})
        assert results == [{"stopReason": "cancelled"}]
        assert client.updates()[-1]["status"] == "failed"
