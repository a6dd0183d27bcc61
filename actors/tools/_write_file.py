"""``write_file`` (Gemini CLI's ``WriteFileTool``, display name WriteFile), and the file
helpers ``write_file`` and ``replace`` share (the diffs themselves: ``_jsdiff``).

The model gets ``Successfully created and wrote to new file: <path>.`` or ``Successfully
overwrote file: <path>.`` followed by `` Here is the updated code:\\n<snippet>`` — the
whole new content for a new file, else the changed regions with 5 lines of context and
``...`` between them. ``returnDisplay`` is Gemini's ``FileDiff`` object::

    {fileDiff, fileName, filePath, originalContent, newContent, diffStat, isNewFile,
     isBuildFile}

``fileDiff`` is a unified diff made exactly like the ``diff`` npm package's
``createPatch`` (Myers line diff, 3 lines of context, ``\\ No newline at end of file``),
ported in ``_jsdiff``. ``isBuildFile`` is what Gemini CLI 0.61 records (always ``false`` in every
recorded run; the source it was built from does not set it).

``diffStat`` counts ``+``/``-`` lines and their characters (UTF-16 units) of the
model's proposal against the original (``model_*``) and of the user's edit against the
proposal (``user_*``, zero unless the user modified the content). Headless ``-o json``
stats come from it: for every *successful* call whose ``returnDisplay`` is an object
with a ``diffStat`` (``getFileDiffFromResultDisplay``), the ``ToolCallEvent`` copies the
eight counters into its metadata and ``UiTelemetryService`` adds ``model_added_lines``
to ``files.totalLinesAdded`` and ``model_removed_lines`` to ``files.totalLinesRemoved``
(``user_*`` are not counted; ``telemetry/types.ts``, ``telemetry/uiTelemetry.ts``).

Gemini may ask an LLM to repair over-escaped content; that is off by default
(``tools.disableLLMCorrection`` defaults to true) and never done here. What remains of it
is the deterministic unescape applied for Gemini models other than 2.x and 3.x.
"""

from __future__ import annotations

import errno as errno_mod
import os
import posixpath
import re
from collections.abc import Mapping
from typing import Any

import attrs
import trio

from actors.common import (
    is_subpath,
    js_trim,
    node_extname,
    node_resolve,
)
from bus.messages import ToolResult

from ._base import FileAccessError, OutputSink, ToolEnv, error_result, plans_dir
from ._fs_errors import NodeFsError, error_message, node_error_code, node_fs_error
from ._jsdiff import (
    DiffTooLarge,
    create_patch,
    diff_lines,
    get_diff_stat,
)
from ._paths import (
    make_dirs,
    make_relative,
    resolve_to_real_path,
    resolve_tool_path,
    shorten_path,
    validate_path_access,
)


def diff_context_snippet(original: str, new: str, context_lines: int = 5) -> str:
    """Gemini's ``getDiffContextSnippet``: changed regions of ``new`` with context."""
    if not original:
        return new
    new_lines = re.split(r"\r?\n", new)
    ranges: list[list[int]] = []
    index = 0
    for change in diff_lines(original, new):
        if change.added:
            ranges.append([index, index + change.count])
            index += change.count
        elif change.removed:
            ranges.append([index, index])
        else:
            index += change.count
    if not ranges:
        return new
    expanded = sorted(
        ([max(0, s - context_lines), min(len(new_lines), e + context_lines)] for s, e in ranges),
        key=lambda r: r[0],
    )
    merged: list[list[int]] = []
    current = expanded[0]
    for nxt in expanded[1:]:
        if nxt[0] <= current[1]:
            current[1] = max(current[1], nxt[1])
        else:
            merged.append(current)
            current = nxt
    merged.append(current)
    parts: list[str] = []
    last_end = 0
    for start, end in merged:
        if start > last_end:
            parts.append("...")
        parts.append("\n".join(new_lines[start:end]))
        last_end = end
    if last_end < len(new_lines):
        parts.append("...")
    return "\n".join(parts)


