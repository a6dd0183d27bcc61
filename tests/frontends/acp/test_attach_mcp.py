"""``agentbus acp --attach`` with MCP servers from the workspace's settings: the daemon
holds the servers, so it lists the session's prompts (``available_commands_update``, as
stdio ACP lists them), runs ``/<prompt> args`` and reads ``@server:uri``; a bad command or
reference is one agent message and the session goes on. The server is the SDK's
``MCPServer`` (tests/fakes/mcp_prompts_server.py) over stdio, started by a daemon in this
process on a real Unix socket."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio

from actors.recording import load_recording
from bus.messages import GenerateRequest

from ._client import Client, connected, fake_responses, text_chunks
from .test_attach import attached, daemon, ws

__all__ = ["ws"]  # the fixture

SERVER = str(Path(__file__).resolve().parents[2] / "fakes" / "mcp_prompts_server.py")


def said(frames: list[dict[str, Any]]) -> str:
    return "".join(
        f["params"]["update"]["content"]["text"]
        for f in frames
        if f.get("method") == "session/update" and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


async def prompt(client: Client, sid: str, *blocks: dict[str, Any]) -> tuple[str, str]:
    client.clear()
    result = await client.call("session/prompt", {"sessionId": sid, "prompt": list(blocks)})
    return result["stopReason"], said(client.log)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


async def test_prompts_and_resources_are_the_daemons(tmp_path: Path, ws: Path) -> None:
    (ws / ".gemini").mkdir()
    servers = {"srv": {"command": sys.executable, "args": [SERVER], "trust": True}}
    (ws / ".gemini" / "settings.json").write_text(json.dumps({"mcpServers": servers}))
    script = fake_responses(tmp_path / "f.jsonl", text_chunks("Hi Ada."), text_chunks("Milk it is."))
    # The image's tokens are counted (countTokens) before the second request.
    lines = script.read_text().splitlines(keepends=True)
    lines.insert(1, json.dumps({"method": "countTokens", "response": {"totalTokens": 258}}) + "\n")
    script.write_text("".join(lines))
    image = {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}
    with trio.fail_after(60):
        async with daemon(tmp_path), connected(attached(tmp_path, script)) as (client, _):
            await client.initialize()
            new = await client.call("session/new", {"cwd": str(ws), "mcpServers": []})
            sid = new["sessionId"]
            update = await client.wait_for(
                lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate") == "available_commands_update"
            )
            commands = update["params"]["update"]["availableCommands"]
            names = [c["name"] for c in commands]
            assert "Two-Words" in names, names
            assert names[: names.index("Two-Words")] == ["about", "help", "tool", "tool!", "shell", "shell!"]
            mcp = {c["name"]: c for c in commands[names.index("Two-Words") :]}
            assert list(mcp) == ["Two-Words", "broken", "empty", "greet", "picture", "review", "srv.help"]
            assert mcp["greet"] == {"name": "greet", "description": "Greet someone.", "input": {"hint": "name [greeting]"}}

            stop, help_text = await prompt(client, sid, text("/greet help"))
            assert (stop, help_text.startswith('Arguments for "greet":')) == ("end_turn", True)
            assert await prompt(client, sid, text("/greet --nmae=Ada")) == (
                "end_turn",
                "Unknown argument(s): --nmae (the prompt takes --name, --greeting)",
            )
            stop, failed = await prompt(client, sid, text("see @srv:data://broken"))
            assert (stop, failed.split(": Error reading")[0]) == ("end_turn", "Exiting due to an error processing the @ command")
            assert await prompt(client, sid, text("/greet Ada")) == ("end_turn", "Hi Ada.")
            # An image beside the reference goes to the model after the resource.
            assert await prompt(client, sid, text("what is in @srv:notes://today"), image) == ("end_turn", "Milk it is.")
    [recording] = (tmp_path / "data").rglob(f"*{sid}*.jsonl")
    first, second = (
        e.message.contents[-1]["parts"]
        for e in load_recording(recording).envelopes
        if isinstance(e.message, GenerateRequest) and e.message.method == "generateContentStream"
    )
    assert first[-1] == {"text": '"Hello, Ada!"'}
    assert {"text": "buy milk"} in second
    assert second[-1] == {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}


async def test_the_clients_own_servers_are_started_by_the_daemon_and_kept_across_a_restart(
    tmp_path: Path,
    ws: Path,
) -> None:
    # The restarted session's fake responses start at their first line again.
    script = fake_responses(tmp_path / "f.jsonl", text_chunks("Done."))
    server = {"name": "cli", "command": sys.executable, "args": [SERVER], "env": []}
    logged: list[str] = []
    with trio.fail_after(60):
        async with daemon(tmp_path):
            async with connected(attached(tmp_path, script)) as (client, _):
                await client.initialize()
                sid = await run_on_the_clients_server(client, ws, server)
            # Loaded while it runs in the daemon: it keeps the servers it has, and says so.
            async with connected(attached(tmp_path, script), log=logged.append) as (client, _):
                await client.initialize()
                await client.call("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": [server]})
                update = await client.wait_for(
                    lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate") == "available_commands_update"
                )
                assert "greet" in [c["name"] for c in update["params"]["update"]["availableCommands"]]
    assert f"agentbus acp: session {sid} already runs in the daemon: it keeps its MCP servers, the client's 1 are not started" in logged
    [recording] = (tmp_path / "data").rglob(f"*{sid}*.jsonl")
    requests = [
        e.message.contents[-1]["parts"]
        for e in load_recording(recording).envelopes
        if isinstance(e.message, GenerateRequest) and e.message.method == "generateContentStream"
    ]
    assert requests[0][-1] == {"text": '"Hello, Ada!"'}
    assert {"text": "buy milk"} in requests[1]


async def run_on_the_clients_server(client: Client, workspace: Path, server: dict[str, Any]) -> str:
    """A new session with the client's ``server``: its prompt and resource used, before and
    after a mode change; the session's id."""
    new = await client.call("session/new", {"cwd": str(workspace), "mcpServers": [server]})
    sid = new["sessionId"]
    update = await client.wait_for(
        lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate") == "available_commands_update"
    )
    names = [c["name"] for c in update["params"]["update"]["availableCommands"]]
    assert "greet" in names and "cli.help" in names, names
    assert await prompt(client, sid, text("/greet Ada")) == ("end_turn", "Done.")
    # A mode change restarts the session's actors in the daemon: its client's
    # server is started again with them.
    assert await client.call("session/set_mode", {"sessionId": sid, "modeId": "yolo"}) == {}
    assert await prompt(client, sid, text("what is in @cli:notes://today")) == ("end_turn", "Done.")
    return str(sid)
