"""write_file: the corpus's result texts, FileDiff display, diff helpers, errors."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from actors.tools import _write_file
from actors.tools._jsdiff import create_patch, diff_lines, get_diff_stat
from actors.tools._write_file import (
    WriteFileTool,
    detect_omission_placeholders,
    diff_context_snippet,
)
from tests.conftest import SHARED

from ._file_env import call, check_declaration, make_env, outside_message

TOOL = WriteFileTool()
CORPUS = SHARED / "conformance" / "scenarios"


def test_declaration() -> None:
    check_declaration(TOOL, {"file_path": "string", "content": "string"}, ["file_path", "content"])
    assert (TOOL.name, TOOL.display_name, TOOL.kind) == ("write_file", "WriteFile", "edit")


def _corpus_call(scenario: str, name: str) -> dict[str, object]:
    return _corpus_call_at(scenario, name, 0)


def _corpus_call_at(scenario: str, name: str, index: int) -> dict[str, object]:
    session = json.loads((CORPUS / scenario / "expected" / "session.json").read_text())
    found: list[dict[str, object]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for call_ in node.get("toolCalls", ()):
                if call_.get("name") == name:
                    found.append(call_)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(session)
    return found[index]


def _placeholders(value: object, workspace: Path) -> object:
    text = json.dumps(value).replace(str(workspace), "{workspace}")
    return json.loads(text)


@pytest.mark.skipif(not CORPUS.exists(), reason="conformance corpus not available")
async def test_new_file_matches_the_corpus(tmp_path: Path) -> None:
    # write-file-fixture-exhausted: write "hello" to test.txt.
    env = make_env(tmp_path)
    out = await call(TOOL, env, file_path="test.txt", content="hello")
    expected = _corpus_call("write-file-fixture-exhausted", "write_file")
    response = expected["result"][0]["functionResponse"]["response"]  # type: ignore[index]
    assert _placeholders(out.llm, env.workspace) == response["output"]
    assert _placeholders(out.display, env.workspace) == expected["resultDisplay"]
    assert TOOL.describe({"file_path": "test.txt"}, env) == expected["description"]
    assert (env.workspace / "test.txt").read_text() == "hello"


@pytest.mark.skipif(not CORPUS.exists(), reason="conformance corpus not available")
async def test_overwrite_and_empty_content_match_the_corpus(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    (env.workspace / "first-run.txt").write_text("test1")
    out = await call(TOOL, env, file_path="first-run.txt", content="test1")
    expected = _corpus_call_at("hooks-disabled-multiple-runs", "write_file", 1)
    response = expected["result"][0]["functionResponse"]["response"]  # type: ignore[index]
    assert _placeholders(out.llm, env.workspace) == response["output"]
    assert _placeholders(out.display, env.workspace) == expected["resultDisplay"]
    assert out.display["fileDiff"] == (
        "Index: first-run.txt\n" + "=" * 67 + "\n--- first-run.txt\tOriginal\n"
        "+++ first-run.txt\tWritten\n"
    )
    assert out.display["isNewFile"] is False and out.display["originalContent"] == "test1"
    assert set(out.display["diffStat"].values()) == {0}
    # hooks-telemetry: empty content.
    out = await call(TOOL, env, file_path="telemetry-test.txt", content="")
    assert out.llm == (
        f"Successfully created and wrote to new file: {env.workspace}/telemetry-test.txt. "
        "Here is the updated code:\n"
    )


async def test_overwrite_snippet_and_stats(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    original = "".join(f"line {i}\n" for i in range(1, 21))
    (env.workspace / "f.txt").write_text(original)
    new = original.replace("line 10\n", "line ten\n")
    out = await call(TOOL, env, file_path="f.txt", content=new)
    snippet = "...\n" + "\n".join(
        ["line 5", "line 6", "line 7", "line 8", "line 9", "line ten"]
        + ["line 11", "line 12", "line 13", "line 14", "line 15"]
    )
    assert out.llm == (
        f"Successfully overwrote file: {env.workspace}/f.txt. Here is the updated code:\n"
        f"{snippet}\n..."
    )
    assert out.display["diffStat"] == {
        "model_added_lines": 1,
        "model_removed_lines": 1,
        "model_added_chars": 8,
        "model_removed_chars": 7,
        "user_added_lines": 0,
        "user_removed_lines": 0,
        "user_added_chars": 0,
        "user_removed_chars": 0,
    }
    assert out.display["fileDiff"].endswith(
        "@@ -7,7 +7,7 @@\n line 7\n line 8\n line 9\n-line 10\n+line ten\n line 11\n"
        " line 12\n line 13\n"
    )
    assert list(out.display) == [
        "fileDiff",
        "fileName",
        "filePath",
        "originalContent",
        "newContent",
        "diffStat",
        "isNewFile",
        "isBuildFile",
    ]


async def test_crlf_is_kept_and_parents_are_created(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    (env.workspace / "win.txt").write_bytes(b"a\r\nb\r\n")
    await call(TOOL, env, file_path="win.txt", content="x\ny\n")
    assert (env.workspace / "win.txt").read_bytes() == b"x\r\ny\r\n"
    out = await call(TOOL, env, file_path="deep/er/new.txt", content="n")
    assert out.error_type is None
    assert (env.workspace / "deep" / "er" / "new.txt").read_text() == "n"


async def test_validation(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    (env.workspace / "dir").mkdir()
    assert (
        await call(TOOL, env, file_path="", content="x")
    ).invalid == 'Missing or empty "file_path"'
    out = await call(TOOL, env, file_path="dir", content="x")
    assert out.invalid == f"Path is a directory, not a file: {env.workspace / 'dir'}"
    out = await call(TOOL, env, file_path="../escape.txt", content="x")
    assert out.invalid == outside_message(env, str(env.workspace.parent / "escape.txt"))
    out = await call(TOOL, env, file_path="a.py", content="def f():\n    // rest of methods ...\n")
    assert out.invalid == (
        "`content` contains an omission placeholder (for example 'rest of methods ...'). "
        "Provide complete file content."
    )
    out = await call(TOOL, env, file_path=str(env.project_temp_dir / "plans" / "p.md"), content="p")
    assert out.error_type is None


@pytest.mark.parametrize(
    ("code", "error_type", "message"),
    [
        (errno.EACCES, "permission_denied", "Permission denied writing to file: {p} (EACCES)"),
        (errno.ENOSPC, "no_space_left", "No space left on device: {p} (ENOSPC)"),
        (errno.EISDIR, "target_is_directory", "Target is a directory, not a file: {p} (EISDIR)"),
        (
            errno.EROFS,
            "file_write_failure",
            "Error writing to file '{p}': EROFS: read-only file system, open '{p}' (EROFS)",
        ),
    ],
)
async def test_write_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, error_type: str, message: str
) -> None:
    env = make_env(tmp_path)
    real_open = open

    def failing(path: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        if "w" in mode:
            raise OSError(code, "nope", str(path))
        return real_open(path, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(_write_file, "open", failing, raising=False)
    out = await call(TOOL, env, file_path="t.txt", content="c")
    target = str(env.workspace / "t.txt")
    assert (out.error_type, out.error) == (error_type, message.format(p=target))
    assert out.display == out.error == out.llm


async def test_unreadable_existing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = make_env(tmp_path)
    target = env.workspace / "t.txt"
    target.write_text("old")
    real_open = open

    def failing(path: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        if "r" in mode:
            raise PermissionError(errno.EACCES, "denied", str(path))
        return real_open(path, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(_write_file, "open", failing, raising=False)
    out = await call(TOOL, env, file_path="t.txt", content="c")
    assert out.error_type == "file_write_failure"
    assert out.error == (
        f"Error checking existing file '{target}': EACCES: permission denied, open "
        f"'{target}' (EACCES)"
    )


async def test_unescape_only_for_other_gemini_models(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    await call(TOOL, env, file_path="a.txt", content="x\\ny")
    assert (env.workspace / "a.txt").read_text() == "x\\ny"
    old = make_env(tmp_path)
    old = type(old)(
        workspace=old.workspace, project_temp_dir=old.project_temp_dir, model="gemini-1.5-pro"
    )
    await call(TOOL, old, file_path="b.txt", content="x\\ny")
    assert (old.workspace / "b.txt").read_text() == "x\ny"
    await call(TOOL, old, file_path="c.json", content='{"a": "x\\ny"}')
    assert (old.workspace / "c.json").read_text() == '{"a": "x\\ny"}'


def test_diff_helpers() -> None:
    changes = diff_lines("a\nb\nc\n", "a\nx\nc\n")
    assert [(c.value, c.added, c.removed) for c in changes] == [
        ("a\n", False, False),
        ("b\n", False, True),
        ("x\n", True, False),
        ("c\n", False, False),
    ]
    assert create_patch("f", "a\n", "a\nb", "Current", "Proposed") == (
        "Index: f\n" + "=" * 67 + "\n--- f\tCurrent\n+++ f\tProposed\n"
        "@@ -1,1 +1,2 @@\n a\n+b\n\\ No newline at end of file\n"
    )
    assert get_diff_stat("", "é😀\n", "é😀\n")["model_added_chars"] == 3
    assert diff_context_snippet("", "new") == "new"
    assert diff_context_snippet("same", "same") == "same"
    assert detect_omission_placeholders("// Rest of   Code ...\n(unchanged methods ....)") == [
        "rest of code ...",
        "unchanged methods ...",
    ]
    assert detect_omission_placeholders("the rest of it ... matters") == []


async def test_symlink_escape_is_refused(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    outside = env.workspace.parent / "outside"
    outside.mkdir()
    (env.workspace / "out").symlink_to(outside)
    out = await call(TOOL, env, file_path="out/x.txt", content="x")
    assert out.invalid == outside_message(env, str(outside / "x.txt"))
    assert not (outside / "x.txt").exists()
