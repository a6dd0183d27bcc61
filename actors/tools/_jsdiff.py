"""A port of the ``diff`` npm package (8.x) as Gemini CLI uses it: ``diffLines`` (Myers'
line diff, with an edit budget), ``structuredPatch`` and ``createPatch`` (3 lines of
context, ``\\ No newline at end of file``), and Gemini's ``getDiffStat`` counters.

A port, not a library: Gemini CLI shows these diffs to the model and the user and counts
their lines in its stats, so the hunks must come out exactly as the package makes them
(Python's ``difflib`` chooses other alignments). ``write_file``, ``replace`` and their
approval details share it.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import attrs

from actors.common import (
    utf16_len,
)

# --------------------------------------------------------------------------------------
# The `diff` package (8.x): diffLines, structuredPatch, createPatch


@attrs.frozen
class Change:
    """One element of ``diffLines``'s result."""

    value: str
    count: int
    added: bool
    removed: bool


def tokenize_lines(value: str) -> list[str]:
    """``diff``'s line tokenizer: each line with its own line break."""
    parts = re.split(r"(\n|\r\n)", value)
    if not parts[-1]:
        parts.pop()
    tokens: list[str] = []
    for i, part in enumerate(parts):
        if i % 2:
            tokens[-1] += part
        else:
            tokens.append(part)
    return [t for t in tokens if t]


# A path through the edit graph is (old_pos, last component); a component is the linked
# tuple (count, added, removed, previous) — jsdiff's objects, made immutable.
_Comp = tuple[int, bool, bool, Any]


def _build_values(last: _Comp | None, new: list[str], old: list[str]) -> list[Change]:
    components: list[_Comp] = []
    while last is not None:
        components.append(last)
        last = last[3]
    components.reverse()
    new_pos = old_pos = 0
    out: list[Change] = []
    for count, added, removed, _ in components:
        if not removed:
            value = "".join(new[new_pos : new_pos + count])
            new_pos += count
            if not added:
                old_pos += count
        else:
            value = "".join(old[old_pos : old_pos + count])
            old_pos += count
        out.append(Change(value, count, added, removed))
    return out


class DiffTooLarge(Exception):
    """The diff needs more edits than the budget allows (jsdiff's ``maxEditLength``)."""


@functools.lru_cache(maxsize=2)
def _diff_lines_cached(old_str: str, new_str: str, max_edit: int | None = None) -> tuple[Change, ...]:
    return tuple(_myers(tokenize_lines(old_str), tokenize_lines(new_str), max_edit))


def diff_lines(old_str: str, new_str: str, max_edit: int | None = None) -> list[Change]:
    """``Diff.diffLines(old, new)``: jsdiff's Myers diff over lines, same tie-breaks.
    Raises ``DiffTooLarge`` when it needs more than ``max_edit`` edits (its time grows
    with the number of edits times the length)."""
    return list(_diff_lines_cached(old_str, new_str, max_edit))


def _myers(old: list[str], new: list[str], budget: int | None = None) -> list[Change]:
    new_len, old_len = len(new), len(old)
    if not set(old).intersection(new):
        # Nothing in common: jsdiff removes everything, then adds everything.
        changes = []
        if old:
            changes.append(Change("".join(old), old_len, False, True))
        if new:
            changes.append(Change("".join(new), new_len, True, False))
        return changes

    def common(old_pos: int, diagonal: int, last: _Comp | None) -> tuple[int, int, _Comp | None]:
        new_pos = old_pos - diagonal
        start = old_pos
        while (
            new_pos + 1 < new_len and old_pos + 1 < old_len and old[old_pos + 1] == new[new_pos + 1]
        ):
            new_pos += 1
            old_pos += 1
        if old_pos != start:
            last = (old_pos - start, False, False, last)
        return old_pos, new_pos, last

    max_edit = new_len + old_len
    offset = max_edit + 1
    best: list[tuple[int, _Comp | None] | None] = [None] * (2 * max_edit + 3)
    old_pos, new_pos, last = common(-1, 0, None)
    if old_pos + 1 >= old_len and new_pos + 1 >= new_len:
        return _build_values(last, new, old)
    best[offset] = (old_pos, last)
    min_diag = -max_edit - 2
    max_diag = max_edit + 2
    for edit in range(1, max_edit + 1):
        if budget is not None and edit > budget:
            raise DiffTooLarge(f"more than {budget} changed lines")
        for diagonal in range(max(min_diag, -edit), min(max_diag, edit) + 1, 2):
            remove_path = best[offset + diagonal - 1]
            add_path = best[offset + diagonal + 1]
            if remove_path is not None:
                best[offset + diagonal - 1] = None
            can_add = add_path is not None and 0 <= add_path[0] - diagonal < new_len
            can_remove = remove_path is not None and remove_path[0] + 1 < old_len
            if not can_add and not can_remove:
                best[offset + diagonal] = None
                continue
            if not can_remove or (
                can_add
                and remove_path is not None
                and add_path is not None
                and remove_path[0] < add_path[0]
            ):
                assert add_path is not None
                base_pos, prev, added, removed = add_path[0], add_path[1], True, False
            else:
                assert remove_path is not None
                base_pos, prev, added, removed = remove_path[0] + 1, remove_path[1], False, True
            if prev is not None and prev[1] == added and prev[2] == removed:
                last = (prev[0] + 1, added, removed, prev[3])
            else:
                last = (1, added, removed, prev)
            old_pos, new_pos, last = common(base_pos, diagonal, last)
            if old_pos + 1 >= old_len and new_pos + 1 >= new_len:
                return _build_values(last, new, old)
            best[offset + diagonal] = (old_pos, last)
            if old_pos + 1 >= old_len:
                max_diag = min(max_diag, diagonal - 1)
            if new_pos + 1 >= new_len:
                min_diag = max(min_diag, diagonal + 1)
    raise AssertionError("diff did not converge")  # pragma: no cover


