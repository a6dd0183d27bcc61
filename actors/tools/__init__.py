"""Built-in tools and the executor actor that runs them (one executor per tool kind)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from actors.common import lazy_exports

from ._base import OutputSink, Tool, ToolEnv, plans_dir
from ._declared import DeclaredTool, reuse_declared_tools
from ._executor import ExecutorActor

if TYPE_CHECKING:
    from ._agent_defs import (
        COMPLETE_TASK,
        DEFAULT_MAX_DEPTH,
        AgentDefinition,
        AgentLoadError,
        AgentRegistry,
        acknowledge,
        agent_tool_names,
        load_registry,
        parse_agent_markdown,
        template,
    )
    from ._agents import (
        REJECTED_MESSAGE,
        CompleteTaskTool,
        InvokeAgentTool,
        agentbus_version,
        final_warning,
    )
    from ._discovery import FileDiscovery, respect_flags
    from ._fs_errors import NodeFsError
    from ._glob import GlobTool, escape_glob, glob_files
    from ._glob import _run_glob as run_glob
    from ._paths import (
        context_file_name,
        resolve_to_real_path,
        validate_path_access,
        validate_path_string,
    )
    from ._read_file import detect_file_type, process_single_file_content
    from ._replace import EditTool, calculate_replacement
    from ._write_file import WriteFileTool

# What the host and the front ends use of the tools' machinery (subagent definitions,
# the ``@``-reference expansion, diffs), loaded on first use.
__getattr__ = lazy_exports(
    __name__,
    {
        "COMPLETE_TASK": "._agent_defs",
        "DEFAULT_MAX_DEPTH": "._agent_defs",
        "AgentDefinition": "._agent_defs",
        "AgentRegistry": "._agent_defs",
        "AgentLoadError": "._agent_defs",
        "parse_agent_markdown": "._agent_defs",
        "template": "._agent_defs",
        "InvokeAgentTool": "._agents",
        "final_warning": "._agents",
        "EditTool": "._replace",
        "WriteFileTool": "._write_file",
        "acknowledge": "._agent_defs",
        "agent_tool_names": "._agent_defs",
        "load_registry": "._agent_defs",
        "REJECTED_MESSAGE": "._agents",
        "CompleteTaskTool": "._agents",
        "GlobTool": "._glob",
        "escape_glob": "._glob",
        "glob_files": "._glob",
        "run_glob": "._glob:_run_glob",
        "FileDiscovery": "._discovery",
        "NodeFsError": "._fs_errors",
        "context_file_name": "._paths",
        "resolve_to_real_path": "._paths",
        "respect_flags": "._discovery",
        "validate_path_access": "._paths",
        "validate_path_string": "._paths",
        "detect_file_type": "._read_file",
        "process_single_file_content": "._read_file",
        "calculate_replacement": "._replace",
        "agentbus_version": "._agents",
    },
)

EXECUTOR_KINDS = {"execute": "shell", "agent": "agents"}
"""Tool kind -> executor; every other kind runs on the ``files`` executor."""


def executor_kind(tool: Tool) -> str:
    return EXECUTOR_KINDS.get(tool.kind, "files")


REGISTRY_ORDER = (
    "update_topic",
    "list_directory",
    "read_file",
    "grep_search",
    "glob",
    "replace",
    "write_file",
    "web_fetch",
    "read_mcp_resource",
    "list_mcp_resources",
    "run_shell_command",
    "list_background_processes",
    "read_background_output",
    "google_web_search",
    "ask_user",
    "write_todos",
    "exit_plan_mode",
    "enter_plan_mode",
    "invoke_agent",
    "activate_skill",
)
"""Gemini CLI's registration order (``Config.createToolRegistry``), with ``activate_skill``
last: skill discovery re-registers it at the end of the registry's map."""


GEMINI_CLASS_NAMES: Final = {
    "update_topic": "UpdateTopicTool",
    "list_directory": "LSTool",
    "read_file": "ReadFileTool",
    "grep_search": "GrepTool",
    "glob": "GlobTool",
    "activate_skill": "ActivateSkillTool",
    "replace": "EditTool",
    "write_file": "WriteFileTool",
    "web_fetch": "WebFetchTool",
    "read_mcp_resource": "ReadMcpResourceTool",
    "list_mcp_resources": "ListMcpResourcesTool",
    "run_shell_command": "ShellTool",
    "list_background_processes": "ListBackgroundProcessesTool",
    "read_background_output": "ReadBackgroundOutputTool",
    "google_web_search": "WebSearchTool",
    "ask_user": "AskUserTool",
    "write_todos": "WriteTodosTool",
    "exit_plan_mode": "ExitPlanModeTool",
    "enter_plan_mode": "EnterPlanModeTool",
    "invoke_agent": "AgentTool",
}
"""The class behind each built-in tool in Gemini CLI: ``tools.core`` and ``tools.exclude``
entries may name a tool by its class (``ShellTool``). Our ``grep_search`` is its
``GrepTool`` (the fallback it registers without ripgrep)."""

