"""``strip-ansi`` as Gemini CLI 0.61 bundles it, shared by the shell tool and headless output."""

from __future__ import annotations

import pytest

from actors.common import strip_ansi


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Outputs of the bundle's stripAnsi (ansi-regex 6.2), checked with node.
        ("plain", "plain"),
        ("\x1b[1;31mbold\x1b[0m \x9b2Kx \x1b]0;title\x1b\\y", "bold x y"),
        ("\x1b]8;;http://x\x07link\x1b]8;;\x07", "link"),
        ("a\x1b[?25lb", "ab"),
        ("\x1bMx", "x"),
        # Where headless output's own pattern differed: the 8-bit CSI and ST, an OSC
        # ended by ST, character-set selection and colon-separated parameters.
        ("\x1b]0;t\x9cz", "z"),
        ("\x1b(Bx", "x"),
        ("\x1b[38:5:1mx", "x"),
    ],
)
def test_strip_ansi_is_geminis(text: str, expected: str) -> None:
    assert strip_ansi(text) == expected


def test_strip_ansi_returns_text_without_escapes_as_is() -> None:
    text = "no escapes here"
    assert strip_ansi(text) is text
