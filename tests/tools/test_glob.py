"""glob: matching, ordering, ignore handling, texts and errors."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from actors.tools import _glob
from actors.tools._glob import GlobTool, expand_braces, glob_files

from ._file_env import call, check_declaration, make_env, outside_message, remove_tree

TOOL = GlobTool()
DAY = 24 * 60 * 60


def test_declaration() -> None:
    check_declaration(
        TOOL,
        {
            "pattern": "string",
            "dir_path": "string",
            "case_sensitive": "boolean",
            "respect_git_ignore": "boolean",
            "respect_gemini_ignore": "boolean",
        },
        ["pattern"],
    )
    assert (TOOL.name, TOOL.display_name, TOOL.kind) == ("glob", "FindFiles", "search")


def touch(path: Path, age_s: float = 0, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))
    return path


async def test_recent_first_then_alphabetical(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    ws = env.workspace
    touch(ws / "zeta.txt", 3 * DAY)
    touch(ws / "Alpha.txt", 5 * DAY)
    touch(ws / "sub" / "beta.txt", 4 * DAY)
    touch(ws / "new.txt", 60)
    touch(ws / "newer.txt", 1)
    touch(ws / "node_modules" / "dep.txt")
    touch(ws / ".hidden" / "h.txt", 2 * DAY)
    out = await call(TOOL, env, pattern="**/*.txt")
    listing = [
        ws / "newer.txt",
        ws / "new.txt",
        ws / ".hidden" / "h.txt",
        ws / "Alpha.txt",
        ws / "sub" / "beta.txt",
        ws / "zeta.txt",
    ]
    assert out.llm == (
        f'Found 6 file(s) matching "**/*.txt" within {ws}, sorted by modification time '
        "(newest first):\n" + "\n".join(str(p) for p in listing)
    )
    assert out.display == "Found 6 matching file(s)"
    assert TOOL.describe({"pattern": "**/*.txt"}, env) == "'**/*.txt'"


async def test_a_pattern_with_a_reversed_range_finds_nothing(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    touch(env.workspace / "a.txt")
    out = await call(TOOL, env, pattern="[z-a]*")
    assert (out.llm, out.display) == (f'No files found matching pattern "[z-a]*" within {env.workspace}', "No files found")


async def test_no_match_and_ignored_counts(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    ws = env.workspace
    (ws / ".git").mkdir()
    (ws / ".gitignore").write_text("secret.txt\n")
    touch(ws / "secret.txt")
    out = await call(TOOL, env, pattern="*.rs")
    assert (out.llm, out.display) == (
        f'No files found matching pattern "*.rs" within {ws}',
        "No files found",
    )
    out = await call(TOOL, env, pattern="*.txt")
    assert out.llm == f'No files found matching pattern "*.txt" within {ws} (1 files were ignored)'
    touch(ws / "open.txt")
    out = await call(TOOL, env, pattern="*.txt")
    assert out.llm == (
        f'Found 1 file(s) matching "*.txt" within {ws} (1 additional files were ignored), '
        f"sorted by modification time (newest first):\n{ws / 'open.txt'}"
    )
    out = await call(TOOL, env, pattern="*.txt", respect_git_ignore=False)
    assert out.display == "Found 2 matching file(s)"


async def test_case_and_dir_path(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    ws = env.workspace
    touch(ws / "src" / "Main.PY")
    touch(ws / "top.py")
    assert (
        await call(TOOL, env, pattern="*.py", dir_path="src")
    ).display == "Found 1 matching file(s)"
    out = await call(TOOL, env, pattern="*.py", dir_path="src", case_sensitive=True)
    assert out.display == "No files found"
    assert TOOL.describe({"pattern": "*.py", "dir_path": "src"}, env) == "'*.py' within src"
    out = await call(TOOL, env, pattern="src/*.py")
    assert out.llm.endswith(f"\n{ws / 'src' / 'Main.PY'}")


async def test_symlinks_and_literal_paths(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    ws = env.workspace
    touch(ws / "real.txt")
    os.symlink(ws / "real.txt", ws / "alias.txt")
    touch(ws / "q[1].txt")
    out = await call(TOOL, env, pattern="*.txt")
    # Symlinked entries resolve elsewhere and are dropped, as in Gemini.
    assert str(ws / "alias.txt") not in out.llm
    assert out.display == "Found 2 matching file(s)"
    out = await call(TOOL, env, pattern="q[1].txt")
    assert out.llm.endswith(f"\n{ws / 'q[1].txt'}")


async def test_validation(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    touch(env.workspace / "f.txt")
    ws = env.workspace
    assert (await call(TOOL, env, pattern="*", dir_path="nope")).invalid == (
        f"Search path does not exist {ws / 'nope'}"
    )
    assert (await call(TOOL, env, pattern="*", dir_path="f.txt")).invalid == (
        f"Search path is not a directory: {ws / 'f.txt'}"
    )
    assert (await call(TOOL, env, pattern="*", dir_path="..")).invalid == outside_message(
        env, str(env.workspace.parent)
    )
    assert (await call(TOOL, env, pattern="  ")).invalid == (
        "The 'pattern' parameter cannot be empty."
    )


async def test_execution_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = make_env(tmp_path)

    def broken(*args: object, **kwargs: object) -> object:
        raise OSError(5, "boom")

    monkeypatch.setattr(_glob, "glob_files", broken)
    out = await call(TOOL, env, pattern="*")
    assert out.error_type == "glob_execution_error"
    assert out.error == "Error during glob search operation: EIO: i/o error, access ''"
    assert out.display == "Error: An unexpected error occurred."


def test_matcher(tmp_path: Path) -> None:
    for name in ("a.ts", "b.TS", "c.md", "d/e.ts", "d/f/g.ts", ".x.ts"):
        touch(tmp_path / name)

    def names(pattern: str, nocase: bool = True) -> list[str]:
        found = glob_files(pattern, str(tmp_path), nocase=nocase)
        return sorted(os.path.relpath(e.fullpath, tmp_path) for e in found)

    assert names("*.ts") == [".x.ts", "a.ts", "b.TS"]
    assert names("*.ts", nocase=False) == [".x.ts", "a.ts"]
    assert names("**/*.ts", nocase=False) == [".x.ts", "a.ts", "d/e.ts", "d/f/g.ts"]
    assert names("d/**") == ["d/e.ts", "d/f/g.ts"]
    assert names("*.{md,ts}", nocase=False) == [".x.ts", "a.ts", "c.md"]
    assert names("[ab].*") == ["a.ts", "b.TS"]
    assert names("!(a).ts", nocase=False) == [".x.ts"]
    assert names("+(a|b).ts") == ["a.ts", "b.TS"]
    assert names("./d/../c.md") == ["c.md"]
    # Character classes as minimatch reads them: a reversed range is dropped, and a
    # class of nothing but reversed ranges matches nothing (it was Python's re.error).
    assert names("[a-c].ts") == ["a.ts", "b.TS"]
    assert names("[z-a].ts") == names("[!z-a].ts") == names("d/[z-a]*") == []
    assert names("[z-ab].ts") == ["b.TS"]
    assert names("[a\\-b].ts") == ["a.ts", "b.TS"]
    assert expand_braces("x{1..3}") == ["x1", "x2", "x3"]
    assert expand_braces("{a,b{c,d}}e") == ["ae", "bce", "bde"]
    assert expand_braces("{a}") == ["{a}"]


async def test_patterns_reaching_outside_the_workspace_are_refused(tmp_path: Path) -> None:
    """Issue 17, defect 9: ``/etc/*``, ``../outside/*`` and ``{../x,y}/*`` listed files
    outside the workspace; glob now refuses them with the message every other file tool
    gives (Gemini CLI's glob confines only ``dir_path``: docs/differences.md)."""
    env = make_env(tmp_path)
    ws = env.workspace
    touch(ws / "in.txt")
    touch(ws / "sub" / "s.txt")
    outside = ws.parent / "outside"
    touch(outside / "secret.txt")
    refused = {
        "/etc/*": "/etc",
        "../outside/*": str(outside),
        "{../outside,sub}/*": str(outside),
        f"{outside}/secret.txt": str(outside / "secret.txt"),
        "sub/../../outside/**": str(outside),
    }
    for pattern, base in refused.items():
        assert (await call(TOOL, env, pattern=pattern)).invalid == outside_message(env, base), pattern
    result = await TOOL.execute({"pattern": "../outside/*"}, env)  # no validation first
    assert (result.error_type, result.error_message, result.return_display) == (
        "path_not_in_workspace",
        outside_message(env, str(outside)),
        "Path not in workspace.",
    )
    # A `..` after a wildcard cannot climb above where the walk started.
    for pattern in ("*/../../outside/*", "**/../../outside/*", "sub/*/../../../outside/*"):
        out = await call(TOOL, env, pattern=pattern)
        assert out.invalid is None and out.display == "No files found", pattern
    assert (await call(TOOL, env, pattern="sub/../in.txt")).llm.endswith(f"\n{ws / 'in.txt'}")
    # What the other tools may read outside the workspace, glob may list.
    touch(env.project_temp_dir / "plan.md")
    out = await call(TOOL, env, pattern=f"{env.project_temp_dir}/*.md")
    assert out.llm.endswith(f"\n{env.project_temp_dir / 'plan.md'}")


def test_brace_expansion_stops_at_brace_expansions_cap() -> None:
    """brace-expansion gives at most 100 000 alternatives; without the cap thirty
    ``{a,b}`` groups (a billion patterns) or ``{1..100000000}`` exhausted memory."""
    assert len(expand_braces("{a,b}" * 30)) == _glob.EXPANSION_MAX == 100_000
    numbers = expand_braces("x{1..100000000}")
    assert (len(numbers), numbers[0], numbers[-1]) == (100_000, "x1", "x100000")


async def test_a_tree_hundreds_of_directories_deep_is_walked(tmp_path: Path) -> None:
    """The walk and the ignore matcher recursed once per directory: RecursionError
    (glob_execution_error) from about 400 levels, where Gemini CLI lists the file."""
    env = make_env(tmp_path)
    deepest = str(env.workspace)
    for _ in range(450):
        deepest = os.path.join(deepest, "d")
        os.mkdir(deepest)
    try:
        touch(Path(deepest) / "x.txt")
        out = await call(TOOL, env, pattern="**/*.txt")
        assert out.llm.endswith(f"\n{deepest}/x.txt")
    finally:
        remove_tree(env.workspace)