_NAMED_BY_CLASS_ONLY: Final = frozenset({"update_topic"})
"""Tools whose Gemini class has no static ``Name``: ``tools.core`` can enable them only by
the class name."""


def enabled_by_core(name: str, core: Sequence[str] | None) -> bool:
    """Gemini's ``tools.core`` test for registering a built-in tool: no list registers
    everything; otherwise an entry must be the tool's name or class name, or either
    followed by ``(`` (``run_shell_command(echo)`` registers the shell tool; which
    commands it may run is the policy's ``tools.core`` rules)."""
    if core is None:
        return True
    cls = GEMINI_CLASS_NAMES.get(name, name)
    names = (cls,) if name in _NAMED_BY_CLASS_ONLY else (name, cls)
    return any(entry == n or entry.startswith(f"{n}(") for entry in core for n in names)


def builtin_tools(
    model: str = "", *, tracker_enabled: bool = False, agents: bool = False
) -> tuple[Tool, ...]:
    """Every built-in tool we implement, in Gemini CLI's registry order.

    ``write_todos`` only for the models Gemini registers it for (Gemini 2, tracker off);
    ``invoke_agent`` when subagents are enabled (the session must then be wired with a
    ``SubagentAccess``).
    Stateful tools (web_fetch's rate limits, update_topic's topic) are new instances
    per call; their state is keyed by session. In a process that declares tools from
    the cache (``reuse_declared_tools``), they are ``DeclaredTool``s until first used.
    """
    from ._declared import declared_tools

    return declared_tools(
        (model, tracker_enabled, agents), lambda: _made_tools(model, tracker_enabled=tracker_enabled, agents=agents)
    )


def _made_tools(model: str, *, tracker_enabled: bool, agents: bool) -> tuple[Tool, ...]:
    from ._background import BACKGROUND_TOOLS
    from ._files import FILE_TOOLS
    from ._shell import SHELL_TOOLS
    from ._update_topic import UpdateTopicTool
    from ._web_fetch import WebFetchTool
    from ._web_search import WebSearchTool
    from ._write_todos import WriteTodosTool, registered_for

    mine: list[Tool] = [UpdateTopicTool(), WebFetchTool(), WebSearchTool()]
    if agents:
        from ._agents import InvokeAgentTool

        mine.append(InvokeAgentTool())
    if registered_for(model, tracker_enabled=tracker_enabled):
        mine.append(WriteTodosTool())
    by_name = {t.name: t for t in (*FILE_TOOLS, *SHELL_TOOLS, *BACKGROUND_TOOLS, *mine)}
    return tuple(by_name[n] for n in REGISTRY_ORDER if n in by_name) + tuple(
        t for n, t in by_name.items() if n not in REGISTRY_ORDER
    )


__all__ = [
    "AgentLoadError",
    "EditTool",
    "InvokeAgentTool",
    "WriteFileTool",
    "final_warning",
    "parse_agent_markdown",
    "template",
    "COMPLETE_TASK",
    "DEFAULT_MAX_DEPTH",
    "REJECTED_MESSAGE",
    "AgentDefinition",
    "AgentRegistry",
    "CompleteTaskTool",
    "FileDiscovery",
    "GlobTool",
    "NodeFsError",
    "acknowledge",
    "agent_tool_names",
    "calculate_replacement",
    "context_file_name",
    "detect_file_type",
    "escape_glob",
    "glob_files",
    "load_registry",
    "plans_dir",
    "agentbus_version",
    "process_single_file_content",
    "resolve_to_real_path",
    "respect_flags",
    "run_glob",
    "validate_path_access",
    "validate_path_string",
    "GEMINI_CLASS_NAMES",
    "ExecutorActor",
    "DeclaredTool",
    "reuse_declared_tools",
    "OutputSink",
    "Tool",
    "ToolEnv",
    "builtin_tools",
    "enabled_by_core",
    "executor_kind",
]
