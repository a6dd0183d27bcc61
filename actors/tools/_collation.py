"""An approximation of ICU's root collation: the order of ``a.localeCompare(b)``.

Gemini CLI sorts glob results and directory listings with ``localeCompare`` (Node's ICU,
root locale); ``glob`` and ``list_directory`` sort with :func:`locale_sort_key` so the
model sees the same order for the names it meets in practice (ASCII, accents, case).
"""

from __future__ import annotations

import unicodedata

_ASCII_PRIMARY = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$"
_PRIMARY_WEIGHT = {ch: i + 1 for i, ch in enumerate(_ASCII_PRIMARY)}
_DIGIT_BASE = 1000
_LETTER_BASE = 2000
_OTHER_BASE = 100_000


def locale_sort_key(text: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """A sort key approximating ``a.localeCompare(b)`` under ICU's root collation.

    Levels: base characters (punctuation < digits < letters, case-blind), then accents,
    then case (lower before upper). Control characters are ignorable.
    """
    primary: list[int] = []
    secondary: list[int] = []
    tertiary: list[int] = []
    for ch in unicodedata.normalize("NFD", text):
        if unicodedata.combining(ch):
            if secondary:
                secondary[-1] = secondary[-1] * 31 + ord(ch)
            continue
        category = unicodedata.category(ch)
        if category == "Cc" and ch not in "\t\n\v\f\r":
            continue
        if ch in "\t\n\v\f\r":
            weight = -10 + "\t\n\v\f\r".index(ch)
        elif ch in _PRIMARY_WEIGHT:
            weight = _PRIMARY_WEIGHT[ch]
        elif category == "Nd":
            weight = _DIGIT_BASE + unicodedata.digit(ch, 0)
        elif ch.isalpha():
            lower = ch.lower()
            if len(lower) == 1 and "a" <= lower <= "z":
                weight = _LETTER_BASE + ord(lower) - ord("a")
            else:
                weight = _OTHER_BASE + ord(lower[0])
        elif category.startswith(("P", "S", "Z")):
            weight = 500 + ord(ch) % 400
        else:
            weight = _OTHER_BASE + ord(ch)
        primary.append(weight)
        secondary.append(0)
        tertiary.append(1 if ch.isupper() else 0)
    return tuple(primary), tuple(secondary), tuple(tertiary)

