"""``@path`` references in a prompt, expanded as Gemini CLI 0.61's headless mode does.

``handleAtCommand`` (cli ``atCommandProcessor``) with ``read_many_files`` underneath:

1. **Parse.** ``(?<!\\\\)@`` then a run of: a ``"quoted"`` chunk, a backslash escape, any
   character but whitespace and ``,;!?()[]{}.``, or a ``.`` not followed by whitespace
   or the end. No word boundary is needed before ``@`` (``user@host.com`` holds
   ``@host.com``). Paths are unescaped (``\\x`` → ``x``); blank text parts are dropped.
2. **Resolve** each path: git- or gemini-ignored paths are skipped; paths failing
   Gemini's path validation (control characters, log fragments, quotes or ``...`` in
   long names, over-long paths/components) are skipped unless a path can be pulled out
   of them; relative paths are tried in each workspace directory, absolute ones must be
   inside it. A directory stands for all its files (``dir/**``). A missing (or
   out-of-workspace) path falls back to the glob ``**/*<name>*`` and takes only the
   first (most recently modified) match.
3. **Nothing resolved:** the prompt goes to the model as typed, one text part.
4. **Read** the files like ``read_many_files``: the default excludes (``node_modules``,
   ``.git``, build output, binary archives, ``.env``, the memory file...), ignore files,
   the workspace check, files sorted by path; each text file as
   ``\\nContent from @<label>:\\n`` plus its content (``.trim()``-ed, prefixed by the
   truncation warning when ``read_file`` would cut it); images/PDF/audio only when named
   explicitly (as ``inlineData`` parts).
5. **Parts:** the rebuilt query (resolved ``@x`` replaced by ``@<path spec>``, a space
   before each reference, trimmed), ``\\n--- Content from referenced files ---``, the
   files, ``\\n--- End of content ---``; or, when no file could be read, the header and
   ``No files matching the criteria were found or all were skipped.`` without a footer.

MCP resources (``@<server>:<uri>``, a resource the session's servers listed) are read
first (``mcp_session.read_references``, concurrently) and come before the files:
``\nContent from @<uri>:\n`` and their contents, the footer after them when no file
was read; a reference that cannot be read stops the prompt (``McpInputError``).

Not carried over: agents as ``@`` targets (we have none), and the "just-in-time"
GEMINI.md context of subdirectories (needs the session's memory state).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import trio

from actors.common import (
    js_trim,
    node_extname,
    node_join,
    node_relative,
    node_resolve,
)
from actors.host.mcp_session import SessionMcp, read_references
from actors.host.settings import gemini_home
from actors.tools import (
    FileDiscovery,
    GlobTool,
    NodeFsError,
    ToolEnv,
    context_file_name,
    detect_file_type,
    escape_glob,
    glob_files,
    process_single_file_content,
    resolve_to_real_path,
    respect_flags,
    run_glob,
    validate_path_access,
)
from actors.tools import validate_path_string as validate_path

REFERENCE_CONTENT_START = "--- Content from referenced files ---"
REFERENCE_CONTENT_END = "--- End of content ---"
REF_CONTENT_HEADER = f"\n{REFERENCE_CONTENT_START}"
OUTPUT_TERMINATOR = f"\n{REFERENCE_CONTENT_END}"
NO_FILES_MESSAGE = "No files matching the criteria were found or all were skipped."
TRUNCATED_WARNING = (
    "[WARNING: This file was truncated. To view the full content, use the 'read_file' "
    "tool on this specific file.]\n\n"
)

_LT = "\n\r\u2028\u2029"
AT_COMMAND_RE = re.compile(
    r'(?<!\\)@(?:"[^"]*"|\\[^' + _LT + r"]|[^ \t\n\r,;!?()\[\]{}.]|\.(?!\Z|[ \t\n\r]))+"
)
_UNESCAPE_RE = re.compile(r"\\([^" + _LT + "])")
_FILE_CONTENT_RE = re.compile(r"--- ([^" + _LT + r"]*?) ---\n\n([\s\S]*?)\n\n")

COMMON_IGNORE_PATTERNS = (
    "**/node_modules/**",
    "**/.git/**",
    "**/bower_components/**",
    "**/.svn/**",
    "**/.hg/**",
)
DEFAULT_FILE_EXCLUDES = (
    *COMMON_IGNORE_PATTERNS,
    *("**/.vscode/**", "**/.idea/**", "**/dist/**", "**/build/**", "**/coverage/**"),
    "**/__pycache__/**",
    *(
        f"**/*.{ext}"
        for ext in (
            "bin exe dll so dylib class jar war zip tar gz bz2 rar 7z pak rpa "
            "doc docx xls xlsx ppt pptx odt ods odp"
        ).split()
    ),
    "**/*.pyc",
    "**/*.pyo",
    "**/.DS_Store",
    "**/.env",
)
"""Gemini's ``DEFAULT_FILE_EXCLUDES`` (read_many_files adds ``**/<memory file name>``)."""


