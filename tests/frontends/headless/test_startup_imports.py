"""What a headless run imports (issue #20: start-up is import-bound): not the daemon's
protocol, nor the HTTP client, URL rules and HTML parser that only a web fetch uses;
without hooks configured, not the hook runner; a prompt without ``@`` and no MCP server,
not the ``@`` expansion nor the MCP session code; with no shell command to run or check,
not the shell's readers (bash grammar, shell-quote) nor the policy's command-safety
lists; with no tool call, not the scheduler's batch machinery; with tool calls whose
schemas use the common keywords, not jsonschema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
NOT_IMPORTED = (
    "bus.messages.client",
    "bus.messages._union",
    "h11",
    "html.parser",
    "actors.hooks._actor",
    "actors.hooks._run",
    "actors.hooks._aggregate",
    "actors.host.at_command",
    "actors.host.mcp_session",
    "actors.common._bash",
    "actors.common._shell",
    "actors.common._shell_quote",
    "actors.scheduler._command_safety",
    "actors.scheduler._batch",
    "actors.scheduler._call_state",
    "actors.scheduler._schema_check",
    "jsonschema",
    "actors.tools._http",
    "actors.tools._url",
)


def _run(home: Path, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -c code args...`` in ``home``, with its own home and data directory."""
    env = {**os.environ, "HOME": str(home), "GEMINI_CLI_HOME": str(home), "AGENTBUS_DATA_DIR": str(home / "data")}
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=home, env=env, capture_output=True, text=True, timeout=60, check=True
    )


def test_a_headless_run_imports_only_what_it_uses(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from actors.frontends import main\n"
        "status = main(['-p', 'hi', '-m', 'gemini-2.5-flash', '--fake-responses', sys.argv[1]])\n"
        "print(status, *(name for name in sys.argv[2:] if name in sys.modules))\n"
    )
    done = _run(tmp_path, code, str(ROOT / "scenarios" / "bench" / "hi.responses"), *NOT_IMPORTED)
    assert done.stdout.splitlines()[-1] == "0", done.stdout


def test_a_tool_call_is_checked_without_jsonschema(tmp_path: Path) -> None:
    # Its import (referencing, jsonschema_specifications, importlib.resources, zipfile...)
    # was a run's first tool call's cost, ~15 ms (actors.scheduler._schema_check).
    (tmp_path / "notes.txt").write_text("milk\n")
    call = {"functionCall": {"name": "read_file", "args": {"file_path": "notes.txt"}}}
    responses = tmp_path / "calls.responses"
    responses.write_text(
        "".join(
            json.dumps({"method": "generateContentStream", "response": [{"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]}]}) + "\n"
            for parts in ([call], [{"functionCall": {"name": "read_file", "args": {"file_path": 3}}}], [{"text": "done"}])
        )
    )
    code = (
        "import sys\n"
        "from actors.frontends import main\n"
        "status = main(['-p', 'read', '-y', '-m', 'gemini-2.5-flash', '--fake-responses', sys.argv[1]])\n"
        "print(status, *(name for name in ('jsonschema', 'referencing') if name in sys.modules))\n"
    )
    done = _run(tmp_path, code, str(responses))
    assert "read_file: params/file_path must be string" in done.stderr, done.stderr  # the second call
    assert done.stdout.splitlines()[-1] == "0", done.stdout
