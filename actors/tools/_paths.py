"""Workspace confinement and the path helpers the file tools share.

Everything here mirrors a piece of Gemini CLI 0.61 that the file tools depend on, so the
tools produce the same paths, the same messages and the same ignore decisions:

- path resolution (``resolveToRealPath``, ``resolveDefensiveToolPath``, Node's
  ``path.resolve`` / ``path.join`` / ``path.relative``), ``makeRelative``, ``shortenPath``;
- workspace confinement (``Config.validatePathAccess`` / ``isPathAllowed``,
  ``WorkspaceContext.isPathWithinWorkspace``, ``validatePath``): a path is usable when it
  resolves (symlinks included) inside a workspace directory — minus ``.git``, ``.env``,
  ``node_modules`` and ``gha-creds-*.json`` segments — or inside the project temp dir
  (minus ``memory/.inbox``), or is exactly the global ``~/.gemini/GEMINI.md``;
- ``.gitignore`` / ``.geminiignore`` handling (``FileDiscoveryService``,
  ``GitIgnoreParser``, ``IgnoreFileParser``) on top of a port of the npm ``ignore``
  package (7.0), which is case-insensitive and git-like;
- Node-style error texts (``ENOENT: no such file or directory, open '/x'``), JavaScript
  string lengths (UTF-16 code units), JavaScript regular expressions run by Python's
  ``re``, and an approximation of ICU's root collation for ``localeCompare`` sorting.

All functions here do blocking file-system work; tools call them from worker threads.
"""

from __future__ import annotations

import errno as errno_mod
import os
import posixpath
import re
import stat
import unicodedata
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from actors.common import (
    is_subpath,
    is_within_root,
    js_regex_to_python,
    js_trim,
    js_trim_start,
    node_join,
    node_relative,
    node_resolve,
    utf16_len,
)

from ._base import ToolEnv

# --------------------------------------------------------------------------------------
# Node-style file-system errors


class NodeFsError(Exception):
    """An ``OSError`` rendered the way Node reports it (``code`` plus libuv text)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_UV_TEXT: dict[int, str] = {
    errno_mod.ENOENT: "no such file or directory",
    errno_mod.EACCES: "permission denied",
    errno_mod.EPERM: "operation not permitted",
    errno_mod.EISDIR: "illegal operation on a directory",
    errno_mod.ENOTDIR: "not a directory",
    errno_mod.ELOOP: "too many symbolic links encountered",
    errno_mod.ENOSPC: "no space left on device",
    errno_mod.EROFS: "read-only file system",
    errno_mod.ENAMETOOLONG: "name too long",
    errno_mod.EEXIST: "file already exists",
    errno_mod.EBUSY: "resource busy or locked",
    errno_mod.EMFILE: "too many open files",
    errno_mod.ENFILE: "file table overflow",
    errno_mod.EIO: "i/o error",
    errno_mod.EINVAL: "invalid argument",
    errno_mod.ENOTEMPTY: "directory not empty",
    errno_mod.EXDEV: "cross-device link not permitted",
    errno_mod.ETXTBSY: "text file is busy",
    errno_mod.EFBIG: "file too large",
    errno_mod.EDQUOT: "disk quota exceeded",
}


def node_error_code(exc: BaseException) -> str | None:
    """The Node ``error.code`` (``ENOENT``...) of an OS error, else None."""
    if isinstance(exc, NodeFsError):
        return exc.code
    if isinstance(exc, OSError) and exc.errno is not None:
        return errno_mod.errorcode.get(exc.errno, f"E{exc.errno}")
    return None


def node_fs_error(exc: OSError, syscall: str, path: str) -> NodeFsError:
    """``exc`` as Node would word it: ``CODE: text, syscall 'path'``."""
    code = node_error_code(exc) or "UNKNOWN"
    text = _UV_TEXT.get(exc.errno or 0) or (exc.strerror or "unknown error").lower()
    return NodeFsError(code, f"{code}: {text}, {syscall} '{path}'")


def error_message(exc: BaseException) -> str:
    """``error.message`` as Gemini's ``getErrorMessage`` would give it."""
    if isinstance(exc, NodeFsError):
        return exc.message
    if isinstance(exc, OSError) and exc.errno is not None:
        return node_fs_error(exc, "access", str(exc.filename or "")).message
    return str(exc)


# --------------------------------------------------------------------------------------
# JavaScript strings: lengths and slices count UTF-16 code units


