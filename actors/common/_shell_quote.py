"""The npm ``shell-quote`` package's ``parse`` (1.8.3, as Gemini CLI 0.61.0 bundles it),
ported by hand.

Why a port and not the bash grammar: Gemini reads a command's *words* with shell-quote,
not with tree-sitter — to unquote ``bash -c "..."`` (``stripShellWrapper``) and to find
the command and its arguments for its safety heuristics (``rm -rf``, ``git status``,
``sed -n 5p``...). shell-quote's rules are its own: ``$VAR`` becomes its value from the
given environment (empty without one), ``#`` starts a comment even inside a word, ``*``
and ``?`` make a glob, an operator inside a word makes the whole word an operator, and
``${}`` or an unclosed ``${`` raise "Bad substitution" (Gemini then skips its heuristics).
Reading the words any other way would judge some commands differently from Gemini.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import attrs

from ._js import JS_WHITESPACE


@attrs.frozen
class ShellOp:
    """An operator (``&&``, ``|``, ``;``...), or a word that holds one unquoted."""

    op: str


@attrs.frozen
class ShellGlob:
    """A word with an unquoted ``*`` or ``?``."""

    pattern: str


@attrs.frozen
class ShellComment:
    """Everything after an unquoted ``#``."""

    comment: str


ShellEntry = str | ShellOp | ShellGlob | ShellComment


class ShellQuoteError(ValueError):
    """shell-quote's ``Bad substitution`` (``${}``, an unclosed ``${``)."""


_CONTROL = r"(?:\|\||\&\&|;;|\|\&|\<\(|\<\<\<|>>|>\&|<\&|[&;()|<>])"
_CONTROL_RE = re.compile("^" + _CONTROL + "$")
_META = "|&;()<> \\t"
# JavaScript's ``\s`` (U+FEFF, not U+001C..U+001F), as in shell-quote's pattern.
_BAREWORD = "(\\\\['\"" + _META + "]|[^" + JS_WHITESPACE + "'\"" + _META + "])+"
_DQ_STRING = '"((\\\\"|[^"])*?)"'
_SQ_STRING = "'((\\\\'|[^'])*?)'"
_CHUNKER = re.compile(
    "(" + _CONTROL + ")|(" + _BAREWORD + "|" + _DQ_STRING + "|" + _SQ_STRING + ")+"
)
_WORD_END = re.compile(r"[^\w\d_]", re.ASCII)


def shell_quote_parse(
    text: str, env: Callable[[str], str] | None = None, *, strict: bool = True
) -> list[ShellEntry]:
    """``parse(text, env)``: ``env`` maps a variable name to its text; without it every
    variable is empty (a lone ``$`` stays ``$``). Raises :class:`ShellQuoteError`, unless
    not ``strict``: then a bad substitution is empty too (not shell-quote's behaviour)."""
    entries: list[ShellEntry] = []
    for match in _CHUNKER.finditer(text):
        chunk = match.group(0)
        if _CONTROL_RE.match(chunk):
            entries.append(ShellOp(chunk))
            continue
        entry = _read_chunk(text, match.start(), chunk, env, strict)
        if isinstance(entry, list):  # a comment: it runs to the end of the text
            entries += entry
            break
        entries.append(entry)
    return entries


def _read_chunk(
    text: str, offset: int, s: str, env: Callable[[str], str] | None, strict: bool
) -> ShellEntry | list[ShellEntry]:
    out: list[str] = []
    quote = ""
    escaped = False
    is_glob = False
    i = 0
    while i < len(s):
        c = s[i]
        is_glob = is_glob or (not quote and c in "*?")
        if escaped:
            out.append(c)
            escaped = False
        elif quote:
            if c == quote:
                quote = ""
            elif quote == "'":
                out.append(c)
            elif c == "\\":
                i += 1
                c = s[i] if i < len(s) else ""
                out.append(c if c in ('"', "\\", "$") else "\\" + c)
            elif c == "$":
                i, value = _read_variable(s, i, env, strict)
                out.append(value)
            else:
                out.append(c)
        elif c in "\"'":
            quote = c
        elif _CONTROL_RE.match(c):
            return ShellOp(s)
        elif c == "#":
            word = "".join(out)
            comment = ShellComment(text[offset + i + 1 :])
            return [word, comment] if word else [comment]
        elif c == "\\":
            escaped = True
        elif c == "$":
            i, value = _read_variable(s, i, env, strict)
            out.append(value)
        else:
            out.append(c)
        i += 1
    return ShellGlob("".join(out)) if is_glob else "".join(out)


def _read_variable(
    s: str, i: int, env: Callable[[str], str] | None, strict: bool
) -> tuple[int, str]:
    """shell-quote's ``parseEnvVar`` at the ``$`` at ``i``: the index of the variable's
    last character and its value."""
    i += 1
    char = s[i] if i < len(s) else ""
    if char == "{":
        i += 1
        if s[i : i + 1] == "}":
            if not strict:
                return i, ""
            raise ShellQuoteError(f"Bad substitution: {s[i - 2 : i + 1]}")
        end = s.find("}", i)
        if end < 0:
            if not strict:
                return len(s), ""
            raise ShellQuoteError(f"Bad substitution: {s[i:]}")
        name = s[i:end]
        i = end
    elif char and char in "*@#?$!_-":
        name = char
        i += 1
    else:
        rest = s[i:]
        stop = _WORD_END.search(rest)
        if stop is None:
            name = rest
            i = len(s)
        else:
            name = rest[: stop.start()]
            i += stop.start() - 1
    if env is not None:
        return i, env(name)
    return i, "" if name else "$"


def entry_text(entry: ShellEntry) -> str:
    """Gemini's ``extractStringFromParseEntry``: the word, operator or glob pattern; a
    comment is ``""``."""
    if isinstance(entry, str):
        return entry
    if isinstance(entry, ShellOp):
        return entry.op
    if isinstance(entry, ShellGlob):
        return entry.pattern
    return ""


def shell_words(command: str, *, strict: bool = True) -> list[str]:
    """``shellParse(command).map(extractStringFromParseEntry)``: the words Gemini's
    command heuristics look at. Raises :class:`ShellQuoteError` (see
    :func:`shell_quote_parse` for ``strict``)."""
    return [entry_text(entry) for entry in shell_quote_parse(command, strict=strict)]