# --------------------------------------------------------------------------------------
# Parsing


def parse_at_commands(query: str) -> list[tuple[str, str]]:
    """``parseAllAtCommands``: ("text" | "atPath", content) parts, blank text dropped."""
    parts: list[tuple[str, str]] = []
    last = 0
    for match in AT_COMMAND_RE.finditer(query):
        if match.start() > last:
            parts.append(("text", query[last : match.start()]))
        parts.append(("atPath", "@" + _UNESCAPE_RE.sub(r"\1", match.group(0)[1:])))
        last = match.end()
    if last < len(query):
        parts.append(("text", query[last:]))
    return [p for p in parts if not (p[0] == "text" and js_trim(p[1]) == "")]


def find_references(query: str) -> list[str]:
    """The paths named by ``@`` references (unescaped, without the ``@``)."""
    return [c[1:] for kind, c in parse_at_commands(query) if kind == "atPath" and c != "@"]


_WRAPPERS = set("()[]{}\"',;!.")


def try_extract_path(noisy: str) -> str | None:
    """Gemini's ``tryExtractPath``: a plausible path inside a noisy string."""
    for segment in re.split(r"\s+", noisy):
        while segment and (segment[0] in _WRAPPERS or segment[-1] in _WRAPPERS):
            segment = segment[1:] if segment[0] in _WRAPPERS else segment[:-1]
        if not segment:
            continue
        line = re.match(r"^(.+?):(\d+)(?::\d+)?", segment)
        path_only = line.group(1) if line else segment
        if validate_path(path_only) is None and any(c in path_only for c in "/\\."):
            return path_only
    return None


# --------------------------------------------------------------------------------------
# Resolving


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _access_problem(path: str, env: ToolEnv) -> str | None:
    try:
        return validate_path_access(path, env, "read")
    except NodeFsError as exc:
        return exc.message


def resolve_at_path(path_name: str, env: ToolEnv) -> tuple[str, str, str, bool] | str:
    """``resolveAtCommandPath``: (absolute, relative, ..., is_dir) or a status string
    (``invalid``, ``not_found``, ``unauthorized``)."""
    if validate_path(path_name) is not None:
        extracted = try_extract_path(path_name)
        if extracted and extracted != path_name:
            return resolve_at_path(extracted, env)
        return "invalid"
    dirs = [str(d) for d in env.workspace_dirs()]
    if path_name.startswith("/"):
        if _access_problem(path_name, env) is not None:
            return "unauthorized"
        info = _stat(path_name)
        if info is None:
            return "not_found"
        relative = path_name
        for d in dirs:
            rel = node_relative(d, path_name)
            if not rel.startswith("..") and not rel.startswith("/"):
                relative = rel
                break
        return (path_name, relative, path_name, stat.S_ISDIR(info.st_mode))
    unauthorized = False
    for d in dirs:
        absolute = node_resolve(d, path_name)
        if _access_problem(absolute, env) is not None:
            unauthorized = True
            continue
        info = _stat(absolute)
        if info is not None:
            return (absolute, path_name, path_name, stat.S_ISDIR(info.st_mode))
    return "unauthorized" if unauthorized else "not_found"


class _Resolved:
    def __init__(self, index: int, path_spec: str, label: str, absolute: str) -> None:
        self.index = index
        """Position of the reference among the parsed parts."""
        self.path_spec = path_spec
        self.label = label
        self.absolute = absolute


def _glob_first(path_name: str, env: ToolEnv) -> str | None:
    """The glob tool's first line for ``**/*<name>*`` (newest match first).

    Gemini passes ``path: <dir>``, which is not a glob parameter: the search covers the
    workspace directories either way."""
    args = {"pattern": f"**/*{path_name}*"}
    tool = GlobTool()
    if tool.validate(args, env) is not None:
        return None
    result = run_glob(args, env)
    content = result.llm_content
    if not isinstance(content, str) or content.startswith(("No files found", "Error:")):
        return None
    lines = content.split("\n")
    if len(lines) > 1 and lines[1]:
        return js_trim(lines[1])
    return None


