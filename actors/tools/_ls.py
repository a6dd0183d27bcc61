"""``list_directory`` (Gemini CLI's ``LSTool``, display name ReadFolder).

``llmContent``: ``Directory listing for <abs dir>:`` then one line per entry —
``[DIR] name`` for directories (symlinks followed), ``name (<size> bytes)`` for files —
directories first, then ``localeCompare`` order of names; ``\\n\\n(<n> ignored)`` when
.gitignore/.geminiignore hid entries. ``ignore`` patterns match entry names (``*`` and
``?`` only). ``returnDisplay`` is Gemini's object ``{summary: "Found N item(s).",
files: ["[DIR] a", "b.txt", ...]}``; an empty directory gives the strings ``Directory
<path> is empty.`` / ``Directory is empty.``.

A missing directory is not ``file_not_found`` here: like Gemini (whose ``stat`` throws
before its not-found branch) it fails with ``ls_execution_error`` and Node's ENOENT text.
Gemini appends just-in-time GEMINI.md context of the listed directory; that needs the
session's memory state and is left to the caller.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from typing import Any

import trio

from actors.common import node_join, node_relative, node_resolve
from bus.messages import ToolResult

from ._base import OutputSink, ToolEnv
from ._collation import locale_sort_key
from ._discovery import FileDiscovery, readdir_sorted, respect_flags
from ._fs_errors import NodeFsError, node_fs_error
from ._paths import make_relative, shorten_path, validate_path_access

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "dir_path": {"type": "string", "description": "Directory whose entries to list."},
        "ignore": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Glob patterns (on entry names) to leave out.",
        },
        "file_filtering_options": {
            "type": "object",
            "description": "Optional: whether .gitignore / .geminiignore entries are hidden.",
            "properties": {
                "respect_git_ignore": {
                    "type": "boolean",
                    "description": "Optional: hide entries matched by .gitignore (default true).",
                },
                "respect_gemini_ignore": {
                    "type": "boolean",
                    "description": (
                        "Optional: hide entries matched by .geminiignore (default true)."
                    ),
                },
            },
        },
    },
    "required": ["dir_path"],
}

_DESCRIPTION = (
    "Shows the files and subdirectories directly inside a directory, optionally leaving "
    "out names that match glob patterns."
)


_JS_DOT = "[^\\n\\r\\u2028\\u2029]"


def _name_ignored(name: str, patterns: object) -> bool:
    """``LSToolInvocation.shouldIgnore``: ``*`` and ``?`` wildcards on the name."""
    if not isinstance(patterns, list | tuple):
        return False
    for pattern in patterns:
        if not isinstance(pattern, str):
            continue
        source = re.sub(r"[.+^${}()|\[\]\\]", lambda m: "\\" + m.group(0), pattern)
        # JavaScript's `.` stops at any line terminator.
        source = source.replace("*", _JS_DOT + "*").replace("?", _JS_DOT)
        if re.fullmatch(source, name):
            return True
    return False


def _error(message: str, display: str, error_type: str) -> ToolResult:
    return ToolResult(
        llm_content=message,
        return_display=f"Error: {display}",
        error_type=error_type,
        error_message=message,
    )


class LsTool:
    """Gemini CLI's ``list_directory`` tool."""

    name = "list_directory"
    display_name = "ReadFolder"
    kind = "search"

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": self.name, "description": _DESCRIPTION, "parametersJsonSchema": _SCHEMA}

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        resolved = node_resolve(str(env.workspace), str(args.get("dir_path", "")))
        try:
            return validate_path_access(resolved, env, "read")
        except NodeFsError as exc:
            return exc.message

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        return shorten_path(make_relative(str(args.get("dir_path", "")), str(env.workspace)))

    async def execute(
        self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None
    ) -> ToolResult:
        return await trio.to_thread.run_sync(_run_ls, dict(args), env, abandon_on_cancel=True)


def _run_ls(args: dict[str, Any], env: ToolEnv) -> ToolResult:
    workspace = str(env.workspace)
    directory = node_resolve(workspace, str(args.get("dir_path", "")))
    try:
        problem = validate_path_access(directory, env, "read")
    except NodeFsError as exc:
        problem = exc.message
    if problem is not None:
        return ToolResult(
            llm_content=problem,
            return_display="Path not in workspace.",
            error_type="path_not_in_workspace",
            error_message=problem,
        )
    try:
        try:
            info = os.stat(directory)
        except OSError as exc:
            raise node_fs_error(exc, "stat", directory) from None
        if not stat.S_ISDIR(info.st_mode):
            return _error(
                f"Error: Path is not a directory: {directory}",
                "Path is not a directory.",
                "path_is_not_a_directory",
            )
        try:
            names = readdir_sorted(directory)
        except OSError as exc:
            raise node_fs_error(exc, "scandir", directory) from None
        if not names:
            return ToolResult(
                llm_content=f"Directory {directory} is empty.",
                return_display="Directory is empty.",
            )
        relative = [node_relative(workspace, node_join(directory, n)) for n in names]
        options = args.get("file_filtering_options")
        options = options if isinstance(options, Mapping) else {}
        git, gemini = respect_flags(
            env, options.get("respect_git_ignore"), options.get("respect_gemini_ignore")
        )
        kept, ignored_count = FileDiscovery.for_env(env).filter_with_report(
            relative, respect_git_ignore=git, respect_gemini_ignore=gemini
        )
        entries: list[tuple[str, bool, int]] = []
        for rel in kept:
            full = node_resolve(workspace, rel)
            name = os.path.basename(full)
            if _name_ignored(name, args.get("ignore")):
                continue
            try:
                entry = os.stat(full)
            except OSError:
                continue
            is_dir = stat.S_ISDIR(entry.st_mode)
            entries.append((name, is_dir, 0 if is_dir else entry.st_size))
        entries.sort(key=lambda e: (not e[1], locale_sort_key(e[0])))
        listing = "\n".join(
            f"[DIR] {name}" if is_dir else f"{name} ({size} bytes)"
            for name, is_dir, size in entries
        )
        message = f"Directory listing for {directory}:\n{listing}"
        if ignored_count > 0:
            message += f"\n\n({ignored_count} ignored)"
        summary = f"Found {len(entries)} item(s)."
        if ignored_count > 0:
            summary += f" ({ignored_count} ignored)"
        return ToolResult(
            llm_content=message,
            return_display={
                "summary": summary,
                "files": [f"[DIR] {n}" if d else n for n, d, _ in entries],
            },
        )
    except NodeFsError as exc:
        return _error(
            f"Error listing directory: {exc.message}",
            "Failed to list directory.",
            "ls_execution_error",
        )
