"""Bash command lines as Gemini CLI reads them: a tree-sitter-bash syntax tree.

Gemini CLI (``shell-utils``) parses a shell command with tree-sitter and the bash grammar
before its policy judges it; we parse with the same grammar through the ``tree_sitter``
bindings and read the tree the way Gemini does:

* A **detail** is a node Gemini names: a ``command`` (its ``name`` field, outer quotes
  removed), a ``declaration_command`` / ``unset_command`` / ``test_command`` (their
  first token), a ``file_redirect`` (``redirection (<)`` or ``(>)``), a heredoc, a
  here-string, a command, backtick or process substitution, a subshell. Its text is the
  node's source, trimmed; details are in source order (an outer node before the nodes
  inside it).
* A line **has an error** when the tree holds an ERROR or MISSING node, when no detail
  was found (``FOO=bar`` alone) or when it uses ``${var@P}`` (a prompt expansion can run
  commands the tree does not show).
* **No parse** (``None``): a blank line, or a parse that ran past one second (Gemini's
  timeout; a partial tree is not trusted). Callers treat it as "cannot tell".

The grammar is loaded once, on the first parse (a few milliseconds), so importing this
module costs nothing.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable
from itertools import accumulate, pairwise
from typing import TYPE_CHECKING, Final

import attrs

from ._js import js_trim

if TYPE_CHECKING:
    from tree_sitter import Language, Node, Tree

REDIRECTION_NAMES: Final = frozenset(
    {
        "redirection (<)",
        "redirection (>)",
        "heredoc (<<)",
        "herestring (<<<)",
        "command substitution",
        "backtick substitution",
        "process substitution",
        "subshell",
    }
)
"""Detail names that are not commands (Gemini's ``REDIRECTION_NAMES``)."""

PARSE_TIMEOUT_S: Final = 1.0
"""Gemini gives up on a parse after one second."""

_NAMED_NODES: Final = {
    "heredoc_redirect": "heredoc (<<)",
    "herestring_redirect": "herestring (<<<)",
    "command_substitution": "command substitution",
    "backtick_substitution": "backtick substitution",
    "process_substitution": "process substitution",
    "subshell": "subshell",
}
_FIRST_TOKEN_NODES: Final = frozenset({"declaration_command", "unset_command", "test_command"})
_REDIRECT_NODES: Final = frozenset(
    {"redirected_statement", "file_redirect", "heredoc_redirect", "herestring_redirect"}
)
_READ_CHUNK: Final = 1 << 16


@attrs.frozen
class CommandDetail:
    """One node of a command line that Gemini names (a command, a redirection...)."""

    name: str
    """The command's name (``git``, ``/usr/bin/env``) or a kind in ``REDIRECTION_NAMES``."""
    text: str
    """The node's source text, trimmed."""
    start: int
    """Where the node starts, in characters from the start of the line."""


@attrs.frozen
class CommandParse:
    """What Gemini's ``parseBashCommandDetails`` returns for a line that parsed."""

    details: tuple[CommandDetail, ...]
    has_error: bool


_language: Language | None = None


def _bash_language() -> Language:
    """tree-sitter-bash, loaded on first use and kept for the life of the process."""
    global _language
    if _language is None:
        import tree_sitter
        import tree_sitter_bash

        _language = tree_sitter.Language(tree_sitter_bash.language())
    return _language


def _parse_tree(source: bytes, timeout_s: float) -> Tree | None:
    """The syntax tree, or None when parsing ran past ``timeout_s`` (no partial trees)."""
    import tree_sitter

    parser = tree_sitter.Parser(_bash_language())
    view = memoryview(source)
    deadline = time.monotonic() + timeout_s
    timed_out = False

    def read(offset: int, _point: object) -> memoryview:
        return view[offset : offset + _READ_CHUNK]

    def progress(_offset: int, _has_error: bool) -> bool:
        nonlocal timed_out
        timed_out = timed_out or time.monotonic() > deadline
        return timed_out  # True cancels the parse

    try:
        tree = parser.parse(read, progress_callback=progress)
    except ValueError:  # "Parsing failed": the progress callback cancelled it
        return None
    return None if timed_out else tree


class _Source:
    """The command line as UTF-8 (what tree-sitter reads) and back to characters."""

    def __init__(self, command: str) -> None:
        self.text = command
        self.data = command.encode("utf-8", "surrogatepass")
        self._starts: list[int] | None = None
        """Each character's byte offset, built on the first ``index`` of a non-ASCII line."""

    def slice(self, start: int, end: int) -> str:
        return self.data[start:end].decode("utf-8", "surrogatepass")

    def index(self, byte_offset: int) -> int:
        if len(self.data) == len(self.text):
            return byte_offset
        if self._starts is None:
            sizes = (len(c.encode("utf-8", "surrogatepass")) for c in self.text)
            self._starts = list(accumulate(sizes, initial=0))
        return bisect_left(self._starts, byte_offset)


def _unquote_name(raw: str) -> str:
    """Gemini's ``normalizeCommandName``: ``'my cmd'`` names ``my cmd``."""
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    return js_trim(raw)


def _detail_name(node: Node, source: _Source) -> str | None:
    kind = node.type
    if kind == "command":
        name = node.child_by_field_name("name")
        return None if name is None else _unquote_name(source.slice(name.start_byte, name.end_byte))
    if kind in _FIRST_TOKEN_NODES or (kind == "compound_statement" and _is_arithmetic(node)):
        first = node.child(0)
        return None if first is None else _unquote_name(source.slice(first.start_byte, first.end_byte))
    if kind == "file_redirect":
        for child in node.children:
            text = source.slice(child.start_byte, child.end_byte)
            if "<" in text:
                return "redirection (<)"
            if ">" in text:
                return "redirection (>)"
        return "redirection (>)"
    return _NAMED_NODES.get(kind)


def _is_arithmetic(node: Node) -> bool:
    """``((i++))``: the grammar Gemini CLI 0.61.0 bundles reads it as a test command named
    ``((`` (so a policy sees it); tree-sitter-bash 0.25.1 as a compound statement."""
    first = node.child(0)
    return first is not None and first.type == "(("


def _details(root: Node, source: _Source) -> list[CommandDetail]:
    """Every named node, outer before inner, then stably in source order."""
    found: list[CommandDetail] = []
    stack = [root]
    while stack:
        node = stack.pop()
        name = _detail_name(node, source)
        if name:
            text = js_trim(source.slice(node.start_byte, node.end_byte))
            found.append(CommandDetail(name=name, text=text, start=source.index(node.start_byte)))
        stack.extend(reversed(node.children))
    found.sort(key=lambda d: d.start)
    return found


def _has_prompt_transform(root: Node, source: _Source) -> bool:
    """``${var@P}`` (or ``@p``): the expansion runs the prompt string's substitutions."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "expansion":
            texts = [source.slice(c.start_byte, c.end_byte) for c in node.children]
            if any(op == "@" and arg.lower() == "p" for op, arg in pairwise(texts)):
                return True
        stack.extend(reversed(node.named_children))
    return False


def parse_command_details(
    command: str, *, timeout_s: float = PARSE_TIMEOUT_S
) -> CommandParse | None:
    """Gemini's ``parseBashCommandDetails``: the line's details, or None when it does
    not parse at all (blank, or past the timeout)."""
    if not js_trim(command):
        return None
    source = _Source(command)
    tree = _parse_tree(source.data, timeout_s)
    if tree is None:
        return None
    details = _details(tree.root_node, source)
    has_error = (
        tree.root_node.has_error or not details or _has_prompt_transform(tree.root_node, source)
    )
    return CommandParse(details=tuple(details), has_error=has_error)


def split_commands(command: str) -> list[str]:
    """Gemini's ``splitCommands``: the text of each command in the line, substitutions
    included (``echo $(id)`` is ``echo $(id)`` and ``id``); [] when it does not parse."""
    parsed = parse_command_details(command)
    if parsed is None or parsed.has_error:
        return []
    return [d.text for d in parsed.details if d.name not in REDIRECTION_NAMES and d.text]


def command_roots(command: str) -> list[str]:
    """Gemini's ``getCommandRoots``: each command's name (``git status && ls``: git, ls);
    [] when the line does not parse."""
    parsed = parse_command_details(command) if command else None
    if parsed is None or parsed.has_error:
        return []
    return [d.name for d in parsed.details if d.name not in REDIRECTION_NAMES]


def has_redirection(command: str) -> bool:
    """Gemini's ``hasRedirection``: the tree holds a redirection (a quoted ``>`` does not
    count, a syntax error does not matter); a line with ``<`` or ``>`` that does not parse
    counts as redirecting."""
    if "<" not in command and ">" not in command:
        return False
    tree = _parse_tree(_Source(command).data, PARSE_TIMEOUT_S)
    if tree is None:
        return True
    return _any_node(tree.root_node, lambda node: node.type in _REDIRECT_NODES)


def _any_node(root: Node, test: Callable[[Node], bool]) -> bool:
    stack = [root]
    while stack:
        node = stack.pop()
        if test(node):
            return True
        stack.extend(node.children)
    return False
