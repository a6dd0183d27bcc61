"""The tools conversation: turn -> scheduler -> executors, and approvals.

Call states follow Gemini CLI (``validating``, ``scheduled``, ``awaiting_approval``,
``executing``, ``success``, ``error``, ``cancelled``); every transition is a
``ToolCallUpdated`` event that clients can show.
"""

from __future__ import annotations

from typing import Literal

import attrs

from ._common import JsonValue, frozen_json, json_tuple, shared_methods, text_field
from .kinds import (
    AgentTerminateMode,
    ApprovalMode,
    ApprovalOutcome,
    Decision,
    SettledOutcome,
    SubagentActivityKind,
    TerminalStatus,
    ToolCallStatus,
)

TERMINAL_STATES: frozenset[ToolCallStatus] = frozenset(("success", "error", "cancelled"))


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ToolCallRequest:
    """One function call to run (a value inside ``ScheduleBatch``)."""

    call_id: str
    name: str
    args: JsonValue = frozen_json({})
    prompt_id: str = ""
    client_initiated: bool = False
    """True when a user asked for the call directly rather than the model."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ScheduleBatch:
    """Command to the scheduler: run these calls; reply ``BatchSettled`` to ``reply_to``."""

    session_id: str
    batch_id: str
    reply_to: str
    approval_mode: ApprovalMode
    calls: tuple[ToolCallRequest, ...] = ()
    interactive: bool = False
    """Whether a client can be asked for approvals (headless: False)."""
    model: str = ""
    """The model the turn is using (the tools' ``active_model``: a subagent that
    inherits its model uses it)."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ToolCallUpdated:
    """Event: a call changed state."""

    session_id: str
    batch_id: str
    call_id: str
    name: str
    status: ToolCallStatus
    wave: int = 0
    """Index of the wave the call runs in (0-based)."""
    detail: str = text_field("")


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ApprovalRequested:
    """Event to clients: a call waits for a decision."""

    session_id: str
    batch_id: str
    call_id: str
    correlation_id: str
    name: str
    args: JsonValue = frozen_json({})
    details: JsonValue = frozen_json({})
    """Confirmation details: ``type`` (edit / exec / info / mcp) and ``title`` (the tool's
    display name), then what the tool shows, in Gemini CLI's names: an edit's
    ``fileName``, ``filePath``, ``isNewFile``, ``fileDiff`` (a unified diff) and a write's
    ``newContent``, each cut after whole lines (``fileDiffOmittedLines``,
    ``newContentOmittedLines``: how many were left out), or a ``note`` where no diff is
    shown (a file too large, an edit that would fail); a shell call's whole ``command``,
    ``rootCommand`` (its root commands, comma-separated) and ``dirPath``."""
    answer_to: str = ""
    """Where ``ApprovalAnswered`` goes; empty: this session's scheduler. Set when a
    subagent's request is shown in its parent session (the child's scheduler)."""
    answer_session_id: str = ""
    """The session id the answer carries; empty: ``session_id``."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ApprovalAnswered:
    """Command from a client: ``outcome`` is Gemini CLI's ``ToolConfirmationOutcome``."""

    session_id: str
    correlation_id: str
    outcome: ApprovalOutcome
    answered_by: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ApprovalSettled:
    """Event: which answer won (the first); later answers are told it was taken."""

    session_id: str
    correlation_id: str
    outcome: SettledOutcome
    """Empty: the answer came too late (another won, or no call waits for it)."""
    answered_by: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class RunTool:
    """Command to an executor: run one validated, approved call."""

    session_id: str
    call_id: str
    reply_to: str
    name: str
    args: JsonValue = frozen_json({})
    approval_mode: Literal[ApprovalMode, ""] = ""
    """The batch's approval mode (a subagent started by this call inherits it); empty:
    the executor's own."""
    model: str = ""
    """The model of the turn that asked for the call."""
    client_initiated: bool = False
    """The user asked for the call (``ToolCallRequest.client_initiated``), not the model."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ReadTextFile:
    """Request from an executor to the session's file-access client (an editor that
    serves its buffers): the text of ``path``; one ``FileAccessed`` answers."""

    session_id: str
    request_id: str
    reply_to: str
    path: str
    """Absolute path."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class WriteTextFile:
    """Request from an executor to the session's file-access client: replace the text of
    ``path`` (creating it); one ``FileAccessed`` answers."""

    session_id: str
    request_id: str
    reply_to: str
    path: str
    content: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class FileAccessed:
    """Terminal reply to ``ReadTextFile`` / ``WriteTextFile``."""

    session_id: str
    request_id: str
    content: str | None = None
    """The text read (``ReadTextFile``); None after a write or a failure."""
    error: str | None = None
    """Why the access failed; None: it succeeded."""
    not_found: bool = False
    """The file does not exist (a read of a new file)."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class RunInTerminal:
    """Request from an executor to the session's terminal client (an editor that runs
    commands in terminals it shows, ACP's ``terminal/*``): run ``command`` with ``args``
    in ``cwd`` for the call ``call_id``. ``TerminalOutput`` events may follow; one
    ``TerminalExited`` answers, also after ``KillTerminal``."""

    session_id: str
    request_id: str
    reply_to: str
    call_id: str
    """The tool call it runs for (the client shows the terminal inside it)."""
    command: str
    args: tuple[str, ...] = ()
    cwd: str
    env: JsonValue = frozen_json({})
    """Variables to set (name -> value) over the client's environment."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class TerminalOutput:
    """Event from the terminal client to the executor: output a ``RunInTerminal``
    command printed since the last one."""

    session_id: str
    request_id: str
    text: str = text_field()


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class TerminalExited:
    """Terminal reply to ``RunInTerminal``: the command's whole output and how it ended
    (``error``: it could not run, or the client failed while it ran)."""

    session_id: str
    request_id: str
    output: str = text_field("")
    exit_code: int | None = None
    signal: str | None = None
    """The signal's name (``SIGTERM``) when one ended it."""
    error: str | None = text_field(None)
    terminal_id: str = ""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class KillTerminal:
    """Command from an executor to the terminal client: kill a ``RunInTerminal``
    command (the call was cancelled); its ``TerminalExited`` still answers."""

    session_id: str
    request_id: str
    reason: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ToolOutputStreamed:
    """Event: live output of a running call (shell)."""

    session_id: str
    call_id: str
    text: str = text_field()
    pid: int | None = None


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ToolResult:
    """What a tool produced (a value inside ``ToolFinished``).

    ``llm_content`` is the text or parts for the model; ``return_display`` what the user
    sees (a string, or an object such as a file diff).
    """

    llm_content: JsonValue = frozen_json("")
    return_display: JsonValue = frozen_json(None)
    error_type: str | None = None
    error_message: str | None = text_field(None)
    cancelled: bool = False
    output_file: str | None = None
    data: JsonValue = frozen_json(None)


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ToolFinished:
    """Terminal reply from an executor to ``RunTool`` (also after ``CancelTool``)."""

    session_id: str
    call_id: str
    result: ToolResult
    duration_ms: int = 0


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class CancelTool:
    """Command to an executor: stop a running call (its process group is killed)."""

    session_id: str
    call_id: str
    reason: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class CompletedCall:
    """A settled call, as the model and the clients get it."""

    call_id: str
    name: str
    args: JsonValue = frozen_json({})
    status: TerminalStatus = "success"
    response_parts: tuple[JsonValue, ...] = json_tuple()
    result_display: JsonValue = frozen_json(None)
    error_type: str | None = None
    error_message: str | None = text_field(None)
    duration_ms: int = 0
    decision: Decision | None = None
    """``accept``, ``reject``, ``modify`` or ``auto_accept`` when a decision was taken."""
    output_file: str | None = None
    replaced: tuple[CompletedCall, ...] = ()
    """Earlier executions of this call that a hook's tail call replaced (same call id);
    each counts in tool statistics."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class BatchSettled:
    """Terminal reply to ``ScheduleBatch``: every call, in request order."""

    session_id: str
    batch_id: str
    calls: tuple[CompletedCall, ...] = ()


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class CancelBatch:
    """Command to the scheduler: cancel a batch in any state."""

    session_id: str
    batch_id: str
    reason: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class BatchCancelAcknowledged:
    """Event: the batch was cancelled; its ``BatchSettled`` went out before this."""

    session_id: str
    batch_id: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class SubagentActivity:
    """Event: what a subagent (a child session started by ``invoke_agent``) is doing,
    shown in the parent session nested under the call that started it.

    ``kind``: ``started``, ``thought``, ``text``, ``tool_call`` (``tool_call_id``,
    ``tool_name``, ``args``), ``tool_update`` (``status``: ``success``, ``error``,
    ``cancelled``), ``error``, ``finished`` (``status``: the termination mode, ``text``:
    the result). ``depth`` 1 is a child of this session, 2 a grandchild, ...
    """

    session_id: str
    call_id: str
    """The ``invoke_agent`` call of this session the activity nests under."""
    agent_name: str
    child_session_id: str
    kind: SubagentActivityKind
    depth: int = 1
    text: str = ""
    tool_call_id: str = ""
    tool_name: str = ""
    args: JsonValue = frozen_json({})
    status: Literal[TerminalStatus, AgentTerminateMode, ""] = ""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ApprovalModeChanged:
    """Command to the scheduler: the session's approval mode changed during a turn. The
    running batch decides its later calls in the new mode, and calls waiting for an
    approval that the new mode allows are approved (``ApprovalSettled`` with
    ``proceed_once``), as Gemini CLI does when the mode changes under a prompt."""

    session_id: str
    approval_mode: ApprovalMode
    requested_by: str = ""