# --------------------------------------------------------------------------------------
# Content checks shared with `replace`

_OMITTED_PREFIXES = frozenset(
    {
        "rest of",
        "rest of method",
        "rest of methods",
        "rest of code",
        "unchanged code",
        "unchanged method",
        "unchanged methods",
    }
)


def _normalize_placeholder(line: str) -> str | None:
    text = js_trim(line)
    if not text:
        return None
    if text.startswith("//"):
        text = js_trim(text[2:])
    if text.startswith("(") and text.endswith(")"):
        text = js_trim(text[1:-1])
    at = text.find("...")
    if at < 0:
        return None
    prefix = " ".join(s for s in re.split(r"[ \t\n\r]", js_trim(text[:at]).lower()) if s)
    suffix = js_trim(text[at + 3 :])
    if prefix not in _OMITTED_PREFIXES:
        return None
    if suffix and set(suffix) != {"."}:
        return None
    return f"{prefix} ..."


def detect_omission_placeholders(text: str) -> list[str]:
    """Gemini's ``detectOmissionPlaceholders`` (``(rest of methods ...)`` and kin)."""
    found: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        normalized = _normalize_placeholder(line)
        if normalized:
            found.append(normalized)
    return found


def _unescape_char(match: re.Match[str]) -> str:
    return {"n": "\n", "t": "\t", "r": "\r", "\n": "\n"}.get(match.group(1), match.group(1))


def unescape_for_gemini_bug(text: str) -> str:
    """Gemini's ``unescapeStringForGeminiBug``: ``\\\\n`` → newline and kin."""
    return re.sub(r"\\+(n|t|r|'|\"|`|\\|\n)", _unescape_char, text)


def aggressive_unescape(model: str) -> bool:
    """Gemini models other than 2.x/3.x get their write content unescaped."""
    name = model.strip()
    return (
        name.startswith("gemini-")
        and re.match(r"^gemini-3(\.|-|$)", name) is None
        and re.match(r"^gemini-2(\.|$)", name) is None
    )


def detect_line_ending(content: str) -> str:
    return "\r\n" if "\r\n" in content else "\n"


def write_error(exc: BaseException, path: str) -> tuple[str, str]:
    """(message, error type) for a failed write, worded as Gemini does."""
    code = node_error_code(exc)
    if not code:
        return f"Error writing to file: {error_message(exc)}", "file_write_failure"
    if code == "EACCES":
        return f"Permission denied writing to file: {path} ({code})", "permission_denied"
    if code == "ENOSPC":
        return f"No space left on device: {path} ({code})", "no_space_left"
    if code == "EISDIR":
        return f"Target is a directory, not a file: {path} ({code})", "target_is_directory"
    return f"Error writing to file '{path}': {error_message(exc)} ({code})", "file_write_failure"


def read_text_file(path: str, env: ToolEnv | None = None) -> str:
    """``fs.readFile(path, 'utf-8')`` (raises ``NodeFsError``); through the session's
    client when it serves files (``ToolEnv.file_access``: call from a worker thread)."""
    if env is not None and env.file_access is not None:
        text: str = _through_client(path, env.file_access.read_text_file, path)
        return text
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except IsADirectoryError:
        raise NodeFsError("EISDIR", "EISDIR: illegal operation on a directory, read") from None
    except OSError as exc:
        raise node_fs_error(exc, "open", path) from None


def _through_client(path: str, call: Any, *args: Any) -> Any:
    """Run a ``FileAccess`` call from a worker thread; its failure as a ``NodeFsError``
    (a missing file as ``ENOENT``, anything else without a code)."""
    try:
        return trio.from_thread.run(call, *args)
    except FileAccessError as exc:
        if exc.not_found:
            raise NodeFsError("ENOENT", f"ENOENT: no such file or directory, open '{path}'") from None
        raise NodeFsError("", exc.message) from None


