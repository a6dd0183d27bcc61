"""The native protocol with a session's MCP servers: ``ListMcpServers`` lists them with their
state, tools, prompts and resources; a ``Prompt`` that is a prompt's command runs it, one
with ``@server:uri`` reads the resource; bad ones are answered ``invalid`` in one line and
the session goes on. The servers are the SDK's ``MCPServer`` (tests/fakes) over stdio,
from the workspace's settings.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio

from actors.frontends.daemon.client import DaemonError
from actors.recording import load_recording
from bus.messages import GenerateRequest, TurnEnded
from tests.frontends.daemon._helpers import (
    call_response,
    client_of,
    events_until,
    running_daemon,
    text_response,
    write_responses,
)

FAKES = Path(__file__).resolve().parents[2] / "fakes"


def settings(home: Path) -> None:
    servers = {
        "srv": {"command": sys.executable, "args": [str(FAKES / "mcp_prompts_server.py")], "trust": True},
        "missing": {"command": str(home / "no-such-server"), "description": "never there"},
    }
    (home / "ws" / ".gemini").mkdir()
    (home / "ws" / ".gemini" / "settings.json").write_text(json.dumps({"mcpServers": servers}))


async def test_a_sessions_servers_are_listed_with_their_state_and_offers(home: Path) -> None:
    settings(home)
    fake = write_responses(home / "f.responses", text_response("ok"))
    with trio.fail_after(30):
        async with running_daemon(home), client_of(home) as client:
            ready = await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
            listed = (await client.list_mcp_servers(ready.session_id)).servers
    by_name = {s.name: s for s in listed}
    assert sorted(by_name) == ["missing", "srv"]
    missing, srv = by_name["missing"], by_name["srv"]
    assert missing.state == "error"
    assert missing.error.startswith("MCP server 'missing' could not be started: command not found")
    assert missing.description == "never there"
    assert srv.state == "connected" and srv.error == ""
    assert [t.name for t in srv.tools] == ["mcp_srv_echo"]
    assert srv.tools[0].description == "Echo the text back."
    assert dict(srv.tools[0].schema)["required"] == ("text",)
    assert [p.command for p in srv.prompts] == [
        "Two-Words", "broken", "empty", "greet", "picture", "review", "srv.help"
    ]
    greet = next(p for p in srv.prompts if p.command == "greet")
    assert (greet.arguments, greet.required) == (("name", "greeting"), ("name",))
    assert [(r.uri, r.name, r.mime_type) for r in srv.resources] == [
        ("data://broken", "broken", "text/plain"),
        ("data://huge", "huge", "text/plain"),
        ("data://logo", "logo", "image/png"),
        ("notes://today", "today", "text/plain"),
    ]


async def test_a_prompt_command_and_a_resource_reach_the_model_and_bad_ones_are_refused(home: Path) -> None:
    settings(home)
    fake = write_responses(home / "f.responses", text_response("first"), text_response("second"))
    with trio.fail_after(30):
        async with running_daemon(home), client_of(home) as client:
            ready = await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
            sid = ready.session_id
            await client.subscribe(sid, from_seq=1)
            for bad, message in {
                "/greet --nmae=Ada": "Unknown argument(s): --nmae (the prompt takes --name, --greeting)",
                "/broken": "Error invoking prompt 'broken' of MCP server 'srv': ",
                "see @srv:data://broken": "Exiting due to an error processing the @ command: ",
                "see @srv:notes://nope": "@srv:notes://nope: MCP server 'srv' has no resource 'notes://nope'"
                " (/mcp lists its resources)",
                "see @other:notes://x": "@other:notes://x: this session has no MCP server 'other'"
                " (its MCP servers: srv, missing)",
                "see @missing:notes://x": "@missing:notes://x: MCP server 'missing' is not available: "
                "MCP server 'missing' could not be started: command not found",
                "/picture": "Received an empty or invalid prompt response from the server.",
                "/empty": "The prompt returned no messages.",
                "/greet help": 'Arguments for "greet":',
            }.items():
                with pytest.raises(DaemonError) as refused:
                    await client.prompt(sid, bad)
                assert refused.value.code == "invalid"
                assert refused.value.message.startswith(message), refused.value.message
            await client.prompt(sid, "/greet Ada")
            first = await events_until(client)
            await client.prompt(sid, "summarise @srv:notes://today")
            second = await events_until(client)
    [recording] = (home / "data" / "sessions").glob(f"*{sid}*.jsonl")
    requests = [e.message for e in load_recording(recording).envelopes if isinstance(e.message, GenerateRequest)]
    assert [e.message.stop_reason for e in (first[-1], second[-1]) if isinstance(e.message, TurnEnded)] == [
        "end_turn", "end_turn"
    ]
    one, two = (r.contents[-1]["parts"] for r in requests)
    assert one[-1] == {"text": '"Hello, Ada!"'}
    assert [p["text"] for p in two[-5:]] == [
        "summarise @srv:notes://today",
        "\n--- Content from referenced files ---",
        "\nContent from @notes://today:\n",
        "buy milk",
        "\n--- End of content ---",
    ]


async def test_a_server_that_went_away_is_listed_disconnected_with_the_line_that_said_so(home: Path) -> None:
    servers = {"fake": {"command": sys.executable, "args": [str(FAKES / "mcp_server.py")], "trust": True}}
    (home / "ws" / ".gemini").mkdir()
    (home / "ws" / ".gemini" / "settings.json").write_text(json.dumps({"mcpServers": servers}))
    fake = write_responses(home / "f.responses", call_response("mcp_fake_crash", {}), text_response("gone"))
    with trio.fail_after(30):
        async with running_daemon(home), client_of(home) as client:
            ready = await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
            sid = ready.session_id
            [before] = (await client.list_mcp_servers(sid)).servers
            await client.subscribe(sid, from_seq=1)
            await client.prompt(sid, "crash it")
            await events_until(client)
            [after] = (await client.list_mcp_servers(sid)).servers
    assert (before.state, before.error, len(before.tools)) == ("connected", "", 7)
    assert after.state == "disconnected"
    assert after.error.startswith("MCP server 'fake' disconnected (")
    assert after.error.endswith("its next call reconnects.")
    assert len(after.tools) == 7


async def test_a_clients_own_servers_join_the_session_and_a_malformed_one_is_invalid(home: Path) -> None:
    fake = write_responses(home / "f.responses", text_response("ok"))
    server = {"name": "cli", "command": sys.executable, "args": [str(FAKES / "mcp_prompts_server.py")], "env": []}
    with trio.fail_after(30):
        async with running_daemon(home), client_of(home) as client:
            with pytest.raises(DaemonError) as refused:
                await client.create_session(str(home / "ws"), fake_responses=str(fake), mcp_servers=[{"name": 7}])
            ready = await client.create_session(
                str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash", mcp_servers=[server]
            )
            [listed] = (await client.list_mcp_servers(ready.session_id)).servers
    assert (refused.value.code, refused.value.message) == (
        "invalid",
        "mcp_servers: mcpServers[0].name must be a string, not a number",
    )
    assert (listed.name, listed.state, [t.name for t in listed.tools]) == ("cli", "connected", ["mcp_cli_echo"])
