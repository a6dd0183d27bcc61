"""``agentbus acp`` over stdio with the client's MCP server (``mcpServers`` of
``session/new``): its prompts are in ``available_commands_update`` after the built-in
commands, ``/<prompt> args`` in ``session/prompt`` runs one, ``@server:uri`` attaches a
resource; a bad command or reference is one agent message and the session goes on. The
server is the SDK's ``MCPServer`` (tests/fakes/mcp_prompts_server.py) over stdio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from actors.recording import load_recording
from bus.messages import GenerateRequest

from ._client import fake_responses, text_chunks

SERVER = str(Path(__file__).resolve().parents[2] / "fakes" / "mcp_prompts_server.py")


class Agent:
    def __init__(self, tmp_path: Path, script: Path) -> None:
        env = {**os.environ, "HOME": str(tmp_path), "GEMINI_CLI_HOME": str(tmp_path), "AGENTBUS_DATA_DIR": str(tmp_path / "data")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "actors.frontends", "acp", "-m", "gemini-2.5-flash", "--fake-responses", str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=tmp_path,
            env=env,
        )
        self.next_id = 0

    def call(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The call's result and the notifications before it."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.next_id += 1
        frame = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(frame).encode() + b"\n")
        self.proc.stdin.flush()
        notes: list[dict[str, Any]] = []
        while True:
            line = self.proc.stdout.readline()
            assert line, f"the agent closed its output after {notes}"
            got = json.loads(line)
            if got.get("id") == self.next_id and "method" not in got:
                assert "result" in got, got
                return got["result"], notes
            notes.append(got)

    def updates(self) -> list[dict[str, Any]]:
        """Notifications that came after the last call's result (the commands update)."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        return [json.loads(line)]

    def close(self) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=15)
        finally:
            self.proc.stdout.close()


def said(notes: list[dict[str, Any]]) -> str:
    return "".join(
        n["params"]["update"]["content"]["text"]
        for n in notes
        if n.get("method") == "session/update" and n["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


def prompt(agent: Agent, sid: str, text: str) -> tuple[str, str]:
    result, notes = agent.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
    return result["stopReason"], said(notes)


def test_prompts_are_commands_and_resources_are_attached(tmp_path: Path) -> None:
    script = fake_responses(tmp_path / "model.responses", text_chunks("Hi Ada."), text_chunks("Milk it is."))
    agent = Agent(tmp_path, script)
    try:
        agent.call("initialize", {"protocolVersion": 1})
        server = {"name": "srv", "command": sys.executable, "args": [SERVER], "env": []}
        new, _ = agent.call("session/new", {"cwd": str(tmp_path), "mcpServers": [server]})
        sid = new["sessionId"]
        [update] = agent.updates()
        commands = update["params"]["update"]["availableCommands"]
        names = [c["name"] for c in commands]
        assert names[: names.index("Two-Words")] == ["about", "help", "tool", "tool!", "shell", "shell!"]
        mcp = {c["name"]: c for c in commands[names.index("Two-Words") :]}
        assert list(mcp) == ["Two-Words", "broken", "empty", "greet", "picture", "review", "srv.help"]
        assert mcp["greet"] == {"name": "greet", "description": "Greet someone.", "input": {"hint": "name [greeting]"}}
        assert "input" not in mcp["srv.help"]

        assert prompt(agent, sid, "/greet help")[1].startswith('Arguments for "greet":')
        assert prompt(agent, sid, "/greet --nmae=Ada") == (
            "end_turn",
            "Unknown argument(s): --nmae (the prompt takes --name, --greeting)",
        )
        stop, text = prompt(agent, sid, "see @srv:data://broken")
        assert (stop, text.split(": Error reading")[0]) == (
            "end_turn",
            "Exiting due to an error processing the @ command",
        )
        assert prompt(agent, sid, "/greet Ada") == ("end_turn", "Hi Ada.")
        assert prompt(agent, sid, "what is in @srv:notes://today") == ("end_turn", "Milk it is.")
    finally:
        assert agent.close() == 0
    [recording] = (tmp_path / "data" / "sessions").glob(f"*{sid}*.jsonl")
    first, second = (
        e.message.contents[-1]["parts"]
        for e in load_recording(recording).envelopes
        if isinstance(e.message, GenerateRequest)
    )
    assert first[-1] == {"text": '"Hello, Ada!"'}
    assert {"text": "buy milk"} in second