def ensure_parent_dir(path: str, env: ToolEnv | None = None) -> None:
    """Create the parent directories when the parent is not accessible (the client does
    that itself when it serves the files)."""
    if env is not None and env.file_access is not None:
        return
    parent = posixpath.dirname(path)
    if os.access(parent, os.F_OK):
        return
    try:
        make_dirs(parent)
    except FileExistsError as exc:
        raise node_fs_error(
            OSError(errno_mod.ENOTDIR, os.strerror(errno_mod.ENOTDIR)), "mkdir", parent
        ) from exc
    except OSError as exc:
        raise node_fs_error(exc, "mkdir", parent) from None


def write_text_file(path: str, content: str, env: ToolEnv | None = None) -> None:
    """``fs.writeFile(path, content, 'utf-8')`` (raises ``NodeFsError``); through the
    session's client when it serves files (``ToolEnv.file_access``)."""
    # Node encodes a lone surrogate (possible in JSON from the model) as U+FFFD.
    content = re.sub("[\ud800-\udfff]", "\ufffd", content)
    if env is not None and env.file_access is not None:
        _through_client(path, env.file_access.write_text_file, path, content)
        return
    try:
        with open(path, "w", encoding="utf-8", newline="") as handle:
            handle.write(content)
    except OSError as exc:
        raise node_fs_error(exc, "open", path) from None


# --------------------------------------------------------------------------------------
# The tool

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "file_path": {"type": "string", "description": "Path of the file to write."},
        "content": {
            "type": "string",
            "description": (
                "The complete new content of the file, written literally; never "
                "abbreviate it with placeholders such as '(rest of code ...)'."
            ),
        },
    },
    "required": ["file_path", "content"],
}

_DESCRIPTION = (
    "Creates a file, or replaces an existing file's whole content, with the given text. "
    "Missing parent directories are created.\n\n"
    "The user may change `content` before it is written; the reply says so when that "
    "happens."
)


@attrs.frozen
class _Existing:
    original: str
    exists: bool
    error: tuple[str, str | None] | None = None


def _read_existing(path: str, env: ToolEnv | None = None) -> _Existing:
    try:
        return _Existing(read_text_file(path, env), True)
    except NodeFsError as exc:
        if exc.code == "ENOENT":
            return _Existing("", False)
        return _Existing("", True, (exc.message, exc.code))


class WriteFileTool:
    """Gemini CLI's ``write_file`` tool."""

    name = "write_file"
    display_name = "WriteFile"
    kind = "edit"

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": self.name, "description": _DESCRIPTION, "parametersJsonSchema": _SCHEMA}

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        file_path = args.get("file_path")
        if not isinstance(file_path, str) or not file_path:
            return 'Missing or empty "file_path"'
        try:
            resolved = resolve_write_path(file_path, env)
            problem = validate_path_access(resolved, env)
        except NodeFsError as exc:
            return exc.message
        if problem is not None:
            return problem
        try:
            if os.path.exists(resolved) and os.path.isdir(resolved):
                return f"Path is a directory, not a file: {resolved}"
        except OSError as exc:
            return (
                f"Error accessing path properties for validation: {resolved}. "
                f"Reason: {error_message(exc)}"
            )
        if detect_omission_placeholders(str(args.get("content", ""))):
            return (
                "`content` contains an omission placeholder (for example 'rest of methods "
                "...'). Provide complete file content."
            )
        return None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        file_path = args.get("file_path")
        if not isinstance(file_path, str):
            return ""
        return f"Writing to {shorten_path(make_relative(_resolved(file_path, env), str(env.workspace)))}"

    def confirmation_details(self, args: Mapping[str, Any], env: ToolEnv) -> dict[str, Any]:
        """What the approval shows: the content and its diff against the file as it is
        (read from the local disk, bounded: see ``edit_confirmation``)."""
        path = _resolved(str(args.get("file_path", "")), env)
        content = _corrected(str(args.get("content", "")), path, env)
        too_large = larger_than_note(path, APPROVAL_FILE_LIMIT)
        if too_large:
            return edit_confirmation(path, "", content, show_content=True, note=too_large)
        existing = _read_existing(path)
        if existing.error is not None:
            note = f"cannot read the file: {existing.error[0]}"
            return edit_confirmation(path, "", content, show_content=True, note=note)
        return edit_confirmation(path, existing.original if existing.exists else None, content, show_content=True)

    async def execute(
        self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None
    ) -> ToolResult:
        # Not abandoned on cancel: a write runs to its end, then the cancel is delivered.
        return await trio.to_thread.run_sync(_run_write, dict(args), env)