def resolve_references(
    parts: list[tuple[str, str]],
    env: ToolEnv,
    *,
    glob_available: bool = True,
    skip: Collection[str] = (),
) -> list[_Resolved]:
    """The file references of ``parts`` resolved (``skip``: names that are not files,
    without the ``@``: MCP resources)."""
    git, gemini = respect_flags(env)
    discovery = FileDiscovery.for_env(env)
    resolved: list[_Resolved] = []
    for index, (kind, content) in enumerate(parts):
        if kind != "atPath" or content == "@" or content[1:] in skip:
            continue
        path_name = content[1:]
        git_ignored = git and discovery.should_ignore(
            path_name, respect_git_ignore=True, respect_gemini_ignore=False
        )
        gemini_ignored = gemini and discovery.should_ignore(
            path_name, respect_git_ignore=False, respect_gemini_ignore=True
        )
        if git_ignored or gemini_ignored:
            continue
        outcome = resolve_at_path(path_name, env)
        if isinstance(outcome, tuple):
            absolute, relative, _, is_dir = outcome
            spec = node_join(relative, "**") if is_dir else relative
            label = relative if path_name.startswith("/") else path_name
            resolved.append(_Resolved(index, spec, label, absolute))
        elif outcome in ("not_found", "unauthorized") and glob_available:
            for d in (str(w) for w in env.workspace_dirs()):
                first = _glob_first(path_name, env)
                if first is None:
                    continue
                try:
                    absolute = resolve_to_real_path(first)
                except NodeFsError:
                    absolute = first
                spec = node_relative(d, absolute)
                label = spec if path_name.startswith("/") else path_name
                resolved.append(_Resolved(index, spec, label, absolute))
                break
    return resolved


def rebuild_query(parts: list[tuple[str, str]], resolved: list[_Resolved]) -> str:
    """``constructInitialQuery``."""
    specs = {r.index: r.path_spec for r in resolved}
    out = ""
    for i, (kind, content) in enumerate(parts):
        if kind == "atPath":
            content = f"@{specs[i]}" if specs.get(i) else content
            if i > 0 and out and not out.endswith(" "):
                out += " "
        out += content
    return js_trim(out)


# --------------------------------------------------------------------------------------
# Reading (read_many_files)


def read_many_files(include: list[str], env: ToolEnv) -> list[Any]:
    """``read_many_files``' ``llmContent`` for ``include`` (absolute paths or ``dir/**``)."""
    workspace = str(env.workspace)
    excludes = [*DEFAULT_FILE_EXCLUDES, f"**/{context_file_name(env)}"]
    entries: dict[str, None] = {}
    for d in (str(w) for w in env.workspace_dirs()):
        for pattern in include:
            normalized = pattern.replace("\\", "/")
            full = node_join(d, normalized)
            effective = escape_glob(normalized) if os.path.isfile(full) else normalized
            for entry in glob_files(effective, d, nocase=True, ignore=excludes):
                entries.setdefault(entry.fullpath)
    relative = [node_relative(workspace, p) for p in entries]
    git, gemini = respect_flags(env)
    kept, _ = FileDiscovery.for_env(env).filter_with_report(
        relative, respect_git_ignore=git, respect_gemini_ignore=gemini
    )
    files: set[str] = set()
    for rel in kept:
        full = node_resolve(workspace, rel)
        if _access_problem(full, env) is None:
            files.add(full)
    parts: list[Any] = []
    for path in sorted(files, key=lambda p: p.encode("utf-16-be", "surrogatepass")):
        try:
            file_type = detect_file_type(path)
        except (OSError, ValueError):
            continue
        if file_type in ("image", "pdf", "audio"):
            ext = node_extname(path).lower()
            stem = os.path.basename(path)[: len(os.path.basename(path)) - len(ext)]
            if not any(ext in p.lower() or stem in p for p in include):
                continue
        try:
            result = process_single_file_content(path, workspace)
        except (OSError, NodeFsError, ValueError):
            continue  # read_many_files reports it as skipped ("Unexpected error")
        if result.error is not None:
            continue
        if isinstance(result.llm_content, str):
            body = (TRUNCATED_WARNING if result.is_truncated else "") + result.llm_content
            parts.append(f"--- {path} ---\n\n{body}\n\n")
        else:
            parts.append(_plain(result.llm_content))
    parts.append(OUTPUT_TERMINATOR if parts else NO_FILES_MESSAGE)
    return parts


