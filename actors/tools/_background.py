"""``list_background_processes`` and ``read_background_output``: the shell's background
jobs of this session (Gemini CLI's texts; our own descriptions)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import trio

from bus.messages import ToolResult

from ._base import OutputSink, ToolEnv
from ._shell_processes import BACKGROUND_PROCESSES, BackgroundProcess, BackgroundProcessRegistry

MAX_LOG_READ_BYTES = 64 * 1024
DEFAULT_TAIL_LINES = 100


def _status_line(entry: BackgroundProcess) -> str:
    running = entry.is_running()
    line = f"- [PID {entry.pid}] {'RUNNING' if running else 'EXITED'}: `{entry.command}`"
    if not running and entry.process is not None:
        code = entry.process.poll()
        if code is not None and code >= 0:
            line += f" (Exit Code: {code})"
        elif code is not None:
            line += f" (Signal: {-code})"
    return line


class ListBackgroundProcessesTool:
    name = "list_background_processes"
    display_name = "List Background Processes"
    kind = "read"

    def __init__(self, registry: BackgroundProcessRegistry | None = None) -> None:
        self.registry = BACKGROUND_PROCESSES if registry is None else registry

    def declaration(self, model: str) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": "List the shell processes started in the background in this session, with their state.",
            "parametersJsonSchema": {"type": "object", "properties": {}},
        }

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        return None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        return "Lists all active and recently completed background processes for the current session."

    async def execute(self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None) -> ToolResult:
        entries = self.registry.entries(env.session_id or None)
        if not entries:
            text = "No background processes found."
        else:
            text = "\n".join(_status_line(e) for e in entries)
        return ToolResult(llm_content=text, return_display=text)


class ReadBackgroundOutputTool:
    name = "read_background_output"
    display_name = "Read Background Output"
    kind = "read"

    def __init__(self, registry: BackgroundProcessRegistry | None = None) -> None:
        self.registry = BACKGROUND_PROCESSES if registry is None else registry

    def declaration(self, model: str) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": "Read the end of a background shell process's output log.",
            "parametersJsonSchema": {
                "type": "object",
                "properties": {
                    "pid": {"type": "integer", "description": "PID of the background process."},
                    "lines": {"type": "integer", "minimum": 1, "description": "Lines from the end (default 100)."},
                    "delay_ms": {"type": "integer", "description": "Wait this long before reading."},
                },
                "required": ["pid"],
            },
        }

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        return None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        return f"Reading output for background process {args.get('pid')}"

    async def execute(self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None) -> ToolResult:
        pid = int(args["pid"])
        delay = args.get("delay_ms")
        if isinstance(delay, int) and delay > 0:
            await trio.sleep(delay / 1000)
        entry = next((e for e in self.registry.entries(env.session_id or None) if e.pid == pid), None)
        if entry is None:
            return ToolResult(
                llm_content=f"Access denied. Background process ID {pid} not found in this session's history.",
                return_display="Access denied.",
                error_type="execution_failed",
                error_message=f"Background process history lookup failed for PID {pid}",
            )
        log = entry.log_path
        if log is None or not await trio.Path(log).exists():
            return ToolResult(
                llm_content=(
                    f"No output log found for process ID {pid}. It might not have produced output or was cleaned up."
                ),
                return_display=f"No log found for PID {pid}",
                error_type="execution_failed",
                error_message=f"Log file not found at {log}",
            )
        try:
            content, position = await trio.to_thread.run_sync(_tail, str(log))
        except OSError as exc:
            return ToolResult(
                llm_content=f"Error reading background log: {exc.strerror or exc}",
                return_display="Failed to read log.",
                error_type="execution_failed",
                error_message=str(exc.strerror or exc),
            )
        if not content:
            return ToolResult(llm_content="Log is empty.", return_display="Log is empty.")
        lines = content.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if position > 0 and lines:
            lines.pop(0)  # started mid-line
        wanted = int(args.get("lines") or DEFAULT_TAIL_LINES)
        header = (
            f"Showing last {wanted} of {len(lines)} lines:\n" if wanted < len(lines) else "Full Log Output:\n"
        )
        text = header + "\n".join(lines[-wanted:])
        return ToolResult(llm_content=text, return_display=text)


def _tail(path: str) -> tuple[str, int]:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        size = os.fstat(fd).st_size
        read = min(size, MAX_LOG_READ_BYTES)
        position = max(0, size - read)
        data = os.pread(fd, read, position)
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace"), position


BACKGROUND_TOOLS = (ListBackgroundProcessesTool(), ReadBackgroundOutputTool())