def js_prefix(text: str, units: int) -> str:
    """``text.substring(0, units)``, never splitting a surrogate pair.

    JavaScript would keep a lone high surrogate when the cut falls inside a pair; we cut
    before the pair instead, so the result stays encodable.
    """
    if units >= len(text) * 2:
        return text
    count = 0
    for index, ch in enumerate(text):
        width = 2 if ord(ch) > 0xFFFF else 1
        if count + width > units:
            return text[:index]
        count += width
    return text


def make_relative(target_path: str, root_directory: str) -> str:
    """Gemini's ``makeRelative``: relative to the root, ``.`` for the root itself."""
    if not target_path.startswith("/"):
        return target_path
    return node_relative(node_resolve(root_directory), target_path) or "."


def shorten_path(file_path: str, max_len: int = 35) -> str:
    """Gemini's ``shortenPath``: keep the first and last segments, elide the middle."""
    if len(file_path) <= max_len:
        return file_path

    def simple_truncate() -> str:
        keep = (max_len - 3) // 2
        if keep <= 0:
            return file_path[: max_len - 3] + "..."
        return f"{file_path[:keep]}...{file_path[len(file_path) - keep :]}"

    def truncate_component(component: str, target: int, mode: str) -> str:
        if len(component) <= target:
            return component
        if target <= 0:
            return ""
        if target <= 3:
            return component[-target:] if mode == "end" else component[:target]
        if mode == "start":
            return f"{component[: target - 3]}..."
        if mode == "end":
            return f"...{component[len(component) - (target - 3) :]}"
        front = -(-(target - 3) // 2)
        back = target - 3 - front
        return f"{component[:front]}...{component[len(component) - back :]}"

    root = "/" if file_path.startswith("/") else ""
    segments = [s for s in file_path[len(root) :].split("/") if s != ""]
    if len(segments) <= 1:
        return simple_truncate()

    first_dir = segments[0]
    last_segment = segments[-1]
    start_component = root + first_dir
    end_part_segments = [last_segment]
    end_part_length = len(last_segment)
    for i in range(len(segments) - 2, 0, -1):
        segment = segments[i]
        new_length = len(start_component) + 1 + 3 + 1 + end_part_length + 1 + len(segment)
        if new_length <= max_len:
            end_part_segments.insert(0, segment)
            end_part_length += 1 + len(segment)
        else:
            break

    components = [first_dir, *end_part_segments]
    modes = [
        "start" if i == 0 else "end" if i == len(components) - 1 else "center"
        for i in range(len(components))
    ]
    separators = len(end_part_segments) + 1
    available = max_len - (len(root) + separators + 3)

    def trailing_fallback() -> str:
        ellipsis_tail = f".../{last_segment}"
        if len(ellipsis_tail) <= max_len:
            return ellipsis_tail
        if root:
            root_tail = f"{root}.../{last_segment}"
            if len(root_tail) <= max_len:
                return root_tail
        if root and len(root + last_segment) <= max_len:
            return root + last_segment
        if len(last_segment) <= max_len:
            return last_segment
        return simple_truncate()

    if available <= 0:
        return trailing_fallback()
    min_lengths = [
        len(c) if i == len(components) - 1 else min(len(c), 1) for i, c in enumerate(components)
    ]
    if available < sum(min_lengths):
        return trailing_fallback()
    budgets = [len(c) for c in components]
    total = sum(budgets)
    while total > available:
        best, best_score = -1, -1
        for i, budget in enumerate(budgets):
            if budget <= min_lengths[i]:
                continue
            score = (0 if i == len(budgets) - 1 else 1_000_000) + budget
            if score > best_score:
                best, best_score = i, score
        if best == -1:
            return trailing_fallback()
        budgets[best] -= 1
        total -= 1
    parts = [truncate_component(c, budgets[i], modes[i]) for i, c in enumerate(components)]
    result = f"{root}{parts[0]}/.../{'/'.join(parts[1:])}"
    if len(result) > max_len:
        return trailing_fallback()
    return result


# --------------------------------------------------------------------------------------
# Resolution of model-supplied paths


def _decode_uri_component(text: str) -> str:
    """``decodeURIComponent``; raises ``ValueError`` where JavaScript throws."""
    if "%" not in text:
        return text
    if re.search(r"%(?![0-9A-Fa-f]{2})", text):
        raise ValueError("URI malformed")
    return urllib.parse.unquote(text, errors="strict")


def _file_url_to_path(url: str) -> str:
    parsed = urllib.parse.urlsplit(url)
    if parsed.netloc not in ("", "localhost"):
        raise ValueError('File URL host must be "localhost" or empty on linux')
    if re.search(r"%2f", parsed.path, re.IGNORECASE):
        raise ValueError("File URL path must not include encoded / characters")
    return urllib.parse.unquote(parsed.path, errors="strict")


_RECOVERABLE = (errno_mod.ENOENT, errno_mod.EISDIR, errno_mod.ENAMETOOLONG, errno_mod.ENOTDIR)


def _robust_realpath(path: str) -> str:
    """Gemini's ``robustRealpath``, as a loop: Gemini recurses once per missing
    ancestor, which Python's stack cannot do for a path of a thousand components.

    Walks up from ``path`` until an ancestor resolves (or a dangling symlink is found,
    whose target is then walked instead); the names walked over are put back on."""
    visited: set[str] = set()
    names: list[str] = []
    current = path
    while True:
        if current in visited:
            raise NodeFsError("ELOOP", f"Infinite recursion detected in robustRealpath: {current}")
        visited.add(current)
        try:
            real = os.path.realpath(current, strict=True)
            break
        except OSError as exc:
            if exc.errno not in _RECOVERABLE:
                raise node_fs_error(exc, "realpath", current) from None
        except ValueError:
            # Not encodable for the file system (a lone surrogate from JSON, say).
            raise NodeFsError("EINVAL", f"EINVAL: invalid argument, realpath '{current}'") from None
        try:
            info = os.lstat(current)
            if stat.S_ISLNK(info.st_mode):
                current = node_resolve(posixpath.dirname(current), os.readlink(current))
                continue
        except OSError as exc:
            if exc.errno not in _RECOVERABLE:
                raise node_fs_error(exc, "lstat", current) from None
        parent = posixpath.dirname(current)
        if parent == current:
            real = current
            break
        names.append(posixpath.basename(current))
        current = parent
    return node_join(real, *reversed(names)) if names else real


def make_dirs(path: str) -> None:
    """``fs.mkdir(path, {recursive: true})``: ``os.makedirs`` without its recursion
    (one frame per missing component: a thousand of them raised RecursionError).
    Raises ``OSError`` (``ENOTDIR`` when an ancestor is a file)."""
    missing: list[str] = []
    current = path
    while not os.path.exists(current):
        missing.append(current)
        parent = posixpath.dirname(current)
        if parent == current:
            break
        current = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory)
        except FileExistsError:
            if not os.path.isdir(directory):
                raise


