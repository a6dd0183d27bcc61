"""The ``tool_response`` AfterTool hooks get, in Gemini CLI's shape: ``{llmContent,
returnDisplay, error}`` of the tool's result as the tool returned it (``error`` absent on
success: JSON drops an undefined field). ``read_file`` of an image or a PDF returns one
``inlineData`` part, not a list of parts (``processSingleFileContent``)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.frontends.headless.test_tool_command import tool, write_settings
from tests.hooks._helpers import py

DUMP_INPUT = py("import sys; open('hook_input.json', 'w').write(sys.stdin.read()); print('{}')")

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    write_settings(
        workspace,
        {"hooks": {"AfterTool": [{"matcher": "read_file", "hooks": [{"type": "command", "command": DUMP_INPUT}]}]}},
    )
    return workspace


@pytest.mark.parametrize(
    ("name", "data", "mime", "kind"),
    [("pic.png", PNG, "image/png", "image"), ("doc.pdf", PDF, "application/pdf", "pdf")],
    ids=["png", "pdf"],
)
def test_after_tool_sees_a_binary_read_as_one_inline_data_part(
    ws: Path, name: str, data: bytes, mime: str, kind: str
) -> None:
    (ws / name).write_bytes(data)
    done = tool(ws, "read_file", "--args", json.dumps({"file_path": name}), "-o", "json")
    assert done.returncode == 0, done.stderr
    hook_input = json.loads((ws / "hook_input.json").read_text())
    assert hook_input["tool_name"] == "read_file"
    assert hook_input["tool_response"] == {
        "llmContent": {"inlineData": {"data": base64.b64encode(data).decode(), "mimeType": mime}},
        "returnDisplay": f"Read {kind} file: {name}",
    }


def test_after_tool_sees_an_error_with_its_message_and_type(ws: Path) -> None:
    done = tool(ws, "read_file", "--args", json.dumps({"file_path": "missing.png"}), "-o", "json")
    assert done.returncode == 1, done.stderr
    hook_input = json.loads((ws / "hook_input.json").read_text())
    assert hook_input["tool_response"] == {
        "llmContent": "Could not read file because no file was found at the specified path.",
        "returnDisplay": "File not found.",
        "error": {"message": f"File not found: {ws / 'missing.png'}", "type": "file_not_found"},
    }


def test_hooks_get_the_sessions_plans_directory(tmp_path: Path) -> None:
    """``GEMINI_PLANS_DIR`` is the session's plans directory (``Storage.getPlansDir``),
    the one write_file uses in plan mode."""
    (tmp_path / "home").mkdir()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("x\n")
    dump = py("import os; open('plans_dir.txt', 'w').write(os.environ['GEMINI_PLANS_DIR']); print('{}')")
    write_settings(workspace, {"hooks": {"AfterTool": [{"hooks": [{"type": "command", "command": dump}]}]}})
    done = tool(workspace, "read_file", "--args", '{"file_path": "notes.txt"}', "-o", "json")
    assert done.returncode == 0, done.stderr
    session = json.loads(done.stdout)["session_id"]
    home = tmp_path / "home"
    assert (workspace / "plans_dir.txt").read_text() == str(home / ".gemini" / "tmp" / "ws" / session / "plans")
