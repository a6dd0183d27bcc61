"""read_file: Gemini CLI's texts, ranges, truncation, media, errors and confinement."""

from __future__ import annotations

import base64
import errno
import os
from pathlib import Path

import pytest

from actors.tools import _read_file
from actors.tools._read_file import ReadFileTool, is_binary_data

from ._file_env import call, check_declaration, make_env, outside_message

TOOL = ReadFileTool()
TRUNCATION = (
    "\nIMPORTANT: The file content has been truncated.\n"
    "Status: Showing lines {start}-{end} of {total} total lines.\n"
    "Action: To read more of the file, you can use the 'start_line' and 'end_line' "
    "parameters in a subsequent 'read_file' call. For example, to read the next section "
    "of the file, use start_line: {next}.\n\n--- FILE CONTENT (truncated) ---\n"
)


def truncated(start: int, end: int, total: int, body: str) -> str:
    return TRUNCATION.format(start=start, end=end, total=total, next=end + 1) + body


def test_declaration() -> None:
    check_declaration(
        TOOL,
        {"file_path": "string", "start_line": "integer", "end_line": "integer"},
        ["file_path"],
    )
    props = TOOL.declaration("")["parametersJsonSchema"]["properties"]
    assert props["start_line"]["minimum"] == 1 and props["end_line"]["minimum"] == 1
    assert (TOOL.name, TOOL.display_name, TOOL.kind) == ("read_file", "ReadFile", "read")


async def test_plain_text_as_in_the_corpus(tmp_path: Path) -> None:
    # steering-headless / policy-headless-readonly-default: output is the text itself.
    env = make_env(tmp_path)
    (env.workspace / "file1.txt").write_text("This is file1.txt content.")
    (env.workspace / "test.txt").write_text("Lorem\nIpsum\nDolor\n")
    out = await call(TOOL, env, file_path="file1.txt")
    assert (out.llm, out.display, out.error_type) == ("This is file1.txt content.", "", None)
    out = await call(TOOL, env, file_path=str(env.workspace / "test.txt"))
    assert out.llm == "Lorem\nIpsum\nDolor\n"
    assert TOOL.describe({"file_path": "test.txt"}, env) == "test.txt"


