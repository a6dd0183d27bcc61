"""``replace`` (Gemini CLI's ``EditTool``, display name Edit).

Finds ``old_string`` in the file and puts ``new_string`` in its place. The strategies
are Gemini's, tried in order: exact text, then line-by-line ignoring indentation
("flexible", re-indenting the replacement), then a whitespace-tolerant token regex,
then a fuzzy line-window match (weighted Levenshtein distance ≤ 10%, reported to the
model as ``Applied fuzzy match at line(s) ...``). Without ``allow_multiple`` exactly one
occurrence must exist. An empty ``old_string`` creates a file that must not exist yet.
CRLF files keep their line endings; a relative path that does not exist at the
workspace root is looked up by name (breadth-first, 50 directories at most).

Results: ``Successfully modified file: <path> (<n> replacements). Here is the updated
code:\\n<snippet>`` with a ``FileDiff`` object as ``returnDisplay`` (see
``_write_file``), or ``Created new file: <path> with provided content. ...`` with the
string ``Created <path>``. Errors: ``edit_no_occurrence_found``,
``edit_expected_occurrence_mismatch``, ``edit_no_change``, ``file_not_found``,
``attempt_to_create_existing_file``, ``edit_preparation_failure``,
``file_write_failure``, ``path_not_in_workspace``.

When no strategy matches, Gemini can ask an LLM "edit fixer" to repair the call; that
is off by default (``tools.disableLLMCorrection`` is true) and is never done here: we
return the ``edit_no_occurrence_found`` (or mismatch) error Gemini returns without it,
so ``edit_no_change_llm_judgement`` never occurs.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import trio

from actors.common import (
    JS_WHITESPACE,
    LazyPattern,
    js_trim,
    js_trim_end,
    js_trim_start,
    node_join,
    node_resolve,
    utf16_len,
)
from bus.messages import ToolResult

from ._base import OutputSink, ToolEnv, error_result
from ._discovery import FileDiscovery, readdir_sorted, respect_flags
from ._fs_errors import NodeFsError
from ._jsdiff import create_patch, get_diff_stat
from ._paths import (
    js_prefix,
    make_relative,
    resolve_defensive_tool_path,
    resolve_to_real_path,
    shorten_path,
    validate_path_access,
)
from ._write_file import (
    APPROVAL_FILE_LIMIT,
    detect_line_ending,
    detect_omission_placeholders,
    diff_context_snippet,
    edit_confirmation,
    ensure_parent_dir,
    larger_than_note,
    read_text_file,
    resolve_plan_path,
    write_text_file,
)

FUZZY_MATCH_THRESHOLD = 0.1
WHITESPACE_PENALTY_FACTOR = 0.1
_JS_SPACE = f"[{re.escape(JS_WHITESPACE)}]"
_JS_LINES = LazyPattern(r"[^\n\r\u2028\u2029]*(?:\n|\Z)")

# --------------------------------------------------------------------------------------
# Replacement strategies (``calculateReplacement``)


@attrs.frozen
class Replacement:
    new_content: str
    occurrences: int
    final_old: str
    final_new: str
    strategy: str | None = None
    match_ranges: tuple[tuple[int, int], ...] = ()


def _source_lines(text: str) -> list[str]:
    """``text.match(/.*(?:\\n|$)/g).slice(0, -1)``."""
    return [m.group(0) for m in _JS_LINES.finditer(text)][:-1]


def restore_trailing_newline(original: str, modified: str) -> str:
    had = original.endswith("\n")
    if had and not modified.endswith("\n"):
        return modified + "\n"
    if not had and modified.endswith("\n"):
        return modified[:-1]
    return modified


def _leading_indent(line: str) -> str:
    match = re.match(r"[ \t]*", line)
    return match.group(0) if match else ""


def apply_indentation(lines: Sequence[str], target: str) -> list[str]:
    """Re-indent ``lines`` relative to the first line's indentation."""
    if not lines:
        return []
    ref = _leading_indent(lines[0])
    out: list[str] = []
    for line in lines:
        if js_trim(line) == "":
            out.append("")
        elif line.startswith(ref):
            out.append(target + line[len(ref) :])
        else:
            out.append(target + js_trim_start(line))
    return out


