"""What an approval shows of an edit, a write and a shell call (the tools'
``confirmation_details``), and its bounds: the scheduler makes them on its event loop
and sends them in a message, so a huge file or a rewrite of every line is cut or noted,
never read or diffed without end."""

from __future__ import annotations

from pathlib import Path

from actors.tools import ToolEnv
from actors.tools._replace import EditTool
from actors.tools._shell import ShellTool
from actors.tools._write_file import (
    APPROVAL_EDIT_BUDGET,
    APPROVAL_FILE_LIMIT,
    APPROVAL_TEXT_LIMIT,
    WriteFileTool,
    cut_text,
)


def _env(tmp_path: Path) -> ToolEnv:
    return ToolEnv(workspace=tmp_path, project_temp_dir=tmp_path / "tmp")


def test_a_new_file_shows_its_content_and_an_overwrite_its_diff(tmp_path: Path) -> None:
    tool = WriteFileTool()
    new = tool.confirmation_details({"file_path": "notes.txt", "content": "milk\n"}, _env(tmp_path))
    assert new["isNewFile"] is True and new["newContent"] == "milk\n" and "+milk" in new["fileDiff"]
    (tmp_path / "notes.txt").write_text("eggs\n")
    old = tool.confirmation_details({"file_path": "notes.txt", "content": "milk\n"}, _env(tmp_path))
    assert old["isNewFile"] is False and "-eggs\n+milk\n" in old["fileDiff"]
    assert (tmp_path / "notes.txt").read_text() == "eggs\n"  # nothing written


def test_an_edit_that_would_fail_says_why(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("x = 1\n")
    details = EditTool().confirmation_details(
        {"file_path": "calc.py", "old_string": "y = 2", "new_string": "y = 3"}, _env(tmp_path)
    )
    assert "fileDiff" not in details
    assert details["note"].startswith("the edit would fail: Failed to edit, could not find the string")


def test_long_content_is_cut_after_whole_lines_and_says_how_many_are_left(tmp_path: Path) -> None:
    content = "".join(f"line {i:05}\n" for i in range(10_000))  # 110 000 characters
    details = WriteFileTool().confirmation_details({"file_path": "long.txt", "content": content}, _env(tmp_path))
    shown = details["newContent"]
    assert len(shown) <= APPROVAL_TEXT_LIMIT and shown.endswith("\n") and content.startswith(shown)
    assert details["newContentOmittedLines"] == 10_000 - shown.count("\n")
    assert len(details["fileDiff"]) <= APPROVAL_TEXT_LIMIT and details["fileDiffOmittedLines"] > 0


def test_a_huge_file_is_not_read_and_a_rewrite_of_every_line_is_not_diffed(tmp_path: Path) -> None:
    (tmp_path / "huge.txt").write_text("x" * (APPROVAL_FILE_LIMIT + 1))
    huge = EditTool().confirmation_details(
        {"file_path": "huge.txt", "old_string": "x", "new_string": "y", "allow_multiple": True}, _env(tmp_path)
    )
    assert huge["note"] == f"the file is too large to show a diff ({APPROVAL_FILE_LIMIT + 1} bytes)"
    lines = APPROVAL_EDIT_BUDGET * 2
    (tmp_path / "every.txt").write_text("".join(f"a{i}\nkeep\n" for i in range(lines)))
    rewrite = "".join(f"b{i}\nkeep\n" for i in range(lines))
    every = WriteFileTool().confirmation_details({"file_path": "every.txt", "content": rewrite}, _env(tmp_path))
    assert every["note"] == f"the diff is too large to show (more than {APPROVAL_EDIT_BUDGET} changed lines)"
    assert every["newContent"] == rewrite


def test_cut_text() -> None:
    assert cut_text("a\nb\nc", 100) == ("a\nb\nc", 0)
    assert cut_text("a\nb\nc", 3) == ("a\n", 2)
    assert cut_text("a\nb\nc\n", 4) == ("a\nb\n", 1)


def test_a_shell_call_shows_the_whole_command_and_its_directory(tmp_path: Path) -> None:
    command = "git log --oneline | " + "grep x | " * 40 + "wc -l"
    details = ShellTool().confirmation_details({"command": command, "dir_path": "sub"}, _env(tmp_path))
    assert details == {"command": command, "rootCommand": "git, grep, wc", "dirPath": "sub"}
