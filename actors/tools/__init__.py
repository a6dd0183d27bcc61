"""Built-in tools and the executor actor that runs them (one executor per tool kind)."""

from __future__ import annotations

from ._base import OutputSink, Tool, ToolEnv
from ._executor import ExecutorActor

EXECUTOR_KINDS = {"execute": "shell"}
"""Tool kind -> executor; every other kind runs on the ``files`` executor."""


def executor_kind(tool: Tool) -> str:
    return EXECUTOR_KINDS.get(tool.kind, "files")


def builtin_tools(model: str = "") -> tuple[Tool, ...]:
    """Every built-in tool, in Gemini CLI's registry order."""
    from ._files import FILE_TOOLS
    from ._shell import SHELL_TOOLS

    del model
    by_name = {t.name: t for t in (*FILE_TOOLS, *SHELL_TOOLS)}
    order = ("list_directory", "read_file", "grep_search", "glob", "replace", "write_file", "run_shell_command")
    return tuple(by_name[n] for n in order if n in by_name) + tuple(
        t for n, t in by_name.items() if n not in order
    )


__all__ = ["ExecutorActor", "OutputSink", "Tool", "ToolEnv", "builtin_tools", "executor_kind"]
