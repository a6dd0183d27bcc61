"""The turn conversation: one prompt's model <-> tool loop."""

from __future__ import annotations

import attrs

from ._common import JsonValue, frozen_json, json_tuple, shared_methods
from .kinds import (
    ApprovalMode,
    CompressionStatus,
    LoopCheckKind,
    LoopType,
    NoticeKind,
    Severity,
    StopReason,
    TurnErrorKind,
)


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class StartTurn:
    """Command from the session to the turn actor: run ``parts`` against ``history``."""

    session_id: str
    turn_id: str
    prompt_id: str
    model: str
    """The configured model (``auto``: the router picks one for this prompt)."""
    approval_mode: ApprovalMode
    history: tuple[JsonValue, ...] = json_tuple()
    """The conversation so far, Gemini ``Content`` objects."""
    parts: tuple[JsonValue, ...] = json_tuple()
    """The new user message."""
    session_turns_used: int = 0
    """Model turns already counted in this session (for ``maxSessionTurns``)."""
    max_session_turns: int = -1
    last_prompt_token_count: int = -1
    """The prompt tokens of the session's last successful model request (its usage);
    ``-1``: unknown, estimated from ``history``."""
    compression_failed: bool = False
    """An earlier compression inflated the history: only truncation is tried now."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class TurnStarted:
    """Event: the turn began."""

    session_id: str
    turn_id: str
    prompt_id: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ModelSelected:
    """Event: the model chosen for this prompt (sticky for its continuations)."""

    session_id: str
    turn_id: str
    model: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class TextStreamed:
    """Event: assistant text as it arrives (thoughts excluded)."""

    session_id: str
    turn_id: str
    text: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ThoughtStreamed:
    """Event: a thought summary part."""

    session_id: str
    turn_id: str
    subject: str
    description: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ToolCallRequested:
    """Event: the model asked for a tool; ``call_id`` carries the ``<name>__`` prefix."""

    session_id: str
    turn_id: str
    call_id: str
    name: str
    args: JsonValue = frozen_json({})


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class StreamRetried:
    """Event: the model stream failed mid-way and is retried; drop partial output."""

    session_id: str
    turn_id: str
    attempt: int
    reason: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class TurnNotice:
    """Event: a warning or error worth showing that does not end the turn by itself.

    ``kind`` is one of ``loop_detected``, ``max_session_turns``, ``agent_blocked``,
    ``invalid_stream``, ``agent_stopped``, ``chat_compressed``,
    ``context_window_will_overflow``.
    """

    session_id: str
    turn_id: str
    kind: NoticeKind
    severity: Severity
    message: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class TurnError:
    """A fatal error that ended a turn (API error, fake-responses exhausted, ...)."""

    kind: TurnErrorKind
    """``api``, ``fatal_tool``, ``turn_limit``, ``cancelled``."""
    type: str
    """The error class name shown to users (``unknown``, ``FatalToolExecutionError``...)."""
    message: str
    exit_code: int = 1
    status: int | None = None


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class TurnEnded:
    """Event: the last message of a turn.

    ``stop_reason``: ``end_turn``, ``cancelled``, ``error``, ``invalid_stream``,
    ``loop_detected``, ``max_session_turns``, ``stop_execution``, ``agent_stopped``,
    ``context_window_overflow``, ``turn_limit``, ``goal`` (a subagent's session: its
    ``complete_task`` call succeeded).
    """

    session_id: str
    turn_id: str
    stop_reason: StopReason
    history_added: tuple[JsonValue, ...] = json_tuple()
    """Contents appended to the conversation by this turn, in order."""
    model_requests: int = 0
    """Model turns this turn counted for ``maxSessionTurns`` (Gemini CLI's
    ``sessionTurnCount``: each model request of the prompt, including recovery and
    continuation requests, and one that a guard stopped before it was sent)."""
    error: TurnError | None = None
    history_reset: bool = False
    """A hook cleared the context: the history restarts (environment context kept)
    with ``history_added``."""
    last_prompt_token_count: int = -1
    """The session's prompt-token count after this turn (``-1``: estimate it again)."""
    compression_failed: bool = False
    """Carried to the next ``StartTurn``: a compression of this session inflated."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class HistoryCompressed:
    """Outcome of a compression attempt of the turn; sent to the session when
    ``history`` is set (``COMPRESSED``, ``CONTENT_TRUNCATED``), which then replaces its
    conversation with it (later ``TurnEnded.history_added`` follows it); only published
    when the attempt failed (``COMPRESSION_FAILED_EMPTY_SUMMARY``,
    ``COMPRESSION_FAILED_INFLATED_TOKEN_COUNT``: the history stays as it was)."""

    session_id: str
    turn_id: str
    status: CompressionStatus
    original_token_count: int
    new_token_count: int
    history: tuple[JsonValue, ...] = json_tuple()
    """The whole new conversation (environment context first, when there was one)."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ResetLoopDetection:
    """Command from the turn to the loop detector: a new prompt starts (its windows and
    counts restart; nothing happens when ``prompt_id`` is the current one)."""

    session_id: str
    prompt_id: str
    user_prompt: str = ""
    """The prompt's text, shown to the LLM loop check as the original request."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class CheckLoop:
    """Request from the turn to the loop detector, answered by one ``LoopVerdict``.

    ``kind``: ``content`` (``text``: a streamed chunk's text, before it is shown),
    ``tool_call`` (``name``, ``args``: before the call is shown), ``turn_started``
    (before each model request; the verdict may say an LLM check is due) and
    ``llm_check`` (``history``: the conversation's last contents for that check).
    """

    session_id: str
    request_id: str
    reply_to: str
    prompt_id: str
    kind: LoopCheckKind
    text: str = ""
    name: str = ""
    args: JsonValue = frozen_json({})
    history: tuple[JsonValue, ...] = json_tuple()


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class LoopVerdict:
    """Reply to ``CheckLoop``: ``count`` loops detected in this prompt so far when this
    event completes one (0: no loop, go on)."""

    session_id: str
    request_id: str
    count: int = 0
    loop_type: LoopType | None = None
    """(``type`` is the codec's tag) ``consecutive_identical_tool_calls``, ``chanting_identical_sentences`` or
    ``llm_detected_loop``."""
    detail: str | None = None
    check_due: bool = False
    """``turn_started`` only: an LLM check is due; send ``llm_check`` with the history."""
    confirmed_by: str | None = None
    """The model that confirmed an LLM-detected loop."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ClearLoopDetection:
    """Command to the loop detector: the recovery turn starts; the count is kept, so the
    next detection in this prompt is the second."""

    session_id: str
    prompt_id: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class CancelLoopCheck:
    """Command to the loop detector: stop the LLM check of ``request_id`` (the turn is
    cancelled); its ``LoopVerdict`` still comes, with no loop."""

    session_id: str
    request_id: str
    reason: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class DisableLoopDetection:
    """Command to the loop detector: no more detection in this session."""

    session_id: str
    requested_by: str = ""
