"""list_directory: the corpus's listing, ordering, ignore handling and errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from actors.tools._ls import LsTool
from tests.conftest import SHARED

from ._file_env import call, check_declaration, make_env, outside_message

TOOL = LsTool()
CORPUS = SHARED / "conformance" / "scenarios"


def test_declaration() -> None:
    check_declaration(
        TOOL,
        {"dir_path": "string", "ignore": "array", "file_filtering_options": "object"},
        ["dir_path"],
    )
    schema = TOOL.declaration("")["parametersJsonSchema"]["properties"]
    assert schema["ignore"]["items"] == {"type": "string"}
    options = schema["file_filtering_options"]["properties"]
    assert {k: v["type"] for k, v in options.items()} == {
        "respect_git_ignore": "boolean",
        "respect_gemini_ignore": "boolean",
    }
    assert (TOOL.name, TOOL.display_name, TOOL.kind) == ("list_directory", "ReadFolder", "search")


@pytest.mark.skipif(not CORPUS.exists(), reason="conformance corpus not available")
async def test_listing_matches_the_corpus(tmp_path: Path) -> None:
    # steering-headless: list_directory(".") over its workspace files and .gemini/.
    env = make_env(tmp_path)
    scenario = json.loads((CORPUS / "steering-headless" / "scenario.json").read_text())
    for name, text in scenario["workspace_files"].items():
        (env.workspace / name).write_text(text)
    (env.workspace / ".gemini").mkdir()
    out = await call(TOOL, env, dir_path=".")
    session = json.loads((CORPUS / "steering-headless" / "expected" / "session.json").read_text())
    calls = [
        c
        for message in session["messages"]
        for c in message.get("toolCalls", ())
        if c["name"] == "list_directory"
    ]
    expected = calls[0]
    output = expected["result"][0]["functionResponse"]["response"]["output"]
    assert out.llm == output.replace("{workspace}", str(env.workspace))
    assert out.display == expected["resultDisplay"]
    assert TOOL.describe({"dir_path": "."}, env) == expected["description"]


async def test_order_ignore_and_symlinks(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    ws = env.workspace
    for name in ("B.txt", "a.txt", "_x", "10.txt", "9.txt", "notes.md"):
        (ws / name).write_text("12345")
    (ws / "zdir").mkdir()
    (ws / "Adir").mkdir()
    os.symlink(ws / "zdir", ws / "link")
    os.symlink(ws / "missing", ws / "broken")
    out = await call(TOOL, env, dir_path=".", ignore=["*.md", "?.txt"])
    assert out.llm == (
        f"Directory listing for {ws}:\n[DIR] Adir\n[DIR] link\n[DIR] zdir\n_x (5 bytes)\n"
        "10.txt (5 bytes)"
    )
    assert out.display == {
        "summary": "Found 5 item(s).",
        "files": ["[DIR] Adir", "[DIR] link", "[DIR] zdir", "_x", "10.txt"],
    }
    out = await call(TOOL, env, dir_path=".")
    assert out.display["files"][-6:] == ["_x", "10.txt", "9.txt", "a.txt", "B.txt", "notes.md"]


async def test_gitignored_entries(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    ws = env.workspace
    (ws / ".git").mkdir()
    (ws / ".gitignore").write_text("build/\n*.log\n")
    (ws / "build").mkdir()
    (ws / "app.log").write_text("x")
    (ws / "main.c").write_text("int main;")
    out = await call(TOOL, env, dir_path=str(ws))
    # Entries are matched as files (no trailing slash), so `build/` does not hide the
    # directory; `.git` is always hidden in a repository. Both as in Gemini.
    assert out.llm == (
        f"Directory listing for {ws}:\n[DIR] build\n.gitignore (13 bytes)\nmain.c (9 bytes)"
        "\n\n(2 ignored)"
    )
    assert out.display["summary"] == "Found 3 item(s). (2 ignored)"
    out = await call(TOOL, env, dir_path=".", file_filtering_options={"respect_git_ignore": False})
    assert out.display["summary"] == "Found 5 item(s)."


async def test_errors(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    ws = env.workspace
    (ws / "empty").mkdir()
    (ws / "f.txt").write_text("x")
    out = await call(TOOL, env, dir_path="empty")
    assert (out.llm, out.display, out.error_type) == (
        f"Directory {ws / 'empty'} is empty.",
        "Directory is empty.",
        None,
    )
    out = await call(TOOL, env, dir_path="f.txt")
    assert out.error_type == "path_is_not_a_directory"
    assert out.error == f"Error: Path is not a directory: {ws / 'f.txt'}"
    assert out.display == "Error: Path is not a directory."
    out = await call(TOOL, env, dir_path="nope")
    assert out.error_type == "ls_execution_error"
    assert out.error == (
        f"Error listing directory: ENOENT: no such file or directory, stat '{ws / 'nope'}'"
    )
    assert out.display == "Error: Failed to list directory."
    out = await call(TOOL, env, dir_path="/")
    assert out.invalid == outside_message(env, "/")
