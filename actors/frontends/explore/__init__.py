"""Explored sessions: a session's real actors re-run many times on trio's virtual clock
while hypothesis varies what the real world would vary, with DESIGN §5's seven
invariants (and the user's own) checked on every run.

The parts, each usable on its own (in a pytest ``@given`` test, say):

- the script of a session (``Session`` and its parts: ``Reply``, ``Call``, ``Fault``,
  ``Prompt``, ``Answer``, ``When``, ``Follower``...), plain data with a short repr, and
  ``sessions()``, the hypothesis strategy that generates whole sessions with scripted
  tools;
- the harness: ``run_session`` runs a ``Session`` with the real actors
  (``actors.host.runtime.supervise_session`` beside the real gateway) on a fresh
  ``MockClock``, then replays its recording; it returns a ``Run``. ``execute`` runs a
  session's client script in any ``World`` (its ``SessionConfig`` and model backend;
  ``scripted_world``: the scripted tools ``explore_tools``, ``ExplorePolicy`` and
  ``ScriptedBackend``), timing tools and model calls as ``Spans``;
- the invariant checks: ``check(run)`` returns every ``Violation`` of the seven
  invariants (``INVARIANTS`` names them);
- targets and perturbations (``load_target``, ``perturbations``, ``run_target``): a
  user's recording, scenario folder or fake-responses file re-run in a copy of its
  workspace with its real tools, under a ``Perturbation`` (tool durations and outcomes,
  chunk timing, API faults, cancels, approval answers, client disconnects);
- user invariants (``UserRun``, ``load_invariant``): ``MODULE:FUNC`` called with each
  finished run;
- ``agentbus explore`` (``main``), the command line over all of it.

Trio's scheduling choices, which hypothesis drives through ``st.random_module()``, are
the only source of interleavings besides the perturbation: a run is reproducible from
its printed seed, and its recording replays with ``agentbus replay --check``.
"""

from actors.frontends.explore._cli import Exploration, build_parser, explore, main
from actors.frontends.explore._harness import (
    CLIENT,
    DEADLINE_S,
    SID,
    ExplorePolicy,
    ExploreTool,
    Processes,
    Run,
    ScriptedBackend,
    Span,
    Spans,
    World,
    execute,
    explore_tools,
    replay_problem,
    run_session,
    scripted_world,
    session_config,
)
from actors.frontends.explore._invariants import (
    FIXED_RUNTIME_BUGS,
    INVARIANTS,
    KNOWN_RUNTIME_BUGS,
    InvariantViolation,
    KnownBug,
    Violation,
    check,
    check_replies,
    check_sequence,
    history_order_problems,
    known_runtime_bugs,
)
from actors.frontends.explore._perturb import (
    KINDS,
    ApiFault,
    HookTwist,
    Perturbation,
    ToolTwist,
    perturbations,
)
from actors.frontends.explore._script import (
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
from actors.frontends.explore._target import (
    ExploreInputError,
    HookRun,
    StandIn,
    Target,
    load_target,
)
from actors.frontends.explore._world import (
    TargetRun,
    UserInvariant,
    UserRun,
    UserViolation,
    load_invariant,
    run_target,
)

__all__ = [
    "KINDS",
    "ApiFault",
    "ExploreInputError",
    "Exploration",
    "HookRun",
    "HookTwist",
    "Perturbation",
    "StandIn",
    "Target",
    "TargetRun",
    "ToolTwist",
    "UserInvariant",
    "UserRun",
    "UserViolation",
    "build_parser",
    "explore",
    "load_invariant",
    "load_target",
    "main",
    "perturbations",
    "run_target",
    "ExplorePolicy",
    "ExploreTool",
    "Processes",
    "ScriptedBackend",
    "Span",
    "Spans",
    "World",
    "execute",
    "explore_tools",
    "scripted_world",
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
    "check",
    "check_replies",
    "check_sequence",
    "history_order_problems",
    "known_runtime_bugs",
    "replay_problem",
    "run_session",
    "session_config",
    "sessions",
]