def resolve_to_real_path(path: str) -> str:
    """Gemini's ``resolveToRealPath``: strip ``file://``, URI-decode, resolve symlinks.

    Paths that do not exist resolve through their deepest existing ancestor. Raises
    ``NodeFsError`` when resolution fails (a symlink loop, a permission error...).
    """
    if "\0" in path:
        raise NodeFsError("EINVAL", f"Invalid path: {path}")
    resolved = path
    try:
        if resolved.startswith("file://"):
            resolved = _file_url_to_path(resolved)
        resolved = _decode_uri_component(resolved)
    except ValueError:
        pass
    return _robust_realpath(node_resolve(resolved))


def resolve_defensive_tool_path(file_path: str, target_dir: str) -> str:
    """Gemini's ``resolveDefensiveToolPath``: drop NULs and a stray leading ``@``."""
    clean = file_path.replace("\0", "")
    try:
        if os.path.exists(node_resolve(target_dir, clean)):
            return clean
        if clean.startswith("@") and len(clean) > 1:
            stripped = re.sub(r"^[\\/]+", "", clean[1:])
            if clean.startswith(("@/", "@\\")):
                return stripped if stripped else clean
            first = re.split(r"[\\/]", stripped)[0]
            if first:
                if os.path.exists(node_resolve(target_dir, "@" + first)):
                    return clean
                return stripped
    except (OSError, ValueError):
        pass
    return clean


def resolve_tool_path(file_path: str, env: ToolEnv) -> str:
    """The absolute, symlink-resolved path a file tool works on (may raise)."""
    workspace = str(env.workspace)
    sanitized = resolve_defensive_tool_path(file_path, workspace)
    return resolve_to_real_path(node_resolve(workspace, sanitized))


# --------------------------------------------------------------------------------------
# Workspace confinement

_MAX_PATH_LENGTH = 4096
_MAX_COMPONENT_LENGTH = 255
_LOG_MARKERS = (
    re.compile(r"(^|[/\\])AssertionError:"),
    re.compile(r"(^|[/\\])FAIL "),
    re.compile(r"(^|[/\\])✓ "),
    re.compile(r"(^|[/\\])× "),
    re.compile(r"(^|[/\\])TestingLibraryElementError:"),
)


