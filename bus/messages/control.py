"""Control messages: failures, lag, shutdown."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class ActorFailed:
    """Event: an actor crashed. Its peers are cancelled; pending requests fail."""

    session_id: str
    actor: str
    reason: str


@attrs.frozen(kw_only=True)
class ObserverLagged:
    """Event to an observer that fell behind: resynchronise from ``resume_from``."""

    session_id: str
    observer: str
    resume_from: int


@attrs.frozen(kw_only=True)
class Shutdown:
    """Command: stop the session's actors (inbox closes, actors finish and cascade)."""

    session_id: str
    reason: str
