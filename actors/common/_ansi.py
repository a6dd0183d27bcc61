r"""``strip-ansi`` as Gemini CLI 0.61 bundles it (``ansi-regex`` 6.2).

Gemini strips terminal escapes from a shell command's output and from headless text
output with this one package; its pattern removes OSC sequences ended by BEL, ``ESC \``
or the 8-bit ST, and CSI sequences opened by ``ESC`` or the 8-bit CSI (ASCII digits
only, as JavaScript's ``\d``).
"""

from __future__ import annotations

from ._lazy import LazyPattern

_ANSI = LazyPattern(
    r"(?:\x1b\][\s\S]*?(?:\x07|\x1b\\|\x9c))"
    r"|[\x1b\x9b][\[\]()#;?]*(?:[0-9]{1,4}(?:[;:][0-9]{0,4})*)?[0-9A-PR-TZcf-nq-uy=><~]"
)


def strip_ansi(text: str) -> str:
    """``stripAnsi(text)`` (``text`` itself when there is nothing to strip)."""
    if "\x1b" not in text and "\x9b" not in text:
        return text
    return _ANSI.sub("", text)
