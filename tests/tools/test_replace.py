"""replace: occurrence rules, strategies, creation, every error type, texts."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from actors.tools import _write_file
from actors.tools._replace import EditTool, calculate_replacement, levenshtein

from ._file_env import call, check_declaration, make_env, outside_message

TOOL = EditTool()


def test_declaration() -> None:
    check_declaration(
        TOOL,
        {
            "file_path": "string",
            "instruction": "string",
            "old_string": "string",
            "new_string": "string",
            "allow_multiple": "boolean",
        },
        ["file_path", "instruction", "old_string", "new_string"],
    )
    assert (TOOL.name, TOOL.display_name, TOOL.kind) == ("replace", "Edit", "edit")


def edit(**kwargs: object) -> dict[str, object]:
    return {"instruction": "change it", **kwargs}


async def test_single_replacement(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    target = env.workspace / "a.py"
    target.write_text("def f():\n    return 1\n")
    out = await call(
        TOOL, env, **edit(file_path="a.py", old_string="return 1", new_string="return 2")
    )
    assert target.read_text() == "def f():\n    return 2\n"
    assert out.llm == (
        f"Successfully modified file: {target} (1 replacements). Here is the updated code:\n"
        "def f():\n    return 2\n"
    )
    assert out.display["fileDiff"] == (
        "Index: a.py\n" + "=" * 67 + "\n--- a.py\tCurrent\n+++ a.py\tProposed\n"
        "@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2\n"
    )
    assert out.display["diffStat"]["model_added_lines"] == 1
    assert out.display["diffStat"]["model_removed_lines"] == 1
    assert out.display["isNewFile"] is False
    assert out.display["originalContent"] == "def f():\n    return 1\n"


async def test_occurrence_rules(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    target = env.workspace / "m.txt"
    target.write_text("x = 1\nx = 1\n")
    out = await call(TOOL, env, **edit(file_path="m.txt", old_string="x = 1", new_string="y"))
    assert out.error_type == "edit_expected_occurrence_mismatch"
    assert out.error == (
        "Failed to edit, Expected 1 occurrence but found 2 for old_string in file: m.txt. If "
        "you intended to replace multiple occurrences, set 'allow_multiple' to true."
    )
    assert out.display == "Error: Failed to edit, expected 1 occurrence but found 2."
    out = await call(
        TOOL,
        env,
        **edit(file_path="m.txt", old_string="x = 1", new_string="y", allow_multiple=True),
    )
    assert out.llm.startswith(f"Successfully modified file: {target} (2 replacements).")
    assert target.read_text() == "y\ny\n"
    out = await call(TOOL, env, **edit(file_path="m.txt", old_string="zzz", new_string="q"))
    assert out.error_type == "edit_no_occurrence_found"
    assert out.error == (
        "Failed to edit, 0 occurrences found for old_string in m.txt. Ensure you're not "
        "escaping content incorrectly and check whitespace, indentation, and context. Use "
        "read_file tool to verify."
    )
    assert out.display == "Error: Failed to edit, could not find the string to replace."
    (env.workspace / "one.txt").write_text("y\n")
    out = await call(TOOL, env, **edit(file_path="one.txt", old_string="y", new_string="y"))
    assert out.error_type == "edit_no_change"
    assert out.error == (
        "No changes to apply. The old_string and new_string are identical in file: one.txt"
    )
    assert out.display == "Error: No changes to apply. The old_string and new_string are identical."


async def test_create_and_missing_files(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    out = await call(TOOL, env, **edit(file_path="new/n.txt", old_string="", new_string="hi\n"))
    target = env.workspace / "new" / "n.txt"
    assert target.read_text() == "hi\n"
    assert out.llm == (
        f"Created new file: {target} with provided content. Here is the updated code:\nhi\n"
    )
    assert out.display == "Created new/n.txt"
    out = await call(TOOL, env, **edit(file_path="new/n.txt", old_string="", new_string="x"))
    assert out.error_type == "attempt_to_create_existing_file"
    assert out.error == f"File already exists, cannot create: {target}"
    assert out.display == "Error: Failed to edit. Attempted to create a file that already exists."
    out = await call(TOOL, env, **edit(file_path="nope.txt", old_string="a", new_string="b"))
    assert out.error_type == "file_not_found"
    assert out.error == f"File not found: {env.workspace / 'nope.txt'}"
    assert out.display == (
        "Error: File not found. Cannot apply edit. Use an empty old_string to create a new file."
    )


async def test_flexible_and_fuzzy_matches(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    target = env.workspace / "i.py"
    target.write_text("class A:\n    def f(self):\n        return 1\n")
    # Indentation differs: the flexible strategy re-indents the replacement.
    await call(
        TOOL,
        env,
        **edit(
            file_path="i.py",
            old_string="def f(self):\n    return 1",
            new_string="def g(self):\n    return 2",
        ),
    )
    assert target.read_text() == "class A:\n    def g(self):\n        return 2\n"
    # A near miss (one character) is applied by the fuzzy strategy, and said so.
    out = await call(
        TOOL,
        env,
        **edit(
            file_path="i.py",
            old_string="    def g(self):\n        retrun 2",
            new_string="    def h(self):\n        return 3",
        ),
    )
    assert target.read_text() == "class A:\n    def h(self):\n        return 3\n"
    # Gemini's wording: "line" stays singular for a single range.
    assert out.llm.endswith(" Applied fuzzy match at line 2-3.")


async def test_crlf_files_keep_crlf(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    target = env.workspace / "w.txt"
    target.write_bytes(b"one\r\ntwo\r\n")
    out = await call(TOOL, env, **edit(file_path="w.txt", old_string="two", new_string="2"))
    assert target.read_bytes() == b"one\r\n2\r\n"
    assert out.display["originalContent"] == "one\ntwo\n"


async def test_relative_paths_are_found_by_name(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    (env.workspace / "src" / "pkg").mkdir(parents=True)
    target = env.workspace / "src" / "pkg" / "mod.py"
    target.write_text("a = 1\n")
    out = await call(
        TOOL, env, **edit(file_path="pkg/mod.py", old_string="a = 1", new_string="a = 2")
    )
    assert out.error_type is None
    assert target.read_text() == "a = 2\n"


async def test_validation(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    out = await call(TOOL, env, **edit(file_path="", old_string="a", new_string="b"))
    assert out.invalid == "The 'file_path' parameter must be non-empty."
    out = await call(TOOL, env, **edit(file_path="/etc/hosts", old_string="a", new_string="b"))
    assert out.invalid == outside_message(env, "/etc/hosts")
    out = await call(
        TOOL,
        env,
        **edit(file_path="a.py", old_string="x", new_string="x\n// unchanged code ...\n"),
    )
    assert out.invalid == (
        "`new_string` contains an omission placeholder (for example 'rest of methods ...'). "
        "Provide exact literal replacement text."
    )
    ok = edit(
        file_path="a.py", old_string="// rest of code ...", new_string="// rest of code ...\nx"
    )
    assert TOOL.validate(ok, env) is None


async def test_preparation_and_write_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_env(tmp_path)
    target = env.workspace / "f.txt"
    target.write_text("a\n")
    real_open = open
    failing_mode = {"mode": "r"}

    def failing(path: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        if failing_mode["mode"] in mode:
            raise PermissionError(errno.EACCES, "denied", str(path))
        return real_open(path, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(_write_file, "open", failing, raising=False)
    out = await call(TOOL, env, **edit(file_path="f.txt", old_string="a", new_string="b"))
    message = f"EACCES: permission denied, open '{target}'"
    assert (out.error_type, out.error) == ("edit_preparation_failure", message)
    assert out.llm == out.display == f"Error preparing edit: {message}"
    failing_mode["mode"] = "w"
    out = await call(TOOL, env, **edit(file_path="f.txt", old_string="a", new_string="b"))
    assert (out.error_type, out.error) == ("file_write_failure", message)
    assert out.llm == f"Error executing edit: {message}"
    assert out.display == f"Error writing file: {message}"


def test_describe(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    assert (
        TOOL.describe(edit(file_path="a.txt", old_string="", new_string="x"), env) == "Create a.txt"
    )
    assert TOOL.describe(edit(file_path="a.txt", old_string="q", new_string="q"), env) == (
        "No file changes to a.txt"
    )
    long_old = "first line that is definitely longer than thirty\nsecond"
    assert TOOL.describe(edit(file_path="a.txt", old_string=long_old, new_string="b"), env) == (
        "a.txt: first line that is definitely ... => b"
    )


def test_strategies_directly() -> None:
    regex = calculate_replacement("if (a==b) {\n  go();\n}\n", "if (a == b) {", "if (c) {", False)
    assert (regex.new_content, regex.occurrences) == ("if (c) {\n  go();\n}\n", 1)
    assert calculate_replacement("abc", "", "x", False).occurrences == 0
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("", "abc") == 3
    assert levenshtein("😀", "a") == 2  # UTF-16 units, as fast-levenshtein counts
