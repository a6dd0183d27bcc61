"""What a rule's arguments pattern is matched against, and how patterns are built.

Gemini CLI matches a rule's ``argsPattern`` (a JavaScript regex) against a stable JSON
text of the call's arguments (:func:`stable_stringify`: sorted keys, each top-level
property wrapped in NULs); ``commandPrefix`` and ``commandRegex`` are shorthands that
become such patterns (:func:`build_args_patterns`); an "always allow" of a shell command
becomes command prefixes (:func:`shell_always_allow`). Patterns go through the shared
JavaScript-regex translation (``actors.common.compile_js_regex``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from actors.common import LazyPattern, compile_js_regex, js_number

_JSON_ESCAPES: Final[Mapping[str, str]] = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_JSON_NEEDS_ESCAPE = LazyPattern('["\\\\\x00-\x1f\ud800-\udfff]')


def _js_string(text: str) -> str:
    """A string literal exactly as JavaScript's ``JSON.stringify`` writes it."""

    def escape(match: re.Match[str]) -> str:
        ch = match.group(0)
        return _JSON_ESCAPES.get(ch) or f"\\u{ord(ch):04x}"

    return '"' + _JSON_NEEDS_ESCAPE.sub(escape, text) + '"'


def _utf16_key(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def _utf16_sorted(keys: list[str]) -> list[str]:
    """``keys`` in JavaScript's order (UTF-16 code units). It differs from Python's (code
    points) only for characters past U+FFFF, so ASCII keys, the usual ones, sort as they
    are: no encoding per key, and a run's first tool call does not look up the codec."""
    if all(k.isascii() for k in keys):
        return sorted(keys)
    return sorted(keys, key=_utf16_key)


def stable_stringify(value: Any) -> str:
    """Gemini's deterministic JSON of tool arguments.

    Keys are sorted (UTF-16 code-unit order), there is no whitespace, ``None`` is
    ``null``, and each key/value pair of the *top-level* object is wrapped in NUL
    characters (``{\\0"a":1\\0,\\0"b":2\\0}``) so patterns can anchor on whole
    top-level properties. Nested objects are plain. A value that would recurse into
    one of its ancestors is written ``"[Circular]"``.
    """
    ancestors: set[int] = set()

    def dump(obj: Any, top_level: bool) -> str:
        if obj is None:
            return "null"
        if obj is True:
            return "true"
        if obj is False:
            return "false"
        if isinstance(obj, str):
            return _js_string(obj)
        if isinstance(obj, int | float):
            return "null" if isinstance(obj, float) and not math.isfinite(obj) else js_number(obj)
        if isinstance(obj, Mapping | list | tuple):
            if id(obj) in ancestors:
                return '"[Circular]"'
            ancestors.add(id(obj))
            try:
                if isinstance(obj, Mapping):
                    pairs = []
                    for key in _utf16_sorted([str(k) for k in obj]):
                        item = obj[key]
                        if callable(item):
                            continue
                        pair = _js_string(key) + ":" + dump(item, False)
                        pairs.append(f"\0{pair}\0" if top_level else pair)
                    return "{" + ",".join(pairs) + "}"
                return "[" + ",".join("null" if callable(x) else dump(x, False) for x in obj) + "]"
            finally:
                ancestors.discard(id(obj))
        return _js_string(str(obj))

    return dump(value, True)


# ---------------------------------------------------------------------------------------
# Regexes: policy patterns are JavaScript regexes (actors.common.compile_js_regex).

_NESTED_QUANTIFIER = LazyPattern(r"\([^)]*[*+?{].*\)[*+?{]")


def is_safe_regexp(pattern: str) -> bool:
    """Gemini's ReDoS heuristic: valid, at most 2048 chars, no nested quantifiers."""
    try:
        compile_js_regex(pattern)
    except (re.error, RecursionError, OverflowError):
        return False
    if len(pattern) > 2048:
        return False
    return _NESTED_QUANTIFIER.search(pattern) is None


def escape_regex(text: str) -> str:
    r"""Escape ``-[]{}()*+?.,\^$|#``, whitespace and ``"`` with a backslash."""
    return re.sub(r'[-\[\]{}()*+?.,\\^$|#\s"]', lambda m: "\\" + m.group(0), text)


def build_args_patterns(
    args_pattern: str | None,
    command_prefix: str | Sequence[str] | None,
    command_regex: str | None,
) -> list[str | None]:
    """The argsPattern sources a rule stands for (JavaScript regex syntax).

    ``commandPrefix`` matches ``"command":"<prefix>`` followed by whitespace, a quote or
    an escaped quote (so ``git`` does not match ``gitx``); ``commandRegex`` is anchored
    after ``"command":"``. Empty strings count as absent, as in Gemini.
    """
    if command_prefix or (command_prefix is not None and not isinstance(command_prefix, str)):
        # (an empty *list* still counts as given: it yields no pattern at all)
        prefixes = [command_prefix] if isinstance(command_prefix, str) else list(command_prefix)
        patterns: list[str | None] = []
        for prefix in prefixes:
            open_literal = _js_string(prefix)[:-1]
            patterns.append(escape_regex(f'"command":{open_literal}') + '(?:[\\s"]|\\\\")')
        return patterns
    if command_regex:
        return [f'"command":"{command_regex}']
    return [args_pattern]


def param_args_pattern(param: str, value: Any) -> str:
    """Gemini's "allow always" narrowing for file tools (``file_path``, ``dir_path``...).

    Faithful quirk: Gemini delimits the property with a *literal* backslash + ``0``,
    not the NUL that :func:`stable_stringify` writes, so a rule built from this pattern
    never matches a real call. (After "allow always" on ``write_file``/``replace``
    Gemini switches to auto-edit mode, which is what lets later edits through.)
    """
    literal = stable_stringify([value])[1:-1]
    return "\\\\0" + escape_regex(f'"{param}":{literal}') + "\\\\0"


def shell_always_allow(command: str) -> tuple[str | list[str], bool | None]:
    """What an "always allow" of a shell command allows from then on, as Gemini's shell
    tool says (``getPolicyUpdateOptions``): the command prefixes (each distinct root
    command of the unwrapped command; the command itself when it has none) and whether
    they may redirect (when the approved command did)."""
    from actors.common import command_roots, has_redirection, strip_shell_wrapper

    stripped = strip_shell_wrapper(command)
    roots = list(dict.fromkeys(command_roots(stripped)))
    return (roots or command), (True if has_redirection(stripped) else None)