def _exact(content: str, search: str, replace: str, allow_multiple: bool) -> Replacement | None:
    occurrences = content.count(search)
    if not allow_multiple and occurrences > 1:
        return Replacement(content, occurrences, search, replace)
    if occurrences > 0:
        modified = content.replace(search, replace)
        return Replacement(
            restore_trailing_newline(content, modified), occurrences, search, replace
        )
    return None


def _flexible(content: str, search: str, replace: str, raw_new: str) -> Replacement | None:
    source = _source_lines(content)
    search_stripped = [js_trim(x) for x in search.split("\n")]
    replace_lines = replace.split("\n")
    count = len(search_stripped)
    occurrences = 0
    i = 0
    while i <= len(source) - count:
        window = source[i : i + count]
        if all(js_trim(line) == search_stripped[j] for j, line in enumerate(window)):
            occurrences += 1
            text = "\n".join(apply_indentation(replace_lines, _leading_indent(window[0])))
            if raw_new != "" and window[-1].endswith("\n") and not text.endswith("\n"):
                text += "\n"
            source[i : i + count] = [text]
        i += 1
    if occurrences > 0:
        modified = restore_trailing_newline(content, "".join(source))
        return Replacement(modified, occurrences, search, replace)
    return None


def _regex(content: str, search: str, replace: str, allow_multiple: bool) -> Replacement | None:
    processed = search
    for delimiter in "():[]{}><=":
        processed = processed.replace(delimiter, f" {delimiter} ")
    tokens = [t for t in re.split(f"{_JS_SPACE}+", processed) if t]
    if not tokens:
        return None
    body = f"{_JS_SPACE}*".join(re.escape(t) for t in tokens)
    # JavaScript's multiline `^`: at the start or after any line terminator.
    pattern = re.compile(f"(?<![^\\n\\r\\u2028\\u2029])([ \\t]*){body}")
    occurrences = sum(1 for _ in pattern.finditer(content))
    if occurrences == 0:
        return None
    new_lines = replace.split("\n")
    modified = pattern.sub(
        lambda m: "\n".join(apply_indentation(new_lines, m.group(1) or "")),
        content,
        count=0 if allow_multiple else 1,
    )
    return Replacement(restore_trailing_newline(content, modified), occurrences, search, replace)


def _utf16_units(text: str) -> Sequence[object]:
    if all(ord(ch) <= 0xFFFF for ch in text):
        return text
    data = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]


