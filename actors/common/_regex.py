"""JavaScript regular expressions (without the ``u`` flag) on Python's ``re``.

Gemini CLI compiles policy ``argsPattern``s, grep patterns and the npm ``ignore``
package's generated patterns with ``new RegExp``. Here they are rewritten so Python's
``re`` matches what V8 would, and refused with V8's words where V8 refuses them. The
policy engine, grep and the ignore rules all use this one translation.
"""

from __future__ import annotations

import re
import warnings

from ._js import JS_WHITESPACE
from ._lazy import LazyPattern

_PY_KNOWN_ESCAPES = set("dDwWsSbBnrtfv0123456789xu")
_JS_SPACE = re.escape(JS_WHITESPACE)
_ASCII_CLASS = {"d": "0-9", "w": "A-Za-z0-9_"}
_ANY_BUT_LINE_END = "[^\\n\\r\\u2028\\u2029]"


def js_regex_to_python(source: str) -> str:
    """Rewrite a JavaScript (non-unicode) regex source so Python's ``re`` reads it alike.

    Handles the differences that matter for policy patterns, patterns written by models
    and the ``ignore`` package's: ``$`` only at the very end, ``.`` stopping at every
    line terminator, JavaScript's ``\\s``, ASCII ``\\d`` / ``\\w`` / ``\\b``, named
    groups and back-references, identity escapes (``\\q`` is ``q``), ``\\cX``, the
    empty classes ``[]`` / ``[^]``, ``{,n}`` (a literal in JavaScript), and characters
    Python would warn about inside classes.
    """
    out: list[str] = []
    i = 0
    n = len(source)
    in_class = False
    while i < n:
        ch = source[i]
        if ch == "\\" and i + 1 < n:
            nxt = source[i + 1]
            if nxt == "k" and not in_class and i + 2 < n and source[i + 2] == "<":
                end = source.find(">", i + 3)
                if end > 0:
                    out.append(f"(?P={source[i + 3 : end]})")
                    i = end + 1
                    continue
            if nxt == "c" and i + 2 < n and source[i + 2].isascii() and source[i + 2].isalpha():
                out.append(f"\\x{ord(source[i + 2]) % 32:02x}")
                i += 3
                continue
            if nxt == "x" and not re.match(r"[0-9A-Fa-f]{2}", source[i + 2 : i + 4]):
                out.append("x")
                i += 2
                continue
            if nxt == "u" and not re.match(r"[0-9A-Fa-f]{4}", source[i + 2 : i + 6]):
                out.append("u")
                i += 2
                continue
            if nxt == "s":
                out.append(_JS_SPACE if in_class else f"[{_JS_SPACE}]")
                i += 2
                continue
            if nxt == "S" and not in_class:
                out.append(f"[^{_JS_SPACE}]")
                i += 2
                continue
            if nxt in "dw" and in_class:
                out.append(_ASCII_CLASS[nxt])
                i += 2
                continue
            if nxt in "dDwWbB" and not in_class:
                out.append(f"(?a:\\{nxt})")  # JavaScript's are ASCII without the u flag
                i += 2
                continue
            if nxt.isascii() and nxt.isalpha() and nxt not in _PY_KNOWN_ESCAPES:
                out.append(re.escape(nxt))
                i += 2
                continue
            if nxt.isdigit() and in_class:
                out.append(f"\\x{int(nxt):02x}" if nxt in "01234567" else nxt)
                i += 2
                continue
            if nxt == "b" and in_class:
                out.append("\\x08")
                i += 2
                continue
            out.append(source[i : i + 2])
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
                out.append(ch)
            elif ch == "[" or (ch in "&~|-" and i + 1 < n and source[i + 1] == ch):
                out.append("\\" + ch)
            else:
                out.append(ch)
            i += 1
            continue
        if ch == "[":
            if source.startswith("[]", i):
                out.append("(?!)")
                i += 2
                continue
            if source.startswith("[^]", i):
                out.append("[\\s\\S]")
                i += 3
                continue
            in_class = True
            out.append("[")
            i += 1
            if i < n and source[i] == "^":
                out.append("^")
                i += 1
            continue
        if (
            ch == "("
            and source.startswith("(?", i)
            and not source.startswith(("(?:", "(?=", "(?!", "(?<"), i)
        ):
            # Inline flags and Python's `(?P...)` are not JavaScript.
            raise re.error("unknown extension")
        if ch == "(" and source.startswith("(?<", i) and not source.startswith(("(?<=", "(?<!"), i):
            out.append("(?P<")
            i += 3
            continue
        if ch == "$":
            out.append("\\Z")  # no m flag: the end of the input, not before a final \n
            i += 1
            continue
        if ch == ".":
            out.append(_ANY_BUT_LINE_END)
            i += 1
            continue
        if ch == "{":
            match = re.match(r"\{(\d*)(,?)(\d*)\}", source[i:])
            if match is None or match.group(1) == "":
                out.append("\\{")
                i += 1
                continue
        out.append(ch)
        i += 1
    return "".join(out)


_JS_REGEX_MESSAGES = (
    ("missing ), unterminated subpattern", "Unterminated group"),
    ("unterminated character set", "Unterminated character class"),
    ("nothing to repeat", "Nothing to repeat"),
    ("multiple repeat", "Nothing to repeat"),
    ("unbalanced parenthesis", "Unmatched ')'"),
    ("bad escape (end of pattern)", "\\ at end of pattern"),
    ("min repeat greater than max repeat", "numbers out of order in {} quantifier"),
    ("bad character range", "Range out of order in character class"),
    ("unknown group name", "Invalid named capture referenced"),
    ("redefinition of group name", "Duplicate capture group name"),
    ("unknown extension", "Invalid group"),
    ("missing group name", "Invalid capture group name"),
    ("bad character in group name", "Invalid capture group name"),
    ("look-behind requires fixed-width pattern", "Invalid regular expression"),
)


class JsRegexError(re.error):
    """A pattern JavaScript's ``new RegExp`` would reject; the message is V8's."""


def compile_js_regex(source: str, *, ignore_case: bool = False) -> re.Pattern[str]:
    """``new RegExp(source, ignore_case ? 'i' : '')`` as a Python pattern.

    Raises ``JsRegexError`` with a message shaped like V8's
    (``Invalid regular expression: /(/: Unterminated group``).
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # FutureWarnings about classes V8 reads plainly
            return re.compile(js_regex_to_python(source), re.IGNORECASE if ignore_case else 0)
    except (re.error, OverflowError, RecursionError) as exc:
        text = str(exc.msg) if isinstance(exc, re.error) else str(exc)
        for needle, js_text in _JS_REGEX_MESSAGES:
            if needle in text:
                text = js_text
                break
        else:
            text = text[:1].upper() + text[1:]
        flags = "i" if ignore_case else ""
        raise JsRegexError(f"Invalid regular expression: /{source}/{flags}: {text}") from None


class LazyJsRegex(LazyPattern):
    """``compile_js_regex(source)``, compiled by its first use (a source that compiled
    before: a policy rule's, read back from the cache). Equal to the pattern it
    compiles to, as that pattern is to another compiled from the same source."""

    __slots__ = ()

    @property
    def compiled(self) -> re.Pattern[str]:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = compile_js_regex(self.pattern)
        return compiled

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyPattern):
            other = other.compiled
        return self.compiled == other

    def __hash__(self) -> int:
        return hash(self.compiled)
