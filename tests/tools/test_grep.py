"""grep_search: the three strategies, result format, limits, errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import trio
import trio.testing

from actors.tools import _grep
from actors.tools._grep import GrepTool

from ._file_env import call, check_declaration, make_env, outside_message

TOOL = GrepTool()
needs_grep = pytest.mark.skipif(shutil.which("grep") is None, reason="needs grep")
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture
def walk_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither git nor grep: the JavaScript-style walk does the search."""
    monkeypatch.setattr(_grep, "command_available", lambda command: False)


def test_declaration() -> None:
    check_declaration(
        TOOL,
        {
            "pattern": "string",
            "dir_path": "string",
            "include_pattern": "string",
            "exclude_pattern": "string",
            "names_only": "boolean",
            "max_matches_per_file": "integer",
            "total_max_matches": "integer",
        },
        ["pattern"],
    )
    props = TOOL.declaration("")["parametersJsonSchema"]["properties"]
    assert props["max_matches_per_file"]["minimum"] == props["total_max_matches"]["minimum"] == 1
    assert (TOOL.name, TOOL.display_name, TOOL.kind) == ("grep_search", "SearchText", "search")


def foo_file(path: Path) -> None:
    path.write_text("x1\nfoo\nx3\nfoo\nfoo\nfoobar")


