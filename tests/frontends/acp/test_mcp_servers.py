"""ACP's ``mcpServers`` (``session/new``): the client's own MCP server is started for the
session and its tools reach the model under Gemini CLI's names; a malformed entry is
invalid params naming it; ``initialize`` offers the http and sse transports."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from actors.frontends.acp._session import AcpOptions

from ._client import RpcFailure, call_chunks, connected, fake_responses, text_chunks

SERVER = str(Path(__file__).resolve().parents[2] / "fakes" / "mcp_server.py")


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GEMINI_CLI_HOME", str(home))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace.resolve()


def options(tmp_path: Path, script: Path, **kw: Any) -> AcpOptions:
    return AcpOptions(model="gemini-2.5-flash", fake_responses=str(script), data_dir=tmp_path / "data", yolo=True, **kw)


def fake_server(name: str = "fake") -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": [SERVER], "env": [{"name": "X", "value": "1"}]}


async def test_a_clients_stdio_server_gives_the_session_its_tools(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(
        tmp_path / "model.responses",
        call_chunks(("mcp_fake_echo", {"text": "hi"})),
        text_chunks("done"),
    )
    async with connected(options(tmp_path, script)) as (client, _):
        init = await client.initialize()
        assert init["agentCapabilities"]["mcpCapabilities"] == {"http": True, "sse": True}
        sid = (await client.call("session/new", {"cwd": str(ws), "mcpServers": [fake_server()]}))["sessionId"]
        result = await client.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
        assert result["stopReason"] == "end_turn"
        updates = [u for u in client.updates(sid) if u.get("sessionUpdate") == "tool_call_update"]
        assert updates and updates[-1]["status"] == "completed"
        assert "echo: hi" in str(updates[-1].get("content"))


async def test_the_flag_filters_the_clients_servers_too(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(tmp_path / "model.responses", call_chunks(("mcp_fake_echo", {"text": "hi"})), text_chunks("x"))
    async with connected(options(tmp_path, script, allowed_mcp_server_names=("other",))) as (client, _):
        await client.initialize()
        sid = (await client.call("session/new", {"cwd": str(ws), "mcpServers": [fake_server()]}))["sessionId"]
        await client.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
        calls = [u for u in client.updates(sid) if u.get("sessionUpdate") in ("tool_call", "tool_call_update")]
        assert calls and calls[-1]["status"] == "failed"  # not registered: the server was not started
        assert "not found" in str(calls[-1]).lower() or "not registered" in str(calls[-1]).lower(), calls[-1]


async def test_a_malformed_server_is_invalid_params_naming_it(tmp_path: Path, ws: Path) -> None:
    script = fake_responses(tmp_path / "model.responses", text_chunks("x"))
    async with connected(options(tmp_path, script)) as (client, _):
        await client.initialize()
        bad = [fake_server(), {"name": "h", "type": "http", "url": "http://127.0.0.1:1/", "headers": [{"name": "A"}]}]
        with pytest.raises(RpcFailure) as info:
            await client.call("session/new", {"cwd": str(ws), "mcpServers": bad})
        assert info.value.error["code"] == -32602
        assert "mcpServers[1].headers[0].value must be a string" in info.value.error["message"]
