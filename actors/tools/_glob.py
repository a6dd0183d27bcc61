"""``glob``: find files by glob pattern (Gemini CLI's ``GlobTool``, display name FindFiles).

The matching follows node-glob 12 / minimatch 10 as Gemini calls them: brace expansion,
``**`` across directories (never into symlinked directories), ``*``/``?``/classes/extglobs
within a segment, dot files included, case-insensitive unless ``case_sensitive``, nothing
under ``node_modules``, ``.git``, ``bower_components``, ``.svn`` or ``.hg``. Symlinks are
listed like files, but the tool then drops every entry whose real path differs from its
own path (Gemini compares resolved paths when applying .gitignore/.geminiignore).

Results: files modified in the last 24 hours first (newest first), then the rest in
``localeCompare`` order of their absolute paths. ``returnDisplay`` is a string.
Ties between recent files with equal mtimes keep our walk order (Gemini keeps
node-glob's, which is not specified).
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import attrs
import trio

from actors.common import LazyPattern, is_within_root, node_join, node_relative, node_resolve
from bus.messages import ToolResult

from ._base import OutputSink, ToolEnv, error_result
from ._collation import locale_sort_key
from ._discovery import FileDiscovery, readdir_sorted, respect_flags
from ._fs_errors import NodeFsError, error_message
from ._paths import make_relative, resolve_to_real_path, shorten_path, validate_path_access

COMMON_IGNORE_PATTERNS: tuple[str, ...] = (
    "**/node_modules/**",
    "**/.git/**",
    "**/bower_components/**",
    "**/.svn/**",
    "**/.hg/**",
)
"""Gemini's ``getGlobExcludes()`` (no custom excludes are configurable)."""

_ONE_DAY_MS = 24 * 60 * 60 * 1000

# --------------------------------------------------------------------------------------
# Brace expansion (the ``brace-expansion`` package, as minimatch uses it)

EXPANSION_MAX = 100_000
"""brace-expansion's cap: a pattern expands to its first 100 000 alternatives, so
``{a,b}`` repeated thirty times cannot exhaust memory."""


def _find_close(text: str, start: int, opening: str = "{", closing: str = "}") -> int:
    """The index of the ``closing`` that balances the ``opening`` at or after ``start``
    (backslash escapes skipped), or -1."""
    depth = 0
    i = start
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == opening:
            depth += 1
        elif ch == closing:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _split_top(body: str, opening: str = "{", closing: str = "}", sep: str = ",") -> list[str]:
    """``body`` split at the ``sep`` outside nested ``opening``/``closing`` pairs (escapes
    kept)."""
    parts: list[str] = []
    depth = 0
    current = ""
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            current += body[i : i + 2]
            i += 2
            continue
        if ch == opening:
            depth += 1
        elif ch == closing:
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(current)
            current = ""
            i += 1
            continue
        current += ch
        i += 1
    parts.append(current)
    return parts


_NUM_SEQ = LazyPattern(r"^(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?$")
_ALPHA_SEQ = LazyPattern(r"^([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?\d+))?$")


def _sequence(body: str) -> list[str] | None:
    match = _NUM_SEQ.match(body)
    if match:
        a, b = int(match.group(1)), int(match.group(2))
        step = abs(int(match.group(3) or 1)) or 1
        width = max(len(match.group(1)), len(match.group(2)))
        pad = any(re.match(r"^-?0\d", g) for g in (match.group(1), match.group(2)))
        values = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        return [str(v).zfill(width) if pad else str(v) for v in itertools.islice(values, EXPANSION_MAX)]
    match = _ALPHA_SEQ.match(body)
    if match:
        a, b = ord(match.group(1)), ord(match.group(2))
        step = abs(int(match.group(3) or 1)) or 1
        codes = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        return [chr(c) for c in codes if chr(c) != "\\"]
    return None


def _first(alternatives: Iterable[str]) -> list[str]:
    return list(itertools.islice(alternatives, EXPANSION_MAX))


