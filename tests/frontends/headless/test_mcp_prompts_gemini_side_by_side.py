"""agentbus and Gemini CLI 0.61.0 side by side on an MCP server's prompts and resources
(tests/fakes/mcp_prompts_server.py over stdio), headless, each against its own fake
Gemini server over HTTP with the same script: ``-p "/greet Ada"`` (a prompt's command),
``-p "/srv.help"`` (a prompt named as a built-in command), ``-p "... @srv:uri ..."`` (a
text and a binary resource). Compared: the user's turn the model got, and the answer on
stdout. Skips saying why when Gemini CLI 0.61.0 or node is missing."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.gateway import FakeEntry
from tests.fakes.gemini_server import FakeGeminiServer
from tests.frontends.headless.test_mcp_gemini_side_by_side import gemini_cli

ROOT = Path(__file__).resolve().parents[3]
AGENTBUS = Path(sys.executable).with_name("agentbus")
SERVER = ROOT / "tests" / "fakes" / "mcp_prompts_server.py"
BOUND_S = 90
"""Only against hangs."""

if shutil.which("node") is None:
    pytestmark = pytest.mark.skip(reason="node is not on PATH: Gemini CLI cannot run")

ANSWER = ("generateContentStream", [{"candidates": [{"content": {"role": "model", "parts": [{"text": "Done."}]}, "finishReason": "STOP"}]}])


async def run(program: list[str], tmp: Path, prompt: str) -> tuple[str, list[dict[str, Any]]]:
    """One headless run: stdout, and the parts of the last user turn of its first
    model request."""
    home, ws = tmp / "home", tmp / "ws"
    (home / ".gemini").mkdir(parents=True)
    settings = {
        "mcpServers": {"srv": {"command": sys.executable, "args": [str(SERVER)], "trust": True}},
        "security": {"auth": {"selectedType": "gemini-api-key"}},
    }
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    ws.mkdir()
    server = FakeGeminiServer([FakeEntry(ANSWER[0], ANSWER[1], 0)])
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "GEMINI_CLI_HOME": str(home),
            "AGENTBUS_DATA_DIR": str(tmp / "data"),
            "TMPDIR": str(tmp),
            "LANG": "C.UTF-8",
            "GEMINI_API_KEY": "not-a-key",
            "GOOGLE_GEMINI_BASE_URL": server.base_url,
            "GEMINI_CLI_NO_RELAUNCH": "true",
        }
        with trio.fail_after(BOUND_S):
            done = await trio.run_process(
                [*program, "-m", "gemini-2.5-flash", "-p", prompt, "-o", "text", "--skip-trust"],
                stdin=b"",
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                cwd=str(ws),
                env=env,
            )
        nursery.cancel_scope.cancel()
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    [request] = [r for r in server.requests if r.method == "generateContentStream"]
    parts = request.body["contents"][-1]["parts"]
    # the session context each sends first is its own (docs/differences.md)
    return done.stdout.decode(), [p for p in parts if not str(p.get("text", "")).startswith("<session_context>")]


@pytest.mark.parametrize(
    "prompt",
    ["/greet Ada", '/greet --name="Ada L." --greeting=Hi', "/srv.help", "summarise @srv:notes://today and @srv:data://logo"],
)
async def test_the_model_gets_the_same_user_turn_as_from_gemini_cli(tmp_path: Path, prompt: str) -> None:
    gemini = gemini_cli()
    theirs = await run([str(gemini)], tmp_path / "gemini", prompt)
    ours = await run([str(AGENTBUS)], tmp_path / "agentbus", prompt)
    assert theirs[1] != [{"text": prompt}]  # the prompt ran or the resources were read
    assert ours == theirs