def validate_path_string(path: str) -> str | None:
    """Gemini's ``validatePath`` pre-flight check; the problem, or None."""
    if not path:
        return "Path must be a non-empty string."
    if re.search(r"[\n\r\0\t]", path):
        return "Path contains invalid characters (newlines or control characters)."
    if any(marker.search(path) for marker in _LOG_MARKERS):
        return "Path appears to be a misinterpreted log fragment."
    if ('"' in path or "..." in path) and utf16_len(path) > 20:
        return (
            "Path contains suspicious characters (double quotes or ellipses) and is too "
            "long to be a simple filename."
        )
    if utf16_len(path) > _MAX_PATH_LENGTH:
        return f"Path is too long (maximum {_MAX_PATH_LENGTH} characters)."
    for component in re.split(r"[/\\]", path):
        if utf16_len(component) > _MAX_COMPONENT_LENGTH:
            return (
                f'Path component "{js_prefix(component, 20)}..." is too long '
                f"(maximum {_MAX_COMPONENT_LENGTH} characters)."
            )
    return None


def _trim_trailing_spaces_and_dots(text: str) -> str:
    return text.rstrip(" .")


def _has_blocked_segment(relative: str) -> bool:
    for segment in relative.split("/"):
        clean = _trim_trailing_spaces_and_dots(segment.split(":")[0]).lower()
        if clean in (".git", ".env", "node_modules"):
            return True
        if clean.startswith("gha-creds-") and clean.endswith(".json"):
            return True
    return False


def is_path_within_workspace(path: str, env: ToolEnv) -> bool:
    """``WorkspaceContext.isPathWithinWorkspace`` (symlinks resolved, blocked segments)."""
    try:
        resolved = resolve_to_real_path(node_resolve(str(env.workspace), path))
        for directory in env.workspace_dirs():
            root = str(directory)
            if is_subpath(root, resolved):
                return not _has_blocked_segment(node_relative(root, resolved))
        return False
    except (OSError, NodeFsError, ValueError):
        return False


def global_gemini_dir(env: ToolEnv) -> str:
    """``~/.gemini`` (the project temp dir is ``~/.gemini/tmp/<slug>``)."""
    return str(env.project_temp_dir.parent.parent)


def context_file_name(env: ToolEnv) -> str:
    """The memory file name (``context.fileName`` setting, first if a list)."""
    name = _setting(env.settings, "context", "fileName")
    if isinstance(name, list | tuple) and name:
        name = name[0]
    return name if isinstance(name, str) and name else "GEMINI.md"


def is_path_allowed(absolute_path: str, env: ToolEnv) -> bool:
    """``Config.isPathAllowed`` (may raise ``NodeFsError`` when resolution fails)."""
    resolved = resolve_to_real_path(absolute_path)
    temp_dir = str(env.project_temp_dir)
    inbox_root = node_join(temp_dir, "memory", ".inbox")
    resolved_inbox = resolve_to_real_path(inbox_root)
    normalized = node_resolve(absolute_path)
    if (
        resolved == resolved_inbox
        or is_subpath(resolved_inbox, resolved)
        or normalized == inbox_root
        or is_subpath(inbox_root, normalized)
    ):
        return False
    if is_path_within_workspace(resolved, env):
        return True
    if is_subpath(resolve_to_real_path(temp_dir), resolved):
        return True
    memory_file = node_join(global_gemini_dir(env), context_file_name(env))
    return resolved == resolve_to_real_path(memory_file)


def validate_path_access(absolute_path: str, env: ToolEnv, check: str = "write") -> str | None:
    """``Config.validatePathAccess``: None when allowed, else Gemini's message.

    May raise ``NodeFsError`` (as Gemini's does) when the path cannot be resolved.
    """
    problem = validate_path_string(absolute_path)
    if problem is not None:
        return f"Invalid path: {problem}"
    if check == "read" and is_path_within_workspace(absolute_path, env):
        return None
    if is_path_allowed(absolute_path, env):
        return None
    dirs = ", ".join(str(d) for d in env.workspace_dirs())
    return (
        f'Path not in workspace: Attempted path "{absolute_path}" resolves outside the '
        f"allowed workspace directories: {dirs} or the project temp directory: "
        f"{env.project_temp_dir}"
    )


# --------------------------------------------------------------------------------------
# Settings


def _setting(settings: Mapping[str, Any], *keys: str) -> Any:
    node: Any = settings
    for key in keys:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def filtering_setting(env: ToolEnv, key: str, default: Any) -> Any:
    """``context.fileFiltering.<key>`` from the merged settings."""
    value = _setting(env.settings, "context", "fileFiltering", key)
    return default if value is None else value


# --------------------------------------------------------------------------------------
# ICU root collation, approximately (``String.prototype.localeCompare``)

