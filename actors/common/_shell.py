"""Shell syntax as Gemini CLI reads and writes it: shell-quote's ``parse`` and
``quote``, ``stripShellWrapper`` and ``escapeShellArg``.

Gemini unwraps ``bash -c "..."`` (and ``cmd.exe /c``, ``powershell -Command``) before it
checks a command against the policy and before it runs it; both places use this one
function, so a rule and the command it guards always see the same text. It quotes a
value for bash in one way too (``escapeShellArg(arg, 'bash')``): the hook runner's
``$GEMINI_CWD``-style tokens and the shell tool's background-PID file both go through
:func:`escape_shell_arg`.
"""

from __future__ import annotations

import re

from ._js import JS_WHITESPACE, js_trim

# Gemini's pattern, with JavaScript's ``\s`` (which has U+FEFF and not U+001C..U+001F).
_WRAPPER = re.compile(
    (
        r"^\s*(?:(?:(?:\S+/)?(?:sh|bash|zsh))\s+-c|cmd\.exe\s+/c"
        r"|powershell(?:\.exe)?\s+(?:-NoProfile\s+)?-Command"
        r"|pwsh(?:\.exe)?\s+(?:-NoProfile\s+)?-Command)\s+"
    )
    .replace(r"\s", f"[{JS_WHITESPACE}]")
    .replace(r"\S", f"[^{JS_WHITESPACE}]"),
    re.IGNORECASE,
)

# shell-quote's ``parse`` (1.8), which Gemini uses to unquote ``bash -c "..."``.
_SQ_CONTROL = r"(?:\|\||\&\&|;;|\|\&|\<\(|\<\<\<|>>|>\&|<\&|[&;()|<>])"
_SQ_CONTROL_RE = re.compile("^" + _SQ_CONTROL + "$")
_SQ_META = "|&;()<> \\t"
_SQ_BAREWORD = "(\\\\['\"" + _SQ_META + "]|[^\\s'\"" + _SQ_META + "])+"
_SQ_DQ_STRING = '"((\\\\"|[^"])*?)"'
_SQ_SQ_STRING = "'((\\\\'|[^'])*?)'"
_SQ_CHUNKER = re.compile(
    "(" + _SQ_CONTROL + ")|(" + _SQ_BAREWORD + "|" + _SQ_DQ_STRING + "|" + _SQ_SQ_STRING + ")+"
)
_SQ_WORD_END = re.compile(r"[^\w\d_]", re.ASCII)


class _NotAString(Exception):
    """A shell-quote entry that is an operator, glob or comment rather than a string."""


def _shell_quote_words(text: str) -> list[str]:
    """shell-quote ``parse(text, key => '$' + key)``; raises if an entry is not a string."""
    words: list[str] = []
    for match in _SQ_CHUNKER.finditer(text):
        s = match.group(0)
        if not s:
            continue
        if _SQ_CONTROL_RE.match(s):
            raise _NotAString(s)
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
                    i, var = _shell_quote_var(s, i)
                    out.append(var)
                else:
                    out.append(c)
            elif c in "\"'":
                quote = c
            elif _SQ_CONTROL_RE.match(c) or c == "#":
                raise _NotAString(c)
            elif c == "\\":
                escaped = True
            elif c == "$":
                i, var = _shell_quote_var(s, i)
                out.append(var)
            else:
                out.append(c)
            i += 1
        if is_glob:
            raise _NotAString("glob")
        words.append("".join(out))
    return words


def _shell_quote_var(s: str, i: int) -> tuple[int, str]:
    """shell-quote's ``parseEnvVar`` with an env that maps ``key`` to ``$key``."""
    i += 1
    char = s[i] if i < len(s) else ""
    if char == "{":
        i += 1
        if s[i : i + 1] == "}":
            raise _NotAString("Bad substitution")
        end = s.find("}", i)
        if end < 0:
            raise _NotAString("Bad substitution")
        return end, "$" + s[i:end]
    if char and char in "*@#?$!_-":
        return i, "$" + char
    rest = s[i:]
    stop = _SQ_WORD_END.search(rest)
    if stop is None:
        return len(s), "$" + rest
    return i + stop.start() - 1, "$" + rest[: stop.start()]


# shell-quote's ``quote`` (1.8, as bundled in Gemini CLI 0.61.0), with JavaScript's ``\s``.
_SQ_SINGLE = re.compile(f'["\\\\{JS_WHITESPACE}]')
_SQ_DOUBLE = re.compile(f"[\"'{JS_WHITESPACE}]")
_SQ_DOUBLE_SPECIAL = re.compile(r"([\"\\$`!])")
_SQ_BARE_SPECIAL = re.compile(r"([A-Za-z]:)?([#!\"$&'()*,:;<=>?@\[\\\]^`{|}])")


def escape_shell_arg(arg: str) -> str:
    """Gemini's ``escapeShellArg(arg, 'bash')``: ``''`` stays empty, else shell-quote's
    ``quote([arg])``.

    Exactly Gemini's, faults included: a value holding ``'`` goes in double quotes with
    ``!`` escaped as ``\\!``, which bash (no history expansion in ``-c``) keeps as two
    characters; a leading ``~`` is left bare, so bash expands it. Both only change what
    a command sees in those rare values, the same way Gemini's does.
    """
    if not arg:
        return ""
    if _SQ_SINGLE.search(arg) and "'" not in arg:
        return "'" + arg + "'"
    if _SQ_DOUBLE.search(arg):
        return '"' + _SQ_DOUBLE_SPECIAL.sub(r"\\\1", arg) + '"'
    return _SQ_BARE_SPECIAL.sub(r"\1\\\2", arg)


def strip_shell_wrapper(command: str) -> str:
    """``stripShellWrapper``: ``bash -c "echo hi"`` runs as ``echo hi``."""
    match = _WRAPPER.match(command)
    if match is None:
        return js_trim(command)
    inner = js_trim(command[match.end() :])
    if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "\"'":
        if match.group(0).strip().endswith("-c") and inner[0] == '"':
            try:
                words = _shell_quote_words(inner)
            except (_NotAString, IndexError):
                words = []
            inner = words[0] if len(words) == 1 else inner[1:-1]
        else:
            inner = inner[1:-1]
    return inner
