"""The policy engine: which tool calls run, which need the user, which are refused.

Gemini CLI's policy model (the facts we reproduce; the code is ours):

* A **rule** names a tool (``*``, a name, ``mcp_<server>_*``), a decision (allow, deny,
  ask_user) and a priority. Rules come in tiers: built-in defaults 1, extensions 2,
  workspace 3, user 4, admin 5; a TOML priority ``p`` (0-999) becomes ``tier + p/1000``.
  Settings add user-tier rules: ``mcp.excluded`` deny 4.9, ``tools.exclude`` deny 4.4,
  ``tools.confirmationRequired`` ask 4.35, ``tools.allowed`` / ``--allowed-tools`` allow 4.3
  (``run_shell_command(git status)`` becomes a command-prefix rule plus a narrowing deny
  at 4.29), ``tools.core`` allow 4.25 plus a ``*`` deny at 4.24 (not in plan mode),
  trusted MCP servers 4.2, ``mcp.allowed`` 4.1. "Always allow" answers add tier + 0.95.
* The highest-priority matching rule wins (ties: load order). A rule may be limited to
  approval modes, to interactive or headless runs, to a subagent, to an MCP server, to
  tool annotations and to an arguments regex matched against :func:`stable_stringify`.
* Shell commands get extra care: heuristics (dangerous commands ask, known read-only
  commands may skip the question, git in an untrusted folder asks), every sub-command
  of a compound command is checked on its own (any deny denies, any ask asks), and
  redirection downgrades allow to ask unless the rule allows redirection or the mode is
  auto-edit / YOLO. A command that does not parse falls back to the default decision.
* Nothing matched: YOLO allows; otherwise the default decision is ask_user when
  interactive and deny when headless.

Pure code: the only I/O is reading policy files in :func:`load_policy_file` and
:meth:`PolicyEngine.build`.
"""

from __future__ import annotations

import math
import os
import posixpath
import re
import tomllib
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

import attrs

from actors.common import compile_js_regex, is_subpath, js_number, js_round, strip_shell_wrapper

__all__ = [
    "ADMIN_POLICY_TIER",
    "ALWAYS_ALLOW_PRIORITY_OFFSET",
    "APPROVAL_MODES",
    "BUILTIN_TOOL_NAMES",
    "DEFAULT_POLICY_DIR",
    "DEFAULT_POLICY_TIER",
    "EXTENSION_POLICY_TIER",
    "POLICY_DENIED_MESSAGE",
    "TOOL_DISPLAY_NAMES",
    "USER_POLICY_TIER",
    "WORKSPACE_POLICY_TIER",
    "Decision",
    "PolicyEngine",
    "PolicyFileError",
    "PolicyVerdict",
    "Rule",
    "build_args_patterns",
    "confirmation_unsupported_message",
    "display_name",
    "escape_regex",
    "has_redirection",
    "is_dangerous_command",
    "is_known_safe_command",
    "is_safe_regexp",
    "load_policy_file",
    "normalize_approval_mode",
    "param_args_pattern",
    "parse_shell_command",
    "policy_denial_message",
    "split_commands",
    "stable_stringify",
    "tool_not_found_message",
]

Decision = Literal["allow", "deny", "ask_user"]
DECISIONS: Final = ("allow", "deny", "ask_user")

# Approval modes, with Gemini's internal spelling ("autoEdit"); the CLI spells it auto_edit.
APPROVAL_MODES: Final = ("default", "autoEdit", "yolo", "plan")
_MODES_BY_PERMISSIVENESS: Final = ("plan", "default", "autoEdit", "yolo")
_NON_PLAN_MODES: Final = ("default", "autoEdit", "yolo")

DEFAULT_POLICY_TIER: Final = 1
EXTENSION_POLICY_TIER: Final = 2
WORKSPACE_POLICY_TIER: Final = 3
USER_POLICY_TIER: Final = 4
ADMIN_POLICY_TIER: Final = 5

_MCP_EXCLUDED_PRIORITY: Final = USER_POLICY_TIER + 0.9
_EXCLUDE_TOOLS_PRIORITY: Final = USER_POLICY_TIER + 0.4
_CONFIRMATION_REQUIRED_PRIORITY: Final = USER_POLICY_TIER + 0.35
_ALLOWED_TOOLS_PRIORITY: Final = USER_POLICY_TIER + 0.3
_CORE_TOOLS_PRIORITY: Final = USER_POLICY_TIER + 0.25
_TRUSTED_MCP_PRIORITY: Final = USER_POLICY_TIER + 0.2
_ALLOWED_MCP_PRIORITY: Final = USER_POLICY_TIER + 0.1
_ALWAYS_ALLOW_FRACTION: Final = 950
ALWAYS_ALLOW_PRIORITY_OFFSET: Final = _ALWAYS_ALLOW_FRACTION / 1000

DEFAULT_POLICY_DIR: Final = Path(__file__).with_name("policies")
"""Our built-in policies (tier 1), shipped as package data."""

POLICY_DENIED_MESSAGE: Final = "Tool execution denied by policy."

SHELL_TOOL_NAMES: Final = ("run_shell_command", "ShellTool")
_SHELL_TOOL_NAME: Final = "run_shell_command"
_AGENT_TOOL_NAME: Final = "invoke_agent"
_ASK_USER_TOOL_NAME: Final = "ask_user"
_MCP_PREFIX: Final = "mcp_"
_DISCOVERED_PREFIX: Final = "discovered_tool_"
_LEGACY_ALIASES: Final[Mapping[str, str]] = {"search_file_content": "grep_search"}

BUILTIN_TOOL_NAMES: Final = (
    "glob",
    "write_todos",
    "write_file",
    "google_web_search",
    "web_fetch",
    "replace",
    "run_shell_command",
    "grep_search",
    "read_many_files",
    "read_file",
    "list_directory",
    "activate_skill",
    "ask_user",
    "tracker_create_task",
    "tracker_update_task",
    "tracker_get_task",
    "tracker_list_tasks",
    "tracker_add_dependency",
    "tracker_visualize",
    "get_internal_docs",
    "enter_plan_mode",
    "exit_plan_mode",
    "update_topic",
    "complete_task",
    "invoke_agent",
    "read_mcp_resource",
    "list_mcp_resources",
)
"""Gemini CLI's built-in tool names (used to flag likely typos in policy files)."""

# Tools whose "always allow" must be narrowed (file path, command prefix...).
_TOOLS_REQUIRING_NARROWING: Final = frozenset(
    {
        "glob",
        "grep_search",
        "read_many_files",
        "read_file",
        "list_directory",
        "write_file",
        "replace",
        "run_shell_command",
    }
)

TOOL_DISPLAY_NAMES: Final[Mapping[str, str]] = {
    "write_file": "WriteFile",
    "replace": "Edit",
    "ask_user": "Ask User",
    "read_file": "ReadFile",
    "glob": "FindFiles",
    "list_directory": "ReadFolder",
    "grep_search": "SearchText",
    "google_web_search": "GoogleSearch",
    "web_fetch": "WebFetch",
    "read_many_files": "ReadManyFiles",
    "run_shell_command": "Shell",
    "activate_skill": "Activate Skill",
    "write_todos": "WriteTodos",
    "enter_plan_mode": "Enter Plan Mode",
    "exit_plan_mode": "Exit Plan Mode",
    "get_internal_docs": "GetInternalDocs",
    "update_topic": "Update Topic Context",
    "complete_task": "Complete Task",
    "read_mcp_resource": "Read MCP Resource",
    "list_mcp_resources": "List MCP Resources",
    "list_background_processes": "List Background Processes",
    "read_background_output": "Read Background Output",
    "tracker_create_task": "Create Task",
    "tracker_update_task": "Update Task",
    "tracker_get_task": "Get Task",
    "tracker_list_tasks": "List Tasks",
    "tracker_add_dependency": "Add Dependency",
    "tracker_visualize": "Visualize Tracker",
}
"""Gemini's tool display names, as they appear in the headless confirmation error."""


# ---------------------------------------------------------------------------------------
# Messages the scheduler shows


def policy_denial_message(verdict: PolicyVerdict) -> str:
    """The tool error for a deny verdict (error type ``policy_violation``)."""
    extra = f" {verdict.deny_message}" if verdict.deny_message else ""
    return f"{POLICY_DENIED_MESSAGE}{extra}"


def confirmation_unsupported_message(display_name: str) -> str:
    """The headless tool error for an ask_user verdict (type ``unhandled_exception``)."""
    return (
        f'Tool execution for "{display_name}" requires user confirmation, '
        "which is not supported in non-interactive mode."
    )


def _levenshtein(a: str, b: str) -> int:
    if a == b:
        return 0
    if not a:
        return len(b)
    if not b:
        return len(a)
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            )
        previous = current
    return previous[-1]


def _tool_suggestion(unknown: str, names: Sequence[str], top_n: int = 3) -> str:
    ranked = sorted(names, key=lambda n: _levenshtein(unknown, n))[:top_n]
    if not ranked:
        return ""
    quoted = ", ".join(f'"{n}"' for n in ranked)
    if len(ranked) > 1:
        return f" Did you mean one of: {quoted}?"
    return f" Did you mean {quoted}?"


def tool_not_found_message(name: str, active_tool_names: Sequence[str]) -> str:
    """The ``tool_not_registered`` error, suggestions ranked as Gemini does.

    ``active_tool_names`` must be in registry order (ties keep that order).
    """
    return f'Tool "{name}" not found.{_tool_suggestion(name, active_tool_names)}'


def normalize_approval_mode(mode: str) -> str:
    """``auto_edit`` (CLI) and ``autoEdit`` (internal) are the same mode."""
    if mode == "auto_edit":
        return "autoEdit"
    if mode in APPROVAL_MODES:
        return mode
    raise ValueError(
        f"Invalid approval mode: {mode}. Valid values are: yolo, auto_edit, plan, default"
    )


# ---------------------------------------------------------------------------------------
# Stable stringify: the text argsPattern regexes are matched against


_JSON_ESCAPES: Final[Mapping[str, str]] = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_JSON_NEEDS_ESCAPE = re.compile('["\\\\\x00-\x1f\ud800-\udfff]')


def _js_string(text: str) -> str:
    """A string literal exactly as JavaScript's ``JSON.stringify`` writes it."""

    def escape(match: re.Match[str]) -> str:
        ch = match.group(0)
        return _JSON_ESCAPES.get(ch) or f"\\u{ord(ch):04x}"

    return '"' + _JSON_NEEDS_ESCAPE.sub(escape, text) + '"'