@needs_grep
async def test_single_match_gets_context(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    (env.workspace / "a.py").write_text('import os\ndef main():\n    print("hello")')
    out = await call(TOOL, env, pattern="print")
    assert out.llm == (
        'Found 1 match for pattern "print" in the workspace directory:\n---\nFile: a.py\n'
        'L1- import os\nL2- def main():\nL3:     print("hello")\n---'
    )
    assert out.display == {
        "summary": "Found 1 match",
        "matches": [
            {
                "filePath": "a.py",
                "absolutePath": str(env.workspace / "a.py"),
                "lineNumber": 3,
                "line": '    print("hello")',
            }
        ],
    }


@needs_grep
async def test_many_matches_limits_and_filters(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    foo_file(env.workspace / "b.txt")
    out = await call(TOOL, env, pattern="FOO")
    assert out.llm == (
        'Found 4 matches for pattern "FOO" in the workspace directory:\n---\nFile: b.txt\n'
        "L2: foo\nL4: foo\nL5: foo\nL6: foobar\n---"
    )
    out = await call(TOOL, env, pattern="foo", total_max_matches=2)
    assert out.llm == (
        'Found 2 matches for pattern "foo" in the workspace directory (results limited to 2 '
        "matches for performance):\n---\nFile: b.txt\nL1- x1\nL2: foo\nL3- x3\nL4: foo\n"
        "L5- foo\nL6- foobar\n---"
    )
    assert out.display["summary"] == "Found 2 matches (limited)"
    out = await call(TOOL, env, pattern="foo", max_matches_per_file=1)
    assert out.display["summary"] == "Found 1 match"
    out = await call(TOOL, env, pattern="foo", exclude_pattern="BAR")
    assert [m["lineNumber"] for m in out.display["matches"]] == [2, 4, 5]


@needs_grep
async def test_include_names_only_and_no_match(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    (env.workspace / "sub").mkdir()
    foo_file(env.workspace / "sub" / "c.txt")
    (env.workspace / "d.py").write_text("foo = 1\n")
    out = await call(TOOL, env, pattern="foo", names_only=True)
    assert out.llm == (
        'Found 2 files with matches for pattern "foo" in the workspace directory:\nd.py\nsub/c.txt'
    )
    assert out.display == {"summary": "Found 2 files", "matches": []}
    out = await call(TOOL, env, pattern="foo", include_pattern="*.py")
    assert [m["filePath"] for m in out.display["matches"]] == ["d.py"]
    assert out.llm.startswith(
        'Found 1 match for pattern "foo" in the workspace directory (filter: "*.py"):\n'
    )
    out = await call(TOOL, env, pattern="zzz", include_pattern="*.py")
    assert out.llm == (
        'No matches found for pattern "zzz" in the workspace directory (filter: "*.py").'
    )
    assert out.display == {"summary": "No matches found", "matches": []}
    out = await call(TOOL, env, pattern="zzz", dir_path="sub")
    assert out.llm == 'No matches found for pattern "zzz" in path "sub".'


@needs_git
async def test_git_grep_skips_ignored_files(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    await trio.run_process(["git", "init", "-q"], cwd=env.workspace)
    (env.workspace / ".gitignore").write_text("ignored.txt\n")
    (env.workspace / "ignored.txt").write_text("needle\n")
    (env.workspace / "kept.txt").write_text("needle\n")
    out = await call(TOOL, env, pattern="needle", names_only=True)
    assert out.llm == (
        'Found 1 files with matches for pattern "needle" in the workspace directory:\nkept.txt'
    )


async def test_walk_strategy_uses_javascript_regex(tmp_path: Path, walk_only: None) -> None:
    env = make_env(tmp_path)
    for name in ("b", "10", "2"):
        (env.workspace / name).write_text("abc123\nfoo\n")
    (env.workspace / "node_modules").mkdir()
    (env.workspace / "node_modules" / "dep").write_text("abc123\n")
    out = await call(TOOL, env, pattern=r"\D\d{3}$")
    # Numeric file names come first, in numeric order: JavaScript object key order.
    assert out.llm == (
        'Found 3 matches for pattern "\\D\\d{3}$" in the workspace directory:\n---\n'
        "File: 2\nL1: abc123\nL2- foo\nL3- \n---\nFile: 10\nL1: abc123\nL2- foo\nL3- \n---\n"
        "File: b\nL1: abc123\nL2- foo\nL3- \n---"
    )


async def test_walk_strategy_timeout(
    tmp_path: Path, walk_only: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_env(tmp_path, context={"fileFiltering": {"searchTimeout": 0}})
    monkeypatch.setattr(_grep, "DEFAULT_SEARCH_TIMEOUT_MS", -1)
    (env.workspace / "a").write_text("x\n")
    out = await call(TOOL, env, pattern="x")
    message = (
        "Operation timed out after 0ms. In large repositories, consider narrowing your "
        "search scope by specifying a 'dir_path' or an 'include_pattern'."
    )
    assert (out.error_type, out.error) == ("grep_execution_error", message)
    assert out.llm == f"Error during grep search operation: {message}"
    assert out.display == f"Error: {message}"


async def test_validation(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    (env.workspace / "f.txt").write_text("x")
    assert (await call(TOOL, env, pattern="(")).invalid == (
        "Invalid regular expression pattern provided: (. Error: Invalid regular expression: "
        "/(/: Unterminated group"
    )
    assert (await call(TOOL, env, pattern="x", exclude_pattern="[")).invalid == (
        "Invalid exclude regular expression pattern provided: [. Error: Invalid regular "
        "expression: /[/: Unterminated character class"
    )
    ws = env.workspace
    assert (await call(TOOL, env, pattern="x", dir_path="f.txt")).invalid == (
        f"Path is not a directory: {ws / 'f.txt'}"
    )
    assert (await call(TOOL, env, pattern="x", dir_path="nope")).invalid == (
        f"Path does not exist: {ws / 'nope'}"
    )
    assert (await call(TOOL, env, pattern="x", dir_path="/usr")).invalid == outside_message(
        env, "/usr"
    )
    assert TOOL.validate({"pattern": "(?<name>a)\\k<name>"}, env) is None


async def test_execute_checks_dir_path_again(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    (env.workspace / "f.txt").write_text("x")
    result = await TOOL.execute({"pattern": "x", "dir_path": "f.txt"}, env)
    assert result.error_type == "path_is_not_a_directory"
    assert result.return_display == "Error: Path is not a directory."
    result = await TOOL.execute({"pattern": "x", "dir_path": "gone"}, env)
    assert result.error_type == "file_not_found"
    assert result.error_message == f"Path does not exist: {env.workspace / 'gone'}"


def test_describe(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    assert TOOL.describe({"pattern": "foo", "include_pattern": "*.py", "dir_path": "."}, env) == (
        "'foo' in *.py within ./"
    )
    assert TOOL.describe({"pattern": "foo", "dir_path": "src/x"}, env) == "'foo' within src/x"
    assert TOOL.describe({"pattern": "foo"}, env) == "'foo'"


async def test_cancel_kills_the_search_process(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    search = _grep._Search(
        pattern="x",
        path=str(env.workspace),
        include=None,
        exclude=None,
        max_matches=10,
        per_file=None,
        trio_deadline=trio.current_time() + 60,
        walk_deadline=0,
    )
    started: list[str] = []
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                started.append("run")
                await _grep._process_search(search, ["sleep", "30"], None)
                started.append("returned")  # never: the cancel must propagate

            nursery.start_soon(run)
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    assert started == ["run"]


async def test_enough_matches_stop_the_process(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    script = "printf 'a.txt:1:x\\nb.txt:2:y\\n'; exec sleep 30"
    search = _grep._Search(
        pattern="x",
        path=str(env.workspace),
        include=None,
        exclude=None,
        max_matches=1,
        per_file=None,
        trio_deadline=trio.current_time() + 60,
        walk_deadline=0,
    )
    with trio.fail_after(10):
        found = await _grep._process_search(search, ["sh", "-c", script], None)
    assert [(m.file_path, m.line_number, m.line) for m in found] == [("a.txt", 1, "x")]


async def test_grep_permission_errors_keep_partial_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_env(tmp_path)
    script = "echo './a.txt:3:hit'; echo 'grep: ./b: Permission denied' >&2; exit 2"

    async def fake_grep(search: _grep._Search) -> list[_grep.GrepMatch]:
        return await _grep._process_search(search, ["sh", "-c", script], None)

    monkeypatch.setattr(_grep, "_system_grep", fake_grep)
    monkeypatch.setattr(_grep, "command_available", lambda command: command == "grep")
    result = await TOOL.execute({"pattern": "hit", "names_only": True}, env)
    assert result.llm_content == (
        'Found 1 files with matches for pattern "hit" in the workspace directory:\na.txt'
    )
