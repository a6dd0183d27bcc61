"""``grep_search`` (Gemini CLI's ``GrepTool``, display name SearchText).

This is the tool Gemini registers when ripgrep is unavailable ("Ripgrep is not
available. Falling back to GrepTool."). Like it, each search directory is searched with
the first strategy that works:

1. ``git grep --untracked -n -E --ignore-case`` inside a git repository;
2. the system ``grep -r -n -H -E -I -i`` (skipping ``node_modules``, ``.git``,
   ``bower_components``, ``.svn``, ``.hg``);
3. a walk of ``include_pattern`` (default ``**/*``) testing each line with the pattern
   as a case-insensitive JavaScript regular expression.

So the pattern dialect is POSIX ERE for the first two and JavaScript for the last, and
``include_pattern`` is a git pathspec, a ``--include`` basename glob, or a glob relative
to the search directory respectively — Gemini's own inconsistencies, kept. At most 100
matches (``total_max_matches``); 30 s timeout (partial results for the process
strategies, an error for the walk).

``llmContent``: ``Found N match(es) for pattern "<p>" in the workspace directory:`` then
``---`` separated ``File: <path>`` blocks of ``L<n>: <line>`` (``L<n>- `` for context
lines: with 1 match, 50 lines of context are added around it; with 2–3, 15).
``returnDisplay`` is Gemini's ``GrepResult`` object: ``{summary, matches: [{filePath,
absolutePath, lineNumber, line}]}``.
"""

from __future__ import annotations

import codecs
import os
import posixpath
import re
import shutil
import stat
import subprocess
import time
from collections.abc import Mapping
from typing import Any

import attrs
import trio

from actors.common import (
    JsRegexError,
    LazyPattern,
    compile_js_regex,
    js_trim,
    js_trim_end,
    node_relative,
    node_resolve,
)
from bus.messages import ToolResult

from ._base import OutputSink, ToolEnv, error_result
from ._discovery import filtering_setting, is_git_repository
from ._fs_errors import NodeFsError, error_message, node_fs_error
from ._glob import COMMON_IGNORE_PATTERNS, glob_files
from ._paths import make_relative, resolve_to_real_path, shorten_path, validate_path_access
from ._read_file import MAX_LINE_LENGTH_TEXT_FILE, split_lines

DEFAULT_TOTAL_MAX_MATCHES = 100
DEFAULT_SEARCH_TIMEOUT_MS = 30000
_MAX_STDERR_BYTES = 20 * 1024
_GREP_LINE = LazyPattern(r"^([^\n\r\u2028\u2029]+?):(\d+):([^\n\r\u2028\u2029]*)$")


@attrs.define
class GrepMatch:
    file_path: str
    absolute_path: str
    line_number: int
    line: str
    is_context: bool = False


class _SearchFailedError(Exception):
    """A strategy failed (its process exited badly); try the next one."""

    def __init__(self, message: str, results: list[GrepMatch] | None = None) -> None:
        super().__init__(message)
        self.results = results or []


def _safe_git_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GIT_CONFIG_") and k != "GIT_CONFIG_PARAMETERS"
    }
    env.update(
        {
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CONFIG_SYSTEM": "/dev/null",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_COUNT": "8",
            "GIT_CONFIG_KEY_0": "credential.helper",
            "GIT_CONFIG_VALUE_0": "",
            "GIT_CONFIG_KEY_1": "core.fsmonitor",
            "GIT_CONFIG_VALUE_1": "",
            "GIT_CONFIG_KEY_2": "core.hooksPath",
            "GIT_CONFIG_VALUE_2": "",
            "GIT_CONFIG_KEY_3": "core.sshCommand",
            "GIT_CONFIG_VALUE_3": "",
            "GIT_CONFIG_KEY_4": "core.pager",
            "GIT_CONFIG_VALUE_4": "cat",
            "GIT_CONFIG_KEY_5": "core.editor",
            "GIT_CONFIG_VALUE_5": "",
            "GIT_CONFIG_KEY_6": "sequence.editor",
            "GIT_CONFIG_VALUE_6": "",
            "GIT_CONFIG_KEY_7": "diff.external",
            "GIT_CONFIG_VALUE_7": "",
        }
    )
    return env


