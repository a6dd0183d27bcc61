"""``@path`` expansion in headless prompts (Gemini's handleAtCommand + read_many_files)."""

from __future__ import annotations

import base64
import os
import subprocess
import time
from pathlib import Path

import pytest

from actors.host.at_command import expand_at_references, parse_at_commands
from actors.tools._base import ToolEnv

HEADER = {"text": "\n--- Content from referenced files ---"}
FOOTER = {"text": "\n--- End of content ---"}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = (tmp_path / "ws").resolve()
    root.mkdir()
    (root / "a.txt").write_text("  alpha\n\n")
    (root / "dir" / "sub").mkdir(parents=True)
    (root / "dir" / "b.txt").write_text("bravo\n")
    (root / "dir" / "sub" / "c.txt").write_text("charlie")
    return root


def env_for(ws: Path, **settings: object) -> ToolEnv:
    return ToolEnv(
        workspace=ws,
        project_temp_dir=ws.parent / "home" / ".gemini" / "tmp" / "ws",
        settings=settings,
    )


def expand(query: str, ws: Path, **kwargs: object) -> list[dict[str, object]]:
    return expand_at_references(query, ws, env=env_for(ws), **kwargs)  # type: ignore[arg-type]


def test_missing_file_leaves_the_prompt_as_typed(ws: Path) -> None:
    query = "@nonexistent-file-that-does-not-exist.txt explain this"
    assert expand(query, ws) == [{"text": query}]
    assert expand_at_references(query, ws) == [{"text": query}]  # default env


def test_one_file(ws: Path) -> None:
    assert expand("explain @a.txt please", ws) == [
        {"text": "explain @a.txt please"},
        HEADER,
        {"text": "\nContent from @a.txt:\n"},
        {"text": "alpha"},
        FOOTER,
    ]


def test_directory_means_all_its_files(ws: Path) -> None:
    assert expand("summarize @dir", ws) == [
        {"text": "summarize @dir/**"},
        HEADER,
        {"text": "\nContent from @dir/b.txt:\n"},
        {"text": "bravo"},
        {"text": "\nContent from @dir/sub/c.txt:\n"},
        {"text": "charlie"},
        FOOTER,
    ]


def test_parsing_rules() -> None:
    assert parse_at_commands("mail user@example.com, see @a.txt. ok") == [
        ("text", "mail user"),
        ("atPath", "@example.com"),
        ("text", ", see "),
        ("atPath", "@a.txt"),
        ("text", ". ok"),
    ]
    assert parse_at_commands(r"@my\ file.txt and \@not (@x;y)") == [
        ("atPath", "@my file.txt"),
        ("text", r" and \@not ("),
        ("atPath", "@x"),
        ("text", ";y)"),
    ]
    assert parse_at_commands('@"quoted name" @a:1 @') == [
        ("atPath", '@"quoted name"'),
        ("atPath", "@a:1"),
        ("text", " @"),
    ]


def test_spaces_are_inserted_before_references(ws: Path) -> None:
    parts = expand("user@example.com and @a.txt.", ws)
    assert parts[0] == {"text": "user @example.com and @a.txt."}
    assert parts[2] == {"text": "\nContent from @a.txt:\n"}


def test_escaped_path_with_space(ws: Path) -> None:
    (ws / "my file.txt").write_text("spaced")
    parts = expand(r"read @my\ file.txt", ws)
    assert parts[0] == {"text": "read @my file.txt"}
    assert parts[2:4] == [{"text": "\nContent from @my file.txt:\n"}, {"text": "spaced"}]


def test_glob_fallback_takes_the_newest_match(ws: Path) -> None:
    now = time.time()
    (ws / "old-notes.md").write_text("old")
    os.utime(ws / "old-notes.md", (now - 100, now - 100))
    (ws / "dir" / "new-notes.md").write_text("new")
    os.utime(ws / "dir" / "new-notes.md", (now - 10, now - 10))
    assert expand("look at @notes", ws) == [
        {"text": "look at @dir/new-notes.md"},
        HEADER,
        {"text": "\nContent from @notes:\n"},
        {"text": "new"},
        FOOTER,
    ]
    # Without the glob tool registered there is no fallback.
    assert expand("look at @notes", ws, glob_available=False) == [{"text": "look at @notes"}]


def test_ignored_paths_are_skipped(ws: Path) -> None:
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / ".gitignore").write_text("secret.txt\n")
    (ws / "secret.txt").write_text("s")
    (ws / ".geminiignore").write_text("private.txt\n")
    (ws / "private.txt").write_text("p")
    assert expand("@secret.txt @private.txt", ws) == [{"text": "@secret.txt @private.txt"}]
    settings_env = env_for(ws, context={"fileFiltering": {"respectGitIgnore": False}})
    parts = expand_at_references("@secret.txt", ws, env=settings_env)
    assert parts[2:4] == [{"text": "\nContent from @secret.txt:\n"}, {"text": "s"}]


def test_excluded_and_binary_files(ws: Path) -> None:
    (ws / "archive.zip").write_bytes(b"PK\x03\x04")
    (ws / ".env").write_text("KEY=1")
    assert expand("@archive.zip", ws) == [
        {"text": "@archive.zip"},
        HEADER,
        {"text": "No files matching the criteria were found or all were skipped."},
    ]
    assert expand("@.env", ws)[2] == {
        "text": "No files matching the criteria were found or all were skipped."
    }
    (ws / "data.dat").write_bytes(b"\x00\x01\x02binary")
    assert expand("@data.dat", ws)[2:4] == [
        {"text": "\nContent from @data.dat:\n"},
        {"text": "Cannot display content of binary file: data.dat"},
    ]


def test_truncated_file_gets_the_warning(ws: Path) -> None:
    (ws / "long.txt").write_text("\n".join(f"line {i}" for i in range(2500)))
    content = expand("@long.txt", ws)[3]["text"]
    assert isinstance(content, str)
    assert content.startswith(
        "[WARNING: This file was truncated. To view the full content, use the 'read_file' tool "
        "on this specific file.]\n\nline 0\n"
    )
    assert content.endswith("line 1999")


def test_images_only_when_named(ws: Path) -> None:
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    )
    (ws / "dir" / "pic.png").write_bytes(png)
    named = expand("@dir/pic.png", ws)
    assert named[2] == {
        "inlineData": {"data": base64.b64encode(png).decode(), "mimeType": "image/png"}
    }
    assert named[3] == FOOTER
    in_dir = expand("@dir", ws)
    assert all("inlineData" not in p for p in in_dir)


def test_outside_the_workspace(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("nope")
    assert expand(f"@{outside}", ws) == [{"text": f"@{outside}"}]
    absolute = expand(f"@{ws / 'a.txt'}", ws)
    assert absolute[0] == {"text": "@a.txt"}
    assert absolute[2] == {"text": "\nContent from @a.txt:\n"}


def test_a_reference_that_is_a_bad_glob_is_left_as_typed(ws: Path) -> None:
    # Not a file: its search (``**/*x[z-a]*``) finds nothing, as minimatch's would; it
    # raised Python's re.error and the prompt was lost.
    query = 'read @"x[z-a]" please'
    assert expand(query, ws) == [{"text": query}]