def _plain(value: Any) -> Any:
    if isinstance(value, dict) or hasattr(value, "items"):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _default_env(workspace: Path) -> ToolEnv:
    root = workspace.resolve()
    return ToolEnv(
        workspace=root,
        project_temp_dir=gemini_home() / ".gemini" / "tmp" / (root.name or "project"),
    )


async def expand_at_references_off_loop(
    query: str,
    workspace: Path,
    *,
    env: ToolEnv | None = None,
    glob_available: bool = True,
    mcp: SessionMcp | None = None,
) -> list[dict[str, Any]]:
    """``expand_at_references`` in a worker thread: its ``**`` walks and file reads
    never stall the event loop (a daemon serves every session from it). A cancel waits
    for the walk to end. A prompt without ``@`` is its own text, without a thread hop
    (one per prompt cost a busy daemon a fifth more CPU). ``mcp``: the session's MCP
    servers, whose resources ``@<server>:<uri>`` reads first (raises
    ``mcp_session.McpInputError`` when one cannot be read)."""
    if "@" not in query:
        return [{"text": query}]
    resources = await read_references(mcp, find_references(query))
    return await trio.to_thread.run_sync(
        lambda: expand_at_references(
            query, workspace, env=env, glob_available=glob_available, resources=resources
        )
    )


def expand_at_references(
    query: str,
    workspace: Path,
    *,
    env: ToolEnv | None = None,
    glob_available: bool = True,
    resources: Mapping[str, list[dict[str, Any]]] | None = None,
) -> list[dict[str, Any]]:
    """The user message parts for ``query`` (Gemini's ``handleAtCommand``, headless).

    ``env`` gives the settings (file filtering, memory file name) and the allowed
    directories; ``glob_available`` is false when the ``glob`` tool is not registered
    (``tools.core`` without it), which turns the glob fallback off as in Gemini CLI.
    ``resources``: the parts of the references (without ``@``) that are MCP resources,
    already read.
    """
    env = env if env is not None else _default_env(workspace)
    resources = resources or {}
    parts = parse_at_commands(query)
    if not any(kind == "atPath" for kind, _ in parts):
        return [{"text": query}]
    resolved = resolve_references(parts, env, glob_available=glob_available, skip=resources)
    if not resolved and not resources:
        return [{"text": query}]
    out: list[dict[str, Any]] = [{"text": rebuild_query(parts, resolved)}]
    mcp_parts: list[dict[str, Any]] = []
    for kind, content in parts:
        read = resources.get(content[1:]) if kind == "atPath" else None
        if read is not None:
            uri = content[1:].partition(":")[2]
            mcp_parts.append({"text": f"\nContent from @{uri}:\n"})
            mcp_parts.extend(read)
    include = [
        node_join(r.absolute, "**") if r.path_spec.endswith("**") else r.absolute for r in resolved
    ]
    file_parts: list[dict[str, Any]] = []
    dirs = [str(w) for w in env.workspace_dirs()]
    for part in read_many_files(include, env) if include else ():
        if not isinstance(part, str):
            file_parts.append(part)
            continue
        match = _FILE_CONTENT_RE.fullmatch(part)
        if match is None:
            file_parts.append({"text": part})
            continue
        path, content = match.group(1), js_trim(match.group(2))
        label = next((r.label for r in resolved if path in (r.absolute, r.path_spec)), None)
        if not label:
            label = next((node_relative(d, path) for d in dirs if path.startswith(d)), path)
        file_parts.append({"text": f"\nContent from @{label}:\n"})
        file_parts.append({"text": content})
    if mcp_parts or file_parts:
        out.append({"text": REF_CONTENT_HEADER})
        out.extend(mcp_parts)
        out.extend(file_parts)
        if mcp_parts and not file_parts:
            out.append({"text": OUTPUT_TERMINATOR})
    return out


__all__ = [
    "REFERENCE_CONTENT_END",
    "REFERENCE_CONTENT_START",
    "expand_at_references",
    "find_references",
    "parse_at_commands",
]