def expand_braces(pattern: str) -> list[str]:
    """``a{b,c}d`` → ``abd``, ``acd``; ``{1..3}``; a lone ``{x}`` stays literal. At
    most ``EXPANSION_MAX`` alternatives, the first ones."""
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{" and not (i > 0 and pattern[i - 1] == "$"):
            close = _find_close(pattern, i)
            if close < 0:
                return [pattern]
            pre, body, post = pattern[:i], pattern[i + 1 : close], pattern[close + 1 :]
            posts = expand_braces(post)
            seq = _sequence(body)
            if seq is not None:
                options = seq
            else:
                parts = _split_top(body)
                if len(parts) < 2:
                    inner = expand_braces(body)
                    return _first(pre + "{" + o + "}" + p for o in inner for p in posts)
                options = _first(o for part in parts for o in expand_braces(part))
            return _first(pre + o + p for o in options for p in posts)
        i += 1
    return [pattern]


# --------------------------------------------------------------------------------------
# One path segment of a minimatch pattern → a regular expression

_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "\\x21-\\x7e",
    "lower": "a-z",
    "print": "\\x20-\\x7e",
    "punct": "!-/:-@\\[-`{-~",
    "space": " \\t\\r\\n\\v\\f",
    "upper": "A-Z",
    "word": "\\w",
    "xdigit": "0-9A-Fa-f",
}

GLOBSTAR = object()
"""A ``**`` segment."""

_MAGIC = LazyPattern(r"[*?\[]|[!?+*@]\(")


def _parse_class(seg: str, start: int) -> tuple[str, int] | None:
    """A ``[...]`` class at ``seg[start]``: (regex, index after it), or None if unclosed."""
    i = start + 1
    negate = False
    if i < len(seg) and seg[i] in "!^":
        negate = True
        i += 1
    body: list[str] = []
    last = ""
    """The character the last piece of ``body`` stands for, when it is one (a range's start)."""
    first = True
    while i < len(seg):
        ch = seg[i]
        if ch == "]" and not first:
            if not body:
                # Only reversed ranges (``[z-a]``): minimatch's class that "cannot possibly
                # match anything", which makes the whole pattern match nothing.
                return "(?!)", i + 1
            return ("[^/" + "".join(body) + "]" if negate else "[" + "".join(body) + "]"), i + 1
        first = False
        if ch == "[" and seg.startswith("[:", i):
            end = seg.find(":]", i + 2)
            name = seg[i + 2 : end] if end > 0 else ""
            if name in _POSIX_CLASSES:
                body.append(_POSIX_CLASSES[name])
                last = ""
                i = end + 2
                continue
        if ch == "-" and last and i + 1 < len(seg) and seg[i + 1] != "]":
            stop, i = (seg[i + 2], i + 3) if seg[i + 1] == "\\" and i + 2 < len(seg) else (seg[i + 1], i + 2)
            body.pop()
            if stop >= last:  # minimatch drops a reversed range (JavaScript would refuse it)
                body.append(_class_char(last) + "-" + _class_char(stop) if stop > last else _class_char(last))
            last = ""
            continue
        if ch == "\\" and i + 1 < len(seg):
            ch = seg[i + 1]
            i += 1
        body.append(_class_char(ch))
        last = ch
        i += 1
    return None


def _class_char(ch: str) -> str:
    """``ch`` inside a regex character class."""
    return "\\" + ch if ch in "\\]^-[" else ch