def command_available(command: str) -> bool:
    """``command -v <command>`` succeeds (the test suite swaps this out)."""
    return shutil.which(command) is not None


def _parse_grep_line(line: str, base: str) -> GrepMatch | None:
    if not js_trim(line):
        return None
    match = _GREP_LINE.match(line)
    if match is None:
        return None
    raw_path, number, content = match.groups()
    absolute = node_resolve(base, raw_path)
    relative = node_relative(base, absolute)
    if relative == ".." or relative.startswith("../") or relative.startswith("/"):
        return None
    return GrepMatch(relative or posixpath.basename(absolute), absolute, int(number), content)


@attrs.frozen(kw_only=True)
class _Search:
    pattern: str
    path: str
    include: str | None
    exclude: re.Pattern[str] | None
    max_matches: int
    per_file: int | None
    trio_deadline: float
    """Past it, the process strategies stop reading and keep what they have."""
    walk_deadline: float
    """A ``time.monotonic()`` value past which the walk strategy fails."""


def _split_output(pending: str) -> tuple[list[str], str]:
    """Complete lines of ``pending`` and the rest (a final ``\r`` is held back)."""
    hold = ""
    if pending.endswith("\r"):
        pending, hold = pending[:-1], "\r"
    parts = re.split(r"\r\n|\r|\n", pending)
    return parts[:-1], parts[-1] + hold


async def _process_search(
    search: _Search, args: list[str], env: dict[str, str] | None
) -> list[GrepMatch]:
    """Run a grep-like process, parsing ``path:line:text`` lines as they arrive.

    Like Gemini's ``execStreaming`` (``allowedExitCodes: [0, 1]``): stopping early (enough
    matches, or the search timeout) kills the process and keeps the matches so far; a
    run that ends with another exit code raises ``_SearchFailedError`` with its stderr.
    Lines end at ``\n``, ``\r\n`` or ``\r`` (Node's ``readline``).
    """
    try:
        process = await trio.lowlevel.open_process(
            args, cwd=search.path, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
    except OSError as exc:
        raise _SearchFailedError(str(exc)) from exc
    assert process.stdout is not None and process.stderr is not None
    stdout, stderr = process.stdout, process.stderr
    errors: list[bytes] = []
    results: list[GrepMatch] = []
    finished = False

    def take(line: str) -> bool:
        """Record one output line; True once enough matches are in."""
        match = _parse_grep_line(line, search.path)
        if match is None:
            return False
        if search.exclude is not None and search.exclude.search(match.line):
            return False
        results.append(match)
        return len(results) >= search.max_matches

    async def drain_stderr() -> None:
        size = 0
        async for chunk in stderr:
            if size < _MAX_STDERR_BYTES:
                errors.append(bytes(chunk))
                size += len(chunk)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain_stderr)
            with trio.move_on_at(search.trio_deadline):
                decoder = codecs.getincrementaldecoder("utf-8")("replace")
                pending = ""
                enough = False
                async for chunk in stdout:
                    lines, pending = _split_output(pending + decoder.decode(chunk))
                    if any(take(line) for line in lines):
                        enough = True
                        break
                if not enough:
                    lines, rest = _split_output(pending + decoder.decode(b"", final=True))
                    for line in [*lines, rest.rstrip("\r")]:
                        if line and take(line):
                            break
                    finished = True
            if not finished:
                process.kill()
        await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()
    if finished and process.returncode not in (0, 1):
        text = b"".join(errors).decode("utf-8", "replace")
        raise _SearchFailedError(
            f"Process exited with code {process.returncode}: {text}", results
        )
    return results


