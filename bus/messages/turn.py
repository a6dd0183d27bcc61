"""The turn conversation: one prompt's model <-> tool loop."""

from __future__ import annotations

import attrs

from ._common import JsonValue, frozen_json, json_tuple


@attrs.frozen(kw_only=True)
class StartTurn:
    """Command from the session to the turn actor: run ``parts`` against ``history``."""

    session_id: str
    turn_id: str
    prompt_id: str
    model: str
    """The configured model (``auto``: the router picks one for this prompt)."""
    approval_mode: str
    history: tuple[JsonValue, ...] = json_tuple()
    """The conversation so far, Gemini ``Content`` objects."""
    parts: tuple[JsonValue, ...] = json_tuple()
    """The new user message."""
    session_turns_used: int = 0
    """Model requests already made in this session (for ``maxSessionTurns``)."""
    max_session_turns: int = -1


@attrs.frozen(kw_only=True)
class TurnStarted:
    """Event: the turn began."""

    session_id: str
    turn_id: str
    prompt_id: str


@attrs.frozen(kw_only=True)
class ModelSelected:
    """Event: the model chosen for this prompt (sticky for its continuations)."""

    session_id: str
    turn_id: str
    model: str


@attrs.frozen(kw_only=True)
class TextStreamed:
    """Event: assistant text as it arrives (thoughts excluded)."""

    session_id: str
    turn_id: str
    text: str


@attrs.frozen(kw_only=True)
class ThoughtStreamed:
    """Event: a thought summary part."""

    session_id: str
    turn_id: str
    subject: str
    description: str


@attrs.frozen(kw_only=True)
class ToolCallRequested:
    """Event: the model asked for a tool; ``call_id`` carries the ``<name>__`` prefix."""

    session_id: str
    turn_id: str
    call_id: str
    name: str
    args: JsonValue = frozen_json({})


@attrs.frozen(kw_only=True)
class StreamRetried:
    """Event: the model stream failed mid-way and is retried; drop partial output."""

    session_id: str
    turn_id: str
    attempt: int
    reason: str


@attrs.frozen(kw_only=True)
class TurnNotice:
    """Event: a warning or error worth showing that does not end the turn by itself.

    ``kind`` is one of ``loop_detected``, ``max_session_turns``, ``agent_blocked``,
    ``invalid_stream``, ``agent_stopped``.
    """

    session_id: str
    turn_id: str
    kind: str
    severity: str
    message: str


@attrs.frozen(kw_only=True)
class TurnError:
    """A fatal error that ended a turn (API error, fake-responses exhausted, ...)."""

    kind: str
    """``api``, ``fatal_tool``, ``internal``, ``turn_limit``, ``cancelled``."""
    type: str
    """The error class name shown to users (``unknown``, ``FatalToolExecutionError``...)."""
    message: str
    exit_code: int = 1
    status: int | None = None


@attrs.frozen(kw_only=True)
class TurnEnded:
    """Event: the last message of a turn.

    ``stop_reason``: ``end_turn``, ``cancelled``, ``error``, ``invalid_stream``,
    ``loop_detected``, ``max_session_turns``, ``stop_execution``, ``agent_stopped``,
    ``context_window_overflow``, ``turn_limit``.
    """

    session_id: str
    turn_id: str
    stop_reason: str
    history_added: tuple[JsonValue, ...] = json_tuple()
    """Contents appended to the conversation by this turn, in order."""
    model_requests: int = 0
    """Model requests this turn made (counted for ``maxSessionTurns``)."""
    error: TurnError | None = None