async def test_empty_file(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    (env.workspace / "empty.txt").write_bytes(b"")
    out = await call(TOOL, env, file_path="empty.txt")
    assert (out.llm, out.display, out.error_type) == ("", "", None)


async def test_line_ranges(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    (env.workspace / "f.txt").write_text("a\nb\nc\nd\ne")
    out = await call(TOOL, env, file_path="f.txt", start_line=2, end_line=3)
    assert out.llm == truncated(2, 3, 5, "b\nc")
    assert out.display == "Read lines 2-3 of 5 from f.txt"
    out = await call(TOOL, env, file_path="f.txt", start_line=4)
    assert out.llm == truncated(4, 5, 5, "d\ne")
    out = await call(TOOL, env, file_path="f.txt", end_line=2)
    assert out.llm == truncated(1, 2, 5, "a\nb")
    out = await call(TOOL, env, file_path="f.txt", start_line=1, end_line=9)
    assert (out.llm, out.display) == ("a\nb\nc\nd\ne", "")
    out = await call(TOOL, env, file_path="f.txt", start_line=9)
    assert out.llm == truncated(6, 5, 5, "")
    out = await call(TOOL, env, file_path="f.txt", start_line=3, end_line=2)
    assert out.invalid == "start_line cannot be greater than end_line"


async def test_crlf_lines(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    (env.workspace / "w.txt").write_bytes(b"one\r\ntwo\r\nthree")
    out = await call(TOOL, env, file_path="w.txt", start_line=2, end_line=2)
    assert out.llm == truncated(2, 2, 3, "two")


async def test_more_than_2000_lines_is_truncated(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    lines = [f"line {i}" for i in range(1, 2501)]
    (env.workspace / "big.txt").write_text("\n".join(lines))
    out = await call(TOOL, env, file_path="big.txt")
    assert out.llm == truncated(1, 2000, 2500, "\n".join(lines[:2000]))
    assert out.display == "Read lines 1-2000 of 2500 from big.txt"
    out = await call(TOOL, env, file_path="big.txt", start_line=2001)
    assert out.llm == truncated(2001, 2500, 2500, "\n".join(lines[2000:]))


async def test_long_lines_are_shortened(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    (env.workspace / "long.txt").write_text("x" * 2500 + "\nshort")
    out = await call(TOOL, env, file_path="long.txt")
    assert out.llm == truncated(1, 2, 2, "x" * 2000 + "... [truncated]\nshort")
    assert out.display == "Read all 2 lines from long.txt (some lines were shortened)"
    # Lengths count UTF-16 units, as in JavaScript: an emoji is two.
    (env.workspace / "emoji.txt").write_text("😀" * 1001)
    out = await call(TOOL, env, file_path="emoji.txt")
    assert out.llm.endswith("\n" + "😀" * 1000 + "... [truncated]")


async def test_boms(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    (env.workspace / "u16.txt").write_bytes(b"\xff\xfe" + "héllo\nwörld".encode("utf-16-le"))
    (env.workspace / "u8.txt").write_bytes(b"\xef\xbb\xbfbom")
    assert (await call(TOOL, env, file_path="u16.txt")).llm == "héllo\nwörld"
    assert (await call(TOOL, env, file_path="u8.txt")).llm == "bom"


async def test_not_found_and_directory(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    (env.workspace / "sub").mkdir()
    out = await call(TOOL, env, file_path="missing.txt")
    assert out.error_type == "file_not_found"
    assert out.error == f"File not found: {env.workspace / 'missing.txt'}"
    assert out.display == "File not found."
    assert out.llm == "Could not read file because no file was found at the specified path."
    out = await call(TOOL, env, file_path="sub")
    assert out.error_type == "target_is_directory"
    assert out.error == f"Path is a directory, not a file: {env.workspace / 'sub'}"
    assert out.display == "Path is a directory."


async def test_file_too_large(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    big = env.workspace / "huge.log"
    big.write_bytes(b"")
    os.truncate(big, 21 * 1024 * 1024)
    out = await call(TOOL, env, file_path="huge.log")
    assert out.error_type == "file_too_large"
    assert out.error == f"File size exceeds the 20MB limit: {big} (21.00MB)"
    assert out.display == "File size exceeds the 20MB limit."


async def test_binary_and_media(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
    (env.workspace / "pic.png").write_bytes(png)
    (env.workspace / "doc.pdf").write_bytes(b"%PDF-1.4\n%\xe2\xe3\n")
    (env.workspace / "blob.bin").write_text("not really binary")
    (env.workspace / "nul.txt").write_bytes(b"abc\x00def")
    (env.workspace / "icon.svg").write_text("<svg/>")
    (env.workspace / "code.ts").write_bytes(b"export const x = 1;\n")

    out = await call(TOOL, env, file_path="pic.png")
    data = base64.b64encode(png).decode()
    assert out.llm == {"inlineData": {"data": data, "mimeType": "image/png"}}  # one part
    assert out.display == "Read image file: pic.png"
    out = await call(TOOL, env, file_path="doc.pdf")
    assert out.llm["inlineData"]["mimeType"] == "application/pdf"
    assert out.display == "Read pdf file: doc.pdf"
    out = await call(TOOL, env, file_path="blob.bin")
    assert out.llm == "Cannot display content of binary file: blob.bin"
    assert out.display == "Skipped binary file: blob.bin"
    out = await call(TOOL, env, file_path="nul.txt")
    assert out.llm == "Cannot display content of binary file: nul.txt"
    out = await call(TOOL, env, file_path="icon.svg")
    assert (out.llm, out.display) == ("<svg/>", "Read SVG as text: icon.svg")
    assert (await call(TOOL, env, file_path="code.ts")).llm == "export const x = 1;\n"


async def test_audio(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    noise = bytes(range(256))
    (env.workspace / "a.mp3").write_bytes(noise)
    (env.workspace / "notes.mp3").write_text("actually text")
    (env.workspace / "song.mid").write_bytes(noise)
    out = await call(TOOL, env, file_path="a.mp3")
    assert out.llm["inlineData"]["mimeType"] == "audio/mpeg"
    assert out.display == "Read audio file: a.mp3"
    assert (await call(TOOL, env, file_path="notes.mp3")).llm == "actually text"
    out = await call(TOOL, env, file_path="song.mid")
    assert out.error_type == "read_content_failure"
    assert out.error == (
        f"Unsupported audio file format for {env.workspace / 'song.mid'}. Supported audio "
        "formats are MP3, WAV, AIFF, AAC, OGG, and FLAC."
    )
    assert out.display == "Unsupported audio file format: song.mid"


async def test_read_failure_is_read_content_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_env(tmp_path)
    target = env.workspace / "locked.txt"
    target.write_text("secret")
    real_open = open

    def deny(path: object, *args: object, **kwargs: object) -> object:
        if str(path) == str(target):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(_read_file, "open", deny, raising=False)
    out = await call(TOOL, env, file_path="locked.txt")
    assert out.error_type == "read_content_failure"
    assert out.error == f"Error reading file {target}: EACCES: permission denied, open '{target}'"
    assert (
        out.display == f"Error reading file locked.txt: EACCES: permission denied, open '{target}'"
    )


async def test_outside_the_workspace(tmp_path: Path) -> None:
    # json-output-error: the exact text the corpus expects.
    env = make_env(tmp_path)
    path = "/gemini-cli/.integration-tests/1761766343238/json-output-error/path/to/file.txt"
    out = await call(TOOL, env, file_path=path)
    assert out.invalid == outside_message(env, path)
    (tmp_path / "outside.txt").write_text("no")
    out = await call(TOOL, env, file_path="../outside.txt")
    assert out.invalid == outside_message(env, str(env.workspace.parent / "outside.txt"))


async def test_symlink_escape_is_refused(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    (secret_dir / "key.txt").write_text("k")
    os.symlink(secret_dir, env.workspace / "link")
    out = await call(TOOL, env, file_path="link/key.txt")
    assert out.invalid == outside_message(env, str(secret_dir.resolve() / "key.txt"))
    # A link inside the workspace pointing inside it is fine.
    (env.workspace / "real.txt").write_text("real")
    os.symlink(env.workspace / "real.txt", env.workspace / "alias.txt")
    assert (await call(TOOL, env, file_path="alias.txt")).llm == "real"


async def test_blocked_segments_temp_dir_and_memory(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    (env.workspace / ".git").mkdir()
    (env.workspace / ".git" / "config").write_text("[core]")
    (env.workspace / ".env").write_text("TOKEN=1")
    for name in (".git/config", ".env"):
        out = await call(TOOL, env, file_path=name)
        assert out.invalid == outside_message(env, str(env.workspace / name))
    (env.project_temp_dir / "plan.md").write_text("plan")
    assert (await call(TOOL, env, file_path=str(env.project_temp_dir / "plan.md"))).llm == "plan"
    inbox = env.project_temp_dir / "memory" / ".inbox"
    inbox.mkdir(parents=True)
    (inbox / "x.patch").write_text("p")
    out = await call(TOOL, env, file_path=str(inbox / "x.patch"))
    assert out.invalid == outside_message(env, str(inbox / "x.patch"))
    memory = env.project_temp_dir.parent.parent / "GEMINI.md"
    memory.write_text("- likes tea")
    assert (await call(TOOL, env, file_path=str(memory))).llm == "- likes tea"


async def test_ignored_files(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    (env.workspace / ".git").mkdir()
    (env.workspace / ".gitignore").write_text("secret.txt\n")
    (env.workspace / ".geminiignore").write_text("*.private\n")
    (env.workspace / "secret.txt").write_text("s")
    (env.workspace / "a.private").write_text("p")
    for name in ("secret.txt", "a.private"):
        out = await call(TOOL, env, file_path=name)
        assert out.invalid == (
            f"File path '{env.workspace / name}' is ignored by configured ignore patterns."
        )
    relaxed = make_env(tmp_path, context={"fileFiltering": {"respectGitIgnore": False}})
    assert (await call(TOOL, relaxed, file_path="secret.txt")).llm == "s"


async def test_parameter_values(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    out = await call(TOOL, env, file_path="   ")
    assert out.invalid == "The 'file_path' parameter must be non-empty."
    (env.workspace / "file1.txt").write_text("at")
    assert (await call(TOOL, env, file_path="@file1.txt")).llm == "at"
    deep = "a/very/long/directory/structure/that/goes/on/file.txt"
    assert TOOL.describe({"file_path": deep}, env) == "a/.../that/goes/on/file.txt"


def test_binary_heuristic() -> None:
    assert not is_binary_data(b"")
    assert not is_binary_data("plain ünïcödé text\n".encode())
    assert is_binary_data(b"\x00\x01")
    assert is_binary_data(b"%PDF-1.7")
    assert is_binary_data(bytes(range(128, 256)) * 3)
    assert not is_binary_data(b"\xff\xfe" + "x".encode("utf-16-le"))