def _segment_source(seg: str) -> str:
    """The regex body (no anchors) for one segment of a glob."""
    out = ""
    i = 0
    while i < len(seg):
        ch = seg[i]
        if ch == "\\":
            if i + 1 < len(seg):
                out += re.escape(seg[i + 1])
                i += 2
            else:
                out += re.escape("\\")
                i += 1
            continue
        if ch in "?*+@!" and i + 1 < len(seg) and seg[i + 1] == "(":
            close = _find_close(seg, i + 1, "(", ")")
            if close > 0:
                alternatives = _split_top(seg[i + 2 : close], "(", ")", "|")
                alts = "|".join(_segment_source(a) for a in alternatives)
                rest = seg[close + 1 :]
                if ch == "!":
                    rest_src = _segment_source(rest)
                    return out + f"(?:(?!(?:{alts}){rest_src}$)[^/]*?){rest_src}"
                suffix = {"?": "?", "*": "*", "+": "+", "@": ""}[ch]
                out += f"(?:{alts}){suffix}"
                i = close + 1
                continue
        if ch == "*":
            while i + 1 < len(seg) and seg[i + 1] == "*":
                i += 1
            out += "[^/]*?"
            i += 1
            continue
        if ch == "?":
            out += "[^/]"
            i += 1
            continue
        if ch == "[":
            parsed = _parse_class(seg, i)
            if parsed is not None:
                out += parsed[0]
                i = parsed[1]
                continue
            out += "\\["
            i += 1
            continue
        out += re.escape(ch)
        i += 1
    return out


def _unescape(seg: str) -> str:
    return re.sub(r"\\(.)", r"\1", seg)


@attrs.frozen
class Segment:
    """A compiled pattern segment: a literal name or a regex (``None`` pattern = ``**``)."""

    literal: str | None
    regex: re.Pattern[str] | None

    def matches(self, name: str, nocase: bool) -> bool:
        if self.literal is not None:
            return name.lower() == self.literal.lower() if nocase else name == self.literal
        assert self.regex is not None
        if name in (".", ".."):
            return False
        return self.regex.fullmatch(name) is not None


def compile_pattern(pattern: str, nocase: bool) -> tuple[bool, list[Segment | object]]:
    """(is_absolute, segments) for one brace-expanded pattern."""
    absolute = pattern.startswith("/")
    parts = [p for p in pattern.split("/") if p != ""]
    segments: list[Segment | object] = []
    for part in parts:
        if part == "**":
            if segments and segments[-1] is GLOBSTAR:
                continue
            segments.append(GLOBSTAR)
        elif _MAGIC.search(part) is None:
            segments.append(Segment(_unescape(part), None))
        else:
            flags = re.IGNORECASE if nocase else 0
            segments.append(Segment(None, re.compile(_segment_source(part), flags)))
    return absolute, segments


# --------------------------------------------------------------------------------------
# Matching whole relative paths (ignore patterns)


def _path_matches(segments: list[Segment | object], parts: list[str], nocase: bool) -> bool:
    # The pattern as an automaton over the path's parts (no recursion: a path may be
    # a thousand directories deep). ``**`` matches zero or more parts, never `.`/`..`.
    states = _closure(frozenset({0}), segments)
    for part in parts:
        following: set[int] = set()
        for si in states:
            if si == len(segments):
                continue
            seg = segments[si]
            if seg is GLOBSTAR:
                if part not in (".", ".."):
                    following.add(si)
            elif isinstance(seg, Segment) and seg.matches(part, nocase):
                following.add(si + 1)
        if not following:
            return False
        states = _closure(frozenset(following), segments)
    return len(segments) in states


class IgnoreGlobs:
    """node-glob's ``ignore`` option: skip matching files and ``x/**`` directories."""

    def __init__(self, patterns: tuple[str, ...] | list[str], nocase: bool) -> None:
        self._nocase = nocase
        self._files: list[list[Segment | object]] = []
        self._children: list[list[Segment | object]] = []
        for pattern in patterns:
            for expanded in expand_braces(pattern):
                _, segs = compile_pattern(expanded, nocase)
                self._files.append(segs)
                if segs and segs[-1] is GLOBSTAR:
                    self._children.append(segs[:-1])

    def ignored(self, rel_parts: list[str]) -> bool:
        return any(_path_matches(s, rel_parts, self._nocase) for s in self._files)

    def children_ignored(self, rel_parts: list[str]) -> bool:
        return any(_path_matches(s, rel_parts, self._nocase) for s in self._children)


# --------------------------------------------------------------------------------------
# The walk


@attrs.frozen
class GlobEntry:
    """A matched non-directory: its absolute path and lstat mtime in milliseconds."""

    fullpath: str
    mtime_ms: float


