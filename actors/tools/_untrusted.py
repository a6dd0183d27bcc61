"""Gemini CLI's ``wrapUntrusted``: tool output the model must read as data.

A shell command's output and a fetched page go to the model inside
``<untrusted_context>`` tags, a closing tag in the text escaped so that it cannot end
the block early.
"""

from __future__ import annotations

from ._truncate import TruncatingWriter

_OPEN = "<untrusted_context>\n"
_CLOSE = "\n</untrusted_context>"
_CLOSE_TAG = "</untrusted_context>"
_ESCAPED_CLOSE_TAG = "&lt;/untrusted_context&gt;"
_FEED_SLICE = 65536


def wrap_untrusted(text: str) -> str:
    """``wrapUntrusted``: the text inside ``<untrusted_context>`` tags, closing tag escaped."""
    return _OPEN + text.replace(_CLOSE_TAG, _ESCAPED_CLOSE_TAG) + _CLOSE


def write_untrusted(writer: TruncatingWriter, pieces: list[str]) -> None:
    """:func:`wrap_untrusted` of the pieces joined, written in slices (a shell command's
    output may be 16 M characters: no second whole copy is built)."""
    writer.write(_OPEN)
    for piece in pieces:
        escaped = piece.replace(_CLOSE_TAG, _ESCAPED_CLOSE_TAG)
        for start in range(0, len(escaped), _FEED_SLICE):
            writer.write(escaped[start : start + _FEED_SLICE])
    writer.write(_CLOSE)