async def _git_grep(search: _Search) -> list[GrepMatch]:
    args = ["git", "grep", "--untracked", "-n", "-E", "--ignore-case", search.pattern]
    if search.per_file:
        args += ["--max-count", str(search.per_file)]
    if search.include:
        args += ["--", search.include]
    return await _process_search(search, args, _safe_git_env())


async def _system_grep(search: _Search) -> list[GrepMatch]:
    args = ["grep", "-r", "-n", "-H", "-E", "-I", "-i"]
    for pattern in COMMON_IGNORE_PATTERNS:
        name = pattern
        if name.startswith("**/"):
            name = name[3:]
        if name.endswith("/**"):
            name = name[:-3]
        elif name.endswith("/"):
            name = name[:-1]
        if name and "/" not in name and "*" not in name:
            args.append(f"--exclude-dir={name}")
    if search.per_file:
        args += ["--max-count", str(search.per_file)]
    if search.include:
        args.append(f"--include={search.include}")
    args += [search.pattern, "."]
    return await _process_search(search, args, None)


class _TimedOutError(Exception):
    pass


def _walk_search(search: _Search) -> list[GrepMatch]:
    """Strategy 3 (blocking): walk files and test each line."""
    regex = compile_js_regex(search.pattern, ignore_case=True)

    def expired() -> bool:
        return time.monotonic() > search.walk_deadline

    entries = glob_files(
        search.include or "**/*",
        search.path,
        nocase=False,
        ignore=COMMON_IGNORE_PATTERNS,
        should_stop=expired,
    )
    if expired():
        raise _TimedOutError
    matches: list[GrepMatch] = []
    for entry in entries:
        if len(matches) >= search.max_matches:
            break
        if expired():
            raise _TimedOutError
        relative = node_relative(search.path, entry.fullpath)
        if relative == ".." or relative.startswith("../") or relative.startswith("/"):
            continue
        try:
            with open(entry.fullpath, "rb") as handle:
                content = handle.read().decode("utf-8", "replace")
        except OSError:
            continue
        in_file = 0
        for index, line in enumerate(split_lines(content)):
            if not regex.search(line):
                continue
            if search.exclude is not None and search.exclude.search(line):
                continue
            matches.append(
                GrepMatch(
                    relative or posixpath.basename(entry.fullpath), entry.fullpath, index + 1, line
                )
            )
            in_file += 1
            if len(matches) >= search.max_matches:
                break
            if search.per_file and in_file >= search.per_file:
                break
    return matches


async def perform_grep_search(search: _Search) -> list[GrepMatch]:
    """One directory: git grep, else system grep, else the walk (Gemini's order)."""
    use_git = await trio.to_thread.run_sync(
        lambda: is_git_repository(search.path) and command_available("git")
    )
    if use_git:
        try:
            return await _git_grep(search)
        except _SearchFailedError:
            pass
    if await trio.to_thread.run_sync(command_available, "grep"):
        try:
            return await _system_grep(search)
        except _SearchFailedError as exc:
            if re.search(r"Permission denied|Is a directory", str(exc), re.IGNORECASE):
                # Gemini keeps what grep printed before it complained.
                return exc.results
    return await trio.to_thread.run_sync(_walk_search, search, abandon_on_cancel=True)


# --------------------------------------------------------------------------------------
# formatGrepResults


def _is_array_index(key: str) -> bool:
    return bool(re.fullmatch(r"0|[1-9]\d*", key)) and int(key) < 2**32 - 1


def _group_by_file(matches: list[GrepMatch]) -> dict[str, list[GrepMatch]]:
    """``groupMatchesByFile`` with JavaScript's object key order (indices first)."""
    groups: dict[str, list[GrepMatch]] = {}
    for match in matches:
        groups.setdefault(match.file_path, []).append(match)
    keys = sorted((k for k in groups if _is_array_index(k)), key=int)
    keys += [k for k in groups if not _is_array_index(k)]
    return {k: sorted(groups[k], key=lambda m: m.line_number) for k in keys}


