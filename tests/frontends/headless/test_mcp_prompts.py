"""Headless runs with an MCP server's prompts and resources, as a user runs them: the SDK's
``MCPServer`` (tests/fakes/mcp_prompts_server.py) as a stdio subprocess from settings.json,
``-p "@srv:uri ..."`` and ``-p "/prompt args"``, the model scripted; what the model got is
read from the session's recording."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from actors.recording import load_recording
from bus.messages import GenerateRequest
from tests.frontends.daemon._helpers import text_response, write_responses
from tests.frontends.daemon._procs import env_for

AGENTBUS = str(Path(sys.executable).with_name("agentbus"))
SERVER = str(Path(__file__).resolve().parents[2] / "fakes" / "mcp_prompts_server.py")


def run(tmp_path: Path, prompt: str, *responses: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "home" / ".gemini").mkdir(parents=True, exist_ok=True)
    settings = {"mcpServers": {"srv": {"command": sys.executable, "args": [SERVER], "trust": True}}}
    (tmp_path / "home" / ".gemini" / "settings.json").write_text(json.dumps(settings))
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    script = write_responses(tmp_path / "model.responses", *(responses or (text_response("ok"),)))
    return subprocess.run(
        [AGENTBUS, "-p", prompt, "-m", "gemini-2.5-flash", "--fake-responses", str(script), "-o", "json"],
        cwd=ws,
        env=env_for(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def user_parts(tmp_path: Path) -> list[dict[str, Any]]:
    [recording] = (tmp_path / "data" / "sessions").glob("*.jsonl")
    first = next(e.message for e in load_recording(recording).envelopes if isinstance(e.message, GenerateRequest))
    parts = [dict(p) for p in first.contents[-1]["parts"]]
    return [p for p in parts if not str(p.get("text", "")).startswith("<session_context>")]


def no_model_request(tmp_path: Path) -> bool:
    return not any(
        isinstance(e.message, GenerateRequest)
        for recording in (tmp_path / "data" / "sessions").glob("*.jsonl")
        for e in load_recording(recording).envelopes
    )


def test_at_references_read_the_resources_and_give_them_to_the_model(tmp_path: Path) -> None:
    done = run(tmp_path, "summarise @srv:notes://today and @srv:data://logo")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["response"] == "ok"
    assert user_parts(tmp_path) == [
        {"text": "summarise @srv:notes://today and @srv:data://logo"},
        {"text": "\n--- Content from referenced files ---"},
        {"text": "\nContent from @notes://today:\n"},
        {"text": "buy milk"},
        {"text": "\nContent from @data://logo:\n"},
        {"text": "[Binary resource content image/png, 16 bytes]"},
        {"text": "\n--- End of content ---"},
    ]


def test_a_resource_that_fails_to_read_is_one_line_and_nothing_reaches_the_model(tmp_path: Path) -> None:
    done = run(tmp_path, "read @srv:data://broken")
    assert done.returncode == 42
    assert done.stderr.splitlines() == [
        # the server's own error message (MCPServer does not pass the exception's on)
        "Exiting due to an error processing the @ command: Error reading resource data://broken: "
        "Error reading resource data://broken"
    ]
    assert no_model_request(tmp_path)


def test_a_huge_resource_is_refused_with_its_limit(tmp_path: Path) -> None:
    done = run(tmp_path, "read @srv:data://huge")
    assert done.returncode == 42
    assert done.stderr.splitlines() == [
        "Exiting due to an error processing the @ command: Error reading resource data://huge: "
        "its contents are over the 20 MB an @ reference may attach"
    ]


def test_a_prompt_command_sends_the_prompts_text_as_gemini_does(tmp_path: Path) -> None:
    done = run(tmp_path, '/review --code="x = 1"')
    assert done.returncode == 0, done.stderr
    assert user_parts(tmp_path) == [{"text": json.dumps('Please review this code:\nx = 1\n(say "done")')}]


def test_a_prompt_named_as_a_built_in_command_is_prefixed_with_its_server(tmp_path: Path) -> None:
    done = run(tmp_path, "/srv.help")
    assert done.returncode == 0, done.stderr
    assert user_parts(tmp_path) == [{"text": '"Explain what this server offers."'}]


def test_prompt_help_lists_its_arguments(tmp_path: Path) -> None:
    done = run(tmp_path, "/greet help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith('Arguments for "greet":\n')
    assert "  --name\n    (required: yes)\n" in done.stdout
    assert no_model_request(tmp_path)


def test_a_prompt_that_fails_is_one_line_and_exit_42(tmp_path: Path) -> None:
    # the other bad commands: tests/frontends/daemon/test_mcp_servers.py (same code, cheaper)
    done = run(tmp_path, "/broken")
    assert done.returncode == 42
    [line] = done.stderr.splitlines()
    assert line.startswith("Error invoking prompt 'broken' of MCP server 'srv': ")
    assert no_model_request(tmp_path)
