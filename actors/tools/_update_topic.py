"""``update_topic`` (Gemini CLI's ``UpdateTopicTool``, display name "Update Topic Context").

The model narrates its work as topics ("chapters") with a strategic intent. The tool
keeps the session's current topic and intent (Gemini's ``TopicState``: titles and
intents are trimmed, runs of line breaks become one space, empty values keep the
previous one) and answers with Gemini's texts:

- a new title: ``Current topic: "<title>"\\nTopic summary: <summary or ...>`` plus
  ``\\n\\nStrategic Intent: <intent>`` when an intent is given;
- otherwise: ``Strategic Intent: <intent, else the current one, else ...>``.

The scheduler runs it alone (a barrier). Gemini's display object (``format: notice``)
travels in ``ToolResult.data["display"]``. State is per session and dropped by
``close_session``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from actors.common import LazyPattern, js_trim
from bus.messages import ToolResult

from ._base import OutputSink, ToolEnv

DISPLAY_NAME = "Update Topic Context"

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "description": "Title of the new topic (chapter)."},
        "summary": {
            "type": "string",
            "description": (
                "Optional: 5-10 sentences on what the previous topic achieved and what the "
                "new one sets out to do; give it when moving to a new topic."
            ),
        },
        "strategic_intent": {
            "type": "string",
            "description": "One sentence: what you are about to do next.",
        },
    },
    "required": ["strategic_intent"],
}

_DESCRIPTION = (
    "Tells the user what you are working on. Give `title` and `summary` only when you "
    "start a new phase of the work or change strategy; otherwise send just the "
    "`strategic_intent`."
)

_BREAKS = LazyPattern(r"[\r\n]+")


@attrs.define
class TopicState:
    """Gemini's ``TopicState``."""

    title: str | None = None
    intent: str | None = None

    def set(self, title: str | None, intent: str | None) -> bool:
        clean_title = _BREAKS.sub(" ", js_trim(title)) if title is not None else None
        clean_intent = _BREAKS.sub(" ", js_trim(intent)) if intent is not None else None
        if not clean_title and not clean_intent:
            return False
        if clean_title:
            self.title = clean_title
        if clean_intent:
            self.intent = clean_intent
        return True


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def update_topic(state: TopicState, args: Mapping[str, Any]) -> tuple[str, str, bool]:
    """Apply one call to ``state``: (llm content, display markdown, is a new topic)."""
    title = _text(args.get("title"))
    summary = _text(args.get("summary"))
    intent = _text(args.get("strategic_intent"))
    active = state.title
    is_new = bool(title and js_trim(title) != "" and js_trim(title) != active)
    state.set(title, intent)
    topic = state.title or "..."
    current_intent = intent or state.intent or "..."
    if is_new:
        llm = f'Current topic: "{topic}"\nTopic summary: {summary or "..."}'
        display = f"## \U0001f4c2 Topic: **{topic}**\n\n**Summary:**\n{summary or '...'}"
        if intent and js_trim(intent):
            llm += f"\n\nStrategic Intent: {js_trim(intent)}"
            display += f"\n\n> [!STRATEGY]\n> **Intent:** {js_trim(intent)}"
    else:
        llm = f"Strategic Intent: {current_intent}"
        display = f"> [!STRATEGY]\n> **Intent:** {current_intent}"
    return llm, display, is_new


class UpdateTopicTool:
    """Gemini CLI's ``update_topic`` tool (kind ``think``)."""

    name = "update_topic"
    display_name = DISPLAY_NAME
    kind = "think"

    def __init__(self) -> None:
        self._states: dict[str, TopicState] = {}

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": self.name, "description": _DESCRIPTION, "parametersJsonSchema": _SCHEMA}

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        return None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        title = _text(args.get("title"))
        if title:
            return f'Update topic to: "{title}"'
        return f'Update tactical intent: "{_text(args.get("strategic_intent")) or "..."}"'

    def state(self, env: ToolEnv) -> TopicState:
        return self._states.setdefault(env.session_id, TopicState())

    async def execute(
        self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None
    ) -> ToolResult:
        llm, display, _ = update_topic(self.state(env), args)
        notice = {
            "format": "notice",
            "name": _text(args.get("title")) or DISPLAY_NAME,
            "description": self.describe(args, env),
        }
        return ToolResult(llm_content=llm, return_display=display, data={"display": notice})

    async def close_session(self, env: ToolEnv) -> None:
        self._states.pop(env.session_id, None)


__all__ = ["TopicState", "UpdateTopicTool", "update_topic"]
