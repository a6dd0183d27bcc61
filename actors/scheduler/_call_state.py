"""A tool call's states and the moves between them, as one table checked in one place.

    new ─► validating ─┬─► scheduled ─► executing ─► success | error | cancelled
     │                 ├─► awaiting_approval ─► scheduled | cancelled
     │                 └─► error | cancelled     (and scheduled ─► cancelled)
     └─► cancelled      (its batch was cancelled while it was queued)

``new`` is the scheduler's own: a call not yet announced (never sent). The others are
Gemini CLI's ``CoreToolCallStatus`` words that ``ToolCallUpdated`` carries. Every change
of a call's state goes through ``advance``, which refuses a move the table does not
allow with ``CallStateError``: a scheduler bug, never a peer's input, so it crashes the
scheduler (its supervisor reports ``ActorFailed``) rather than send a state no client
can follow. A tail call (an AfterTool hook's ``tailToolCallRequest``) is a new call that
takes the settled one's place, so no terminal state is ever left. The model is h11's
``_state.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeAlias

from bus.messages import TERMINAL_STATES, ToolCallStatus

CallState: TypeAlias = Literal["new", ToolCallStatus]

TRANSITIONS: Mapping[CallState, frozenset[ToolCallStatus]] = {
    "new": frozenset({"validating", "cancelled"}),
    "validating": frozenset({"scheduled", "awaiting_approval", "error", "cancelled"}),
    "awaiting_approval": frozenset({"scheduled", "cancelled"}),
    "scheduled": frozenset({"executing", "cancelled"}),
    "executing": frozenset({"success", "error", "cancelled"}),
    "success": frozenset(),
    "error": frozenset(),
    "cancelled": frozenset(),
}
"""State -> the states it may move to; terminal states move nowhere."""


class CallStateError(RuntimeError):
    """A tool call was asked to move where the table does not allow (a scheduler bug)."""


def advance(call_id: str, current: CallState, new: ToolCallStatus) -> ToolCallStatus:
    """The state after moving from ``current`` to ``new``; raises ``CallStateError``
    when the move is not allowed."""
    if new not in TRANSITIONS[current]:
        raise CallStateError(f"tool call {call_id!r} cannot move from {current} to {new}")
    return new


def is_terminal(state: CallState) -> bool:
    return state in TERMINAL_STATES