def _split_patch_lines(text: str) -> list[str]:
    has_trailing = text.endswith("\n")
    result = [line + "\n" for line in text.split("\n")]
    if has_trailing:
        result.pop()
    else:
        result[-1] = result[-1][:-1]
    return result


@attrs.frozen
class Hunk:
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    lines: tuple[str, ...]


def structured_patch(
    old_str: str, new_str: str, context: int = 3, max_edit: int | None = None
) -> list[Hunk]:
    """``Diff.structuredPatch(...).hunks`` (``max_edit``: see ``diff_lines``)."""
    diff: list[tuple[Change, list[str]]] = [
        (c, _split_patch_lines(c.value)) for c in diff_lines(old_str, new_str, max_edit)
    ]
    diff.append((Change("", 0, False, False), []))
    hunks: list[Hunk] = []
    old_range_start = new_range_start = 0
    current: list[str] = []
    old_line = new_line = 1
    for i, (change, lines) in enumerate(diff):
        if change.added or change.removed:
            if not old_range_start:
                old_range_start = old_line
                new_range_start = new_line
                if i > 0:
                    prev_lines = diff[i - 1][1]
                    current = [" " + x for x in prev_lines[-context:]] if context > 0 else []
                    old_range_start -= len(current)
                    new_range_start -= len(current)
            current.extend(("+" if change.added else "-") + x for x in lines)
            if change.added:
                new_line += len(lines)
            else:
                old_line += len(lines)
        else:
            if old_range_start:
                if len(lines) <= context * 2 and i < len(diff) - 2:
                    current.extend(" " + x for x in lines)
                else:
                    size = min(len(lines), context)
                    current.extend(" " + x for x in lines[:size])
                    hunks.append(
                        Hunk(
                            old_range_start,
                            old_line - old_range_start + size,
                            new_range_start,
                            new_line - new_range_start + size,
                            tuple(current),
                        )
                    )
                    old_range_start = new_range_start = 0
                    current = []
            old_line += len(lines)
            new_line += len(lines)
    finished: list[Hunk] = []
    for hunk in hunks:
        out: list[str] = []
        for line in hunk.lines:
            if line.endswith("\n"):
                out.append(line[:-1])
            else:
                out.append(line)
                out.append("\\ No newline at end of file")
        finished.append(attrs.evolve(hunk, lines=tuple(out)))
    return finished


def create_patch(
    file_name: str,
    old_str: str,
    new_str: str,
    old_header: str,
    new_header: str,
    *,
    max_edit: int | None = None,
) -> str:
    """``Diff.createPatch(fileName, old, new, oldHeader, newHeader, {context: 3})``
    (``max_edit``: see ``diff_lines``)."""
    out = [
        f"Index: {file_name}",
        "=" * 67,
        f"--- {file_name}\t{old_header}",
        f"+++ {file_name}\t{new_header}",
    ]
    for hunk in structured_patch(old_str, new_str, max_edit=max_edit):
        old_start = hunk.old_start - 1 if hunk.old_lines == 0 else hunk.old_start
        new_start = hunk.new_start - 1 if hunk.new_lines == 0 else hunk.new_start
        out.append(f"@@ -{old_start},{hunk.old_lines} +{new_start},{hunk.new_lines} @@")
        out.extend(hunk.lines)
    return "\n".join(out) + "\n"


def _patch_stats(old_str: str, new_str: str) -> tuple[int, int, int, int]:
    added = removed = added_chars = removed_chars = 0
    for hunk in structured_patch(old_str, new_str):
        for line in hunk.lines:
            if line.startswith("+"):
                added += 1
                added_chars += utf16_len(line) - 1
            elif line.startswith("-"):
                removed += 1
                removed_chars += utf16_len(line) - 1
    return added, removed, added_chars, removed_chars


def get_diff_stat(old_str: str, ai_str: str, user_str: str) -> dict[str, int]:
    """Gemini's ``getDiffStat`` (``tools/diffOptions.ts``)."""
    m_add, m_rem, m_add_c, m_rem_c = _patch_stats(old_str, ai_str)
    u_add, u_rem, u_add_c, u_rem_c = _patch_stats(ai_str, user_str)
    return {
        "model_added_lines": m_add,
        "model_removed_lines": m_rem,
        "model_added_chars": m_add_c,
        "model_removed_chars": m_rem_c,
        "user_added_lines": u_add,
        "user_removed_lines": u_rem,
        "user_added_chars": u_add_c,
        "user_removed_chars": u_rem_c,
    }
