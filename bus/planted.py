"""Planted bugs: test-only switches that break one invariant of DESIGN §5 on purpose.

The explored-sessions suite (``tests/system/test_explored_sessions.py``) and ``agentbus
explore`` (``tests/frontends/explore/``) must fail when an invariant is broken. To show
they do, each switch below plants a bug at one spot in an actor (a one-line
``if planted("..."):`` there), and a test turns it on and asserts the bug is found
within the CI budget (``agentbus explore``: its default budget, on a bundled scenario).

Only ``planting`` (used by tests) turns a switch on. In every real run no switch is on:
``planted`` is then a call and a membership test on an empty frozenset (about 50 ns;
the hot spots are one per recorded message or tool run, which cost microseconds).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

SWITCHES: dict[str, str] = {
    "scheduler.completion_order": "the scheduler settles a batch in completion order (invariant 1)",
    "turn.end_before_tools": "a cancelled turn ends without waiting for its batch (invariant 2)",
    "executor.two_results": "an executor sends two ToolFinished for one RunTool (invariant 3)",
    "recorder.drop_line": "the recorder skips every tenth message (invariant 4)",
    "scheduler.shuffled_dispatch": "a wave's runs go out in random order (invariant 5)",
    "scheduler.barrier_joins_wave": "a mutating call joins the parallel wave before it (invariant 6)",
    "executor.skip_close": "an executor never closes its tools at session end (invariant 7)",
}
"""Every switch, with the bug it plants."""

_active: frozenset[str] = frozenset()


def planted(name: str) -> bool:
    """Whether the bug ``name`` is planted (only ever inside ``planting``)."""
    return name in _active


@contextlib.contextmanager
def planting(*names: str) -> Iterator[None]:
    """Plant the bugs ``names`` for the duration of the block (tests only)."""
    global _active
    unknown = sorted(set(names) - set(SWITCHES))
    if unknown:
        raise ValueError(f"no planted bug named {', '.join(unknown)}")
    before = _active
    _active = before | frozenset(names)
    try:
        yield
    finally:
        _active = before


__all__ = ["SWITCHES", "planted", "planting"]
