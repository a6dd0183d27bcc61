"""Paths the file tools work on: resolution, workspace confinement, display.

Each piece mirrors Gemini CLI 0.61, so the tools produce the same paths and messages:

- resolution of model-supplied paths (``resolveToRealPath``, ``resolveDefensiveToolPath``,
  ``robustRealpath``, ``fs.mkdir`` recursive) on Node's ``path`` rules
  (:mod:`actors.common`);
- workspace confinement (``Config.validatePathAccess`` / ``isPathAllowed``,
  ``WorkspaceContext.isPathWithinWorkspace``, ``validatePath``): a path is usable when it
  resolves (symlinks included) inside a workspace directory — minus ``.git``, ``.env``,
  ``node_modules`` and ``gha-creds-*.json`` segments — or inside the project temp dir
  (minus ``memory/.inbox``), or is exactly the global ``~/.gemini/GEMINI.md``;
- display: ``makeRelative``, ``shortenPath``, ``substring`` in UTF-16 code units.

Beside it: Node-worded errors (``_fs_errors``), ignore files (``_discovery`` on the npm
``ignore`` port in ``_ignore``) and ``localeCompare`` order (``_collation``). Functions
here touch the file system: tools call them from worker threads, except the few checks
of a tool's ``validate``, which the scheduler runs in its own task.
"""

from __future__ import annotations

import errno as errno_mod
import os
import posixpath
import re
import stat
import urllib.parse

from actors.common import (
    LazyPattern,
    is_subpath,
    node_join,
    node_relative,
    node_resolve,
    utf16_len,
)

from ._base import ToolEnv, setting
from ._fs_errors import NodeFsError, node_fs_error

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
    LazyPattern(r"(^|[/\\])AssertionError:"),
    LazyPattern(r"(^|[/\\])FAIL "),
    LazyPattern(r"(^|[/\\])✓ "),
    LazyPattern(r"(^|[/\\])× "),
    LazyPattern(r"(^|[/\\])TestingLibraryElementError:"),
)


def validate_path_string(path: str) -> str | None:
    """Gemini's ``validatePath`` pre-flight check; the problem, or None."""
    if not path:
        return "Path must be a non-empty string."
    if any(c in path for c in "\n\r\0\t"):  # string tests: a regex cost the first call its compile
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
    for component in path.replace("\\", "/").split("/"):
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
    name = setting(env.settings, "context", "fileName")
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

