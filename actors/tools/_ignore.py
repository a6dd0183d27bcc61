"""The npm ``ignore`` package (7.0), ported: gitignore rules on relative POSIX paths.

Kept as a hand-written port rather than a Python gitignore library because parity needs
``ignore``'s exact behaviour, which differs from git's in ways the model sees: matching
is case-insensitive, a rule is its ``REPLACERS`` chain's regular expression (run here by
:func:`actors.common.js_regex_to_python`), and a path is ignored when an ancestor
directory is. Gemini CLI's ``GitIgnoreParser`` and ``IgnoreFileParser``
(:mod:`._discovery`) are built on it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from actors.common import js_regex_to_python


def _sanitize_range(body: str) -> str:
    return re.sub(
        r"([0-z])-([0-z])",
        lambda m: m.group(0) if ord(m.group(1)) <= ord(m.group(2)) else "",
        body,
    )


def _clean_range_backslash(slashes: str) -> str:
    return slashes[: len(slashes) - len(slashes) % 2]


def _range_replacer(m: re.Match[str]) -> str:
    lead, body, end_escape, close = m.group(1), m.group(2), m.group(3), m.group(4)
    if lead == "\\":
        return f"\\[{body}{_clean_range_backslash(end_escape)}{close}"
    if close == "]":
        if len(end_escape) % 2 == 0:
            return f"[{_sanitize_range(body)}{end_escape}]"
        return "[]"
    return "[]"


def _globstar_replacer(m: re.Match[str]) -> str:
    if m.start() + 6 < len(m.string):
        return r"(?:\/[^\/]+)*"
    return r"\/.+"


def _make_regex_prefix(pattern: str) -> str:
    """The ``REPLACERS`` chain of ``ignore`` 7.0, step by step."""
    s = pattern
    s = re.sub(r"^\ufeff", "", s, count=1)
    s = re.sub(
        r"((?:\\\\)*?)(\\?\s+)$",
        lambda m: m.group(1) + (" " if m.group(2).startswith("\\") else ""),
        s,
        count=1,
    )
    s = re.sub(
        r"(\\+?)\s",
        lambda m: m.group(1)[: len(m.group(1)) - len(m.group(1)) % 2] + " ",
        s,
    )
    s = re.sub(r"[\\$.|*+(){^]", lambda m: "\\" + m.group(0), s)
    s = re.sub(r"(?!\\)\?", lambda m: "[^/]", s)
    s = re.sub(r"^/", lambda m: "^", s, count=1)
    s = re.sub(r"/", lambda m: "\\/", s)
    s = re.sub(r"^\^*\\\*\\\*\\/", lambda m: r"^(?:.*\/)?", s, count=1)
    if s and s[0] != "^":
        s = (r"(?:^|\/)" if not re.search(r"/(?!$)", pattern) else "^") + s
    s = re.sub(r"\\/\\\*\\\*(?=\\/|$)", _globstar_replacer, s)
    s = re.sub(
        r"(^|[^\\]+)(\\\*)+(?=.+)",
        lambda m: m.group(1) + m.group(2).replace("\\*", r"[^\/]*"),
        s,
    )
    s = re.sub(r"\\\\\\(?=[$.|*+(){^])", lambda m: "\\", s)
    s = re.sub(r"\\\\", lambda m: "\\", s)
    s = re.sub(r"(\\)?\[([^\]/]*?)(\\*)($|\])", _range_replacer, s)
    s = re.sub(
        r"(?:[^*])$",
        lambda m: m.group(0) + "$" if m.group(0).endswith("/") else m.group(0) + r"(?=$|\/$)",
        s,
        count=1,
    )
    return s


def _trailing_wildcard(m: re.Match[str]) -> str:
    prefix = f"{m.group(1)}[^/]+" if m.group(1) else "[^/]*"
    return prefix + r"(?=$|\/$)"


class _IgnoreRule:
    __slots__ = ("negative", "regex")

    def __init__(self, pattern: str) -> None:
        negative = pattern.startswith("!")
        body = pattern[1:] if negative else pattern
        body = re.sub(r"^\\!", "!", body, count=1)
        body = re.sub(r"^\\#", "#", body, count=1)
        prefix = _make_regex_prefix(body)
        source = re.sub(r"(^|\\/)?\\\*$", _trailing_wildcard, prefix, count=1)
        self.negative = negative
        try:
            self.regex: re.Pattern[str] | None = re.compile(
                js_regex_to_python(source), re.IGNORECASE
            )
        except re.error:
            self.regex = None


def _check_pattern(pattern: str) -> bool:
    return (
        bool(pattern)
        and not re.fullmatch(r"\s+", pattern)
        and not re.search(r"(?:[^\\]|^)\\$", pattern)
        and not pattern.startswith("#")
    )


class IgnoreRules:
    """``ignore()`` from npm: add gitignore patterns, ask ``ignores(relative_path)``.

    Matching is case-insensitive, a path is ignored when an ancestor directory is, and
    the last matching rule wins otherwise. Directory paths end with ``/``.
    """

    def __init__(self) -> None:
        self._rules: list[_IgnoreRule] = []
        self._cache: dict[str, tuple[bool, bool]] = {}

    def add(self, patterns: Iterable[str] | IgnoreRules | str) -> IgnoreRules:
        if isinstance(patterns, IgnoreRules):
            if patterns._rules:
                self._rules.extend(patterns._rules)
                self._cache = {}
            return self
        if isinstance(patterns, str):
            patterns = [p for p in re.split(r"\r?\n", patterns) if p]
        added = False
        for pattern in patterns:
            if _check_pattern(pattern):
                self._rules.append(_IgnoreRule(pattern))
                added = True
        if added:
            self._cache = {}
        return self

    def copy(self) -> IgnoreRules:
        return IgnoreRules().add(self)

    def _test(self, path: str) -> tuple[bool, bool]:
        ignored = unignored = False
        for rule in self._rules:
            negative = rule.negative
            if (unignored == negative and ignored != unignored) or (
                negative and not ignored and not unignored
            ):
                continue
            if rule.regex is None or not rule.regex.search(path):
                continue
            ignored = not negative
            unignored = negative
        return ignored, unignored

    def _t(self, path: str, parts: list[str]) -> tuple[bool, bool]:
        """npm ``ignore``'s ``_t``: a path is what its nearest ignored ancestor directory
        says, else its own test; each ancestor once, from the root down, in a loop (a
        path of a thousand components overflowed the recursive original)."""
        cached = self._cache.get(path)
        if cached is not None:
            return cached
        parent: tuple[bool, bool] | None = None
        prefix = ""
        for part in parts[:-1]:
            prefix += part + "/"
            known = self._cache.get(prefix)
            if known is None:
                known = parent if parent is not None and parent[0] else self._test(prefix)
                self._cache[prefix] = known
            parent = known
        result = parent if parent is not None and parent[0] else self._test(path)
        self._cache[path] = result
        return result

    def ignores(self, path: str) -> bool:
        """Whether ``path`` (relative, POSIX, dirs ending in ``/``) is ignored.

        Raises ``ValueError`` for empty or non-relative paths, as ``ignore`` does.
        """
        if not path:
            raise ValueError("path must not be empty")
        if re.match(r"^\.*/|^\.+$", path):
            raise ValueError(f'path should be a `path.relative()`d string, but got "{path}"')
        return self._t(path, [s for s in path.split("/") if s])[0]