def _utf16_key(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


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
                    for key in sorted((str(k) for k in obj), key=_utf16_key):
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

_NESTED_QUANTIFIER = re.compile(r"\([^)]*[*+?{].*\)[*+?{]")


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


# ---------------------------------------------------------------------------------------
# Shell parsing (bash): sub-commands, redirections, syntax errors


_REDIRECTION_NAMES: Final = frozenset(
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
_WORD_BREAK: Final = frozenset(" \t\n;&|()<>")
_COMPOUND_STARTERS: Final = frozenset(
    {"if", "case", "for", "select", "while", "until", "function", "{", "[["}
)
_MISPLACED_WORDS: Final = frozenset({"then", "elif", "else", "fi", "do", "done", "esac", "}", "]]"})
_FUNCTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]\n]*\])?\+?=")
_PROMPT_TRANSFORM = re.compile(r"@[Pp]\s*$")
_EMPTY_PARENS = re.compile(r"[ \t]*\([ \t]*\)")


@attrs.frozen
class _ShellDetail:
    name: str
    text: str
    start: int


@attrs.frozen
class _ShellParse:
    details: tuple[_ShellDetail, ...]
    has_error: bool
    has_redirection: bool


class _ShellSyntaxError(Exception):
    pass


class _BashParser:
    """A recursive-descent reading of a bash command line.

    It records what a syntax tree would show as separate nodes: simple commands
    (with their own source text), redirections, here-docs / here-strings, command,
    backtick and process substitutions and subshells; it flags syntax errors. The
    structure follows bash's grammar closely enough to split compound commands the
    way tree-sitter-bash does for Gemini.
    """

    def __init__(self, src: str) -> None:
        self.src = src
        self.n = len(src)
        self.pos = 0
        self.seq = 0
        self.details: list[tuple[int, int, str, str]] = []
        self.has_redirection = False
        self.prompt_transform = False
        self.heredocs: list[tuple[str, bool, bool]] = []

    # -- helpers ------------------------------------------------------------------------

    def error(self) -> _ShellSyntaxError:
        return _ShellSyntaxError(self.pos)

    def peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.src[i] if i < self.n else ""

    def starts(self, text: str) -> bool:
        return self.src.startswith(text, self.pos) and self.pos + len(text) <= self.n

    def open_node(self) -> int:
        self.seq += 1
        return self.seq

    def record(self, seq: int, name: str, start: int, end: int) -> None:
        self.details.append((start, seq, name, self.src[start:end].strip()))

    def skip_blanks(self) -> None:
        while self.pos < self.n:
            c = self.src[self.pos]
            if c in " \t\r":
                self.pos += 1
            elif c == "\\" and self.peek(1) == "\n":
                self.pos += 2
            elif c == "#":
                while self.pos < self.n and self.src[self.pos] != "\n":
                    self.pos += 1
            else:
                return

    def skip_newlines(self) -> None:
        while True:
            self.skip_blanks()
            if self.peek() != "\n":
                return
            self.pos += 1
            if self.heredocs:
                self.read_heredoc_bodies()

    def bare_word(self) -> str | None:
        """The unquoted word at the cursor, if it is a whole word."""
        j = self.pos
        while j < self.n and self.src[j] not in _WORD_BREAK and self.src[j] not in "'\"\\$`":
            j += 1
        if j == self.pos or (j < self.n and self.src[j] not in _WORD_BREAK):
            return None
        return self.src[self.pos : j]

    def at_word(self, word: str) -> bool:
        return self.bare_word() == word

    def expect_word(self, word: str) -> None:
        self.skip_newlines()
        if not self.at_word(word):
            raise self.error()
        self.pos += len(word)

    def at_command_end(self) -> bool:
        c = self.peek()
        if c in ("", "\n", ";", ")"):
            return True
        if c == "|":
            return True
        return c == "&" and self.peek(1) != ">"

    def redirect_at(self) -> tuple[int, str] | None:
        """(length of operator incl. fd digits, kind) when a redirection starts here."""
        j = self.pos
        while j < self.n and self.src[j].isdigit():
            j += 1
        rest = self.src[j : min(j + 3, self.n)]
        if j > self.pos and rest[:1] not in ("<", ">"):
            return None
        for op, kind in (
            ("<<<", "herestring"),
            ("<<-", "heredoc"),
            ("<<", "heredoc"),
            ("<&", "file<"),
            ("<>", "file<"),
            (">>", "file>"),
            (">&", "file>"),
            (">|", "file>"),
        ):
            if rest.startswith(op):
                return j - self.pos + len(op), kind
        if rest[:1] in ("<", ">") and rest[1:2] != "(":
            return j - self.pos + 1, "file<" if rest[0] == "<" else "file>"
        if j == self.pos and self.src.startswith(("&>>", "&>"), j):
            return (3 if self.src.startswith("&>>", j) else 2), "file>"
        return None

    # -- lists, pipelines, commands -----------------------------------------------------

    def at_stop(self, stops: frozenset[str]) -> bool:
        if not stops:
            return False
        c = self.peek()
        if c == ")" and ")" in stops:
            return True
        if c == ";" and self.peek(1) in (";", "&") and ";;" in stops:
            return True
        word = self.bare_word()
        return word is not None and word in stops

    def parse_list(self, stops: frozenset[str]) -> int:
        count = 0
        while True:
            self.skip_newlines()
            if self.pos >= self.n or self.at_stop(stops):
                return count
            self.parse_and_or()
            count += 1
            self.skip_blanks()
            c = self.peek()
            if c in ("", "\n"):
                continue
            if c == ";":
                if self.peek(1) in (";", "&"):
                    if ";;" in stops:
                        return count
                    raise self.error()
                self.pos += 1
                continue
            if c == "&" and self.peek(1) not in ("&", ">"):
                self.pos += 1
                continue
            if self.at_stop(stops):
                return count
            raise self.error()

    def parse_and_or(self) -> None:
        self.parse_pipeline()
        while True:
            self.skip_blanks()
            if self.starts("&&") or self.starts("||"):
                self.pos += 2
                self.skip_newlines()
                self.parse_pipeline()
            else:
                return

    def parse_pipeline(self) -> None:
        self.skip_blanks()
        if self.peek() == "!" and self.peek(1) in (" ", "\t", "\n", ""):
            self.pos += 1
            self.skip_blanks()
        self.parse_command()
        while True:
            self.skip_blanks()
            if self.peek() == "|" and self.peek(1) != "|":
                self.pos += 2 if self.peek(1) == "&" else 1
                self.skip_newlines()
                self.parse_command()
            else:
                return

    def parse_command(self) -> None:
        self.skip_blanks()
        if self.at_command_end() and self.redirect_at() is None:
            raise self.error()
        if self.peek() == "(":
            if self.peek(1) == "(":
                self.pos += 2
                self.scan_arithmetic()
            else:
                self.parse_group("subshell")
            self.parse_redirects()
            return
        word = self.bare_word()
        if word in _COMPOUND_STARTERS:
            self.parse_compound(word)
            self.parse_redirects()
            return
        if word in _MISPLACED_WORDS:
            raise self.error()
        if word is not None and _FUNCTION_NAME.fullmatch(word):
            after = self.pos + len(word)
            match = _EMPTY_PARENS.match(self.src, after)
            if match:
                self.pos = match.end()
                self.skip_newlines()
                self.parse_command()
                return
        self.parse_simple_command()

    def parse_group(self, name: str) -> None:
        start = self.pos
        seq = self.open_node()
        self.pos += 1
        if self.parse_list(frozenset({")"})) == 0 or self.peek() != ")":
            raise self.error()
        self.pos += 1
        self.record(seq, name, start, self.pos)

    def parse_compound(self, word: str) -> None:
        start = self.pos
        if word == "{":
            self.pos += 1
            if self.parse_list(frozenset({"}"})) == 0:
                raise self.error()
            self.expect_word("}")
        elif word == "[[":
            seq = self.open_node()
            self.pos += 2
            self.parse_test_expression()
            self.record(seq, "[[", start, self.pos)
        elif word == "if":
            self.pos += 2
            self.parse_clause("then")
            while True:
                self.parse_list(frozenset({"elif", "else", "fi"}))
                if self.at_word("elif"):
                    self.pos += 4
                    self.parse_clause("then")
                    continue
                if self.at_word("else"):
                    self.pos += 4
                    self.parse_list(frozenset({"fi"}))
                self.expect_word("fi")
                return
        elif word in ("while", "until"):
            self.pos += len(word)
            self.parse_clause("do")
            self.parse_list(frozenset({"done"}))
            self.expect_word("done")
        elif word in ("for", "select"):
            self.pos += len(word)
            self.parse_for_header()
            self.expect_word("do")
            self.parse_list(frozenset({"done"}))
            self.expect_word("done")
        elif word == "case":
            self.pos += 4
            self.parse_case()
        else:  # function NAME [()] BODY
            self.pos += len(word)
            self.skip_blanks()
            self.parse_word()
            self.skip_blanks()
            match = _EMPTY_PARENS.match(self.src, self.pos)
            if match:
                self.pos = match.end()
            self.skip_newlines()
            self.parse_command()

    def parse_clause(self, closer: str) -> None:
        if self.parse_list(frozenset({closer})) == 0:
            raise self.error()
        self.expect_word(closer)

    def parse_for_header(self) -> None:
        self.skip_blanks()
        if self.starts("(("):
            self.pos += 2
            self.scan_arithmetic()
        else:
            self.parse_word()
            self.skip_newlines()
            if self.at_word("in"):
                self.pos += 2
                while True:
                    self.skip_blanks()
                    if self.at_command_end():
                        break
                    self.parse_word()
        self.skip_blanks()
        if self.peek() == ";":
            self.pos += 1
        self.skip_newlines()

    def parse_case(self) -> None:
        self.skip_blanks()
        self.parse_word()
        self.expect_word("in")
        while True:
            self.skip_newlines()
            if self.at_word("esac"):
                self.pos += 4
                return
            if self.peek() == "(":
                self.pos += 1
            while True:
                self.skip_blanks()
                self.parse_word()
                self.skip_blanks()
                if self.peek() == "|":
                    self.pos += 1
                    continue
                break
            if self.peek() != ")":
                raise self.error()
            self.pos += 1
            self.parse_list(frozenset({";;", "esac"}))
            self.skip_blanks()
            for terminator in (";;&", ";;", ";&"):
                if self.starts(terminator):
                    self.pos += len(terminator)
                    break
            else:
                if not self.at_word("esac"):
                    raise self.error()

    def parse_test_expression(self) -> None:
        while True:
            self.skip_newlines()
            if self.pos >= self.n:
                raise self.error()
            if self.at_word("]]"):
                self.pos += 2
                return
            if self.starts("&&") or self.starts("||"):
                self.pos += 2
            elif self.peek() in "()!<>|&;":
                self.pos += 1
            else:
                self.parse_word()

    def parse_redirects(self) -> None:
        while True:
            self.skip_blanks()
            found = self.redirect_at()
            if found is None:
                return
            self.parse_redirect(*found)

    def parse_simple_command(self) -> None:
        start = self.pos
        seq = self.open_node()
        end = self.pos
        consumed = False
        while True:  # prefix: assignments and redirections
            self.skip_blanks()
            found = self.redirect_at()
            if found is not None:
                self.parse_redirect(*found)
            elif _ASSIGNMENT.match(self.src, self.pos) and not self.at_command_end():
                self.parse_assignment()
            else:
                break
            consumed = True
            end = self.pos
        if self.at_command_end() or self.peek() == "(":
            if not consumed:
                raise self.error()
            return  # assignments / redirections only: no command node
        name_start = self.pos
        self.parse_word()
        name = self.src[name_start : self.pos]
        end = self.pos
        while True:
            self.skip_blanks()
            if self.at_command_end():
                break
            found = self.redirect_at()
            if found is not None:
                if found[1] != "herestring":
                    break
                self.parse_redirect(*found)
            elif self.peek() == "(":
                raise self.error()
            else:
                self.parse_word()
            end = self.pos
        self.record(seq, _normalize_command_name(name), start, end)
        self.parse_redirects()

    def parse_assignment(self) -> None:
        match = _ASSIGNMENT.match(self.src, self.pos)
        assert match is not None
        self.pos = match.end()
        if self.peek() == "(":  # array value
            self.pos += 1
            while True:
                self.skip_newlines()
                if self.peek() == ")":
                    self.pos += 1
                    return
                if self.pos >= self.n:
                    raise self.error()
                self.parse_word()
        elif self.peek() not in _WORD_BREAK or self.peek() in ("<", ">"):
            if self.peek() and self.peek() not in " \t\n;&|)":
                self.parse_word()

    def parse_redirect(self, length: int, kind: str) -> None:
        start = self.pos
        seq = self.open_node()
        self.pos += length
        self.has_redirection = True
        self.skip_blanks()
        if self.at_command_end() or self.redirect_at() is not None:
            raise self.error()
        if kind == "heredoc":
            word_start = self.pos
            self.parse_word()
            raw = self.src[word_start : self.pos]
            quoted = any(q in raw for q in "'\"\\")
            delimiter = re.sub(r"\\(.)|['\"]", lambda m: m.group(1) or "", raw)
            self.heredocs.append((delimiter, self.src[start + length - 1] == "-", not quoted))
            self.record(seq, "heredoc (<<)", start, self.pos)
            return
        self.parse_word()
        if kind == "herestring":
            self.record(seq, "herestring (<<<)", start, self.pos)
            return
        while True:  # a file redirection takes every following word as a destination
            self.skip_blanks()
            if self.at_command_end() or self.redirect_at() is not None or self.peek() == "(":
                break
            self.parse_word()
        name = "redirection (<)" if kind == "file<" else "redirection (>)"
        self.record(seq, name, start, self.pos)

    def read_heredoc_bodies(self) -> None:
        pending, self.heredocs = self.heredocs, []
        for delimiter, strip_tabs, expand in pending:
            while self.pos < self.n:
                line_end = self.src.find("\n", self.pos)
                if line_end < 0:
                    line_end = self.n
                line = self.src[self.pos : line_end]
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    self.pos = min(line_end + 1, self.n)
                    break
                if expand:
                    self.scan_heredoc_line(line_end)
                if self.pos <= line_end:
                    self.pos = min(line_end + 1, self.n)

    def scan_heredoc_line(self, line_end: int) -> None:
        while self.pos < line_end:
            c = self.src[self.pos]
            if c == "\\":
                self.pos += 2
            elif c == "$":
                self.parse_dollar()
            elif c == "`":
                self.parse_backtick()
            else:
                self.pos += 1

    # -- words ----------------------------------------------------------------------------

    def parse_word(self) -> None:
        start = self.pos
        if self.peek() in ("<", ">") and self.peek(1) == "(":
            self.parse_process_substitution()
        while self.pos < self.n:
            c = self.src[self.pos]
            if c in _WORD_BREAK:
                break
            if c == "\\":
                self.pos += 2
            elif c == "'":
                end = self.src.find("'", self.pos + 1)
                if end < 0 or end >= self.n:
                    raise self.error()
                self.pos = end + 1
            elif c == '"':
                self.parse_double_quoted()
            elif c == "`":
                self.parse_backtick()
            elif c == "$":
                self.parse_dollar()
            else:
                self.pos += 1
        self.pos = min(self.pos, self.n)
        if self.pos == start:
            raise self.error()

    def parse_double_quoted(self) -> None:
        self.pos += 1
        while True:
            if self.pos >= self.n:
                raise self.error()
            c = self.src[self.pos]
            if c == '"':
                self.pos += 1
                return
            if c == "\\":
                self.pos += 2
            elif c == "`":
                self.parse_backtick()
            elif c == "$" and self.peek(1) in ("(", "{"):
                self.parse_dollar()
            else:
                self.pos += 1

    def parse_dollar(self) -> None:
        if self.starts("$(("):
            self.pos += 3
            self.scan_arithmetic()
        elif self.starts("$("):
            start = self.pos
            seq = self.open_node()
            self.pos += 2
            self.parse_list(frozenset({")"}))
            if self.peek() != ")":
                raise self.error()
            self.pos += 1
            self.record(seq, "command substitution", start, self.pos)
        elif self.starts("${"):
            self.pos += 2
            self.scan_expansion()
        elif self.starts("$'"):
            self.pos += 2
            while True:
                if self.pos >= self.n:
                    raise self.error()
                c = self.src[self.pos]
                if c == "'":
                    self.pos += 1
                    return
                self.pos += 2 if c == "\\" else 1
        elif self.starts('$"'):
            self.pos += 1
            self.parse_double_quoted()
        else:
            self.pos += 1

    def scan_expansion(self) -> None:
        content_start = self.pos
        while True:
            if self.pos >= self.n:
                raise self.error()
            c = self.src[self.pos]
            if c == "}":
                if _PROMPT_TRANSFORM.search(self.src, content_start, self.pos):
                    self.prompt_transform = True
                self.pos += 1
                return
            if c == "\\":
                self.pos += 2
            elif c == "'":
                end = self.src.find("'", self.pos + 1)
                if end < 0 or end >= self.n:
                    raise self.error()
                self.pos = end + 1
            elif c == '"':
                self.parse_double_quoted()
            elif c == "`":
                self.parse_backtick()
            elif c == "$":
                self.parse_dollar()
            else:
                self.pos += 1

    def scan_arithmetic(self) -> None:
        """After ``((`` / ``$((``: up to the matching ``))``."""
        depth = 0
        while True:
            if self.pos >= self.n:
                raise self.error()
            c = self.src[self.pos]
            if c == "(":
                depth += 1
                self.pos += 1
            elif c == ")":
                if depth == 0:
                    if self.peek(1) != ")":
                        raise self.error()
                    self.pos += 2
                    return
                depth -= 1
                self.pos += 1
            elif c == "\\":
                self.pos += 2
            elif c == "$":
                self.parse_dollar()
            elif c == "`":
                self.parse_backtick()
            elif c == '"':
                self.parse_double_quoted()
            else:
                self.pos += 1

    def parse_backtick(self) -> None:
        start = self.pos
        seq = self.open_node()
        j = self.pos + 1
        while j < self.n and self.src[j] != "`":
            j += 2 if self.src[j] == "\\" else 1
        if j >= self.n:
            raise self.error()
        saved_end = self.n
        self.n = j
        self.pos = start + 1
        try:
            self.parse_list(frozenset())
            if self.pos != j:
                raise self.error()
        finally:
            self.n = saved_end
        self.pos = j + 1
        self.record(seq, "backtick substitution", start, self.pos)

    def parse_process_substitution(self) -> None:
        start = self.pos
        seq = self.open_node()
        self.pos += 2
        self.parse_list(frozenset({")"}))
        if self.peek() != ")":
            raise self.error()
        self.pos += 1
        self.record(seq, "process substitution", start, self.pos)

    def parse_program(self) -> None:
        self.parse_list(frozenset())
        self.skip_newlines()
        if self.pos < self.n:
            raise self.error()


