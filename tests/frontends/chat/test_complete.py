"""Tab completion in the chat, as a pure function of the line and the cursor's word."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.frontends.chat._app import tool_names
from actors.frontends.chat._complete import complete, path_candidates

TOOLS = ("read_file", "read_many_files", "run_shell_command", "write_file")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("")
    (tmp_path / "src" / "my notes.md").write_text("")
    (tmp_path / "setup.cfg").write_text("")
    (tmp_path / ".env").write_text("")
    return tmp_path


def at_end(line: str, ws: Path) -> list[str]:
    """Completions of the last word of ``line`` (readline splits words at spaces)."""
    begidx = line.rfind(" ") + 1
    return complete(line, begidx, len(line), tools=TOOLS, workspace=ws)


def test_slash_commands_at_the_start_of_the_line(ws: Path) -> None:
    assert at_end("/to", ws) == ["/tool ", "/tool! "]
    assert at_end("/q", ws) == ["/quit "]
    assert at_end("/m", ws) == ["/mode ", "/mcp "]
    prompts = ("/greet", "/srv.help")
    assert complete("/gr", 0, 3, tools=TOOLS, workspace=ws, commands=prompts) == ["/greet "]
    assert complete("/", 0, 1, tools=TOOLS, workspace=ws, commands=prompts)[-2:] == ["/greet ", "/srv.help "]
    assert at_end("/", ws)[0] == "/help "
    assert at_end("say /to", ws) == []  # only the first word is a command


def test_tool_names_after_tool(ws: Path) -> None:
    assert at_end("/tool read_", ws) == ["read_file ", "read_many_files "]
    assert at_end("/tool! ru", ws) == ["run_shell_command "]
    assert at_end("/tool ", ws) == [f"{t} " for t in TOOLS]
    assert at_end('/tool read_file {"file_path": "sr', ws) == []  # JSON is not completed


def test_modes_after_mode(ws: Path) -> None:
    assert at_end("/mode a", ws) == ["auto_edit "]


def test_paths_after_at_in_a_prompt(ws: Path) -> None:
    assert at_end("explain @sr", ws) == ["@src/"]
    assert at_end("explain @src/", ws) == ["@src/main.py ", "@src/my\\ notes.md "]
    assert at_end("explain @s", ws) == ["@setup.cfg ", "@src/"]
    assert at_end("explain @", ws) == ["@setup.cfg ", "@src/"]  # hidden files only when asked for
    assert at_end("explain @.e", ws) == ["@.env "]
    assert at_end("explain @nothing", ws) == []


def test_paths_in_shell_commands_but_not_the_command_itself(ws: Path) -> None:
    assert at_end("!cat src/m", ws) == ["src/main.py ", "src/my\\ notes.md "]
    assert at_end("!!wc -l set", ws) == ["setup.cfg "]
    assert at_end("!ca", ws) == []
    assert at_end("cat src/m", ws) == []  # a prompt's words are not paths unless after @


def test_a_cursor_in_the_middle_completes_the_word_under_it(ws: Path) -> None:
    line = "/tool rea {}"
    assert complete(line, 6, 9, tools=TOOLS, workspace=ws) == ["read_file ", "read_many_files "]


def test_absolute_paths_and_unreadable_directories(ws: Path) -> None:
    assert path_candidates(f"{ws}/src/ma", Path("/")) == [f"{ws}/src/main.py "]
    assert path_candidates("no/such/dir/x", ws) == []


def test_the_chat_completes_every_built_in_tool() -> None:
    names = tool_names()
    assert "read_file" in names and "run_shell_command" in names