def levenshtein(a: str, b: str) -> int:
    """Edit distance over UTF-16 units (``fast-levenshtein``), bit-parallel (Hyyrö)."""
    x, y = _utf16_units(a), _utf16_units(b)
    if len(x) < len(y):
        x, y = y, x
    m = len(y)
    if m == 0:
        return len(x)
    peq: dict[object, int] = {}
    for i, ch in enumerate(y):
        peq[ch] = peq.get(ch, 0) | (1 << i)
    mask = (1 << m) - 1
    high = 1 << (m - 1)
    pv, mv, score = mask, 0, m
    for ch in x:
        eq = peq.get(ch, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = mv | (~(xh | pv) & mask)
        mh = pv & xh
        if ph & high:
            score += 1
        elif mh & high:
            score -= 1
        ph = ((ph << 1) | 1) & mask
        mh = (mh << 1) & mask
        pv = mh | (~(xv | ph) & mask)
        mv = ph & xv
    return score


def _strip_whitespace(text: str) -> str:
    return re.sub(_JS_SPACE, "", text)


def _fuzzy(content: str, search: str, replace: str, raw_old: str) -> Replacement | None:
    if utf16_len(raw_old) < 10:
        return None
    source = _source_lines(content.replace("\r\n", "\n"))
    search_lines = [js_trim_end(x) for x in _source_lines(search)]
    if len(source) * utf16_len(raw_old) ** 2 > 400_000_000:
        return None
    if not search_lines:
        return None
    count = len(search_lines)
    block = "\n".join(search_lines)
    block_len = utf16_len(block)
    block_stripped = _strip_whitespace(block)
    candidates: list[tuple[float, int]] = []
    for i in range(0, len(source) - count + 1):
        window_text = "\n".join(js_trim_end(x) for x in source[i : i + count])
        if block_len == 0:
            continue
        if abs(utf16_len(window_text) - block_len) / block_len > (
            FUZZY_MATCH_THRESHOLD / WHITESPACE_PENALTY_FACTOR
        ):
            continue
        d_raw = levenshtein(window_text, block)
        d_norm = levenshtein(_strip_whitespace(window_text), block_stripped)
        score = (d_norm + (d_raw - d_norm) * WHITESPACE_PENALTY_FACTOR) / block_len
        if score <= FUZZY_MATCH_THRESHOLD:
            candidates.append((score, i))
    if not candidates:
        return None
    candidates.sort()
    selected: list[int] = []
    for _, index in candidates:
        if all(abs(s - index) >= count for s in selected):
            selected.append(index)
    ranges = tuple(sorted((s + 1, s + count) for s in selected))
    new_lines = replace.split("\n")
    for index in sorted(selected, reverse=True):
        text = "\n".join(apply_indentation(new_lines, _leading_indent(source[index])))
        if source[index + count - 1].endswith("\n"):
            text += "\n"
        source[index : index + count] = [text]
    modified = restore_trailing_newline(content, "".join(source))
    return Replacement(modified, len(selected), search, replace, "fuzzy", ranges)


def calculate_replacement(
    content: str, old_string: str, new_string: str, allow_multiple: bool
) -> Replacement:
    """Gemini's ``calculateReplacement`` (exact → flexible → regex → fuzzy)."""
    search = old_string.replace("\r\n", "\n")
    replace = new_string.replace("\r\n", "\n")
    if search == "":
        return Replacement(content, 0, search, replace)
    result = (
        _exact(content, search, replace, allow_multiple)
        or _flexible(content, search, replace, new_string)
        or _regex(content, search, replace, allow_multiple)
        or _fuzzy(content, search, replace, old_string)
    )
    return result if result is not None else Replacement(content, 0, search, replace)


@attrs.frozen
class EditError:
    display: str
    raw: str
    type: str


def replace_error(
    file_path: str, allow_multiple: bool, occurrences: int, final_old: str, final_new: str
) -> EditError | None:
    """Gemini's ``getErrorReplaceResult``."""
    if occurrences == 0:
        return EditError(
            "Failed to edit, could not find the string to replace.",
            f"Failed to edit, 0 occurrences found for old_string in {file_path}. Ensure "
            "you're not escaping content incorrectly and check whitespace, indentation, "
            "and context. Use read_file tool to verify.",
            "edit_no_occurrence_found",
        )
    if not allow_multiple and occurrences != 1:
        return EditError(
            f"Failed to edit, expected 1 occurrence but found {occurrences}.",
            f"Failed to edit, Expected 1 occurrence but found {occurrences} for old_string "
            f"in file: {file_path}. If you intended to replace multiple occurrences, set "
            "'allow_multiple' to true.",
            "edit_expected_occurrence_mismatch",
        )
    if final_old == final_new:
        return EditError(
            "No changes to apply. The old_string and new_string are identical.",
            "No changes to apply. The old_string and new_string are identical in file: "
            f"{file_path}",
            "edit_no_change",
        )
    return None


# --------------------------------------------------------------------------------------
# Path resolution (``correctPath`` for relative paths)


def _bfs_find(
    root: str, file_name: str, discovery: FileDiscovery, git: bool, gemini: bool
) -> list[str]:
    found: list[str] = []
    queue = [root]
    visited: set[str] = set()
    head = scanned = 0
    while head < len(queue) and scanned < 50:
        current = queue[head]
        head += 1
        if current in visited:
            continue
        visited.add(current)
        scanned += 1
        try:
            names = readdir_sorted(current)
        except OSError:
            continue
        for name in names:
            full = node_join(current, name)
            try:
                mode = os.lstat(full).st_mode
            except OSError:
                continue
            is_dir = stat.S_ISDIR(mode)
            if not is_dir and not (stat.S_ISREG(mode) and name == file_name):
                continue
            if discovery.should_ignore(full, respect_git_ignore=git, respect_gemini_ignore=gemini):
                continue
            (queue if is_dir else found).append(full)
    return found


def correct_path(file_path: str, env: ToolEnv) -> str | None:
    """Gemini's ``correctPath``: the single workspace file this relative path names."""
    workspace = str(env.workspace)
    sanitized = resolve_defensive_tool_path(file_path, workspace)
    direct = node_join(workspace, sanitized)
    if os.path.exists(direct):
        return direct
    git, gemini = respect_flags(env)
    discovery = FileDiscovery.for_env(env)
    target = sanitized.replace("\\", "/")
    found = [
        f
        for d in env.workspace_dirs()
        for f in _bfs_find(str(d), posixpath.basename(sanitized), discovery, git, gemini)
        if f.replace("\\", "/").endswith(target)
    ]
    return found[0] if len(found) == 1 else None


def resolve_edit_path(file_path: str, env: ToolEnv) -> str:
    """The file ``replace`` edits (raises ``NodeFsError`` when resolution fails): a plan
    file in plan mode."""
    if env.approval_mode == "plan":
        return resolve_plan_path(file_path, env)
    if not file_path.startswith("/"):
        corrected = correct_path(file_path, env)
        if corrected is not None:
            return resolve_to_real_path(corrected)
        workspace = str(env.workspace)
        sanitized = resolve_defensive_tool_path(file_path, workspace)
        return resolve_to_real_path(node_resolve(workspace, sanitized))
    return resolve_to_real_path(file_path.replace("\0", ""))


def _resolved_or_raw(file_path: str, env: ToolEnv) -> str:
    try:
        return resolve_edit_path(file_path, env)
    except NodeFsError:
        clean = file_path.replace("\0", "")
        return node_resolve(str(env.workspace), clean)


# --------------------------------------------------------------------------------------
# The tool

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "file_path": {"type": "string", "description": "Path of the file to edit."},
        "instruction": {
            "type": "string",
            "description": (
                "What the change does and why, precise enough that someone could make it "
                "from this text alone (where in the file, what changes, the intended "
                "result)."
            ),
        },
        "old_string": {
            "type": "string",
            "description": (
                "The exact text to replace, unescaped, with enough surrounding lines "
                "(about three before and after) to make it unique. Empty to create a new "
                "file."
            ),
        },
        "new_string": {
            "type": "string",
            "description": (
                "The exact text to put in place of `old_string`, unescaped and complete; "
                "never abbreviate with placeholders such as '(rest of code ...)'."
            ),
        },
        "allow_multiple": {
            "type": "boolean",
            "description": (
                "Replace every occurrence of `old_string` when true; by default exactly "
                "one occurrence must exist."
            ),
        },
    },
    "required": ["file_path", "instruction", "old_string", "new_string"],
}

