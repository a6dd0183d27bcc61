"""How a tool call looks on ACP: title, kind, locations, content, permission options.

Pure functions of the call (name and arguments), the session's tool registry and the
tool's result, following what Gemini CLI puts on the wire (``acpSession.ts``,
``acpUtils.ts``): the title is the tool's description (for the shell: the command,
with the directory and the model's explanation as content), locations are the files a
call touches, a finished call shows its ``returnDisplay`` (text, or a diff for a file
edit), an edit asks permission with a diff of the whole file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import attrs

from actors.tools import Tool, ToolEnv

ACP_TOOL_KINDS = frozenset(
    {"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"}
)
EDIT_TOOLS = frozenset({"write_file", "replace"})
"""Tools whose permission request shows a diff of the file they change."""
SHELL_TOOLS = frozenset({"run_shell_command"})
SHELL_CANCELLED_TEXT = "Command cancelled by user."
"""The shell's own words for a command the user cancelled (Gemini CLI's display)."""

PERMISSION_OPTIONS: tuple[dict[str, str], ...] = (
    {"optionId": "proceed_always", "name": "Allow for this session", "kind": "allow_always"},
    {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"},
    {"optionId": "cancel", "name": "Reject", "kind": "reject_once"},
)
"""Gemini CLI's options (edit, exec, info); the ids are the scheduler's outcomes."""
MCP_PERMISSION_OPTIONS: tuple[dict[str, str], ...] = (
    {"optionId": "proceed_always_server", "name": "Allow all server tools for this session", "kind": "allow_always"},
    {"optionId": "proceed_always_tool", "name": "Allow tool for this session", "kind": "allow_always"},
    {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"},
    {"optionId": "cancel", "name": "Reject", "kind": "reject_once"},
)
OUTCOMES = frozenset(o["optionId"] for o in (*PERMISSION_OPTIONS, *MCP_PERMISSION_OPTIONS))


def permission_options(details_type: str) -> list[dict[str, str]]:
    chosen = MCP_PERMISSION_OPTIONS if details_type == "mcp" else PERMISSION_OPTIONS
    return [dict(o) for o in chosen]


def acp_kind(tool_kind: str) -> str:
    return tool_kind if tool_kind in ACP_TOOL_KINDS else "other"


def text_content(text: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": text}}


def diff_content(path: str, old_text: str, new_text: str) -> dict[str, Any]:
    kind = "add" if not old_text else ("delete" if new_text == "" else "modify")
    return {"type": "diff", "path": path, "oldText": old_text, "newText": new_text, "_meta": {"kind": kind}}


@attrs.frozen(kw_only=True)
class Presentation:
    """The parts of a ``tool_call`` that depend only on the call."""

    title: str
    kind: str
    locations: tuple[Mapping[str, Any], ...] = ()
    explanation: str = ""
    """Text shown as the call's content while it runs (Gemini's ``getExplanation``)."""
    edit_path: str | None = None
    """For an edit: the file it changes (its permission request shows the diff)."""


class Presenter:
    """Presents the calls of one session (its registry and environment)."""

    def __init__(self, tools: Mapping[str, Tool], env: ToolEnv) -> None:
        self.tools = tools
        self.env = env

    def resolve(self, path: str) -> str:
        return os.path.normpath(os.path.join(str(self.env.workspace), path))

    def present(self, name: str, args: Mapping[str, Any]) -> Presentation:
        tool = self.tools.get(name)
        kind = acp_kind(tool.kind) if tool is not None else "other"
        if name in SHELL_TOOLS:
            return self._shell(args, kind)
        title = name
        if tool is not None:
            try:
                title = tool.describe(args, self.env) or name
            except Exception:  # a description must never break the stream
                title = name
        locations: tuple[Mapping[str, Any], ...] = ()
        file_path = args.get("file_path")
        edit_path = None
        if isinstance(file_path, str) and file_path:
            location: dict[str, Any] = {"path": self.resolve(file_path)}
            start = args.get("start_line")
            if isinstance(start, int) and not isinstance(start, bool) and start > 0:
                location["line"] = start
            locations = (location,)
            if name in EDIT_TOOLS:
                edit_path = location["path"]
        return Presentation(title=title, kind=kind, locations=locations, edit_path=edit_path)

    def _shell(self, args: Mapping[str, Any], kind: str) -> Presentation:
        command = args.get("command")
        dir_path = args.get("dir_path") or args.get("directory")
        description = args.get("description")
        if isinstance(dir_path, str) and dir_path:
            explanation = f"[in {dir_path}]"
        else:
            explanation = f"[current working directory {self.env.workspace}]"
        if isinstance(description, str) and description:
            explanation += f" ({description.replace(chr(10), ' ')})"
        if args.get("is_background") is True:
            explanation += " [background]"
        return Presentation(
            title=command if isinstance(command, str) else "", kind=kind, explanation=explanation
        )

    def running_content(self, p: Presentation) -> list[dict[str, Any]]:
        return [text_content(p.explanation)] if p.explanation else []

    def proposed_text(self, name: str, args: Mapping[str, Any], original: str) -> str:
        """What an edit would leave in the file (for the permission diff)."""
        if name == "write_file":
            return str(args.get("content", ""))
        old, new = str(args.get("old_string", "")), str(args.get("new_string", ""))
        if old == "":
            return new if not original else original
        from actors.tools import calculate_replacement

        try:
            return calculate_replacement(
                original.replace("\r\n", "\n"), old, new, bool(args.get("allow_multiple"))
            ).new_content
        except Exception:
            return original.replace(old, new, 1)

    def result_content(self, name: str, display: Any) -> list[dict[str, Any]]:
        """A finished call's content (Gemini's ``toToolCallContent``): its display text,
        or the diff of a file it changed; nothing for the shell, whose display Gemini
        keeps for its terminal (reference D9)."""
        if name in SHELL_TOOLS or not display:
            return []
        if isinstance(display, str):
            return [text_content(display)]
        if isinstance(display, Mapping) and "fileName" in display:
            path = display.get("filePath") or display.get("fileName")
            return [
                diff_content(str(path), str(display.get("originalContent") or ""), str(display.get("newContent") or ""))
            ]
        return []


TODO_STATUS = {"pending": "pending", "in_progress": "in_progress", "completed": "completed"}


def plan_entries(todos: Any) -> list[dict[str, Any]]:
    """``write_todos``' list as ACP plan entries. ACP knows pending / in_progress /
    completed; a ``cancelled`` todo shows as completed and a ``blocked`` one as pending,
    each with its own status in ``_meta``."""
    entries: list[dict[str, Any]] = []
    for todo in todos if isinstance(todos, list | tuple) else ():
        if not isinstance(todo, Mapping):
            continue
        status = str(todo.get("status", "pending"))
        entry: dict[str, Any] = {
            "content": str(todo.get("description", "")),
            "priority": "medium",
            "status": TODO_STATUS.get(status, "completed" if status == "cancelled" else "pending"),
        }
        if status not in TODO_STATUS:
            entry["_meta"] = {"status": status}
        entries.append(entry)
    return entries
