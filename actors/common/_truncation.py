"""Gemini CLI's head-and-tail rendering of a long text (``formatTruncatedToolOutput``).

The shell tool's output and the turn's history budget both cut long texts this way::

    Output too large. Showing first 8,000 and last 32,000 characters. For full output see: FILE
    <head>

    ... [1,960,074 characters omitted] ...

    <tail>

Lengths are JavaScript string lengths (UTF-16 code units) and numbers are grouped like
``toLocaleString('en-US')``. A cut that would split a surrogate pair keeps the unit
count but shows U+FFFD instead of a lone surrogate, which no encoder downstream could
write (Node writes U+FFFD for it too).
"""

from __future__ import annotations

import math

from ._js import utf16_len
from ._lazy import LazyPattern

HEAD_FRACTION = 0.2
"""Share of the budget shown from the start; the rest is shown from the end."""

_ASTRAL = LazyPattern("[\U00010000-\U0010ffff]")
_REPLACEMENT = "\ufffd"


def utf16_head(text: str, units: int) -> str:
    """``text.slice(0, units)`` in JavaScript (a split pair's half becomes U+FFFD)."""
    if units <= 0:
        return ""
    prefix = text[:units]
    if prefix.isascii() or _ASTRAL.search(prefix) is None:
        return prefix
    out: list[str] = []
    used = 0
    for char in text:
        width = 2 if char > "\uffff" else 1
        if used + width > units:
            if used < units:  # half a surrogate pair fits
                out.append(_REPLACEMENT)
            break
        out.append(char)
        used += width
        if used == units:
            break
    return "".join(out)


def utf16_tail(text: str, units: int) -> str:
    """``text.slice(-units)`` for ``units > 0`` (a split pair's half becomes U+FFFD)."""
    if units <= 0:
        return ""
    suffix = text[-units:]
    if suffix.isascii() or _ASTRAL.search(suffix) is None:
        return suffix
    out: list[str] = []
    used = 0
    for char in reversed(text):
        width = 2 if char > "\uffff" else 1
        if used + width > units:
            if used < units:
                out.append(_REPLACEMENT)
            break
        out.append(char)
        used += width
        if used == units:
            break
    return "".join(reversed(out))


def format_count(value: int) -> str:
    """``value.toLocaleString()`` for an integer in the en-US locale (``1,960,074``)."""
    return f"{value:,}"


def split_budget(max_chars: int) -> tuple[int, int]:
    # Same float arithmetic as ``Math.floor(maxChars * 0.2)``.
    head = math.floor(max_chars * HEAD_FRACTION)
    return head, max_chars - head


def truncation_text(
    output_file: str, head: int, tail: int, omitted: int, head_text: str, tail_text: str
) -> str:
    return (
        f"Output too large. Showing first {format_count(head)} and last "
        f"{format_count(tail)} characters. For full output see: {output_file}\n"
        + head_text
        + f"\n\n... [{format_count(omitted)} characters omitted] ...\n\n"
        + tail_text
    )


def format_truncated_output(content: str, output_file: str, max_chars: int) -> str:
    """``formatTruncatedToolOutput``: ``content`` itself when it fits in ``max_chars``."""
    total = utf16_len(content)
    if total <= max_chars:
        return content
    head, tail = split_budget(max_chars)
    return truncation_text(
        output_file,
        head,
        tail,
        total - head - tail,
        utf16_head(content, head),
        utf16_tail(content, tail) if tail > 0 else content,  # slice(-0) is the whole text
    )