_DESCRIPTION = (
    "Edits a file by replacing a literal text fragment. By default `old_string` must "
    "occur exactly once; set `allow_multiple` to replace every occurrence. Read the file "
    "first with read_file and copy the fragment exactly, whitespace and indentation "
    "included, with a few lines of context around the change. An empty `old_string` "
    "creates a new file holding `new_string`. Prefer several small edits to one large "
    "one.\n\nThe user may change `new_string` before it is applied; the reply says so "
    "when that happens."
)


def _snippet_of(text: str) -> str:
    first = text.split("\n")[0]
    return js_prefix(first, 30) + ("..." if utf16_len(text) > 30 else "")


class EditTool:
    """Gemini CLI's ``replace`` tool."""

    name = "replace"
    display_name = "Edit"
    kind = "edit"

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": self.name, "description": _DESCRIPTION, "parametersJsonSchema": _SCHEMA}

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        file_path = args.get("file_path")
        if not isinstance(file_path, str) or not file_path:
            return "The 'file_path' parameter must be non-empty."
        try:
            resolved = resolve_edit_path(file_path, env)
        except NodeFsError as exc:
            return exc.message
        new_placeholders = detect_omission_placeholders(str(args.get("new_string", "")))
        if new_placeholders:
            old_placeholders = set(detect_omission_placeholders(str(args.get("old_string", ""))))
            if any(p not in old_placeholders for p in new_placeholders):
                return (
                    "`new_string` contains an omission placeholder (for example 'rest of "
                    "methods ...'). Provide exact literal replacement text."
                )
        try:
            return validate_path_access(resolved, env)
        except NodeFsError as exc:
            return exc.message

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        file_path = args.get("file_path")
        if not isinstance(file_path, str):
            return ""
        relative = shorten_path(make_relative(_resolved_or_raw(file_path, env), str(env.workspace)))
        old = str(args.get("old_string", ""))
        new = str(args.get("new_string", ""))
        if old == "":
            return f"Create {relative}"
        if old == new:
            return f"No file changes to {relative}"
        return f"{relative}: {_snippet_of(old)} => {_snippet_of(new)}"

    def confirmation_details(self, args: Mapping[str, Any], env: ToolEnv) -> dict[str, Any]:
        """What the approval shows: the diff of the edit against the file as it is (read
        from the local disk, bounded: see ``edit_confirmation``); an edit that would fail
        shows why in a ``note``."""
        path = _resolved_or_raw(str(args.get("file_path", "")), env)
        too_large = larger_than_note(path, APPROVAL_FILE_LIMIT)
        if too_large:
            return edit_confirmation(path, "", "", show_content=False, note=too_large)
        try:
            edit = _calculate(args, path)
        except NodeFsError as exc:
            return edit_confirmation(path, "", "", show_content=False, note=f"cannot read the file: {exc.message}")
        if edit.error is not None:
            return edit_confirmation(path, "", "", show_content=False, note=f"the edit would fail: {edit.error.display}")
        original = None if edit.is_new_file else edit.current or ""
        return edit_confirmation(path, original, edit.new_content, show_content=False)

    async def execute(
        self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None
    ) -> ToolResult:
        # Not abandoned on cancel: an edit runs to its end, then the cancel is delivered.
        return await trio.to_thread.run_sync(_run_edit, dict(args), env)