def _read_lines(path: str) -> list[str] | None:
    try:
        with open(path, "rb") as handle:
            return split_lines(handle.read().decode("utf-8", "replace"))
    except OSError:
        return None


def _enrich_with_context(groups: dict[str, list[GrepMatch]], match_count: int) -> None:
    if not 1 <= match_count <= 3:
        return
    context = 50 if match_count == 1 else 15
    for file_path, matches in groups.items():
        if not matches:
            continue
        lines = _read_lines(matches[0].absolute_path)
        if lines is None:
            continue
        enriched: list[GrepMatch] = []
        seen: set[int] = set()
        for match in sorted(matches, key=lambda m: m.line_number):
            start = max(0, match.line_number - 1 - context)
            end = min(len(lines), match.line_number + context)
            for i in range(start, end):
                number = i + 1
                if number not in seen:
                    enriched.append(
                        GrepMatch(
                            match.file_path,
                            match.absolute_path,
                            number,
                            lines[i],
                            number != match.line_number,
                        )
                    )
                    seen.add(number)
                elif number == match.line_number:
                    for existing in enriched:
                        if existing.line_number == number:
                            existing.is_context = False
                            break
        groups[file_path] = sorted(enriched, key=lambda m: m.line_number)


def _js_sort_key(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def format_grep_results(
    matches: list[GrepMatch],
    pattern: str,
    names_only: bool,
    include: str | None,
    location: str,
    total_max: int,
) -> tuple[str, dict[str, Any]]:
    """Gemini's ``formatGrepResults``: (llmContent, GrepResult display)."""
    filter_note = f' (filter: "{include}")' if include else ""
    if not matches:
        return (
            f'No matches found for pattern "{pattern}" {location}{filter_note}.',
            {"summary": "No matches found", "matches": []},
        )
    groups = _group_by_file(matches)
    match_count = sum(1 for m in matches if not m.is_context)
    term = "match" if match_count == 1 else "matches"
    if not names_only:
        _enrich_with_context(groups, match_count)
    truncated = match_count >= total_max
    limit_note = f" (results limited to {total_max} matches for performance)" if truncated else ""
    if names_only:
        paths = sorted(groups, key=_js_sort_key)
        text = (
            f'Found {len(paths)} files with matches for pattern "{pattern}" {location}'
            f"{filter_note}{limit_note}:\n" + "\n".join(paths)
        )
        summary = f"Found {len(paths)} files{' (limited)' if truncated else ''}"
        return js_trim(text), {"summary": summary, "matches": []}
    text = f'Found {match_count} {term} for pattern "{pattern}" {location}{filter_note}'
    text += limit_note + ":\n---\n"
    for file_path, file_matches in groups.items():
        text += f"File: {file_path}\n"
        for match in file_matches:
            separator = "-" if match.is_context else ":"
            content = js_trim_end(match.line)
            if len(content) > MAX_LINE_LENGTH_TEXT_FILE:
                content = content[:MAX_LINE_LENGTH_TEXT_FILE] + "... [truncated]"
            text += f"L{match.line_number}{separator} {content}\n"
        text += "---\n"
    display = {
        "summary": f"Found {match_count} {term}{' (limited)' if truncated else ''}",
        "matches": [
            {
                "filePath": m.file_path,
                "absolutePath": m.absolute_path,
                "lineNumber": m.line_number,
                "line": m.line,
            }
            for m in matches
            if not m.is_context
        ],
    }
    return js_trim(text), display


# --------------------------------------------------------------------------------------
# The tool

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {
            "type": "string",
            "description": "Regular expression to look for, e.g. 'def\\s+main' or 'TODO'.",
        },
        "dir_path": {
            "type": "string",
            "description": "Optional directory to search; defaults to the workspace.",
        },
        "include_pattern": {
            "type": "string",
            "description": "Optional glob limiting which files are searched, e.g. '*.py'.",
        },
        "exclude_pattern": {
            "type": "string",
            "description": "Optional regular expression; matching lines are left out.",
        },
        "names_only": {
            "type": "boolean",
            "description": "Optional: list only the paths of files that match.",
        },
        "max_matches_per_file": {
            "type": "integer",
            "minimum": 1,
            "description": "Optional: at most this many matches from any one file.",
        },
        "total_max_matches": {
            "type": "integer",
            "minimum": 1,
            "description": "Optional: at most this many matches overall (default 100).",
        },
    },
    "required": ["pattern"],
}

