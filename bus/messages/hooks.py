"""The hooks conversation: actors that reach a hook point and the hook-runner actor.

Gemini CLI's command hooks (``hooks`` in settings.json) run at fixed points of the
flow. The actor at that point sends ``RunHooks`` and waits for ``HooksFinished``;
the runner spawns the matching commands, feeds them JSON on stdin, parses what they
print and aggregates the decisions as Gemini CLI does.
"""

from __future__ import annotations

import attrs

from ._common import JsonValue, frozen_json, shared_methods
from .kinds import HookEvent, HookOutputFormat


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class RunHooks:
    """Command to the hook runner: run the hooks of ``event`` that match ``target``."""

    session_id: str
    request_id: str
    reply_to: str
    event: HookEvent
    """``SessionStart``, ``SessionEnd``, ``BeforeAgent``, ``AfterAgent``, ``BeforeModel``,
    ``AfterModel``, ``BeforeToolSelection``, ``BeforeTool``, ``AfterTool``,
    ``PreCompress`` or ``Notification``."""
    target: str = ""
    """What matchers test: the tool name for tool events, else the trigger/source/reason."""
    input: JsonValue = frozen_json({})
    """Event-specific input fields; the runner adds ``session_id``, ``transcript_path``,
    ``cwd``, ``hook_event_name`` and ``timestamp``."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class HookRan:
    """Event: one hook command finished (or failed to run)."""

    session_id: str
    request_id: str
    event: HookEvent
    name: str
    """The hook's name, or its command."""
    success: bool
    exit_code: int | None = None
    duration_ms: int = 0
    error: str | None = None
    """Why it failed: timed out, could not start, output not understood..."""
    output: JsonValue = frozen_json(None)
    """What the hook answered, parsed (Gemini CLI's rules for plain text and JSON)."""
    output_format: HookOutputFormat | None = None
    """``json`` or ``text`` (plain text converted by the exit-code rule); None: no answer."""
    stdout: str = ""
    """What the hook printed (at most 256 KiB of it here; Gemini's telemetry logs it)."""
    stderr: str = ""
    """What the hook printed on stderr (at most 256 KiB of it here)."""
    input: JsonValue = frozen_json(None)
    """The request's hook input with the runner's base fields, as Gemini's telemetry logs
    it (a sequential hook actually received it with earlier hooks' changes applied)."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class HooksFinished:
    """Terminal reply to ``RunHooks``: the hooks' answers, aggregated for the event."""

    session_id: str
    request_id: str
    event: HookEvent
    output: JsonValue = frozen_json(None)
    """The aggregated hook output (``continue``, ``decision``, ``reason``,
    ``systemMessage``, ``hookSpecificOutput``...), None when no hook answered."""
    ran: int = 0
    """How many hooks were started."""
    failed: tuple[str, ...] = ()
    """Names of hooks that were not successful: non-zero exit, timed out, could not start,
    killed by ``CancelHooks``. As in Gemini CLI, a non-zero exit's answer still counts
    in ``output`` (exit 2 + ``deny`` denies); the others contribute nothing."""
    duration_ms: int = 0
    """Sum of the hooks' durations (Gemini's ``totalDuration``)."""
    cancelled: bool = False
    """The request was cancelled (``CancelHooks`` or the runner stopping)."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class CancelHooks:
    """Command: kill the running hooks of a request; ``HooksFinished`` follows."""

    session_id: str
    request_id: str
    reason: str
