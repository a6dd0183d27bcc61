"""Control messages: failures, lag, shutdown."""

from __future__ import annotations

import attrs

from ._common import shared_methods


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ActorFailed:
    """Event: an actor crashed. Its peers are cancelled; pending requests fail."""

    session_id: str
    actor: str
    reason: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ObserverLagged:
    """Event to an observer that fell behind: resynchronise from ``resume_from``."""

    session_id: str
    observer: str
    resume_from: int


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class Shutdown:
    """Command: stop the session's actors (inbox closes, actors finish and cascade)."""

    session_id: str
    reason: str