@attrs.frozen
class _Calculated:
    current: str | None
    new_content: str
    occurrences: int
    is_new_file: bool
    line_ending: str
    error: EditError | None = None
    replacement: Replacement | None = None


def _calculate(args: Mapping[str, Any], path: str, env: ToolEnv | None = None) -> _Calculated:
    old_string = str(args.get("old_string", ""))
    new_string = str(args.get("new_string", ""))
    file_path = str(args.get("file_path", ""))
    allow_multiple = bool(args.get("allow_multiple"))
    current: str | None = None
    exists = False
    ending = "\n"
    try:
        raw = read_text_file(path, env)
        ending = detect_line_ending(raw)
        current = raw.replace("\r\n", "\n")
        exists = True
    except NodeFsError as exc:
        if exc.code != "ENOENT":
            raise
    if old_string == "" and not exists:
        return _Calculated(current, new_string, 1, True, ending)
    if not exists or current is None:
        return _Calculated(
            current,
            "",
            0,
            False,
            ending,
            EditError(
                "File not found. Cannot apply edit. Use an empty old_string to create a new file.",
                f"File not found: {path}",
                "file_not_found",
            ),
        )
    if old_string == "":
        return _Calculated(
            current,
            current,
            0,
            False,
            ending,
            EditError(
                "Failed to edit. Attempted to create a file that already exists.",
                f"File already exists, cannot create: {path}",
                "attempt_to_create_existing_file",
            ),
        )
    result = calculate_replacement(current, old_string, new_string, allow_multiple)
    error = replace_error(
        file_path, allow_multiple, result.occurrences, result.final_old, result.final_new
    )
    if error is not None:
        return _Calculated(current, current, result.occurrences, False, ending, error)
    return _Calculated(current, result.new_content, result.occurrences, False, ending, None, result)