def _closure(states: frozenset[int], segments: list[Segment | object]) -> frozenset[int]:
    out = set(states)
    for s in sorted(states):
        i = s
        while i < len(segments) and segments[i] is GLOBSTAR:
            i += 1
            out.add(i)
    return frozenset(out)


def glob_files(
    pattern: str,
    cwd: str,
    *,
    nocase: bool,
    ignore: tuple[str, ...] | list[str] = COMMON_IGNORE_PATTERNS,
    should_stop: Callable[[], bool] | None = None,
) -> list[GlobEntry]:
    """node-glob with ``{nodir, dot, follow: false, stat}``: matching non-directories.

    Entries come in walk order (directories read in ``strcmp`` order, depth first).
    """
    ignores = IgnoreGlobs(ignore, nocase)
    seen: set[str] = set()
    results: list[GlobEntry] = []

    for expanded in expand_braces(pattern):
        absolute, segments = compile_pattern(expanded, nocase)
        if not segments:
            continue
        base = "/" if absolute else node_resolve(cwd)
        # Literal leading segments (including `.` and `..`) are walked directly.
        start = 0
        while start < len(segments):
            seg = segments[start]
            if not isinstance(seg, Segment) or seg.literal not in (".", ".."):
                break
            base = node_join(base, seg.literal)
            start += 1
        _walk(base, cwd, segments, frozenset({start}), nocase, ignores, seen, results, should_stop, base)
    return results


def pattern_base(pattern: str, cwd: str) -> str:
    """Where a brace-expanded pattern's matches lie: its leading literal segments
    (``..`` included) joined to ``cwd``, or to ``/`` for an absolute pattern."""
    absolute, segments = compile_pattern(pattern, nocase=False)
    base = "/" if absolute else node_resolve(cwd)
    for seg in segments:
        if not isinstance(seg, Segment) or seg.literal is None:
            break
        base = node_join(base, seg.literal)
    return base


def _walk(
    directory: str,
    cwd: str,
    segments: list[Segment | object],
    states: frozenset[int],
    nocase: bool,
    ignores: IgnoreGlobs,
    seen: set[str],
    results: list[GlobEntry],
    should_stop: Callable[[], bool] | None,
    floor: str,
) -> None:
    """Depth first, each directory's entries in ``strcmp`` order, as a loop over a stack
    of directory visits (a tree may be a thousand directories deep)."""

    def visit(directory: str, states: frozenset[int]) -> Iterator[tuple[str, frozenset[int]]]:
        """Matches in ``directory`` go to ``results``; yields, in order, where to descend."""
        if should_stop is not None and should_stop():
            return
        states = _closure(states, segments)
        live = [s for s in states if s < len(segments)]
        if not live:
            return
        for s in live:
            seg = segments[s]
            if isinstance(seg, Segment) and seg.literal in (".", ".."):
                # `.` and `..` are never read from the directory; they are walked
                # directly, and never above ``floor``, where the walk started (so
                # ``*/../../*`` cannot reach what lies outside the checked base).
                target = node_join(directory, seg.literal)
                if is_within_root(target, floor):
                    yield target, frozenset({s + 1})
        try:
            names = readdir_sorted(directory)
        except OSError:
            return
        for name in names:
            consumed: set[int] = set()
            via_regex: set[int] = set()
            for s in live:
                seg = segments[s]
                if seg is GLOBSTAR:
                    consumed.add(s)
                elif isinstance(seg, Segment) and seg.matches(name, nocase):
                    via_regex.add(s + 1)
            if not consumed and not via_regex:
                continue
            full = node_join(directory, name)
            rel_parts = node_relative(cwd, full).split("/")
            if ignores.ignored(rel_parts):
                continue
            try:
                info = os.lstat(full)
            except OSError:
                continue
            is_dir = stat.S_ISDIR(info.st_mode)
            matched = _closure(frozenset(consumed | via_regex), segments)
            if not is_dir and len(segments) in matched and full not in seen:
                seen.add(full)
                results.append(GlobEntry(full, info.st_mtime_ns / 1e6))
            if ignores.children_ignored(rel_parts):
                continue
            if is_dir:
                yield full, frozenset(consumed | via_regex)
            elif stat.S_ISLNK(info.st_mode) and via_regex and os.path.isdir(full):
                # follow: false — `**` never crosses a symlink, named segments do.
                yield full, frozenset(via_regex)

    stack = [visit(directory, states)]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
        else:
            stack.append(visit(*child))


