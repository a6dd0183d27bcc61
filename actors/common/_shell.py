"""Shell syntax as Gemini CLI reads and writes it: ``stripShellWrapper`` (which unquotes
with shell-quote's ``parse``, :mod:`._shell_quote`) and ``escapeShellArg`` (shell-quote's
``quote``).

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
from ._shell_quote import ShellQuoteError, shell_quote_parse

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
                words = shell_quote_parse(inner, lambda key: "$" + key)
            except ShellQuoteError:
                words = []
            inner = words[0] if len(words) == 1 and isinstance(words[0], str) else inner[1:-1]
        else:
            inner = inner[1:-1]
    return inner