_ASCII_PRIMARY = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$"
_PRIMARY_WEIGHT = {ch: i + 1 for i, ch in enumerate(_ASCII_PRIMARY)}
_DIGIT_BASE = 1000
_LETTER_BASE = 2000
_OTHER_BASE = 100_000


def locale_sort_key(text: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """A sort key approximating ``a.localeCompare(b)`` under ICU's root collation.

    Levels: base characters (punctuation < digits < letters, case-blind), then accents,
    then case (lower before upper). Control characters are ignorable.
    """
    primary: list[int] = []
    secondary: list[int] = []
    tertiary: list[int] = []
    for ch in unicodedata.normalize("NFD", text):
        if unicodedata.combining(ch):
            if secondary:
                secondary[-1] = secondary[-1] * 31 + ord(ch)
            continue
        category = unicodedata.category(ch)
        if category == "Cc" and ch not in "\t\n\v\f\r":
            continue
        if ch in "\t\n\v\f\r":
            weight = -10 + "\t\n\v\f\r".index(ch)
        elif ch in _PRIMARY_WEIGHT:
            weight = _PRIMARY_WEIGHT[ch]
        elif category == "Nd":
            weight = _DIGIT_BASE + unicodedata.digit(ch, 0)
        elif ch.isalpha():
            lower = ch.lower()
            if len(lower) == 1 and "a" <= lower <= "z":
                weight = _LETTER_BASE + ord(lower) - ord("a")
            else:
                weight = _OTHER_BASE + ord(lower[0])
        elif category.startswith(("P", "S", "Z")):
            weight = 500 + ord(ch) % 400
        else:
            weight = _OTHER_BASE + ord(ch)
        primary.append(weight)
        secondary.append(0)
        tertiary.append(1 if ch.isupper() else 0)
    return tuple(primary), tuple(secondary), tuple(tertiary)


# --------------------------------------------------------------------------------------
# The npm ``ignore`` package (7.0), ported: gitignore rules on relative POSIX paths


def _sanitize_range(body: str) -> str:
    return re.sub(
        r"([0-z])-([0-z])",
        lambda m: m.group(0) if ord(m.group(1)) <= ord(m.group(2)) else "",
        body,
    )


def _clean_range_backslash(slashes: str) -> str:
    return slashes[: len(slashes) - len(slashes) % 2]


def _range_replacer(m: re.Match[str]) -> str:
    lead, body, end_escape, close = m.group(1), m.group(2), m.group(3), m.group(4)
    if lead == "\\":
        return f"\\[{body}{_clean_range_backslash(end_escape)}{close}"
    if close == "]":
        if len(end_escape) % 2 == 0:
            return f"[{_sanitize_range(body)}{end_escape}]"
        return "[]"
    return "[]"


def _globstar_replacer(m: re.Match[str]) -> str:
    if m.start() + 6 < len(m.string):
        return r"(?:\/[^\/]+)*"
    return r"\/.+"


def _make_regex_prefix(pattern: str) -> str:
    """The ``REPLACERS`` chain of ``ignore`` 7.0, step by step."""
    s = pattern
    s = re.sub(r"^\ufeff", "", s, count=1)
    s = re.sub(
        r"((?:\\\\)*?)(\\?\s+)$",
        lambda m: m.group(1) + (" " if m.group(2).startswith("\\") else ""),
        s,
        count=1,
    )
    s = re.sub(
        r"(\\+?)\s",
        lambda m: m.group(1)[: len(m.group(1)) - len(m.group(1)) % 2] + " ",
        s,
    )
    s = re.sub(r"[\\$.|*+(){^]", lambda m: "\\" + m.group(0), s)
    s = re.sub(r"(?!\\)\?", lambda m: "[^/]", s)
    s = re.sub(r"^/", lambda m: "^", s, count=1)
    s = re.sub(r"/", lambda m: "\\/", s)
    s = re.sub(r"^\^*\\\*\\\*\\/", lambda m: r"^(?:.*\/)?", s, count=1)
    if s and s[0] != "^":
        s = (r"(?:^|\/)" if not re.search(r"/(?!$)", pattern) else "^") + s
    s = re.sub(r"\\/\\\*\\\*(?=\\/|$)", _globstar_replacer, s)
    s = re.sub(
        r"(^|[^\\]+)(\\\*)+(?=.+)",
        lambda m: m.group(1) + m.group(2).replace("\\*", r"[^\/]*"),
        s,
    )
    s = re.sub(r"\\\\\\(?=[$.|*+(){^])", lambda m: "\\", s)
    s = re.sub(r"\\\\", lambda m: "\\", s)
    s = re.sub(r"(\\)?\[([^\]/]*?)(\\*)($|\])", _range_replacer, s)
    s = re.sub(
        r"(?:[^*])$",
        lambda m: m.group(0) + "$" if m.group(0).endswith("/") else m.group(0) + r"(?=$|\/$)",
        s,
        count=1,
    )
    return s


def _trailing_wildcard(m: re.Match[str]) -> str:
    prefix = f"{m.group(1)}[^/]+" if m.group(1) else "[^/]*"
    return prefix + r"(?=$|\/$)"


class _IgnoreRule:
    __slots__ = ("negative", "regex")

    def __init__(self, pattern: str) -> None:
        negative = pattern.startswith("!")
        body = pattern[1:] if negative else pattern
        body = re.sub(r"^\\!", "!", body, count=1)
        body = re.sub(r"^\\#", "#", body, count=1)
        prefix = _make_regex_prefix(body)
        source = re.sub(r"(^|\\/)?\\\*$", _trailing_wildcard, prefix, count=1)
        self.negative = negative
        try:
            self.regex: re.Pattern[str] | None = re.compile(
                js_regex_to_python(source), re.IGNORECASE
            )
        except re.error:
            self.regex = None


def _check_pattern(pattern: str) -> bool:
    return (
        bool(pattern)
        and not re.fullmatch(r"\s+", pattern)
        and not re.search(r"(?:[^\\]|^)\\$", pattern)
        and not pattern.startswith("#")
    )


class IgnoreRules:
    """``ignore()`` from npm: add gitignore patterns, ask ``ignores(relative_path)``.

    Matching is case-insensitive, a path is ignored when an ancestor directory is, and
    the last matching rule wins otherwise. Directory paths end with ``/``.
    """

    def __init__(self) -> None:
        self._rules: list[_IgnoreRule] = []
        self._cache: dict[str, tuple[bool, bool]] = {}

    def add(self, patterns: Iterable[str] | IgnoreRules | str) -> IgnoreRules:
        if isinstance(patterns, IgnoreRules):
            if patterns._rules:
                self._rules.extend(patterns._rules)
                self._cache = {}
            return self
        if isinstance(patterns, str):
            patterns = [p for p in re.split(r"\r?\n", patterns) if p]
        added = False
        for pattern in patterns:
            if _check_pattern(pattern):
                self._rules.append(_IgnoreRule(pattern))
                added = True
        if added:
            self._cache = {}
        return self

    def copy(self) -> IgnoreRules:
        return IgnoreRules().add(self)

    def _test(self, path: str) -> tuple[bool, bool]:
        ignored = unignored = False
        for rule in self._rules:
            negative = rule.negative
            if (unignored == negative and ignored != unignored) or (
                negative and not ignored and not unignored
            ):
                continue
            if rule.regex is None or not rule.regex.search(path):
                continue
            ignored = not negative
            unignored = negative
        return ignored, unignored

    def _t(self, path: str, parts: list[str]) -> tuple[bool, bool]:
        """npm ``ignore``'s ``_t``: a path is what its nearest ignored ancestor directory
        says, else its own test; each ancestor once, from the root down, in a loop (a
        path of a thousand components overflowed the recursive original)."""
        cached = self._cache.get(path)
        if cached is not None:
            return cached
        parent: tuple[bool, bool] | None = None
        prefix = ""
        for part in parts[:-1]:
            prefix += part + "/"
            known = self._cache.get(prefix)
            if known is None:
                known = parent if parent is not None and parent[0] else self._test(prefix)
                self._cache[prefix] = known
            parent = known
        result = parent if parent is not None and parent[0] else self._test(path)
        self._cache[path] = result
        return result

    def ignores(self, path: str) -> bool:
        """Whether ``path`` (relative, POSIX, dirs ending in ``/``) is ignored.

        Raises ``ValueError`` for empty or non-relative paths, as ``ignore`` does.
        """
        if not path:
            raise ValueError("path must not be empty")
        if re.match(r"^\.*/|^\.+$", path):
            raise ValueError(f'path should be a `path.relative()`d string, but got "{path}"')
        return self._t(path, [s for s in path.split("/") if s])[0]


def normalized_relative_path(project_root: str, file_path: str, is_directory: bool) -> str | None:
    """Gemini's ``getNormalizedRelativePath`` (None when outside the root)."""
    if not file_path:
        return None
    absolute = node_resolve(project_root, file_path)
    if not is_within_root(absolute, project_root):
        return None
    normalized = node_relative(project_root, absolute).replace("\\", "/")
    if is_directory and not normalized.endswith("/") and normalized != "":
        normalized += "/"
    if normalized == "":
        return "/" if is_directory else ""
    if normalized.startswith("/") and normalized != "/":
        normalized = normalized[1:]
    return normalized


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as handle:
            return handle.read()
    except OSError:
        return None


class GitIgnoreParser:
    """Gemini's ``GitIgnoreParser``: nested ``.gitignore`` files plus extra patterns."""

    def __init__(self, project_root: str, extra_patterns: list[str] | None = None) -> None:
        self._root = node_resolve(project_root)
        self._cache: dict[str, IgnoreRules] = {}
        self._global: IgnoreRules | None = None
        self._extra = IgnoreRules()
        if extra_patterns:
            self._extra.add(self._process_patterns(extra_patterns, "."))

    def _load_patterns_for_file(self, patterns_file: str) -> IgnoreRules:
        content = _read_text(patterns_file)
        if content is None:
            return IgnoreRules()
        if patterns_file.endswith("/.git/info/exclude"):
            base = "."
        else:
            base = posixpath.dirname(node_relative(self._root, patterns_file))
        raw = re.split(r"\r\n|\n|\r", content)
        return IgnoreRules().add(self._process_patterns(raw, base))

    @staticmethod
    def _process_patterns(raw_patterns: Iterable[str], base: str) -> list[str]:
        out: list[str] = []
        for raw in raw_patterns:
            p = js_trim_start(raw)
            if p == "" or p.startswith("#"):
                continue
            negative = p.startswith("!")
            if negative:
                p = p[1:]
            anchored = p.startswith("/")
            if anchored:
                p = p[1:]
            if p == "":
                continue
            pattern = p
            if base and base != ".":
                if not anchored and "/" not in p:
                    pattern = posixpath.normpath(posixpath.join("**", p))
                pattern = node_join(base, pattern)
                if not pattern.startswith("/"):
                    pattern = "/" + pattern
            if anchored and not pattern.startswith("/"):
                pattern = "/" + pattern
            if negative:
                pattern = "!" + pattern
            out.append(pattern)
        return out

    def is_ignored(self, file_path: str, is_directory: bool) -> bool:
        normalized = normalized_relative_path(self._root, file_path, is_directory)
        if normalized is None or normalized in ("", "/"):
            return False
        try:
            ig = IgnoreRules().add([".git"])
            if self._global is None:
                exclude = node_join(self._root, ".git", "info", "exclude")
                self._global = (
                    self._load_patterns_for_file(exclude)
                    if os.path.exists(exclude)
                    else IgnoreRules()
                )
            ig.add(self._global)
            parts = normalized.split("/")
            current = self._root
            dirs = [self._root]
            for part in parts[:-1]:
                current = node_join(current, part)
                dirs.append(current)
            # One probe (and its cache of ancestors' answers) while the rules stay the
            # same: a directory without a .gitignore adds none. A new probe for each
            # ancestor made a path of n components cost n^2 rule tests.
            probe: IgnoreRules | None = None
            probe_rules = -1
            for directory in dirs:
                if node_relative(self._root, directory):
                    parent_rel = normalized_relative_path(self._root, directory, True)
                    if probe is None or probe_rules != len(ig._rules):
                        probe = IgnoreRules().add(ig).add(self._extra)
                        probe_rules = len(ig._rules)
                    if parent_rel and probe.ignores(parent_rel):
                        break
                patterns = self._cache.get(directory)
                if patterns is None:
                    gitignore = node_join(directory, ".gitignore")
                    patterns = (
                        self._load_patterns_for_file(gitignore)
                        if os.path.exists(gitignore)
                        else IgnoreRules()
                    )
                    self._cache[directory] = patterns
                ig.add(patterns)
            return ig.add(self._extra).ignores(normalized)
        except ValueError:
            return False


class IgnoreFileParser:
    """Gemini's ``IgnoreFileParser`` (``.geminiignore`` and custom ignore files)."""

    def __init__(self, project_root: str, source: list[str], *, is_patterns: bool = False) -> None:
        self._root = node_resolve(project_root)
        self.patterns: list[str] = []
        self._ig = IgnoreRules()
        if is_patterns:
            self.patterns.extend(source)
            self._ig.add(source)
        else:
            for name in reversed(source):
                content = _read_text(node_join(self._root, name))
                if content is None:
                    continue
                found = [
                    js_trim(p)
                    for p in re.split(r"\r\n|\n|\r", content)
                    if js_trim(p) and not js_trim(p).startswith("#")
                ]
                self.patterns.extend(found)
                self._ig.add(found)

    def is_ignored(self, file_path: str, is_directory: bool) -> bool:
        if not self.patterns:
            return False
        normalized = normalized_relative_path(self._root, file_path, is_directory)
        if normalized is None or normalized in ("", "/"):
            return False
        try:
            return self._ig.ignores(normalized)
        except ValueError:
            return False


def is_git_repository(directory: str) -> bool:
    """Gemini's ``isGitRepository``: a ``.git`` entry here or in an ancestor."""
    current = node_resolve(directory)
    while True:
        if os.path.exists(node_join(current, ".git")):
            return True
        parent = posixpath.dirname(current)
        if parent == current:
            return False
        current = parent


class FileDiscovery:
    """Gemini's ``FileDiscoveryService`` for one call (built fresh; tools keep no state)."""

    def __init__(self, project_root: str, custom_ignore_files: list[str] | None = None) -> None:
        self.root = node_resolve(project_root)
        self._git: GitIgnoreParser | None = (
            GitIgnoreParser(self.root) if is_git_repository(self.root) else None
        )
        self._gemini = IgnoreFileParser(self.root, [".geminiignore"])
        self._custom = (
            IgnoreFileParser(self.root, list(custom_ignore_files)) if custom_ignore_files else None
        )
        extra = self._gemini.patterns + (self._custom.patterns if self._custom else [])
        self._combined: GitIgnoreParser | IgnoreFileParser
        if self._git is not None:
            self._combined = GitIgnoreParser(self.root, extra)
        else:
            self._combined = IgnoreFileParser(self.root, extra, is_patterns=True)

    @classmethod
    def for_env(cls, env: ToolEnv) -> FileDiscovery:
        custom = filtering_setting(env, "customIgnoreFilePaths", [])
        paths = [str(p) for p in custom] if isinstance(custom, list | tuple) else []
        return cls(str(env.workspace), paths)

    def _check_filters(self, path: str, is_dir: bool, git: bool, gemini: bool) -> bool:
        if git and gemini:
            return self._combined.is_ignored(path, is_dir)
        if self._custom is not None and self._custom.is_ignored(path, is_dir):
            return True
        if git and self._git is not None and self._git.is_ignored(path, is_dir):
            return True
        return gemini and self._gemini.is_ignored(path, is_dir)

    def should_ignore(
        self,
        path: str,
        *,
        is_directory: bool = False,
        respect_git_ignore: bool = True,
        respect_gemini_ignore: bool = True,
        is_symbolic_link: bool | None = None,
    ) -> bool:
        """``_shouldIgnore``: the path itself, then a symlink's target."""
        if self._check_filters(path, is_directory, respect_git_ignore, respect_gemini_ignore):
            return True
        try:
            absolute = path if path.startswith("/") else node_resolve(self.root, path)
            is_link = is_symbolic_link
            if is_link is None:
                try:
                    is_link = stat.S_ISLNK(os.lstat(absolute).st_mode)
                except OSError:
                    is_link = False
            if is_link:
                real = resolve_to_real_path(absolute)
                target_is_dir = is_directory
                try:
                    target_is_dir = os.path.isdir(real)
                except OSError:
                    pass
                if self._check_filters(
                    real, target_is_dir, respect_git_ignore, respect_gemini_ignore
                ):
                    return True
        except (OSError, NodeFsError, ValueError):
            pass
        return False

    def filter_with_report(
        self, paths: list[str], *, respect_git_ignore: bool, respect_gemini_ignore: bool
    ) -> tuple[list[str], int]:
        """``filterFilesWithReport``: kept paths and how many were ignored."""
        kept = [
            p
            for p in paths
            if not self.should_ignore(
                p,
                is_directory=p.endswith(("/", "\\")),
                respect_git_ignore=respect_git_ignore,
                respect_gemini_ignore=respect_gemini_ignore,
            )
        ]
        return kept, len(paths) - len(kept)


def respect_flags(
    env: ToolEnv, git_param: object = None, gemini_param: object = None
) -> tuple[bool, bool]:
    """Tool parameter, else ``context.fileFiltering`` setting, else true."""
    git = (
        git_param
        if isinstance(git_param, bool)
        else filtering_setting(env, "respectGitIgnore", True)
    )
    gemini = (
        gemini_param
        if isinstance(gemini_param, bool)
        else filtering_setting(env, "respectGeminiIgnore", True)
    )
    return bool(git), bool(gemini)


def readdir_sorted(path: str) -> list[str]:
    """``fs.readdir`` order: libuv's scandir sorts names with ``strcmp``."""
    return sorted(os.listdir(path), key=lambda n: n.encode("utf-8", "surrogateescape"))
