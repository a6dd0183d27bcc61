"""Session actor: one conversation (pure core in ``_core``, trio shell in ``_actor``)."""

from ._actor import SessionActor, SessionWiring
from ._core import Effect, Publish, SessionCore, SessionInbox, SessionState, Stop, ToTurn

__all__ = [
    "Effect",
    "Publish",
    "SessionActor",
    "SessionCore",
    "SessionInbox",
    "SessionState",
    "SessionWiring",
    "Stop",
    "ToTurn",
]
