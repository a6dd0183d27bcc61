"""The shared path helpers: resolution, confinement, ignore rules, collation, regexes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from actors.common import utf16_len
from actors.tools._collation import locale_sort_key
from actors.tools._discovery import GitIgnoreParser
from actors.tools._fs_errors import NodeFsError
from actors.tools._ignore import IgnoreRules
from actors.tools._paths import (
    js_prefix,
    make_relative,
    resolve_defensive_tool_path,
    resolve_to_real_path,
    shorten_path,
    validate_path_access,
    validate_path_string,
)

from ._file_env import make_env, outside_message


def test_make_relative() -> None:
    assert make_relative("/ws", "/ws") == "."
    assert make_relative("rel/x", "/ws") == "rel/x"


def test_shorten_path() -> None:
    # Expected values produced by Gemini's own shortenPath.
    assert shorten_path("short.txt") == "short.txt"
    assert shorten_path("a/very/long/directory/structure/that/goes/on/file.txt") == (
        "a/.../that/goes/on/file.txt"
    )
    assert shorten_path("/" + "x" * 50) == "/xxxxxxxxxxxxxxx...xxxxxxxxxxxxxxxx"


def test_resolve_to_real_path(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    (root / "real").mkdir()
    os.symlink(root / "real", root / "link")
    assert resolve_to_real_path(str(root / "link" / "not" / "there")) == str(
        root / "real" / "not" / "there"
    )
    assert resolve_to_real_path(f"file://{root}/a%20b") == f"{root}/a b"
    assert resolve_to_real_path(f"{root}/100%") == f"{root}/100%"
    os.symlink(root / "loop", root / "loop")
    with pytest.raises(NodeFsError) as caught:
        resolve_to_real_path(str(root / "loop" / "x"))
    assert caught.value.code == "ELOOP"


def test_resolve_defensive_tool_path(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "@scope").mkdir()
    assert resolve_defensive_tool_path("@src/new.ts", str(tmp_path)) == "src/new.ts"
    assert resolve_defensive_tool_path("@/src", str(tmp_path)) == "src"
    assert resolve_defensive_tool_path("@scope/x", str(tmp_path)) == "@scope/x"
    assert resolve_defensive_tool_path("a\0b", str(tmp_path)) == "ab"


def test_path_validation_messages() -> None:
    assert validate_path_string("ok/path") is None
    assert validate_path_string("a\nb") == (
        "Path contains invalid characters (newlines or control characters)."
    )
    assert validate_path_string("x/FAIL src/test.ts") == (
        "Path appears to be a misinterpreted log fragment."
    )
    assert validate_path_string('"quoted/and/long/enough/path"') == (
        "Path contains suspicious characters (double quotes or ellipses) and is too long to "
        "be a simple filename."
    )
    assert validate_path_string("a/" + "b" * 256) == (
        f'Path component "{"b" * 20}..." is too long (maximum 255 characters).'
    )
    assert validate_path_string("a\\" + "c" * 256 + "\\d") == (
        f'Path component "{"c" * 20}..." is too long (maximum 255 characters).'
    )
    for control in "\r\0\t":
        assert validate_path_string(f"a{control}b") == validate_path_string("a\nb")


def test_confinement(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    ws = env.workspace
    assert validate_path_access(str(ws / "new" / "file"), env) is None
    assert validate_path_access(str(ws / "node_modules" / "x"), env, "read") == outside_message(
        env, str(ws / "node_modules" / "x")
    )
    assert validate_path_access(str(ws / "gha-creds-1.json"), env) is not None
    assert validate_path_access(str(ws / ".env.local"), env) is None
    assert validate_path_access(str(env.project_temp_dir / "x"), env) is None
    assert validate_path_access(f"{ws}/a\tb", env) == (
        "Invalid path: Path contains invalid characters (newlines or control characters)."
    )
    os.symlink("/etc", ws / "etc")
    assert validate_path_access(str(ws / "etc" / "hosts"), env, "read") == outside_message(
        env, str(ws / "etc" / "hosts")
    )


def test_ignore_rules_match_the_npm_package() -> None:
    # Expected values produced by the `ignore` package (7.0) itself.
    rules = IgnoreRules().add(["*.log", "!keep.log", "dist/", "/root.txt", "docs/**/*.md"])
    cases = {
        "a.LOG": True,
        "keep.log": False,
        "dist/": True,
        "dist": False,
        "dist/x.js": True,
        "root.txt": True,
        "sub/root.txt": False,
        "docs/a/b.md": True,
        "docs/b.md": True,
        "src/app.ts": False,
    }
    assert {path: rules.ignores(path) for path in cases} == cases
    # A file in an ignored directory cannot be re-included.
    assert IgnoreRules().add(["build/", "!build/keep.txt"]).ignores("build/keep.txt")
    with pytest.raises(ValueError):
        rules.ignores("../x")


def test_nested_gitignore(tmp_path: Path) -> None:
    (tmp_path / ".git" / "info").mkdir(parents=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("*.tmp\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("x.txt\n/y.txt\n")
    parser = GitIgnoreParser(str(tmp_path), ["*.secret"])
    assert parser.is_ignored("sub/x.txt", False)
    assert parser.is_ignored("sub/deeper/x.txt", False)
    assert not parser.is_ignored("x.txt", False)
    assert parser.is_ignored("sub/y.txt", False)
    assert not parser.is_ignored("sub/deeper/y.txt", False)
    assert parser.is_ignored("a.tmp", False)
    assert parser.is_ignored("a.secret", False)
    assert parser.is_ignored(".git", True)
    assert not parser.is_ignored(str(tmp_path), True)


def test_gitignore_answers_for_a_path_of_a_thousand_components(tmp_path: Path) -> None:
    """npm ignore's ancestor walk was recursive (RecursionError, the call failed with
    Python's own message); an ignored ancestor still decides for what lies below."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("*.log\nbuild/\n")
    parser = GitIgnoreParser(str(tmp_path))
    deep = "a/" * 1000
    assert not parser.is_ignored(deep + "x.txt", False)
    assert parser.is_ignored(deep + "x.log", False)
    assert parser.is_ignored("build/" + deep + "x.txt", False)
    assert parser.is_ignored(deep + "build/x.txt", False)


def test_locale_order() -> None:
    # Node's `localeCompare` order for these names.
    names = ["b", "B", "a10", "a2", "_x", "-x", ".gemini", "a", "A", "ä", "a-b", "ab", "a_b"]
    assert sorted(names, key=locale_sort_key) == [
        "_x",
        "-x",
        ".gemini",
        "a",
        "A",
        "ä",
        "a_b",
        "a-b",
        "a10",
        "a2",
        "ab",
        "b",
        "B",
    ]


def test_javascript_strings() -> None:
    assert utf16_len("a😀") == 3
    assert js_prefix("a😀b", 2) == "a"


def test_a_path_of_thousands_of_missing_components_resolves_without_recursion(tmp_path: Path) -> None:
    """Gemini's robustRealpath recurses once per missing ancestor; ours loops (issue 17,
    defect 8: a thousand components raised RecursionError and killed the session)."""
    root = tmp_path.resolve()
    (root / "real").mkdir()
    os.symlink(root / "real", root / "link")
    deep = "/".join(["d"] * 2000)
    assert resolve_to_real_path(f"{root}/link/{deep}/x") == f"{root}/real/{deep}/x"
    os.symlink(root / "gone", root / "dangling")
    assert resolve_to_real_path(f"{root}/dangling/{deep}") == f"{root}/gone/{deep}"
