"""Whole sessions under explored schedules, in three parts:

- ``script``: a ``Session`` is what the model says, the tools do and the client does,
  as plain data with a short repr (a failing example shrinks to a session one can
  read), and ``sessions()`` generates them;
- ``harness``: ``run_session`` runs a session's real actors (``supervise_session`` beside
  the real gateway, whose backend plays the model script) on trio's virtual clock, with
  scripted tools and client, and replays the recording;
- ``invariants``: ``check`` returns every ``Violation`` of DESIGN §5's seven invariants
  (known runtime bugs not fixed yet excuse the invariant they break).

Trio's scheduling choices, which hypothesis drives through ``st.random_module()``, are
the only source of interleavings: an example is reproducible from its printed seed.
"""

from .harness import CLIENT, DEADLINE_S, SID, Run, replay_problem, run_session, session_config
from .invariants import (
    FIXED_RUNTIME_BUGS,
    INVARIANTS,
    KNOWN_RUNTIME_BUGS,
    InvariantViolation,
    KnownBug,
    Violation,
    _replies,
    _sequence,
    check,
    history_order_problems,
    known_runtime_bugs,
)
from .script import (
    Answer,
    Call,
    Fault,
    Follower,
    Junk,
    Prompt,
    Reply,
    Session,
    Text,
    Thought,
    When,
    sessions,
)

__all__ = [
    "CLIENT",
    "DEADLINE_S",
    "FIXED_RUNTIME_BUGS",
    "INVARIANTS",
    "KNOWN_RUNTIME_BUGS",
    "SID",
    "Answer",
    "Call",
    "Fault",
    "Follower",
    "InvariantViolation",
    "Junk",
    "KnownBug",
    "Prompt",
    "Reply",
    "Run",
    "Session",
    "Text",
    "Thought",
    "Violation",
    "When",
    "_replies",
    "_sequence",
    "check",
    "history_order_problems",
    "known_runtime_bugs",
    "replay_problem",
    "run_session",
    "session_config",
    "sessions",
]