def _normalize_command_name(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    return raw.strip()


def parse_shell_command(command: str) -> _ShellParse | None:
    """Sub-commands of a bash command line, or None when it cannot be parsed at all.

    ``details`` are sorted by position; ``has_error`` is set for syntax errors, for a
    line with no command node (e.g. only assignments) and for ``${var@P}``.
    """
    if not command.strip():
        return None
    parser = _BashParser(command)
    error = False
    try:
        parser.parse_program()
    except _ShellSyntaxError:
        error = True
    except RecursionError:
        return None
    ordered = sorted(parser.details, key=lambda d: (d[0], d[1]))
    details = tuple(_ShellDetail(name=d[2], text=d[3], start=d[0]) for d in ordered)
    return _ShellParse(
        details=details,
        has_error=error or not details or parser.prompt_transform,
        has_redirection=parser.has_redirection,
    )


def has_redirection(command: str) -> bool:
    """Whether the command line redirects input/output (quoted ``>`` does not count)."""
    if not re.search("[<>]", command):
        return False
    parsed = parse_shell_command(command)
    if parsed is None:
        return True
    if parsed.has_error and not parsed.has_redirection:
        return True
    return parsed.has_redirection


def split_commands(command: str) -> list[str]:
    """The sub-command texts of a parseable command line ([] when it does not parse)."""
    parsed = parse_shell_command(command)
    if parsed is None or parsed.has_error:
        return []
    return [d.text for d in parsed.details if d.name not in _REDIRECTION_NAMES and d.text]


_QUOTE_OPS: Final = ("||", "&&", ";;", "|&", "<(", "<<<", ">>", ">&", "<&", "&", ";", "(", ")")
_QUOTE_OPS_SHORT: Final = ("|", "<", ">")
_VARIABLE = re.compile(r"\$(?:\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*|[0-9*@#?$!-])")


def _shell_words(command: str) -> list[str]:
    """Split like the ``shell-quote`` package: operators are items, ``$VAR`` is empty."""
    items: list[str] = []
    i = 0
    n = len(command)
    while i < n:
        c = command[i]
        if c.isspace():
            i += 1
            continue
        op = next((o for o in (*_QUOTE_OPS, *_QUOTE_OPS_SHORT) if command.startswith(o, i)), None)
        if op is not None:
            items.append(op)
            i += len(op)
            continue
        if c == "#":
            items.append("")
            break
        buf: list[str] = []
        while i < n and not command[i].isspace() and command[i] not in "|&;()<>":
            ch = command[i]
            if ch == "'":
                end = command.find("'", i + 1)
                end = n if end < 0 else end
                buf.append(command[i + 1 : end])
                i = end + 1
            elif ch == '"':
                i += 1
                while i < n and command[i] != '"':
                    if command[i] == "\\" and i + 1 < n:
                        nxt = command[i + 1]
                        buf.append(nxt if nxt in '"\\$' else "\\" + nxt)
                        i += 2
                    elif (var := _VARIABLE.match(command, i)) is not None:
                        i = var.end()
                    else:
                        buf.append(command[i])
                        i += 1
                i += 1
            elif ch == "\\":
                if i + 1 < n:
                    buf.append(command[i + 1])
                i += 2
            elif (var := _VARIABLE.match(command, i)) is not None:
                i = var.end()
            else:
                buf.append(ch)
                i += 1
        items.append("".join(buf))
    return items


_GIT_PREDECESSORS: Final = frozenset({"sudo", "env", "time", "&&", "||", ";", "|", "&", "(", "\\n"})
_ENV_ASSIGNMENT = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*=")


def _basename(path: str) -> str:
    return posixpath.basename(path.rstrip("/")) if path.strip("/") else path


def _contains_git_command(args: Sequence[str]) -> bool:
    for index, arg in enumerate(args):
        trimmed = arg.strip()
        if not trimmed or _basename(trimmed).lower() not in ("git", "git.exe"):
            continue
        prev = index - 1
        while prev >= 0 and _ENV_ASSIGNMENT.match(args[prev]):
            prev -= 1
        if prev >= 0 and args[prev].lower() not in _GIT_PREDECESSORS:
            continue
        return True
    return False


_SAFE_COMMANDS: Final = frozenset(
    {
        "__read",
        "__write",
        "cat",
        "cd",
        "cut",
        "echo",
        "expr",
        "false",
        "grep",
        "head",
        "id",
        "ls",
        "nl",
        "paste",
        "pwd",
        "rev",
        "seq",
        "stat",
        "tail",
        "tr",
        "true",
        "uname",
        "uniq",
        "wc",
        "which",
        "whoami",
        "numfmt",
        "tac",
    }
)
_FIND_UNSAFE: Final = frozenset(
    {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls", "-fprint", "-fprint0", "-fprintf"}
)
_TRUSTED_BIN_PREFIXES: Final = (
    "/usr/bin",
    "/bin",
    "/usr/local/bin",
    "/opt/homebrew/bin",
    "/opt/homebrew/Cellar",
    "/usr/local/Cellar",
    "/usr/sbin",
    "/sbin",
    "/google/bin",
    "/google/src/cloud",
)


def _is_ripgrep(cmd: str) -> bool:
    return _basename(cmd) in ("rg", "rg.exe")


def _ripgrep_unsafe(args: Sequence[str]) -> bool:
    for arg in args:
        if arg in ("--search-zip", "-z"):
            return True
        for opt in ("--pre", "--hostname-bin"):
            if arg == opt or arg.startswith(opt + "="):
                return True
    return False


def _base64_unsafe(args: Sequence[str]) -> bool:
    return any(
        a in ("-o", "--output") or a.startswith("--output=") or (a.startswith("-o") and a != "-o")
        for a in args[1:]
    )


def _git_config_override(args: Sequence[str]) -> bool:
    return any(
        a in ("-c", "--config-env")
        or (a.startswith("-c") and len(a) > 2)
        or a.startswith("--config-env=")
        for a in args
    )


_GIT_OPTS_WITH_VALUE: Final = (
    "-C",
    "-c",
    "--config-env",
    "--exec-path",
    "--git-dir",
    "--namespace",
    "--super-prefix",
    "--work-tree",
)


def _git_subcommand(args: Sequence[str]) -> tuple[int, str | None]:
    skip_next = False
    for idx in range(1, len(args)):
        if skip_next:
            skip_next = False
            continue
        arg = args[idx]
        if any(arg.startswith(o + "=") for o in _GIT_OPTS_WITH_VALUE[2:]) or (
            (arg.startswith("-C") or arg.startswith("-c")) and len(arg) > 2
        ):
            continue
        if arg in _GIT_OPTS_WITH_VALUE:
            skip_next = True
            continue
        if arg == "--" or arg.startswith("-"):
            continue
        if arg in ("status", "log", "diff", "show", "branch"):
            return idx, arg
        return -1, None
    return -1, None


def _git_args_read_only(args: Sequence[str]) -> bool:
    unsafe = ("--output", "--ext-diff", "--textconv", "--exec", "--paginate")
    return not any(
        a in unsafe or a.startswith("--output=") or a.startswith("--exec=") for a in args
    )


_GIT_BRANCH_READ_FLAGS: Final = frozenset(
    {"--list", "-l", "--show-current", "-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose"}
)


def _git_branch_read_only(args: Sequence[str]) -> bool:
    if not args:
        return True
    seen = False
    for arg in args:
        if arg in _GIT_BRANCH_READ_FLAGS or arg.startswith("--format="):
            seen = True
        else:
            return False
    return seen


def _git_read_only(args: Sequence[str]) -> bool | None:
    """True/False for a recognised read-only-capable git subcommand, None otherwise."""
    idx, sub = _git_subcommand(args)
    if sub is None:
        return None
    rest = args[idx + 1 :]
    if sub == "branch":
        return _git_args_read_only(rest) and _git_branch_read_only(rest)
    return _git_args_read_only(rest)


def _sed_print_arg(arg: str | None) -> bool:
    if not arg or not arg.endswith("p"):
        return False
    parts = arg[:-1].split(",")
    return 1 <= len(parts) <= 2 and all(p and p.isascii() and p.isdigit() for p in parts)


def _safe_to_exec(args: Sequence[str]) -> bool:
    if not args:
        return False
    cmd = args[0]
    if cmd in _SAFE_COMMANDS:
        return True
    if cmd == "base64":
        return not _base64_unsafe(args)
    if cmd == "find":
        return not any(a in _FIND_UNSAFE for a in args)
    if _is_ripgrep(cmd):
        trusted = cmd.startswith("/") and any(
            cmd == p or cmd.startswith(p + "/") for p in _TRUSTED_BIN_PREFIXES
        )
        return trusted and not _ripgrep_unsafe(args)
    if cmd == "git":
        if _git_config_override(args):
            return False
        return _git_read_only(args) is True
    if cmd == "sed":
        return len(args) <= 4 and len(args) > 2 and args[1] == "-n" and _sed_print_arg(args[2])
    return False


def is_known_safe_command(args: Sequence[str]) -> bool:
    """Read-only commands that need no confirmation (cat, ls, git status, sed -n 5p...)."""
    if not args:
        return False
    normalized = ["bash" if a == "zsh" else a for a in args]
    if _safe_to_exec(normalized):
        return True
    if len(normalized) == 3 and normalized[0] == "bash" and normalized[1] in ("-lc", "-c"):
        script = normalized[2]
        if re.search("[()<>]", script):
            return False
        commands = split_commands(script)
        if not commands:
            return False
        for sub in commands:
            words = _shell_words(sub.strip())
            if words and not _safe_to_exec(words):
                return False
        return True
    return False


def is_dangerous_command(args: Sequence[str]) -> bool:
    """rm -f/-rf/-fr, sudo of those, find -exec/-delete, rg --pre, git -c, mutating git."""
    if not args:
        return False
    cmd = args[0]
    if cmd == "rm":
        return len(args) > 1 and args[1] in ("-f", "-rf", "-fr")
    if cmd == "sudo":
        return is_dangerous_command(args[1:])
    if cmd == "find":
        return any(a in _FIND_UNSAFE for a in args)
    if _is_ripgrep(cmd):
        return _ripgrep_unsafe(args)
    if cmd == "git":
        if _git_config_override(args):
            return True
        read_only = _git_read_only(args)
        return read_only is False
    if cmd == "base64":
        return _base64_unsafe(args)
    return False


# ---------------------------------------------------------------------------------------
# Rules and verdicts


@attrs.frozen(kw_only=True)
class Rule:
    """One policy rule. ``priority`` is the effective value (tier + priority/1000)."""

    tool_name: str
    decision: Decision
    priority: float
    modes: tuple[str, ...] | None = None
    """Approval modes (Gemini's spelling: default, autoEdit, yolo, plan); None = all."""
    interactive: bool | None = None
    """True: interactive runs only; False: headless only; None: both."""
    args_pattern: re.Pattern[str] | None = None
    args_pattern_source: str | None = None
    """The JavaScript source of ``args_pattern`` (as written / built)."""
    allow_redirection: bool = False
    deny_message: str | None = None
    source: str = ""
    """``<file>:<line>`` for TOML rules, ``settings: tools.core`` etc. otherwise."""
    subagent: str | None = None
    mcp_name: str | None = None
    tool_annotations: tuple[tuple[str, Any], ...] | None = None
    name: str | None = None


@attrs.frozen(kw_only=True)
class PolicyVerdict:
    decision: Decision
    rule: Rule | None = None
    deny_message: str | None = None


class PolicyFileError(Exception):
    """A policy file that cannot be used: ``str()`` is ``<path>:<line>: <message>``, or
    ``<path>: <message>`` when the problem is the path itself (``line`` 0)."""

    def __init__(self, path: Path | str, line: int, message: str) -> None:
        self.path = Path(path)
        self.line = line
        self.message = message
        super().__init__(f"{path}:{line}: {message}" if line else f"{path}: {message}")


def _verdict(decision: Decision, rule: Rule | None) -> PolicyVerdict:
    deny_message = rule.deny_message if decision == "deny" and rule is not None else None
    return PolicyVerdict(decision=decision, rule=rule, deny_message=deny_message)


def _is_mcp_name(name: str) -> bool:
    return name.startswith(_MCP_PREFIX)


def _mcp_server_of(name: str) -> str | None:
    if not _is_mcp_name(name):
        return None
    match = re.fullmatch(r"([^_]+)_(.+)", name[len(_MCP_PREFIX) :], re.DOTALL)
    return match.group(1) if match else None


def _format_mcp_name(server: str, tool: str | None) -> str:
    if server == "*" and tool in (None, "*"):
        return f"{_MCP_PREFIX}*"
    if server == "*":
        return f"{_MCP_PREFIX}*_{tool}"
    if tool in (None, "*"):
        return f"{_MCP_PREFIX}{server}_*"
    return f"{_MCP_PREFIX}{server}_{tool}"


def _tool_aliases(name: str) -> list[str]:
    aliases = [name]
    canonical = _LEGACY_ALIASES.get(name, name)
    if canonical not in aliases:
        aliases.append(canonical)
    for legacy, current in _LEGACY_ALIASES.items():
        if current == canonical and legacy not in aliases:
            aliases.append(legacy)
    return aliases


def _matches_wildcard(pattern: str, tool_name: str, server: str | None) -> bool:
    if pattern == "*":
        return True
    if pattern == f"{_MCP_PREFIX}*":
        return server is not None
    if pattern.startswith(_MCP_PREFIX) and pattern.endswith("_*"):
        expected = pattern[len(_MCP_PREFIX) : -2]
        if server is None or server != expected:
            return False
        return tool_name.startswith(f"{_MCP_PREFIX}{expected}_")
    return tool_name == pattern


def _rule_matches(
    rule: Rule,
    tool_name: str,
    stringified_args: str | None,
    server: str | None,
    mode: str,
    non_interactive: bool,
    annotations: Mapping[str, Any] | None,
    subagent: str | None,
    *,
    ignore_args: bool = False,
) -> bool:
    if rule.modes and mode not in rule.modes:
        return False
    if rule.subagent is not None and rule.subagent != subagent:
        return False
    if rule.mcp_name is not None:
        if rule.mcp_name == "*":
            if server is None:
                return False
        elif server != rule.mcp_name:
            return False
    if rule.tool_name != "*":
        if "*" in rule.tool_name:
            if not tool_name or not _matches_wildcard(rule.tool_name, tool_name, server):
                return False
        elif tool_name != rule.tool_name:
            mcp_match = False
            if server and tool_name:
                if (
                    rule.mcp_name
                    and not _is_mcp_name(rule.tool_name)
                    and tool_name == _format_mcp_name(rule.mcp_name, rule.tool_name)
                ):
                    mcp_match = True
                if (
                    not mcp_match
                    and _is_mcp_name(rule.tool_name)
                    and rule.tool_name == _format_mcp_name(server, tool_name)
                ):
                    mcp_match = True
            if not mcp_match:
                return False
    if rule.tool_annotations is not None:
        if annotations is None:
            return False
        for key, value in rule.tool_annotations:
            if key not in annotations or annotations[key] != value:
                return False
    if rule.args_pattern is not None and not ignore_args:
        if stringified_args is None or rule.args_pattern.search(stringified_args) is None:
            return False
    if rule.interactive is not None:
        if rule.interactive and non_interactive:
            return False
        if not rule.interactive and not non_interactive:
            return False
    return True


def _is_always_allow(rule: Rule) -> bool:
    return js_round((rule.priority % 1) * 1000) == _ALWAYS_ALLOW_FRACTION


# ---------------------------------------------------------------------------------------
# TOML policy files

_RULE_HEADER = re.compile(r"^[ \t]*\[\[[ \t]*(?:rule|\"rule\"|'rule')\s*\]\]", re.MULTILINE)
_CHECKER_HEADER = re.compile(
    r"^[ \t]*\[\[[ \t]*(?:safety_checker|\"safety_checker\"|'safety_checker')\s*\]\]", re.MULTILINE
)
_TOML_LOCATION = re.compile(r"\(at line (\d+), column \d+\)|\(at end of document\)")
_TIER_NAMES: Final[Mapping[int, str]] = {
    1: "default",
    2: "extension",
    3: "workspace",
    4: "user",
    5: "admin",
}


def _header_lines(pattern: re.Pattern[str], text: str) -> list[int]:
    return [text.count("\n", 0, m.start()) + 1 for m in pattern.finditer(text)]


def _line_of_key(text: str, key: str) -> int:
    match = re.search(rf"^[ \t]*{key}[ \t]*=", text, re.MULTILINE)
    return text.count("\n", 0, match.start()) + 1 if match else 1


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _validate_rule(raw: Any) -> str | None:
    """Gemini's schema for one ``[[rule]]`` table; the first problem, or None."""
    if not isinstance(raw, dict):
        return "each rule must be a table"
    if "toolName" not in raw:
        return 'field "toolName": required (use "*" for all tools)'
    if not isinstance(raw["toolName"], str) and not _is_str_list(raw["toolName"]):
        return 'field "toolName": must be a string or an array of strings'
    for key in ("subagent", "mcpName", "argsPattern", "commandRegex", "denyMessage", "deny_message"):
        if key in raw and not isinstance(raw[key], str):
            return f'field "{key}": must be a string'
    if "commandPrefix" in raw and not (
        isinstance(raw["commandPrefix"], str) or _is_str_list(raw["commandPrefix"])
    ):
        return 'field "commandPrefix": must be a string or an array of strings'
    if "decision" not in raw:
        return 'field "decision": required (allow, deny or ask_user)'
    if raw["decision"] not in DECISIONS:
        return f'field "decision": must be allow, deny or ask_user, not {raw["decision"]!r}'
    if "priority" not in raw:
        return 'field "priority": priority is required'
    priority = raw["priority"]
    if isinstance(priority, bool) or not isinstance(priority, int | float):
        return 'field "priority": priority must be a number'
    if isinstance(priority, float) and not priority.is_integer():
        return 'field "priority": priority must be an integer'
    if priority < 0:
        return 'field "priority": priority must be >= 0'
    if priority > 999:
        return (
            'field "priority": priority must be <= 999 to prevent tier overflow. '
            "Priorities >= 1000 would jump to the next tier."
        )
    if "modes" in raw:
        modes = raw["modes"]
        if not isinstance(modes, list):
            return 'field "modes": must be an array'
        for mode in modes:
            if mode not in APPROVAL_MODES:
                hint = ' (write "autoEdit")' if mode == "auto_edit" else ""
                return (
                    f'field "modes": {mode!r} is not one of default, autoEdit, yolo, plan{hint}'
                )
    for key in ("interactive", "allowRedirection", "allow_redirection"):
        if key in raw and not isinstance(raw[key], bool):
            return f'field "{key}": must be a boolean'
    if "toolAnnotations" in raw and not isinstance(raw["toolAnnotations"], dict):
        return 'field "toolAnnotations": must be a table'
    return None


def _validate_checker(raw: Any) -> str | None:
    if not isinstance(raw, dict):
        return "each safety_checker must be a table"
    if "toolName" not in raw or not (
        isinstance(raw["toolName"], str) or _is_str_list(raw["toolName"])
    ):
        return 'field "toolName": required (a string or an array of strings)'
    checker = raw.get("checker")
    if not isinstance(checker, dict) or checker.get("type") not in ("in-process", "external"):
        return 'field "checker": must be a table with type "in-process" or "external"'
    if not isinstance(checker.get("name"), str):
        return 'field "checker.name": must be a string'
    return None


def _is_valid_tool_name(name: str, known: Collection[str]) -> bool:
    if name in known or name in BUILTIN_TOOL_NAMES or name in _LEGACY_ALIASES:
        return True
    if name.startswith(_DISCOVERED_PREFIX) or name == "*":
        return True
    if _is_mcp_name(name):
        if name == f"{_MCP_PREFIX}*":
            return True
        if name.startswith(f"{_MCP_PREFIX}_"):
            return False
        match = re.fullmatch(r"([^_]+)_(.+)", name[len(_MCP_PREFIX) :], re.DOTALL)
        if not match:
            return False
        server, tool = match.groups()
        slug = re.compile(r"[a-z0-9_.:-]+", re.IGNORECASE)
        if not slug.fullmatch(server):
            return False
        if tool == "*":
            return True
        if re.fullmatch("_*", tool):
            return False
        return slug.fullmatch(tool) is not None
    return False


def _tool_name_warning(name: str, known: Collection[str]) -> str | None:
    if "__" in name:
        return (
            f'tool name "{name}": the "__" syntax for MCP tools is deprecated; use '
            'mcpName = "..." or the mcp_<server>_<tool> form'
        )
    if _is_valid_tool_name(name, known):
        return None
    candidates = list(dict.fromkeys([*BUILTIN_TOOL_NAMES, *known]))
    if min(_levenshtein(name, c) for c in candidates) > 3:
        return None  # far from every known name: probably a dynamic tool, not a typo
    return f'unrecognized tool name "{name}".{_tool_suggestion(name, candidates)}'


def load_policy_file(
    path: Path | str,
    *,
    tier: int = USER_POLICY_TIER,
    known_tools: Collection[str] = (),
) -> tuple[list[Rule], list[str]]:
    """Read one policy TOML file: its rules (priorities already tiered) and warnings.

    Raises :class:`PolicyFileError` (file and line) for unreadable files, TOML syntax
    errors, schema errors (Gemini rejects the whole file then) and empty tool names.
    Warnings (the rule is still loaded unless said otherwise): tool names that look like
    typos of known tools, ``commandPrefix``/``commandRegex`` misuse, invalid or unsafe
    regexes (that rule is dropped), safety checkers (not supported: ignored).
    """
    path = Path(path)
    try:
        info = path.stat()
    except OSError as exc:
        raise PolicyFileError(path, 1, f"cannot read policy file: {exc}") from exc
    # ctime and the inode too: a same-size copy that keeps the old mtime (cp -p) is new.
    key = (
        str(path),
        info.st_dev,
        info.st_ino,
        info.st_mtime_ns,
        info.st_ctime_ns,
        info.st_size,
        tier,
        tuple(known_tools),
    )
    cached = _PARSED_POLICY_FILES.get(key)
    if cached is None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PolicyFileError(path, 1, f"cannot read policy file: {exc}") from exc
        cached = _parse_policy_text(text, path, tier=tier, known_tools=known_tools)
        if len(_PARSED_POLICY_FILES) >= _PARSED_POLICY_FILES_MAX:
            del _PARSED_POLICY_FILES[next(iter(_PARSED_POLICY_FILES))]
        _PARSED_POLICY_FILES[key] = cached
    rules, warnings_out = cached
    return list(rules), list(warnings_out)


_PARSED_POLICY_FILES: dict[tuple[Any, ...], tuple[list[Rule], list[str]]] = {}
"""Parsed policy files by (path, mtime, size, tier, known tools): a process that builds
many engines (the daemon starts a session per request, each with the default policies)
parses each file once. Rules are frozen, so engines can share them; a file that changes
gets a new mtime or size and is parsed again. Files that fail to parse are not kept."""
_PARSED_POLICY_FILES_MAX = 256


def _parse_policy_text(
    text: str, path: Path, *, tier: int, known_tools: Collection[str]
) -> tuple[list[Rule], list[str]]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        location = _TOML_LOCATION.search(message)
        if location and location.group(1):
            line = int(location.group(1))
        else:
            line = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
        detail = _TOML_LOCATION.sub("", message).strip()
        raise PolicyFileError(path, line, f"TOML parsing failed: {detail}") from exc

    raw_rules = data.get("rule", [])
    if not isinstance(raw_rules, list):
        raise PolicyFileError(path, _line_of_key(text, "rule"), '"rule" must be [[rule]] tables')
    raw_checkers = data.get("safety_checker", [])
    if not isinstance(raw_checkers, list):
        raise PolicyFileError(
            path, _line_of_key(text, "safety_checker"), '"safety_checker" must be tables'
        )
    rule_lines = _header_lines(_RULE_HEADER, text)
    checker_lines = _header_lines(_CHECKER_HEADER, text)

    def rule_line(index: int) -> int:
        return rule_lines[index] if index < len(rule_lines) else _line_of_key(text, "rule")

    for index, raw in enumerate(raw_rules):
        problem = _validate_rule(raw)
        if problem:
            raise PolicyFileError(path, rule_line(index), f"rule #{index + 1}: {problem}")
    for index, raw in enumerate(raw_checkers):
        problem = _validate_checker(raw)
        if problem:
            line = checker_lines[index] if index < len(checker_lines) else 1
            raise PolicyFileError(path, line, f"safety_checker #{index + 1}: {problem}")

    warnings_out: list[str] = []
    rules: list[Rule] = []
    for index, raw in enumerate(raw_rules):
        line = rule_line(index)
        where = f"{path}:{line}"
        tool_names: list[str] = (
            [raw["toolName"]] if isinstance(raw["toolName"], str) else list(raw["toolName"])
        )
        if any(name == "" for name in tool_names):
            raise PolicyFileError(
                path, line, f'rule #{index + 1}: toolName cannot be empty (use "*" for all tools)'
            )
        has_prefix = "commandPrefix" in raw
        has_regex = "commandRegex" in raw
        if has_prefix or has_regex:
            if raw["toolName"] != _SHELL_TOOL_NAME:
                warnings_out.append(
                    f"{where}: rule #{index + 1}: commandPrefix and commandRegex can only be "
                    'used with toolName = "run_shell_command"'
                )
            elif "argsPattern" in raw:
                warnings_out.append(
                    f"{where}: rule #{index + 1}: commandPrefix/commandRegex and argsPattern "
                    "are mutually exclusive"
                )
            elif has_prefix and has_regex:
                warnings_out.append(
                    f"{where}: rule #{index + 1}: commandPrefix and commandRegex are mutually "
                    "exclusive"
                )
        for name in tool_names:
            warning = _tool_name_warning(name, known_tools)
            if warning:
                warnings_out.append(f"{where}: rule #{index + 1}: {warning}")

        patterns = build_args_patterns(
            raw.get("argsPattern"), raw.get("commandPrefix"), raw.get("commandRegex")
        )
        modes = tuple(raw["modes"]) if "modes" in raw else None
        annotations = raw.get("toolAnnotations")
        allow_redirection = raw.get("allowRedirection", raw.get("allow_redirection"))
        deny_message = raw.get("denyMessage", raw.get("deny_message"))
        mcp_name = raw.get("mcpName")
        for pattern_source in patterns:
            compiled: re.Pattern[str] | None = None
            if pattern_source:
                try:
                    compiled = compile_js_regex(pattern_source)
                except (re.error, RecursionError, OverflowError) as exc:
                    warnings_out.append(
                        f"{where}: rule #{index + 1}: invalid regex {pattern_source!r} ({exc}); "
                        "rule ignored"
                    )
                    continue
                if not is_safe_regexp(pattern_source):
                    warnings_out.append(
                        f"{where}: rule #{index + 1}: unsafe regex {pattern_source!r} (nested "
                        "quantifiers or too long); rule ignored"
                    )
                    continue
            for name in tool_names:
                rules.append(
                    Rule(
                        tool_name=_format_mcp_name(mcp_name, name) if mcp_name else name,
                        decision=raw["decision"],
                        priority=tier + raw["priority"] / 1000,
                        modes=modes,
                        interactive=raw.get("interactive"),
                        args_pattern=compiled,
                        args_pattern_source=pattern_source if compiled is not None else None,
                        allow_redirection=bool(allow_redirection),
                        deny_message=deny_message,
                        source=where,
                        subagent=raw.get("subagent"),
                        mcp_name=mcp_name,
                        tool_annotations=(
                            tuple(annotations.items()) if isinstance(annotations, dict) else None
                        ),
                        name=raw.get("name") if isinstance(raw.get("name"), str) else None,
                    )
                )
    for index, _raw in enumerate(raw_checkers):
        line = checker_lines[index] if index < len(checker_lines) else 1
        warnings_out.append(
            f"{path}:{line}: safety_checker #{index + 1}: safety checkers are not supported; "
            "ignored"
        )
    return rules, warnings_out


def _named_path_problem(location: Path) -> str | None:
    """Why a path the user named (``--policy``, ``policyPaths``, ``adminPolicyPaths``)
    holds no policy: Gemini CLI skips such a path without a word."""
    if location.is_dir():
        return None
    if not location.exists():
        return "no such file or directory"
    if not (location.is_file() and location.name.endswith(".toml")):
        return "not a .toml file or a directory of them"
    return None


def _policy_files(location: Path) -> list[Path]:
    """A directory's ``*.toml`` files (sorted), a single ``.toml`` file, or nothing."""
    if location.is_dir():
        return sorted(p for p in location.iterdir() if p.suffix == ".toml" and p.is_file())
    if location.is_file() and location.name.endswith(".toml"):
        return [location]
    return []


# ---------------------------------------------------------------------------------------
# Settings-derived rules


def _str_list(value: Any) -> list[str]:
    if isinstance(value, list | tuple):
        return [v for v in value if isinstance(v, str)]
    return []


def _get(mapping: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


_LEGACY_TOOL_ARGS = re.compile(r"([a-zA-Z0-9_-]+)\(([^\n\r\u2028\u2029]*)\)")


def _tool_list_rules(
    tools: Sequence[str],
    priority: float,
    source: str,
    modes: tuple[str, ...] | None,
    narrowing_deny: bool,
) -> list[Rule]:
    rules: list[Rule] = []
    narrowed: list[str] = []
    for tool in tools:
        match = _LEGACY_TOOL_ARGS.fullmatch(tool)
        if match:
            raw_name, args = match.groups()
            name = _SHELL_TOOL_NAME if raw_name in SHELL_TOOL_NAMES else raw_name
            if name == _SHELL_TOOL_NAME:
                if name not in narrowed:
                    narrowed.append(name)
                for pattern in build_args_patterns(None, args, None):
                    if pattern:
                        rules.append(
                            Rule(
                                tool_name=name,
                                decision="allow",
                                priority=priority,
                                modes=modes,
                                args_pattern=compile_js_regex(pattern),
                                args_pattern_source=pattern,
                                source=source,
                            )
                        )
            else:  # arguments only ever narrowed shell commands: allow the whole tool
                rules.append(
                    Rule(
                        tool_name=name,
                        decision="allow",
                        priority=priority,
                        modes=modes,
                        source=source,
                    )
                )
        else:
            name = _SHELL_TOOL_NAME if tool in SHELL_TOOL_NAMES else tool
            rules.append(
                Rule(tool_name=name, decision="allow", priority=priority, modes=modes, source=source)
            )
    if narrowing_deny:
        for name in narrowed:
            rules.append(
                Rule(
                    tool_name=name,
                    decision="deny",
                    priority=priority - 0.01,
                    modes=modes,
                    source=f"{source} (narrowing)",
                )
            )
    return rules


def _settings_rules(
    settings: Mapping[str, Any],
    *,
    allowed_tools: Sequence[str],
    excluded_tools: Sequence[str],
    interactive: bool,
) -> list[Rule]:
    rules: list[Rule] = []
    mcp = _get(settings, "mcp")
    mcp_servers = _get(settings, "mcpServers")
    servers = mcp_servers if isinstance(mcp_servers, Mapping) else {}

    def server_pattern(server: str) -> str:
        return f"{_MCP_PREFIX}*" if server == "*" else f"{_MCP_PREFIX}{server}_*"

    for server in _str_list(_get(mcp, "excluded")):
        rules.append(
            Rule(
                tool_name=server_pattern(server),
                mcp_name=server,
                decision="deny",
                priority=_MCP_EXCLUDED_PRIORITY,
                source="settings: mcp.excluded",
            )
        )
    for tool in excluded_tools:
        rules.append(
            Rule(
                tool_name=tool,
                decision="deny",
                priority=_EXCLUDE_TOOLS_PRIORITY,
                source="settings: tools.exclude",
            )
        )
    if allowed_tools:
        rules += _tool_list_rules(
            allowed_tools, _ALLOWED_TOOLS_PRIORITY, "settings: tools.allowed", None, True
        )
    for tool in _str_list(_get(settings, "tools", "confirmationRequired")):
        rules.append(
            Rule(
                tool_name=_SHELL_TOOL_NAME if tool in SHELL_TOOL_NAMES else tool,
                decision="ask_user",
                priority=_CONFIRMATION_REQUIRED_PRIORITY,
                source="settings: tools.confirmationRequired",
            )
        )
    core = _get(settings, "tools", "core")
    if isinstance(core, list | tuple):
        rules += _tool_list_rules(
            _str_list(core), _CORE_TOOLS_PRIORITY, "settings: tools.core", _NON_PLAN_MODES, False
        )
        rules.append(
            Rule(
                tool_name="*",
                decision="deny",
                priority=_CORE_TOOLS_PRIORITY - 0.01,
                modes=_NON_PLAN_MODES,
                source="settings: tools.core (allowlist enforcement)",
            )
        )
    for server, config in servers.items():
        if isinstance(config, Mapping) and config.get("trust"):
            rules.append(
                Rule(
                    tool_name=f"{_MCP_PREFIX}{server}_*",
                    mcp_name=server,
                    decision="allow",
                    priority=_TRUSTED_MCP_PRIORITY,
                    modes=_NON_PLAN_MODES,
                    source="settings: mcpServers.trust",
                )
            )
    mcp_allowed = _str_list(_get(mcp, "allowed"))
    for server in mcp_allowed:
        rules.append(
            Rule(
                tool_name=server_pattern(server),
                mcp_name=server,
                decision="allow",
                priority=_ALLOWED_MCP_PRIORITY,
                modes=_NON_PLAN_MODES,
                source="settings: mcp.allowed",
            )
        )
    if not interactive and _get(mcp, "autoAllowInHeadless") and servers:
        for server, config in servers.items():
            trusted = isinstance(config, Mapping) and bool(config.get("trust"))
            if server in mcp_allowed or "*" in mcp_allowed or trusted:
                continue
            rules.append(
                Rule(
                    tool_name=server_pattern(server),
                    mcp_name=server,
                    decision="allow",
                    priority=_ALLOWED_MCP_PRIORITY,
                    modes=_NON_PLAN_MODES,
                    source="settings: mcp.autoAllowInHeadless",
                )
            )
    return rules


# ---------------------------------------------------------------------------------------
# The engine


def _sorted_rules(rules: Iterable[Rule]) -> list[Rule]:
    return sorted(rules, key=lambda r: -r.priority)


class PolicyEngine:
    """Decides allow / deny / ask_user for a tool call. Build it with :meth:`build`."""

    def __init__(
        self,
        rules: Iterable[Rule] = (),
        *,
        approval_mode: str = "default",
        interactive: bool = True,
        default_decision: Decision | None = None,
        disable_always_allow: bool = False,
        trusted_folder: bool = True,
        workspace_dir: Path | None = None,
        static_excludes: Iterable[str] = (),
    ) -> None:
        self._rules: list[Rule] = _sorted_rules(rules)
        for rule in self._rules:
            if not rule.tool_name:
                raise ValueError(f"policy rule without toolName (source: {rule.source})")
        self._mode = normalize_approval_mode(approval_mode)
        self._non_interactive = not interactive
        self._default: Decision = default_decision or ("ask_user" if interactive else "deny")
        self._disable_always_allow = disable_always_allow
        self._trusted_folder = trusted_folder
        self._workspace = workspace_dir
        self._static_excludes = tuple(static_excludes)

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        *,
        approval_mode: str,
        interactive: bool,
        settings: Mapping[str, Any],
        policy_paths: Sequence[Path] = (),
        user_policy_dir: Path | None = None,
        workspace_policy_dir: Path | None = None,
        allowed_tools: Sequence[str] = (),
        known_tools: Collection[str] = (),
        admin_policy_paths: Sequence[Path] = (),
        system_policy_dir: Path | None = None,
        trusted_folder: bool = True,
        workspace_policies_enabled: bool = False,
        default_policy_dir: Path | None = None,
        workspace_dir: Path | None = None,
        strict: bool = False,
    ) -> tuple[PolicyEngine, list[str]]:
        """The engine Gemini CLI would assemble, plus warnings to show the user.

        * ``policy_paths`` (``--policy``, else ``settings.policyPaths``) *replace*
          ``user_policy_dir`` (``~/.gemini/policies``; resolve GEMINI_CLI_HOME in the
          caller). Files or directories; their rules are user tier (4).
        * ``admin_policy_paths`` (``--admin-policy``) are tier 5 but ignored when
          ``system_policy_dir`` (``/etc/gemini-cli/policies``) holds ``.toml`` files.
        * ``workspace_policy_dir`` (``.gemini/policies``) is loaded only when
          ``workspace_policies_enabled`` and ``trusted_folder``: Gemini CLI currently
          ships with workspace policies switched off, so by default they are ignored.
        * Headless runs exclude ``ask_user`` (a ``tools.exclude`` entry, as Gemini).
        * An untrusted folder forces the ``default`` approval mode; ``plan`` falls back
          to ``default`` when ``general.plan.enabled`` is false.
        * A broken policy file is skipped with a warning (Gemini reports and goes on);
          with ``strict`` it raises ``PolicyFileError`` instead (agentbus refuses to
          start rather than run with rules the user did not get), as it does for a
          named path that does not exist or is neither a ``.toml`` file nor a
          directory (Gemini skips it silently).
        """
        warnings_out: list[str] = []
        mode = normalize_approval_mode(approval_mode)
        if mode == "plan" and _get(settings, "general", "plan", "enabled") is False:
            warnings_out.append(
                'Approval mode "plan" is disabled in your settings. Falling back to "default".'
            )
            mode = "default"
        if not trusted_folder and mode != "default":
            warnings_out.append(
                'Approval mode overridden to "default" because the current folder is not trusted.'
            )
            mode = "default"

        if not policy_paths:
            policy_paths = [Path(p).expanduser() for p in _str_list(_get(settings, "policyPaths"))]
        if not admin_policy_paths:
            admin_policy_paths = [
                Path(p).expanduser() for p in _str_list(_get(settings, "adminPolicyPaths"))
            ]
        if admin_policy_paths and system_policy_dir is not None:
            if _policy_files(system_policy_dir) and system_policy_dir.is_dir():
                warnings_out.append(
                    "Security Warning: Ignoring --admin-policy because system policies are "
                    f"already defined in {system_policy_dir}"
                )
                admin_policy_paths = ()

        locations: list[tuple[Path, int]] = []
        if system_policy_dir is not None:
            locations.append((system_policy_dir, ADMIN_POLICY_TIER))
        locations += [(Path(p), ADMIN_POLICY_TIER) for p in admin_policy_paths]
        if policy_paths:
            locations += [(Path(p), USER_POLICY_TIER) for p in policy_paths]
        elif user_policy_dir is not None:
            locations.append((user_policy_dir, USER_POLICY_TIER))
        if workspace_policies_enabled and trusted_folder and workspace_policy_dir is not None:
            locations.append((workspace_policy_dir, WORKSPACE_POLICY_TIER))
        locations.append((default_policy_dir or DEFAULT_POLICY_DIR, DEFAULT_POLICY_TIER))

        known = tuple(known_tools)
        named = {Path(p) for p in (*admin_policy_paths, *policy_paths)}
        rules: list[Rule] = []
        for location, tier in locations:
            try:
                problem = _named_path_problem(location) if strict and location in named else None
                files = _policy_files(location)
            except OSError as exc:
                if strict and location in named:
                    raise PolicyFileError(location, 0, f"cannot read it: {exc.strerror or exc}") from None
                warnings_out.append(f"{location}: cannot read policy path: {exc}")
                continue
            if problem is not None:
                raise PolicyFileError(location, 0, problem)
            for file in files:
                try:
                    file_rules, file_warnings = load_policy_file(
                        file, tier=tier, known_tools=known
                    )
                except PolicyFileError as exc:
                    if strict:
                        raise
                    warnings_out.append(
                        f"[{_TIER_NAMES[tier].upper()}] {exc} (file skipped)"
                    )
                    continue
                rules += file_rules
                warnings_out += file_warnings

        tools_settings = _get(settings, "tools")
        excluded = _str_list(_get(tools_settings, "exclude"))
        if not interactive and _ASK_USER_TOOL_NAME not in excluded:
            excluded.append(_ASK_USER_TOOL_NAME)
        allowed = list(allowed_tools) or _str_list(_get(tools_settings, "allowed"))
        rules += _settings_rules(
            settings, allowed_tools=allowed, excluded_tools=excluded, interactive=interactive
        )
        disable_always_allow = bool(
            _get(settings, "security", "disableAlwaysAllow")
            or _get(settings, "admin", "secureModeEnabled")
        )
        engine = cls(
            rules,
            approval_mode=mode,
            interactive=interactive,
            disable_always_allow=disable_always_allow,
            trusted_folder=trusted_folder,
            workspace_dir=workspace_dir,
            static_excludes=excluded,
        )
        return engine, warnings_out

    # -- state ----------------------------------------------------------------------------

    @property
    def rules(self) -> tuple[Rule, ...]:
        """All rules, highest priority first."""
        return tuple(self._rules)

    @property
    def approval_mode(self) -> str:
        return self._mode

    @property
    def interactive(self) -> bool:
        return not self._non_interactive

    @property
    def default_decision(self) -> Decision:
        return self._default

    def set_approval_mode(self, mode: str) -> None:
        self._mode = normalize_approval_mode(mode)

    def add_rule(self, rule: Rule) -> None:
        """Add a rule; among equal priorities, earlier rules keep winning."""
        self._rules = _sorted_rules([*self._rules, rule])

    def add_session_rule(
        self,
        tool_name: str,
        *,
        command_prefix: str | Sequence[str] | None = None,
        args_pattern: str | None = None,
        modes: Sequence[str] | None = None,
        allow_redirection: bool | None = None,
        mcp_name: str | None = None,
        persist_scope: Literal["workspace", "user"] | None = None,
    ) -> None:
        """Remember an "allow always" answer (priority 3.95, 4.95 for user scope).

        ``command_prefix`` (shell root commands) or ``args_pattern`` (a JavaScript regex
        over :func:`stable_stringify`, e.g. a file path pattern) narrow the rule. Tools
        that must be narrowed (shell, file tools) get no rule without one, as in Gemini.
        ``modes`` should be the current mode and the more permissive ones.
        """
        tier = USER_POLICY_TIER if persist_scope == "user" else WORKSPACE_POLICY_TIER
        priority = tier + _ALWAYS_ALLOW_FRACTION / 1000
        mode_tuple = tuple(normalize_approval_mode(m) for m in modes) if modes else None

        def make(pattern: str | None) -> Rule:
            return Rule(
                tool_name=tool_name,
                decision="allow",
                priority=priority,
                modes=mode_tuple,
                args_pattern=compile_js_regex(pattern) if pattern else None,
                args_pattern_source=pattern or None,
                allow_redirection=bool(allow_redirection),
                mcp_name=mcp_name,
                source="session: always allow",
            )

        if command_prefix or (command_prefix is not None and not isinstance(command_prefix, str)):
            for pattern in build_args_patterns(None, command_prefix, None):
                if pattern:
                    self.add_rule(make(pattern))
            return
        if args_pattern and not is_safe_regexp(args_pattern):
            raise ValueError(
                f"Invalid or unsafe regular expression for tool {tool_name}: {args_pattern}"
            )
        if tool_name in _TOOLS_REQUIRING_NARROWING and not args_pattern:
            return
        self.add_rule(make(args_pattern))

    # -- decisions ------------------------------------------------------------------------

    def check(
        self,
        tool_name: str,
        args: Mapping[str, Any],
        *,
        approval_mode: str | None = None,
        subagent: str | None = None,
        server_name: str | None = None,
        tool_annotations: Mapping[str, Any] | None = None,
    ) -> PolicyVerdict:
        """The decision for one call. Headless ask_user is for the caller to refuse."""
        mode = normalize_approval_mode(approval_mode) if approval_mode else self._mode
        return self._check(
            tool_name, args, mode, subagent, server_name, tool_annotations, skip_heuristics=False
        )

    def _check(
        self,
        tool_name: str,
        args: Mapping[str, Any] | None,
        mode: str,
        subagent: str | None,
        server: str | None,
        annotations: Mapping[str, Any] | None,
        *,
        skip_heuristics: bool,
    ) -> PolicyVerdict:
        if server is None and annotations is not None:
            annotated = annotations.get("_serverName")
            if isinstance(annotated, str):
                server = annotated
        if server is None and tool_name:
            server = _mcp_server_of(tool_name)
        stringified = stable_stringify(args) if args is not None else None

        is_shell = tool_name in SHELL_TOOL_NAMES
        command: str | None = None
        dir_path: Any = None
        if is_shell and isinstance(args, Mapping):
            raw_command = args.get("command")
            command = raw_command if isinstance(raw_command, str) else None
            dir_path = args.get("dir_path")

        names = _tool_aliases(tool_name) if tool_name else []
        if tool_name == _AGENT_TOOL_NAME and isinstance(args, Mapping):
            agent = args.get("agent_name")
            if isinstance(agent, str):
                names.append(agent)

        decision: Decision | None = None
        rule: Rule | None = None
        for candidate in self._rules:
            if self._disable_always_allow and _is_always_allow(candidate):
                continue
            if not any(
                _rule_matches(
                    candidate,
                    name,
                    stringified,
                    server,
                    mode,
                    self._non_interactive,
                    annotations,
                    subagent,
                )
                for name in names
            ):
                continue
            rule_decision = candidate.decision
            if not skip_heuristics and is_shell and command and candidate.args_pattern is None:
                rule_decision = self._shell_heuristics(command, rule_decision, mode)
            if is_shell:
                decision, rule = self._check_shell(
                    tool_name,
                    command,
                    rule_decision,
                    mode,
                    server,
                    dir_path,
                    candidate.allow_redirection,
                    candidate,
                    annotations,
                    subagent,
                )
            else:
                decision, rule = rule_decision, candidate
            break

        if decision is None:
            if mode == "yolo":
                return _verdict("allow", None)
            if is_shell:
                fallback = self._default
                if not skip_heuristics and command:
                    fallback = self._shell_heuristics(command, fallback, mode)
                decision, rule = self._check_shell(
                    tool_name,
                    command,
                    fallback,
                    mode,
                    server,
                    dir_path,
                    False,
                    None,
                    annotations,
                    subagent,
                )
            else:
                decision = self._default

        if decision == "allow" and isinstance(args, Mapping) and self._outside_workspace(args):
            decision = "ask_user"
        return _verdict(decision, rule)

    def _outside_workspace(self, args: Mapping[str, Any]) -> bool:
        """Sandbox ``additional_permissions`` naming paths outside the workspace."""
        permissions = args.get("additional_permissions")
        file_system = permissions.get("fileSystem") if isinstance(permissions, Mapping) else None
        if not isinstance(file_system, Mapping):
            return False
        workspace = str(self._workspace) if self._workspace is not None else os.getcwd()
        paths: list[Any] = []
        for key in ("read", "write"):
            value = file_system.get(key)
            if isinstance(value, list):
                paths += value
        for path in paths:
            if not isinstance(path, str):
                continue
            absolute = path if os.path.isabs(path) else os.path.join(workspace, path)
            if not is_subpath(workspace, absolute) and workspace != path:
                return True
        return False

    def _shell_heuristics(self, command: str, decision: Decision, mode: str) -> Decision:
        if decision == "deny":
            return "deny"
        words = _shell_words(command)
        if _contains_git_command(words) and not self._trusted_folder:
            return "ask_user"
        if is_dangerous_command(words):
            return decision if mode == "yolo" else "ask_user"
        if is_known_safe_command(words) and decision == "ask_user":
            return "allow"
        return decision

    def _downgrade_for_redirection(self, command: str, allow_redirection: bool, mode: str) -> bool:
        if allow_redirection or not has_redirection(command):
            return False
        return mode not in ("autoEdit", "yolo")

    def _check_shell(
        self,
        tool_name: str,
        command: str | None,
        rule_decision: Decision,
        mode: str,
        server: str | None,
        dir_path: Any,
        allow_redirection: bool,
        rule: Rule | None,
        annotations: Mapping[str, Any] | None,
        subagent: str | None,
    ) -> tuple[Decision, Rule | None]:
        if not command:
            return rule_decision, rule
        parsed = parse_shell_command(command)
        if parsed is None or not parsed.details or parsed.has_error:
            if rule_decision == "deny":
                return "deny", rule
            if mode == "yolo":
                if rule is not None and rule.args_pattern is not None:
                    return "deny", rule  # cannot prove the restricted rule applies
                return "allow", rule
            return self._default, rule
        if rule_decision == "deny":
            return "deny", rule

        aggregate: Decision = rule_decision
        responsible = rule if rule is not None and rule_decision == rule.decision else None
        if self._downgrade_for_redirection(command, allow_redirection, mode):
            if aggregate == "allow":
                aggregate = "ask_user"
                responsible = None

        def sub_check(text: str) -> PolicyVerdict:
            sub_args: dict[str, Any] = {"command": text}
            if dir_path is not None:
                sub_args["dir_path"] = dir_path
            return self._check(
                tool_name, sub_args, mode, subagent, server, annotations, skip_heuristics=True
            )

        for detail in parsed.details:
            if detail.name in _REDIRECTION_NAMES:
                continue
            sub_command = detail.text.strip()
            atomic = sub_command == command or (
                detail.start == 0 and len(detail.text) == len(command)
            )
            stripped = strip_shell_wrapper(sub_command)
            if stripped != sub_command:
                wrapped = sub_check(stripped)
                if wrapped.decision == "deny":
                    return "deny", wrapped.rule
                if wrapped.decision == "ask_user":
                    if aggregate == "allow":
                        responsible = wrapped.rule
                    elif responsible is None:
                        responsible = wrapped.rule
                    aggregate = "ask_user"
            if not atomic:
                sub = sub_check(sub_command)
                if sub.decision == "deny":
                    return "deny", sub.rule
                if sub.decision == "ask_user":
                    if aggregate == "allow":
                        responsible = sub.rule
                    elif responsible is None:
                        responsible = sub.rule
                    aggregate = "ask_user"
                if sub.decision == "allow" and self._downgrade_for_redirection(
                    sub_command, allow_redirection, mode
                ):
                    if aggregate == "allow":
                        aggregate = "ask_user"
                        responsible = None
        return aggregate, (rule if aggregate == rule_decision else responsible)

    def excluded_tools(
        self,
        tool_names: Iterable[str],
        *,
        approval_mode: str | None = None,
        tool_annotations: Mapping[str, Mapping[str, Any]] | None = None,
        class_names: Mapping[str, str] | None = None,
    ) -> set[str]:
        """The tools Gemini drops from the registry: the model never sees them.

        Per tool, rules are walked by priority ignoring arguments: a rule *with* an args
        pattern that denies is skipped (it only denies some calls); one that allows or
        asks keeps the tool; the first rule without a pattern decides (deny excludes).
        No rule: excluded when the default decision is deny (headless). ask_user never
        excludes. ``tools.exclude`` (and headless ``ask_user``) are always excluded, and
        exclusions carry over to legacy aliases (``search_file_content``/``grep_search``).
        A ``tools.exclude`` entry may also name the tool's class (``class_names``:
        ``ShellTool`` excludes ``run_shell_command``, as Gemini's registry checks both).
        A call to an excluded tool fails as ``tool_not_registered``, not a policy error.
        """
        names = list(tool_names)
        mode = normalize_approval_mode(approval_mode) if approval_mode else self._mode
        excluded: set[str] = set(self._static_excludes)
        for name in names:
            annotations = tool_annotations.get(name) if tool_annotations else None
            annotated = annotations.get("_serverName") if annotations else None
            server = annotated if isinstance(annotated, str) else None
            statically_denied = self._default == "deny"
            for rule in self._rules:
                if self._disable_always_allow and _is_always_allow(rule):
                    continue
                if not _rule_matches(
                    rule,
                    name,
                    None,
                    server,
                    mode,
                    self._non_interactive,
                    annotations,
                    None,
                    ignore_args=True,
                ):
                    continue
                if rule.args_pattern is not None:
                    if rule.decision == "deny":
                        continue
                    statically_denied = False
                    break
                statically_denied = rule.decision == "deny"
                break
            if statically_denied:
                excluded.add(name)
        expanded = {alias for name in excluded for alias in _tool_aliases(name)}
        classes = class_names or {}
        return {name for name in names if name in expanded or classes.get(name) in expanded}


def display_name(tool_name: str) -> str:
    """Gemini's display name for a built-in tool (the name itself otherwise)."""
    return TOOL_DISPLAY_NAMES.get(tool_name, tool_name)

