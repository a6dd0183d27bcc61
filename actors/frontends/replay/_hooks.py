"""A recording's hooks, for runs that give their answers back instead of running them
(a replay, an explored run): the hook configuration the recorded session behaved as if
it had (``recorded_hook_config``), and the replay's hook runner (``PlayedHooks``).

A hook's command is a real process whose timing the virtual clock cannot own, and its
answers are in the recording (``HookRan``, ``HooksFinished``): the session asks at the
points it asked (``RunHooks`` for the recorded event and target) and gets the recorded
answer back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import trio

from actors.hooks import TOOL_EVENTS, TRIGGER_EVENTS, CommandHook, HookConfig, HookDefinition
from bus import Bus, Port
from bus.messages import HookRan, RunHooks


def hook_points(messages: Iterable[Any]) -> list[tuple[str, str, tuple[str, ...]]]:
    """Each recorded ``RunHooks``: its event, target and the names of the hooks that ran
    for it (``HookRan``), in the order asked."""
    asked: dict[str, tuple[str, str, list[str]]] = {}
    order: list[tuple[str, str, list[str]]] = []
    for msg in messages:
        if isinstance(msg, RunHooks):
            point: tuple[str, str, list[str]] = (str(msg.event), msg.target, [])
            asked[msg.request_id] = point
            order.append(point)
        elif isinstance(msg, HookRan) and msg.request_id in asked:
            names = asked[msg.request_id][2]
            if msg.name not in names:
                names.append(msg.name)
    # A client's own asking with nothing configured (a headless run's SessionStart) ran none.
    return [(event, target, tuple(names)) for event, target, names in order if names]


def recorded_hook_config(points: Iterable[tuple[str, str, Sequence[str]]]) -> HookConfig | None:
    """A configuration under which the session asks for hooks exactly at ``points``
    (event, target, hook names): each point's hooks, matching its target only. Its
    commands are the hooks' names and are never run. None: no point ran a hook."""
    definitions: dict[str, list[HookDefinition]] = {}
    seen: set[tuple[str, str]] = set()
    for event, target, names in points:
        if (event, target) in seen or not names:
            continue
        seen.add((event, target))
        if event in TOOL_EVENTS and target:
            matcher: str | None = f"^{re.escape(target)}$"
        elif event in TRIGGER_EVENTS and target:
            matcher = target
        else:
            matcher = None
        hooks = tuple(CommandHook(command=name) for name in names)
        definitions.setdefault(event, []).append(HookDefinition(matcher=matcher, hooks=hooks))
    if not definitions:
        return None
    return HookConfig(definitions={event: tuple(found) for event, found in definitions.items()})


class PlayedHooks:
    """The replay's hook runner: takes the session's ``RunHooks`` and ``CancelHooks`` off
    its inbox; what the recorded runner sent is played by the replay as the recording
    shows it."""

    def __init__(self, bus: Bus, address: str) -> None:
        self.bus = bus
        self.address = address

    async def run(self, *, task_status: trio.TaskStatus[Port] = trio.TASK_STATUS_IGNORED) -> None:
        port = self.bus.connect(self.address, capacity=100_000)
        try:
            task_status.started(port)
            async for _env in port:
                pass
        finally:
            port.close()