def escape_glob(pattern: str) -> str:
    """minimatch's ``escape``: backslash the magic characters (not braces)."""
    return re.sub(r"[?*()[\]\\]", lambda m: "\\" + m.group(0), pattern)


def sort_file_entries(
    entries: list[GlobEntry], now_ms: float, recency_ms: float = _ONE_DAY_MS
) -> list[GlobEntry]:
    """Gemini's ``sortFileEntries``: recent first (newest first), then alphabetical."""

    def compare(a: GlobEntry, b: GlobEntry) -> int:
        a_recent = now_ms - a.mtime_ms < recency_ms
        b_recent = now_ms - b.mtime_ms < recency_ms
        if a_recent and b_recent:
            return (b.mtime_ms > a.mtime_ms) - (b.mtime_ms < a.mtime_ms)
        if a_recent:
            return -1
        if b_recent:
            return 1
        ka, kb = locale_sort_key(a.fullpath), locale_sort_key(b.fullpath)
        return (ka > kb) - (ka < kb)

    return sorted(entries, key=functools.cmp_to_key(compare))


# --------------------------------------------------------------------------------------
# The tool

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {
            "type": "string",
            "description": "Glob to match, e.g. 'src/**/*.py' or '*.md'.",
        },
        "dir_path": {
            "type": "string",
            "description": "Optional directory to search from; defaults to the workspace.",
        },
        "case_sensitive": {
            "type": "boolean",
            "description": "Optional: match case exactly (default false).",
        },
        "respect_git_ignore": {
            "type": "boolean",
            "description": "Optional: skip files matched by .gitignore (default true).",
        },
        "respect_gemini_ignore": {
            "type": "boolean",
            "description": "Optional: skip files matched by .geminiignore (default true).",
        },
    },
    "required": ["pattern"],
}

_DESCRIPTION = (
    "Lists files whose paths match a glob pattern (for example `**/*.ts` or "
    "`docs/*.md`), as absolute paths with recently modified files first. Use it to "
    "locate files by name or location."
)


def outside_problem(pattern: str, search_dir: str, env: ToolEnv) -> str | None:
    """Gemini's message for a pattern whose fixed leading part (``/etc/*``,
    ``../x/*``, a brace alternative ``{../x,y}/*``) lies outside the search directory
    and outside what the other tools may read; None when every alternative is inside.

    Gemini CLI's glob lists such paths (it confines only ``dir_path``); every other file
    tool refuses them, so glob does too (docs/differences.md). A ``..`` after a
    wildcard is held inside by the walk itself (``glob_files``). Raises
    ``NodeFsError`` when a base cannot be resolved."""
    for expanded in expand_braces(pattern):
        base = pattern_base(expanded, search_dir)
        if is_within_root(base, search_dir):
            continue
        problem = validate_path_access(resolve_to_real_path(base), env, "read")
        if problem is not None:
            return problem
    return None


class GlobTool:
    """Gemini CLI's ``glob`` tool."""

    name = "glob"
    display_name = "FindFiles"
    kind = "search"

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": self.name, "description": _DESCRIPTION, "parametersJsonSchema": _SCHEMA}

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        dir_path = args.get("dir_path") or "."
        try:
            search_dir = resolve_to_real_path(node_resolve(str(env.workspace), dir_path))
            problem = validate_path_access(search_dir, env, "read")
        except NodeFsError as exc:
            return exc.message
        if problem is not None:
            return problem
        if not os.path.exists(search_dir):
            return f"Search path does not exist {search_dir}"
        if not os.path.isdir(search_dir):
            return f"Search path is not a directory: {search_dir}"
        pattern = args.get("pattern")
        if not pattern or not isinstance(pattern, str) or pattern.strip() == "":
            return "The 'pattern' parameter cannot be empty."
        try:
            return outside_problem(pattern, search_dir, env)
        except NodeFsError as exc:
            return exc.message

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        description = f"'{args.get('pattern', '')}'"
        dir_path = args.get("dir_path")
        if isinstance(dir_path, str) and dir_path:
            workspace = str(env.workspace)
            relative = make_relative(node_resolve(workspace, dir_path), workspace)
            description += f" within {shorten_path(relative)}"
        return description

    async def execute(
        self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None
    ) -> ToolResult:
        return await trio.to_thread.run_sync(_run_glob, dict(args), env, abandon_on_cancel=True)