_DESCRIPTION = (
    "Searches file contents for a regular expression and returns the matching lines "
    "with their file paths and line numbers (at most 100 matches by default)."
)


def _int_arg(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class GrepTool:
    """Gemini CLI's ``grep_search`` tool (the non-ripgrep variant)."""

    name = "grep_search"
    display_name = "SearchText"
    kind = "search"

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": self.name, "description": _DESCRIPTION, "parametersJsonSchema": _SCHEMA}

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        pattern = str(args.get("pattern", ""))
        try:
            compile_js_regex(pattern)
        except JsRegexError as exc:
            return f"Invalid regular expression pattern provided: {pattern}. Error: {exc}"
        exclude = args.get("exclude_pattern")
        if isinstance(exclude, str) and exclude:
            try:
                compile_js_regex(exclude)
            except JsRegexError as exc:
                return (
                    f"Invalid exclude regular expression pattern provided: {exclude}. Error: {exc}"
                )
        per_file = _int_arg(args.get("max_matches_per_file"))
        if per_file is not None and per_file < 1:
            return "max_matches_per_file must be at least 1."
        total = _int_arg(args.get("total_max_matches"))
        if total is not None and total < 1:
            return "total_max_matches must be at least 1."
        dir_path = args.get("dir_path")
        if isinstance(dir_path, str) and dir_path:
            try:
                resolved = resolve_to_real_path(node_resolve(str(env.workspace), dir_path))
                problem = validate_path_access(resolved, env, "read")
            except NodeFsError as exc:
                return exc.message
            if problem is not None:
                return problem
            try:
                if not os.path.isdir(resolved):
                    os.stat(resolved)
                    return f"Path is not a directory: {resolved}"
            except FileNotFoundError:
                return f"Path does not exist: {resolved}"
            except OSError as exc:
                message = node_fs_error(exc, "stat", resolved).message
                return f"Failed to access path stats for {resolved}: {message}"
        return None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        description = f"'{args.get('pattern', '')}'"
        include = args.get("include_pattern")
        if isinstance(include, str) and include:
            description += f" in {include}"
        dir_path = args.get("dir_path")
        workspace = str(env.workspace)
        if isinstance(dir_path, str) and dir_path:
            resolved = node_resolve(workspace, dir_path)
            if resolved == workspace or dir_path == ".":
                description += " within ./"
            else:
                description += f" within {shorten_path(make_relative(resolved, workspace))}"
        elif len(env.workspace_dirs()) > 1:
            description += " across all workspace directories"
        return description

    async def execute(
        self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None
    ) -> ToolResult:
        try:
            return await _run_grep(args, env)
        except (OSError, NodeFsError, JsRegexError, _TimedOutError, ValueError) as exc:
            message = (
                _timeout_message(env) if isinstance(exc, _TimedOutError) else error_message(exc)
            )
            return ToolResult(
                llm_content=f"Error during grep search operation: {message}",
                return_display=f"Error: {message}",
                error_type="grep_execution_error",
                error_message=message,
            )


def _timeout_ms(env: ToolEnv) -> int:
    configured = filtering_setting(env, "searchTimeout", 5000)
    if isinstance(configured, int | float) and configured > DEFAULT_SEARCH_TIMEOUT_MS:
        return int(configured)
    return DEFAULT_SEARCH_TIMEOUT_MS


def _timeout_message(env: ToolEnv) -> str:
    return (
        f"Operation timed out after {_timeout_ms(env)}ms. In large repositories, consider "
        "narrowing your search scope by specifying a 'dir_path' or an 'include_pattern'."
    )


def _check_search_dir(dir_path: str, env: ToolEnv) -> ToolResult | str:
    """The resolved search directory, or the error result Gemini gives (blocking)."""
    try:
        search_abs = resolve_to_real_path(node_resolve(str(env.workspace), dir_path))
    except NodeFsError as exc:
        return error_result(exc.message, "Error: Path resolution failed.", "path_not_in_workspace")
    problem = validate_path_access(search_abs, env, "read")
    if problem is not None:
        return error_result(problem, "Error: Path not in workspace.", "path_not_in_workspace")
    try:
        is_dir = stat.S_ISDIR(os.stat(search_abs).st_mode)
    except FileNotFoundError:
        message = f"Path does not exist: {search_abs}"
        return error_result(message, "Error: Path does not exist.", "file_not_found")
    except OSError as exc:
        detail = node_fs_error(exc, "stat", search_abs).message
        message = f"Failed to access path stats for {search_abs}: {detail}"
        return error_result(message, "Error: Failed to access path.", "grep_execution_error")
    if not is_dir:
        message = f"Path is not a directory: {search_abs}"
        return error_result(message, "Error: Path is not a directory.", "path_is_not_a_directory")
    return search_abs


async def _run_grep(args: Mapping[str, Any], env: ToolEnv) -> ToolResult:
    dir_path = args.get("dir_path")
    search_abs: str | None = None
    if isinstance(dir_path, str) and dir_path:
        checked = await trio.to_thread.run_sync(_check_search_dir, dir_path, env)
        if isinstance(checked, ToolResult):
            return checked
        search_abs = checked

    search_dirs = [search_abs] if search_abs is not None else [str(d) for d in env.workspace_dirs()]
    total_max = _int_arg(args.get("total_max_matches")) or DEFAULT_TOTAL_MAX_MATCHES
    exclude_arg = args.get("exclude_pattern")
    exclude = (
        compile_js_regex(exclude_arg, ignore_case=True)
        if isinstance(exclude_arg, str) and exclude_arg
        else None
    )
    include_arg = args.get("include_pattern")
    include = include_arg if isinstance(include_arg, str) and include_arg else None
    pattern = str(args.get("pattern", ""))
    timeout_s = _timeout_ms(env) / 1000
    trio_deadline = trio.current_time() + timeout_s
    walk_deadline = time.monotonic() + timeout_s
    all_matches: list[GrepMatch] = []
    for directory in search_dirs:
        remaining = total_max - len(all_matches)
        if remaining <= 0:
            break
        found = await perform_grep_search(
            _Search(
                pattern=pattern,
                path=directory,
                include=include,
                exclude=exclude,
                max_matches=remaining,
                per_file=_int_arg(args.get("max_matches_per_file")),
                trio_deadline=trio_deadline,
                walk_deadline=walk_deadline,
            )
        )
        if len(search_dirs) > 1:
            for match in found:
                match.file_path = posixpath.join(posixpath.basename(directory), match.file_path)
        all_matches.extend(found)

    if search_abs is None:
        count = len(env.workspace_dirs())
        location = (
            f"across {count} workspace directories" if count > 1 else "in the workspace directory"
        )
    else:
        location = f'in path "{dir_path}"'
    text, display = await trio.to_thread.run_sync(
        format_grep_results,
        all_matches,
        pattern,
        bool(args.get("names_only")),
        include,
        location,
        total_max,
        abandon_on_cancel=True,
    )
    return ToolResult(llm_content=text, return_display=display)
