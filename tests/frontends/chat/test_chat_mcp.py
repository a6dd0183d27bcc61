"""``agentbus chat`` with MCP servers, as a person uses it through a pseudo-terminal:
``/mcp`` (and its ``desc`` and ``schema`` forms) lists the session's servers with their
state, tools, prompts and resources; ``/<prompt> args`` runs a server's prompt,
``/<prompt> help`` lists its arguments, Tab completes it; ``@server:uri`` attaches a resource; bad ones
are one line and the chat goes on. The servers are the SDK's ``MCPServer`` (tests/fakes)
over stdio, from the workspace's settings.json; the daemon runs the session."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from actors.recording import load_recording
from bus.messages import GenerateRequest
from tests.frontends.chat.test_chat_terminal import chat_on_fake
from tests.frontends.daemon._helpers import text_response, write_responses
from tests.frontends.daemon._procs import agentbus

FAKES = Path(__file__).resolve().parents[2] / "fakes"


def test_mcp_lists_servers_and_prompts_and_resources_work_in_the_chat(home: Path) -> None:
    servers = {
        "srv": {"command": sys.executable, "args": [str(FAKES / "mcp_prompts_server.py")], "trust": True},
        "missing": {"command": str(home / "no-such-server")},
    }
    (home / "ws" / ".gemini").mkdir()
    (home / "ws" / ".gemini" / "settings.json").write_text(json.dumps({"mcpServers": servers}))
    fake = write_responses(home / "chat.responses", text_response("Reviewed it."), text_response("Noted the milk."))
    term = chat_on_fake(home, fake)
    try:
        term.expect("> ")
        term.type("/mcp\n")
        term.expect("Configured MCP servers:")
        term.expect("🟢 srv - Ready (1 tool, 7 prompts, 4 resources)")
        term.expect("  Tools:\n  - mcp_srv_echo\n  Prompts:\n  - Two-Words\n")
        term.expect("  - srv.help\n  Resources:\n  - broken (data://broken) [text/plain]")
        term.expect("  - today (notes://today) [text/plain]")
        term.expect("🔴 missing - Error")
        screen = term.expect("  Error: MCP server 'missing' could not be started: command not found")
        assert "Review a piece of code." not in screen
        term.type("/mcp schema srv\n")
        term.expect("🟢 srv - Ready")
        term.expect("  - mcp_srv_echo\n    Echo the text back.\n      Parameters:\n      {")
        term.expect("  - review\n    Review a piece of code.")
        term.type("/gre\thelp\n")  # Tab completes the prompt's command
        term.expect('Arguments for "greet":')
        term.expect("  --greeting\n    (required: no)")
        term.type("/greet --nmae=Ada\n")
        term.expect("error: Unknown argument(s): --nmae (the prompt takes --name, --greeting)")
        term.type("/nosuch\n")
        term.expect("unknown command /nosuch; /help lists them")
        term.type('/review --code="x = 1"\n')
        term.expect("Reviewed it.")
        term.expect("> ")
        term.type("read @srv:data://broken\n")
        term.expect("error: Exiting due to an error processing the @ command: Error reading resource data://broken")
        term.type("what is in @srv:notes://today\n")
        term.expect("Noted the milk.")
        term.expect("> ")
    finally:
        term.close()
        agentbus(home, "daemon", "stop")
    [recording] = (home / "data" / "sessions").glob("*.jsonl")
    first, second = (
        e.message.contents[-1]["parts"]
        for e in load_recording(recording).envelopes
        if isinstance(e.message, GenerateRequest)
    )
    assert first[-1] == {"text": json.dumps('Please review this code:\nx = 1\n(say "done")')}
    assert {"text": "buy milk"} in second