def _run_glob(args: dict[str, Any], env: ToolEnv) -> ToolResult:
    pattern = str(args.get("pattern", ""))
    workspace = str(env.workspace)
    try:
        dir_path = args.get("dir_path")
        if isinstance(dir_path, str) and dir_path:
            try:
                search_dir = resolve_to_real_path(node_resolve(workspace, dir_path))
            except NodeFsError as exc:
                return error_result(exc.message, "Path resolution failed.", "path_not_in_workspace")
            problem = validate_path_access(search_dir, env, "read")
            if problem is not None:
                return error_result(problem, "Path not in workspace.", "path_not_in_workspace")
            search_dirs = [search_dir]
        else:
            search_dirs = [str(d) for d in env.workspace_dirs()]

        nocase = not bool(args.get("case_sensitive"))
        entries: list[GlobEntry] = []
        for search_dir in search_dirs:
            effective = pattern
            if os.path.exists(node_join(search_dir, pattern)):
                effective = escape_glob(pattern)
            try:
                problem = outside_problem(effective, search_dir, env)
            except NodeFsError as exc:
                return error_result(exc.message, "Path resolution failed.", "path_not_in_workspace")
            if problem is not None:
                return error_result(problem, "Path not in workspace.", "path_not_in_workspace")
            entries.extend(glob_files(effective, search_dir, nocase=nocase))

        try:
            real_target = resolve_to_real_path(workspace)
        except NodeFsError:
            real_target = workspace
        relative_paths: list[str] = []
        for entry in entries:
            try:
                real_full = resolve_to_real_path(entry.fullpath)
            except NodeFsError:
                real_full = entry.fullpath
            relative_paths.append(node_relative(real_target, real_full))

        git, gemini = respect_flags(
            env, args.get("respect_git_ignore"), args.get("respect_gemini_ignore")
        )
        kept, ignored_count = FileDiscovery.for_env(env).filter_with_report(
            relative_paths, respect_git_ignore=git, respect_gemini_ignore=gemini
        )
        kept_absolute = {node_resolve(workspace, p) for p in kept}
        filtered = [e for e in entries if e.fullpath in kept_absolute]

        if not filtered:
            message = f'No files found matching pattern "{pattern}"'
            if len(search_dirs) == 1:
                message += f" within {search_dirs[0]}"
            else:
                message += f" within {len(search_dirs)} workspace directories"
            if ignored_count > 0:
                message += f" ({ignored_count} files were ignored)"
            return ToolResult(llm_content=message, return_display="No files found")

        ordered = sort_file_entries(filtered, time.time() * 1000)
        listing = "\n".join(e.fullpath for e in ordered)
        message = f'Found {len(ordered)} file(s) matching "{pattern}"'
        if len(search_dirs) == 1:
            message += f" within {search_dirs[0]}"
        else:
            message += f" across {len(search_dirs)} workspace directories"
        if ignored_count > 0:
            message += f" ({ignored_count} additional files were ignored)"
        message += f", sorted by modification time (newest first):\n{listing}"
        return ToolResult(
            llm_content=message, return_display=f"Found {len(ordered)} matching file(s)"
        )
    except (OSError, NodeFsError, ValueError, re.error, RecursionError) as exc:
        raw = f"Error during glob search operation: {error_message(exc)}"
        return error_result(raw, "Error: An unexpected error occurred.", "glob_execution_error")
