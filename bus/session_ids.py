"""What a session id may be, wherever one comes in (the daemon's requests, ACP's
``session/load``, ``--resume``): it names the session's recording file, so letters,
digits, ``-`` and ``_`` only, at most ``MAX_SESSION_ID`` of them."""

from __future__ import annotations

import re

SESSION_ID_RE = re.compile(r"[A-Za-z0-9_-]+\Z")
"""(``\\Z``, not ``$``: ``$`` lets a trailing newline through.)"""
MAX_SESSION_ID = 128


def session_id_problem(session_id: str) -> str | None:
    """Why ``session_id`` is not one (one line, the id cut to its allowed length), or None."""
    if len(session_id) > MAX_SESSION_ID or not SESSION_ID_RE.match(session_id):
        return f"invalid session id {session_id[:MAX_SESSION_ID]!r} (letters, digits, - and _, at most {MAX_SESSION_ID})"
    return None


__all__ = ["MAX_SESSION_ID", "SESSION_ID_RE", "session_id_problem"]
