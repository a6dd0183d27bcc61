"""``write_todos`` (Gemini CLI's ``WriteTodosTool``, display name WriteTodos).

The model sends the whole list each time; the tool checks it (non-empty descriptions,
known statuses, at most one ``in_progress``) and answers with the numbered list. The
list itself goes to clients as ``ToolResult.data == {"todos": [...]}`` (and as the
``return_display`` object, like Gemini's ``{todos}``), so a client can render it as a
plan.

Gemini registers the tool only for Gemini 2 models that are not previews and only when
its task tracker is off (see ``builtin_tools``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from actors.common import js_trim
from bus.messages import ToolResult

from ._base import OutputSink, ToolEnv

TODO_STATUSES = ("pending", "in_progress", "completed", "cancelled", "blocked")

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "todos": {
            "type": "array",
            "description": "The full, current todo list; it replaces the previous one.",
            "items": {
                "type": "object",
                "description": "One todo item.",
                "properties": {
                    "description": {"type": "string", "description": "What the task is."},
                    "status": {
                        "type": "string",
                        "description": "Where the task stands.",
                        "enum": list(TODO_STATUSES),
                    },
                },
                "required": ["description", "status"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["todos"],
    "additionalProperties": False,
}

_DESCRIPTION = (
    "Keeps a visible list of the subtasks of a multi-step request. Send the complete "
    "list every time (it replaces the previous one), each item with a status: pending, "
    "in_progress (at most one at a time, set just before starting it), completed, "
    "cancelled or blocked. Update it whenever a subtask starts, finishes or is dropped. "
    "Do not use it for requests that take fewer than two steps."
)

GEMINI_2_MODEL = re.compile(r"^gemini-2(\.|$)")


def registered_for(model: str, *, tracker_enabled: bool = False) -> bool:
    """Gemini's ``useWriteTodos``: a Gemini 2 model (never a preview), tracker off."""
    return bool(GEMINI_2_MODEL.match(model)) and not tracker_enabled


class WriteTodosTool:
    """Gemini CLI's ``write_todos`` tool."""

    name = "write_todos"
    display_name = "WriteTodos"
    kind = "other"

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": self.name, "description": _DESCRIPTION, "parametersJsonSchema": _SCHEMA}

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        todos = args.get("todos")
        if not isinstance(todos, list | tuple):
            return "`todos` parameter must be an array"
        for todo in todos:
            if not isinstance(todo, Mapping):
                return "Each todo item must be an object"
            description = todo.get("description")
            if not isinstance(description, str) or not js_trim(description):
                return "Each todo must have a non-empty description string"
            if todo.get("status") not in TODO_STATUSES:
                return f"Each todo must have a valid status ({', '.join(TODO_STATUSES)})"
        if sum(1 for t in todos if t.get("status") == "in_progress") > 1:
            return 'Invalid parameters: Only one task can be "in_progress" at a time.'
        return None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        todos = args.get("todos")
        count = len(todos) if isinstance(todos, list | tuple) else 0
        return "Cleared todo list" if count == 0 else f"Set {count} todo(s)"

    async def execute(
        self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None
    ) -> ToolResult:
        raw = args.get("todos")
        todos = [
            {"description": str(t.get("description")), "status": str(t.get("status"))}
            for t in (raw if isinstance(raw, list | tuple) else ())
            if isinstance(t, Mapping)
        ]
        if todos:
            listing = "\n".join(
                f"{i}. [{t['status']}] {t['description']}" for i, t in enumerate(todos, start=1)
            )
            llm = f"Successfully updated the todo list. The current list is now:\n{listing}"
        else:
            llm = "Successfully cleared the todo list."
        return ToolResult(llm_content=llm, return_display={"todos": todos}, data={"todos": todos})


__all__ = ["TODO_STATUSES", "WriteTodosTool", "registered_for"]
