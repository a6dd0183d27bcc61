"""Policy rules and verdicts: what a rule is, when it matches a call, the tiers.

Gemini CLI's facts: a rule names a tool (``*``, a name, ``mcp_<server>_*``), a decision
(allow, deny, ask_user) and a priority. Rules come in tiers: built-in defaults 1,
extensions 2, workspace 3, user 4, admin 5; a TOML priority ``p`` (0-999) becomes
``tier + p/1000``, and "always allow" answers get ``tier + 0.95``. A rule may be limited
to approval modes, to interactive or headless runs, to a subagent, to an MCP server, to
tool annotations and to an arguments regex (:mod:`._policy_args`). Pure code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

import attrs

from actors.common import LazyPattern, js_round

Decision = Literal["allow", "deny", "ask_user"]
DECISIONS: Final = ("allow", "deny", "ask_user")

# Approval modes, with Gemini's internal spelling ("autoEdit"); the CLI spells it auto_edit.
APPROVAL_MODES: Final = ("default", "autoEdit", "yolo", "plan")
NON_PLAN_MODES: Final = ("default", "autoEdit", "yolo")

DEFAULT_POLICY_TIER: Final = 1
EXTENSION_POLICY_TIER: Final = 2
WORKSPACE_POLICY_TIER: Final = 3
USER_POLICY_TIER: Final = 4
ADMIN_POLICY_TIER: Final = 5

ALWAYS_ALLOW_FRACTION: Final = 950
ALWAYS_ALLOW_PRIORITY_OFFSET: Final = ALWAYS_ALLOW_FRACTION / 1000

DEFAULT_POLICY_DIR: Final = Path(__file__).with_name("policies")
"""Our built-in policies (tier 1), shipped as package data."""

POLICY_DENIED_MESSAGE: Final = "Tool execution denied by policy."

SHELL_TOOL_NAMES: Final = ("run_shell_command", "ShellTool")
SHELL_TOOL_NAME: Final = "run_shell_command"
AGENT_TOOL_NAME: Final = "invoke_agent"
ASK_USER_TOOL_NAME: Final = "ask_user"
MCP_PREFIX: Final = "mcp_"
DISCOVERED_PREFIX: Final = "discovered_tool_"
LEGACY_ALIASES: Final[Mapping[str, str]] = {"search_file_content": "grep_search"}

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
TOOLS_REQUIRING_NARROWING: Final = frozenset(
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


def normalize_approval_mode(mode: str) -> str:
    """``auto_edit`` (CLI) and ``autoEdit`` (internal) are the same mode."""
    if mode == "auto_edit":
        return "autoEdit"
    if mode in APPROVAL_MODES:
        return mode
    raise ValueError(
        f"Invalid approval mode: {mode}. Valid values are: yolo, auto_edit, plan, default"
    )


def display_name(tool_name: str) -> str:
    """Gemini's display name for a built-in tool (the name itself otherwise)."""
    return TOOL_DISPLAY_NAMES.get(tool_name, tool_name)


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
    args_pattern: re.Pattern[str] | LazyPattern | None = None
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


def verdict_for(decision: Decision, rule: Rule | None) -> PolicyVerdict:
    deny_message = rule.deny_message if decision == "deny" and rule is not None else None
    return PolicyVerdict(decision=decision, rule=rule, deny_message=deny_message)


def is_mcp_name(name: str) -> bool:
    return name.startswith(MCP_PREFIX)


def mcp_server_of(name: str) -> str | None:
    if not is_mcp_name(name):
        return None
    match = re.fullmatch(r"([^_]+)_(.+)", name[len(MCP_PREFIX) :], re.DOTALL)
    return match.group(1) if match else None


def format_mcp_name(server: str, tool: str | None) -> str:
    if server == "*" and tool in (None, "*"):
        return f"{MCP_PREFIX}*"
    if server == "*":
        return f"{MCP_PREFIX}*_{tool}"
    if tool in (None, "*"):
        return f"{MCP_PREFIX}{server}_*"
    return f"{MCP_PREFIX}{server}_{tool}"


def tool_aliases(name: str) -> list[str]:
    aliases = [name]
    canonical = LEGACY_ALIASES.get(name, name)
    if canonical not in aliases:
        aliases.append(canonical)
    for legacy, current in LEGACY_ALIASES.items():
        if current == canonical and legacy not in aliases:
            aliases.append(legacy)
    return aliases


def _matches_wildcard(pattern: str, tool_name: str, server: str | None) -> bool:
    if pattern == "*":
        return True
    if pattern == f"{MCP_PREFIX}*":
        return server is not None
    if pattern.startswith(MCP_PREFIX) and pattern.endswith("_*"):
        expected = pattern[len(MCP_PREFIX) : -2]
        if server is None or server != expected:
            return False
        return tool_name.startswith(f"{MCP_PREFIX}{expected}_")
    return tool_name == pattern


def rule_matches(
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
                    and not is_mcp_name(rule.tool_name)
                    and tool_name == format_mcp_name(rule.mcp_name, rule.tool_name)
                ):
                    mcp_match = True
                if (
                    not mcp_match
                    and is_mcp_name(rule.tool_name)
                    and rule.tool_name == format_mcp_name(server, tool_name)
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


def is_always_allow(rule: Rule) -> bool:
    return js_round((rule.priority % 1) * 1000) == ALWAYS_ALLOW_FRACTION
