"""Which hooks run for an event: Gemini CLI's ``hookPlanner.ts``.

Matching (``matchesContext``): a definition without a matcher, or with ``''`` / ``'*'``
(after trimming), matches everything. Tool events (``BeforeTool``, ``AfterTool``) test
the matcher as a regular expression against the tool name (``RegExp.test``: a search,
not anchored); a matcher that does not compile is compared exactly. ``SessionStart``,
``SessionEnd`` and ``PreCompress`` compare it exactly with the source / reason /
trigger. Every other event is fired without a context, so its matchers are ignored,
as are all matchers when the target is empty.

Then identical hooks (``name:command``) are de-duplicated, keeping the first, and the
plan is sequential when ANY remaining entry comes from a ``sequential: true`` definition.
Order is the settings order (every settings hook has the same source in Gemini).

``has_hooks`` is on the hot path (the lead asks it per streamed chunk): an event with no
hooks costs one dict lookup; otherwise plans are memoised per (event, target).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from ._config import CommandHook

TOOL_EVENTS = frozenset({"BeforeTool", "AfterTool"})
"""Events whose target is a tool name (regex matchers)."""
TRIGGER_EVENTS = frozenset({"SessionStart", "SessionEnd", "PreCompress"})
"""Events whose target is a source / reason / trigger (exact matchers)."""

_CACHE_LIMIT = 4096


@attrs.frozen(kw_only=True)
class Plan:
    """The hooks to run for one event occurrence, in order."""

    event: str
    hooks: tuple[CommandHook, ...]
    sequential: bool


@attrs.frozen
class PlanEntry:
    """One enabled hook with its definition's matcher, pre-compiled."""

    hook: CommandHook
    matcher: str | None
    """Trimmed matcher; None when it matches everything (absent, ``''``, ``'*'``)."""
    regex: re.Pattern[str] | None
    """The matcher compiled for tool events; None when it is not a valid pattern."""
    sequential: bool

    @classmethod
    def build(cls, hook: CommandHook, matcher: str | None, sequential: bool) -> PlanEntry:
        trimmed = matcher.strip() if matcher else ""
        if trimmed in ("", "*"):
            return cls(hook, None, None, sequential)
        try:
            regex: re.Pattern[str] | None = re.compile(trimmed)
        except re.error:
            regex = None
        return cls(hook, trimmed, regex, sequential)

    def matches(self, event: str, target: str) -> bool:
        if self.matcher is None or not target:
            return True
        if event in TOOL_EVENTS:
            if self.regex is None:
                return self.matcher == target
            return self.regex.search(target) is not None
        if event in TRIGGER_EVENTS:
            return self.matcher == target
        return True


def plan_entries(event: str, target: str, entries: Sequence[PlanEntry]) -> Plan | None:
    """Gemini's ``createExecutionPlan`` over one event's enabled entries."""
    seen: set[str] = set()
    kept: list[PlanEntry] = []
    for entry in entries:
        if not entry.matches(event, target):
            continue
        key = entry.hook.key
        if key in seen:
            continue
        seen.add(key)
        kept.append(entry)
    if not kept:
        return None
    return Plan(
        event=event,
        hooks=tuple(e.hook for e in kept),
        sequential=any(e.sequential for e in kept),
    )


class Planner:
    """Enabled entries per event, with memoised plans.

    The memo is the only mutable state of a ``HookConfig``: a pure cache (same answer
    with or without it), touched only from trio tasks, so sharing it is harmless.
    """

    def __init__(self, entries: Mapping[str, Sequence[PlanEntry]]) -> None:
        self._entries = {event: tuple(found) for event, found in entries.items() if found}
        self._cache: dict[tuple[str, str], Plan | None] = {}
        self.entry_count = sum(len(found) for found in self._entries.values())

    def plan(self, event: str, target: str) -> Plan | None:
        entries = self._entries.get(event)
        if entries is None:
            return None
        if event not in TOOL_EVENTS and event not in TRIGGER_EVENTS:
            target = ""
        key = (event, target)
        try:
            return self._cache[key]
        except KeyError:
            pass
        found = plan_entries(event, target, entries)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = found
        return found

    def has_hooks(self, event: str, target: str) -> bool:
        if event not in self._entries:
            return False
        return self.plan(event, target) is not None
