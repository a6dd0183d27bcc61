"""Writing tool output the model must read as data (Gemini CLI's ``wrapUntrusted``,
``actors.common.wrap_untrusted``) in slices, for outputs too large to copy whole.
"""

from __future__ import annotations

from actors.common import UNTRUSTED_CLOSE, UNTRUSTED_OPEN, escape_untrusted, wrap_untrusted

from ._truncate import TruncatingWriter

_FEED_SLICE = 65536


def write_untrusted(writer: TruncatingWriter, pieces: list[str]) -> None:
    """:func:`wrap_untrusted` of the pieces joined, written in slices (a shell command's
    output may be 16 M characters: no second whole copy is built)."""
    writer.write(UNTRUSTED_OPEN)
    for piece in pieces:
        escaped = escape_untrusted(piece)
        for start in range(0, len(escaped), _FEED_SLICE):
            writer.write(escaped[start : start + _FEED_SLICE])
    writer.write(UNTRUSTED_CLOSE)


__all__ = ["wrap_untrusted", "write_untrusted"]
