"""The closed sets of words the messages carry: modes, statuses, reasons, kinds.

Each is a ``Literal`` type, so the type checker proves every producer sends one of
them and every ``match`` over them is complete, and the codec refuses any other word
(``CodecError``) as it refuses a wrong field. The values are the ones the producers
send (read from them, not from documentation); most are Gemini CLI's own words.
``literal_values(T)`` gives a type's words at run time, for validation and messages.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, TypeGuard, get_args

ApprovalMode: TypeAlias = Literal["default", "auto_edit", "yolo", "plan"]
"""Gemini CLI's ``--approval-mode`` values (``autoEdit`` in settings is mapped on entry)."""

ToolCallStatus: TypeAlias = Literal[
    "validating", "scheduled", "awaiting_approval", "executing", "success", "error", "cancelled"
]
"""The states of a tool call (Gemini CLI's ``CoreToolCallStatus``)."""

TerminalStatus: TypeAlias = Literal["success", "error", "cancelled"]
"""The states a tool call ends in."""

ApprovalOutcome: TypeAlias = Literal[
    "proceed_once",
    "proceed_always",
    "proceed_always_and_save",
    "proceed_always_tool",
    "proceed_always_server",
    "modify_with_editor",
    "cancel",
]
"""An answer to an approval (Gemini CLI's ``ToolConfirmationOutcome``)."""

SettledOutcome: TypeAlias = Literal[ApprovalOutcome, ""]
"""``ApprovalSettled.outcome``: the winning answer; empty when the answer came too late
(another one won, or no call waits under that correlation id)."""

Decision: TypeAlias = Literal["accept", "reject", "modify", "auto_accept"]
"""How a call's approval was decided (Gemini CLI's ``ToolCallDecision``)."""

StopReason: TypeAlias = Literal[
    "end_turn",
    "cancelled",
    "error",
    "invalid_stream",
    "loop_detected",
    "max_session_turns",
    "stop_execution",
    "agent_stopped",
    "agent_blocked",
    "context_window_overflow",
    "turn_limit",
    "goal",
]
"""Why a turn ended (``TurnEnded.stop_reason``)."""

NoticeKind: TypeAlias = Literal[
    "loop_detected",
    "max_session_turns",
    "agent_blocked",
    "agent_stopped",
    "invalid_stream",
    "chat_compressed",
    "context_window_will_overflow",
]
"""What a ``TurnNotice`` is about."""

Severity: TypeAlias = Literal["info", "warning", "error"]

TurnErrorKind: TypeAlias = Literal["api", "fatal_tool", "turn_limit", "cancelled"]
"""What ended a turn with an error (``cancelled``: only headless builds it, for its
output of a cancelled turn)."""

CompressionStatus: TypeAlias = Literal[
    "COMPRESSED",
    "CONTENT_TRUNCATED",
    "COMPRESSION_FAILED_EMPTY_SUMMARY",
    "COMPRESSION_FAILED_INFLATED_TOKEN_COUNT",
]
"""Outcome of a compression attempt that was made (Gemini CLI's ``CompressionStatus``;
its ``NOOP`` is never sent)."""

LoopCheckKind: TypeAlias = Literal["content", "tool_call", "turn_started", "llm_check"]
"""What a ``CheckLoop`` asks the loop detector to look at."""

LoopType: TypeAlias = Literal[
    "consecutive_identical_tool_calls", "chanting_identical_sentences", "llm_detected_loop"
]
"""The loop a ``LoopVerdict`` found (Gemini CLI's ``LoopType``)."""

GenerateMethod: TypeAlias = Literal["generateContentStream", "generateContent", "countTokens"]
"""The model API a ``GenerateRequest`` calls (as in Gemini CLI's fake-responses files)."""

ModelRole: TypeAlias = Literal[
    "main", "classifier", "compressor", "next_speaker", "token_counter", "loop_detector", "utility_tool"
]
"""Who asks the model (``GenerateRequest.role``): the turn's own request, the router,
the compression, the next-speaker check, a token count, the loop detector, a tool."""

HookEvent: TypeAlias = Literal[
    "SessionStart",
    "SessionEnd",
    "BeforeAgent",
    "AfterAgent",
    "BeforeModel",
    "AfterModel",
    "BeforeToolSelection",
    "BeforeTool",
    "AfterTool",
    "PreCompress",
    "Notification",
]
"""The points of the flow where command hooks run (Gemini CLI's ``HookEventName``)."""

HookOutputFormat: TypeAlias = Literal["json", "text"]

SubagentActivityKind: TypeAlias = Literal[
    "started", "thought", "text", "tool_call", "tool_update", "error", "finished"
]

AgentTerminateMode: TypeAlias = Literal[
    "GOAL", "TIMEOUT", "MAX_TURNS", "ABORTED", "ERROR", "ERROR_NO_COMPLETE_TASK_CALL"
]
"""How a subagent's run ended (Gemini CLI's ``AgentTerminateMode``)."""

SessionState: TypeAlias = Literal["running", "dormant", "recorded", "interrupted"]
"""A session as the daemon lists it."""

McpServerState: TypeAlias = Literal["connected", "disconnected", "error"]
"""An MCP server of a session, as ``ListMcpServers`` lists it."""

ProtocolErrorCode: TypeAlias = Literal[
    "bad_frame",
    "frame_too_large",
    "hello_required",
    "bad_version",
    "bad_token",
    "not_a_request",
    "unknown_session",
    "not_yours",
    "busy",
    "in_use",
    "invalid",
    "too_many_errors",
    "auth_required",
    "failed",
]
"""Why the daemon refused a frame or a request (``ProtocolError.code``)."""


def literal_values(kind: Any) -> tuple[str, ...]:
    """The words of a ``Literal`` type, in order."""
    return tuple(get_args(kind))


def is_approval_mode(text: str) -> TypeGuard[ApprovalMode]:
    """``text`` is an approval mode (for words that come from outside: flags, settings,
    a client's request)."""
    return text in _APPROVAL_MODES


def as_approval_mode(text: str) -> ApprovalMode:
    """``text``, which its reader already checked, as an approval mode; ``ValueError``
    naming the valid ones otherwise."""
    if not is_approval_mode(text):
        raise ValueError(f"unknown approval mode {text!r} (one of {', '.join(sorted(_APPROVAL_MODES))})")
    return text


def is_approval_outcome(text: str) -> TypeGuard[ApprovalOutcome]:
    return text in _OUTCOMES


def as_approval_outcome(text: str) -> ApprovalOutcome:
    """``text``, which its reader already checked, as an approval outcome; ``ValueError``
    naming the valid ones otherwise."""
    if not is_approval_outcome(text):
        raise ValueError(f"unknown approval outcome {text!r} (one of {', '.join(literal_values(ApprovalOutcome))})")
    return text


_APPROVAL_MODES = frozenset(literal_values(ApprovalMode))
_OUTCOMES = frozenset(literal_values(ApprovalOutcome))