def _resolved(file_path: str, env: ToolEnv) -> str:
    try:
        return resolve_write_path(file_path, env)
    except NodeFsError:
        return node_resolve(str(env.workspace), file_path.replace("\0", ""))


# --------------------------------------------------------------------------------------
# Plan mode: write_file and replace work on plan files only


class PlanPathError(NodeFsError):
    """A plan path Gemini's ``resolveAndValidatePlanPath`` refuses (callers treat it as
    any other resolution failure)."""

    def __init__(self, message: str) -> None:
        super().__init__("", message)


def resolve_plan_path(file_path: str, env: ToolEnv) -> str:
    """Gemini's ``resolveAndValidatePlanPath`` then ``resolveToRealPath``: an absolute
    path, or one relative to the project, already inside the plans directory is kept;
    anything else is relative to the plans directory and must stay inside it."""
    plan_path = js_trim(file_path.replace("\0", ""))
    if not plan_path:
        raise PlanPathError("Plan file path must be non-empty.")
    directory = plans_dir(env)
    real_dir = resolve_to_real_path(directory)
    if plan_path.startswith("/") and is_subpath(real_dir, resolve_to_real_path(plan_path)):
        return resolve_to_real_path(plan_path)
    from_project = node_resolve(str(env.workspace), plan_path)
    if is_subpath(real_dir, resolve_to_real_path(from_project)):
        return resolve_to_real_path(from_project)
    real = resolve_to_real_path(node_resolve(directory, plan_path))
    if not is_subpath(real_dir, real):
        raise PlanPathError(
            f"Access denied: plan path ({plan_path}) must be within the designated plans "
            f"directory ({directory})."
        )
    return real


def resolve_write_path(file_path: str, env: ToolEnv) -> str:
    """The file ``write_file`` writes: a plan file in plan mode (may raise)."""
    if env.approval_mode == "plan":
        return resolve_plan_path(file_path, env)
    return resolve_tool_path(file_path, env)


def _corrected(content: str, path: str, env: ToolEnv) -> str:
    """The content written: unescaped for the models that over-escape (not JSON files)."""
    if node_extname(path).lower() not in (".json", ".ipynb", ".jsonc", ".json5"):
        unescaped = unescape_for_gemini_bug(content)
        if unescaped != content and aggressive_unescape(env.model):
            return unescaped
    return content


# --------------------------------------------------------------------------------------
# What an approval shows (Gemini CLI's edit confirmation details, bounded for a message)

APPROVAL_FILE_LIMIT = 256 * 1024
"""Bytes of a file an approval reads to diff: the details are made on the scheduler's
event loop, so what they read and compute is bounded."""
APPROVAL_EDIT_BUDGET = 400
"""Changed lines an approval's diff may take (its time grows with them)."""
APPROVAL_TEXT_LIMIT = 32 * 1024
"""Characters of a diff, or of new content, an approval message carries."""


def cut_text(text: str, limit: int) -> tuple[str, int]:
    """``text`` up to ``limit`` characters, cut after a whole line; and the number of
    lines left out."""
    if len(text) <= limit:
        return text, 0
    head = text[:limit]
    end = head.rfind("\n")
    head = head[: end + 1] if end >= 0 else head
    rest = text[len(head) :]
    return head, rest.count("\n") + (0 if rest.endswith("\n") else 1)