def _run_edit(args: dict[str, Any], env: ToolEnv) -> ToolResult:
    path = _resolved_or_raw(str(args.get("file_path", "")), env)
    try:
        problem = validate_path_access(path, env)
    except NodeFsError as exc:
        problem = exc.message
    if problem is not None:
        return error_result(problem, "Error: Path not in workspace.", "path_not_in_workspace")
    try:
        edit = _calculate(args, path, env)
    except NodeFsError as exc:
        return ToolResult(
            llm_content=f"Error preparing edit: {exc.message}",
            return_display=f"Error preparing edit: {exc.message}",
            error_type="edit_preparation_failure",
            error_message=exc.message,
        )
    if edit.error is not None:
        return ToolResult(
            llm_content=edit.error.raw,
            return_display=f"Error: {edit.error.display}",
            error_type=edit.error.type,
            error_message=edit.error.raw,
        )
    final = edit.new_content
    try:
        ensure_parent_dir(path, env)
        if not edit.is_new_file and edit.line_ending == "\r\n":
            final = re.sub(r"\r?\n", "\r\n", final)
        write_text_file(path, final, env)
    except NodeFsError as exc:
        return ToolResult(
            llm_content=f"Error executing edit: {exc.message}",
            return_display=f"Error writing file: {exc.message}",
            error_type="file_write_failure",
            error_message=exc.message,
        )

    workspace = str(env.workspace)
    current = edit.current or ""
    display: Any
    if edit.is_new_file:
        display = f"Created {shorten_path(make_relative(path, workspace))}"
    else:
        file_name = posixpath.basename(path)
        ai_content = edit.new_content
        proposed = args.get("ai_proposed_content")
        if args.get("modified_by_user") and isinstance(proposed, str):
            ai_content = calculate_replacement(
                current,
                str(args.get("old_string", "")),
                proposed,
                bool(args.get("allow_multiple")),
            ).new_content
        display = {
            "fileDiff": create_patch(file_name, current, edit.new_content, "Current", "Proposed"),
            "fileName": file_name,
            "filePath": path,
            "originalContent": edit.current,
            "newContent": edit.new_content,
            "diffStat": get_diff_stat(current, ai_content, edit.new_content),
            "isNewFile": False,
            "isBuildFile": False,
        }
    parts = [
        f"Created new file: {path} with provided content."
        if edit.is_new_file
        else f"Successfully modified file: {path} ({edit.occurrences} replacements)."
    ]
    parts.append(f"Here is the updated code:\n{diff_context_snippet(current, final, 5)}")
    replacement = edit.replacement
    if replacement is not None and replacement.strategy == "fuzzy" and replacement.match_ranges:
        ranges = ", ".join(f"{s}" if s == e else f"{s}-{e}" for s, e in replacement.match_ranges)
        plural = "s" if len(replacement.match_ranges) > 1 else ""
        parts.append(f"Applied fuzzy match at line{plural} {ranges}.")
    if args.get("modified_by_user"):
        parts.append(f"User modified the `new_string` content to be: {args.get('new_string', '')}.")
    return ToolResult(llm_content=" ".join(parts), return_display=display)
