"""The session conversation: clients and the session actor.

Commands are imperative (``SubmitPrompt``), events are past tense (``SessionOpened``).
Correlation ids come first in every message.
"""

from __future__ import annotations

import attrs

from ._common import JsonValue, frozen_json, json_tuple, shared_methods, text_field
from .kinds import ApprovalMode


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class OpenSession:
    """Command to a session actor: start (or resume) the conversation."""

    session_id: str
    model: str
    """The configured model, ``auto`` when the router chooses."""
    approval_mode: ApprovalMode
    """``default``, ``auto_edit``, ``yolo`` or ``plan``."""
    workspace: str
    """Absolute path of the workspace root."""
    history: tuple[JsonValue, ...] = json_tuple()
    """Contents carried over from a resumed session (Gemini wire shape)."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class SessionOpened:
    """Event: the session is ready to take prompts. Its actors start here: whatever its
    messages before this left open (a turn without its ``TurnEnded``, a call without its
    final status, a question without its ``ApprovalSettled``: the process running them
    was killed, or a failover moved the session) ended with that process, and a client
    shows it ended (its calls ``error``: the session was interrupted before the tool
    finished), as the history the model gets has it."""

    session_id: str
    model: str
    approval_mode: ApprovalMode
    workspace: str
    resumed: bool = False


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class SubmitPrompt:
    """Command from a client: run one prompt as a turn."""

    session_id: str
    prompt_id: str
    parts: tuple[JsonValue, ...] = json_tuple()
    """The user content parts sent to the model (after ``@path`` expansion)."""
    display_text: str = text_field("")
    """The prompt as the user typed it."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class PromptQueued:
    """Event: a prompt arrived while a turn was running and waits its turn."""

    session_id: str
    prompt_id: str
    position: int


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class CancelTurn:
    """Command: cancel the running turn (``turn_id`` None: whichever is running)."""

    session_id: str
    turn_id: str | None
    reason: str
    requested_by: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class TurnCancelAcknowledged:
    """Event: the cancel was carried out; nothing the turn started still runs."""

    session_id: str
    turn_id: str | None
    requested_by: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ConfigureSession:
    """Command from a client: change the session's approval mode and/or model (``None``:
    unchanged); turns started from now on use them. ``SessionConfigured`` answers."""

    session_id: str
    request_id: str
    approval_mode: ApprovalMode | None = None
    """``default``, ``auto_edit``, ``yolo`` or ``plan``."""
    model: str | None = None
    requested_by: str = ""
    max_session_turns: int | None = None
    """A new bound on the session's model turns (``-1``: none); a subagent's supervisor
    uses it to allow exactly one recovery turn."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class SessionConfigured:
    """Event: the settings the session's next turns use (after ``ConfigureSession``)."""

    session_id: str
    request_id: str
    approval_mode: ApprovalMode
    model: str
    requested_by: str = ""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class AddContext:
    """Command from a client: add ``parts`` to the conversation as a user turn of their
    own, so that the next prompt's model request carries them (the result of a tool
    call the user ran and chose to share). Added at once between turns, after the
    running turn otherwise; ``ContextAdded`` tells when."""

    session_id: str
    request_id: str
    parts: tuple[JsonValue, ...] = json_tuple()
    requested_by: str = ""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ContextAdded:
    """Event: ``content`` (a user ``Content``) was appended to the session's history;
    the next model request carries it (resume rebuilds it from this event)."""

    session_id: str
    request_id: str
    content: JsonValue = frozen_json({})
    requested_by: str = ""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class CloseSession:
    """Command: finish the session (cancels a running turn first)."""

    session_id: str
    reason: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class SessionClosed:
    """Event: the session's actors have stopped; the last message of a session."""

    session_id: str
    reason: str