def larger_than_note(path: str, limit: int) -> str:
    """A note when the file at ``path`` is larger than ``limit`` bytes, else ``""``."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return ""
    return f"the file is too large to show a diff ({size} bytes)" if size > limit else ""


def edit_confirmation(
    path: str, original: str | None, proposed: str, *, show_content: bool, note: str = ""
) -> dict[str, Any]:
    """Confirmation details of a file change (Gemini CLI's ``fileName``, ``filePath``,
    ``fileDiff``, ``isNewFile``; ``newContent`` when ``show_content`` or the file is
    new). ``original`` None: the file does not exist. Bounded: the diff and the content
    are cut after ``APPROVAL_TEXT_LIMIT`` characters (``fileDiffOmittedLines``,
    ``newContentOmittedLines`` say how many lines were left out); a diff that would take
    more than ``APPROVAL_EDIT_BUDGET`` changed lines, or ``note``, replaces the diff by a
    ``note``."""
    file_name = posixpath.basename(path)
    details: dict[str, Any] = {"fileName": file_name, "filePath": path, "isNewFile": original is None}
    if show_content or original is None:
        details["newContent"], details["newContentOmittedLines"] = cut_text(proposed, APPROVAL_TEXT_LIMIT)
    if note or len(proposed) > APPROVAL_FILE_LIMIT:
        details["note"] = note or f"the new content is too large to show a diff ({len(proposed)} characters)"
        return details
    try:
        diff = create_patch(
            file_name, original or "", proposed, "Current", "Proposed", max_edit=APPROVAL_EDIT_BUDGET
        )
    except DiffTooLarge:
        details["note"] = f"the diff is too large to show (more than {APPROVAL_EDIT_BUDGET} changed lines)"
        return details
    details["fileDiff"], details["fileDiffOmittedLines"] = cut_text(diff, APPROVAL_TEXT_LIMIT)
    return details


def _run_write(args: dict[str, Any], env: ToolEnv) -> ToolResult:
    path = _resolved(str(args.get("file_path", "")), env)
    try:
        problem = validate_path_access(path, env)
    except NodeFsError as exc:
        problem = exc.message
    if problem is not None:
        return error_result(problem, "Error: Path not in workspace.", "path_not_in_workspace")

    content = str(args.get("content", ""))
    existing = _read_existing(path, env)
    if existing.error is not None:
        text, code = existing.error
        message = (
            f"Error checking existing file '{path}': {text} ({code})"
            if code
            else f"Error checking existing file: {text}"
        )
        return error_result(message, message, "file_write_failure")

    corrected = _corrected(content, path, env)
    original = existing.original
    is_new = not existing.exists

    try:
        ensure_parent_dir(path, env)
        final = corrected
        use_crlf = detect_line_ending(original) == "\r\n" if (not is_new and original) else False
        if use_crlf:
            final = re.sub(r"\r?\n", "\r\n", final)
        write_text_file(path, final, env)
    except (NodeFsError, OSError) as exc:
        message, error_type = write_error(exc, path)
        return error_result(message, message, error_type)

    file_name = posixpath.basename(path)
    modified_by_user = bool(args.get("modified_by_user"))
    proposed = args.get("ai_proposed_content") or content
    parts = [
        f"Successfully created and wrote to new file: {path}."
        if is_new
        else f"Successfully overwrote file: {path}."
    ]
    if modified_by_user:
        parts.append(f"User modified the `content` to be: {content}")
    snippet = diff_context_snippet("" if is_new else original, final, 5)
    parts.append(f"Here is the updated code:\n{snippet}")
    display = {
        "fileDiff": create_patch(file_name, original, corrected, "Original", "Written"),
        "fileName": file_name,
        "filePath": path,
        "originalContent": original,
        "newContent": corrected,
        "diffStat": get_diff_stat(original, str(proposed), content),
        "isNewFile": is_new,
        "isBuildFile": False,
    }
    return ToolResult(llm_content=" ".join(parts), return_display=display)
