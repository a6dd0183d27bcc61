"""Hook configuration: the merged settings' ``hooks`` and ``hooksConfig``, validated.

Gemini CLI reads ``hooks`` (event name → definitions) and ``hooksConfig`` (``enabled``,
``disabled``, ``notifications``) from the merged settings (``hookRegistry.ts``,
``settingsSchema.ts``). It silently skips what it does not understand; we report every
problem at start instead, each with its settings key path, in one ``HookConfigError``
(the issue asks for it; ``docs/`` records the difference).

The result is immutable data. ``HookConfig.plan`` / ``has_hooks`` (``_plan.py``) answer
which hooks run for an event.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs
from frozendict import frozendict

from actors.common import LazyPattern

from ._plan import Plan, PlanEntry, Planner

HOOK_EVENTS: tuple[str, ...] = (
    "BeforeTool",
    "AfterTool",
    "BeforeAgent",
    "Notification",
    "AfterAgent",
    "SessionStart",
    "SessionEnd",
    "PreCompress",
    "BeforeModel",
    "AfterModel",
    "BeforeToolSelection",
)
"""Every event Gemini CLI fires (``HookEventName``, ``types.ts``), in its order."""

RESERVED_HOOKS_KEYS = frozenset({"enabled", "disabled", "notifications"})
"""Keys inside ``hooks`` that are not event names (``HOOKS_CONFIG_FIELDS``)."""

DEFAULT_TIMEOUT_MS = 60_000
"""``DEFAULT_HOOK_TIMEOUT`` (``hookRunner.ts``)."""

_IDENTIFIER = LazyPattern(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class HookConfigError(ValueError):
    """The hook configuration is invalid; ``problems`` lists each with its key path."""

    def __init__(self, problems: list[str] | tuple[str, ...], *, source: str = "settings.json"):
        self.problems = tuple(problems)
        self.source = source
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"Invalid hook configuration in {source}:\n{lines}")


def _frozen_env(env: Mapping[str, str]) -> frozendict[str, str]:
    return frozendict(env)


@attrs.frozen(kw_only=True)
class CommandHook:
    """One ``{"type": "command", ...}`` entry of a hook definition."""

    command: str
    """The shell command, run as ``bash -c <command>``."""
    name: str | None = None
    description: str | None = None
    timeout_ms: float = DEFAULT_TIMEOUT_MS
    """Milliseconds before the hook is killed (SIGTERM, SIGKILL 5 s later)."""
    env: frozendict[str, str] = attrs.field(default=frozendict(), converter=_frozen_env)
    """Extra environment variables, applied last."""

    @property
    def display_name(self) -> str:
        """Gemini's ``getHookName``: the name, else the command."""
        return self.name or self.command

    @property
    def key(self) -> str:
        """Gemini's ``getHookKey`` (``name:command``), used to de-duplicate."""
        return f"{self.name or ''}:{self.command}"


@attrs.frozen(kw_only=True)
class HookDefinition:
    """``{"matcher"?, "sequential"?, "hooks": [...]}`` under an event."""

    matcher: str | None = None
    sequential: bool = False
    hooks: tuple[CommandHook, ...] = ()


def _frozen_definitions(
    definitions: Mapping[str, tuple[HookDefinition, ...]],
) -> frozendict[str, tuple[HookDefinition, ...]]:
    return frozendict({event: tuple(found) for event, found in definitions.items()})


@attrs.frozen(kw_only=True)
class HookConfig:
    """The validated hook configuration of a session. Immutable; safe to share."""

    enabled: bool = True
    """``hooksConfig.enabled``: when false no hook ever runs."""
    definitions: frozendict[str, tuple[HookDefinition, ...]] = attrs.field(
        default=frozendict(), converter=_frozen_definitions
    )
    """Event name → its definitions, in settings order."""
    disabled: frozenset[str] = frozenset()
    """``hooksConfig.disabled``: hook names (or commands) that never run."""
    notifications: bool = True
    """``hooksConfig.notifications`` (display only)."""
    _planner: Planner = attrs.field(init=False, eq=False, repr=False)

    @_planner.default
    def _build_planner(self) -> Planner:
        entries: dict[str, list[PlanEntry]] = {}
        if self.enabled:
            for event, definitions in self.definitions.items():
                for definition in definitions:
                    for hook in definition.hooks:
                        if hook.display_name in self.disabled:
                            continue
                        entries.setdefault(event, []).append(
                            PlanEntry.build(hook, definition.matcher, definition.sequential)
                        )
        return Planner(entries)

    def plan(self, event: str, target: str = "") -> Plan | None:
        """The hooks to run for ``event`` and matcher target, or None when none match."""
        return self._planner.plan(event, target)

    def has_hooks(self, event: str, target: str = "") -> bool:
        """Whether any hook would run; a dict lookup when the event has no hooks."""
        return self._planner.has_hooks(event, target)

    @property
    def hook_count(self) -> int:
        """How many hooks are configured and enabled, over all events."""
        return self._planner.entry_count


# ---------------------------------------------------------------------------- parsing


def _key(parent: str, key: str) -> str:
    if _IDENTIFIER.match(key):
        return f"{parent}.{key}" if parent else key
    return f"{parent}[{key!r}]"


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    return type(value).__name__


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Parser:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def problem(self, path: str, expected: str, value: Any) -> None:
        self.problems.append(f"{path}: expected {expected}, got {_describe(value)}")

    def optional_str(self, node: Mapping[str, Any], key: str, path: str) -> str | None:
        value = node.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            self.problem(_key(path, key), "a string", value)
            return None
        return value

    def hook(self, node: Any, path: str) -> CommandHook | None:
        if not isinstance(node, Mapping):
            self.problem(path, "an object", node)
            return None
        ok = True
        kind = node.get("type")
        if kind != "command":
            # 'runtime' hooks are JavaScript functions registered by embedders, not settings.
            self.problems.append(f'{_key(path, "type")}: expected "command", got {kind!r}')
            ok = False
        command = node.get("command")
        if command is None:
            self.problems.append(f"{_key(path, 'command')}: missing")
            ok = False
        elif not isinstance(command, str) or not command.strip():
            self.problem(_key(path, "command"), "a non-empty string", command)
            ok = False
        name = self.optional_str(node, "name", path)
        description = self.optional_str(node, "description", path)
        timeout: float = DEFAULT_TIMEOUT_MS
        raw_timeout = node.get("timeout")
        if raw_timeout is not None:
            if not _is_number(raw_timeout):
                self.problem(_key(path, "timeout"), "a number", raw_timeout)
                ok = False
            elif not math.isfinite(raw_timeout) or raw_timeout <= 0:
                self.problems.append(
                    f"{_key(path, 'timeout')}: expected a positive number of milliseconds, "
                    f"got {raw_timeout!r}"
                )
                ok = False
            else:
                timeout = raw_timeout
        env: dict[str, str] = {}
        raw_env = node.get("env")
        if raw_env is not None:
            if not isinstance(raw_env, Mapping):
                self.problem(_key(path, "env"), "an object", raw_env)
                ok = False
            else:
                for k, v in raw_env.items():
                    if not isinstance(v, str):
                        self.problem(_key(_key(path, "env"), str(k)), "a string", v)
                        ok = False
                    else:
                        env[str(k)] = v
        if not ok or not isinstance(command, str):
            return None
        return CommandHook(
            command=command, name=name, description=description, timeout_ms=timeout, env=env
        )

    def definition(self, node: Any, path: str) -> HookDefinition | None:
        if not isinstance(node, Mapping):
            self.problem(path, "an object", node)
            return None
        matcher = self.optional_str(node, "matcher", path)
        sequential = node.get("sequential")
        if sequential is not None and not isinstance(sequential, bool):
            self.problem(_key(path, "sequential"), "a boolean", sequential)
        raw_hooks = node.get("hooks")
        hooks: list[CommandHook] = []
        if raw_hooks is None:
            self.problems.append(f"{_key(path, 'hooks')}: missing")
        elif not isinstance(raw_hooks, list | tuple):
            self.problem(_key(path, "hooks"), "an array", raw_hooks)
        else:
            for i, raw in enumerate(raw_hooks):
                hook = self.hook(raw, f"{_key(path, 'hooks')}[{i}]")
                if hook is not None:
                    hooks.append(hook)
        return HookDefinition(matcher=matcher, sequential=sequential is True, hooks=tuple(hooks))

    def hooks_config(self, node: Any) -> tuple[bool, frozenset[str], bool]:
        if node is None:
            return True, frozenset(), True
        if not isinstance(node, Mapping):
            self.problem("hooksConfig", "an object", node)
            return True, frozenset(), True
        enabled = node.get("enabled", True)
        if not isinstance(enabled, bool):
            self.problem("hooksConfig.enabled", "a boolean", enabled)
            enabled = True
        notifications = node.get("notifications", True)
        if not isinstance(notifications, bool):
            self.problem("hooksConfig.notifications", "a boolean", notifications)
            notifications = True
        disabled: set[str] = set()
        raw_disabled = node.get("disabled")
        if raw_disabled is not None:
            if not isinstance(raw_disabled, list | tuple):
                self.problem("hooksConfig.disabled", "an array", raw_disabled)
            else:
                for i, item in enumerate(raw_disabled):
                    if isinstance(item, str):
                        disabled.add(item)
                    else:
                        self.problem(f"hooksConfig.disabled[{i}]", "a string", item)
        return enabled, frozenset(disabled), notifications

    def events(self, node: Any) -> dict[str, tuple[HookDefinition, ...]]:
        if node is None:
            return {}
        if not isinstance(node, Mapping):
            self.problem("hooks", "an object", node)
            return {}
        found: dict[str, tuple[HookDefinition, ...]] = {}
        for event, raw in node.items():
            path = _key("hooks", str(event))
            if event in RESERVED_HOOKS_KEYS:
                continue
            if event not in HOOK_EVENTS:
                self.problems.append(
                    f"{path}: unknown hook event (expected one of {', '.join(HOOK_EVENTS)})"
                )
                continue
            if not isinstance(raw, list | tuple):
                self.problem(path, "an array", raw)
                continue
            definitions = [self.definition(d, f"{path}[{i}]") for i, d in enumerate(raw)]
            found[event] = tuple(d for d in definitions if d is not None)
        return found


def load_hook_config(settings: Mapping[str, Any], *, source: str = "settings.json") -> HookConfig:
    """Parse the merged settings' ``hooks`` and ``hooksConfig``.

    Raises ``HookConfigError`` listing every problem (``hooks.BeforeTool[0].hooks[1].timeout:
    expected a number, got a string``). When ``hooksConfig.enabled`` is false the ``hooks``
    section is not looked at (Gemini never loads it then), so a broken section can be
    switched off.
    """
    parser = _Parser()
    if not isinstance(settings, Mapping):
        raise HookConfigError([f"settings: expected an object, got {_describe(settings)}"], source=source)
    enabled, disabled, notifications = parser.hooks_config(settings.get("hooksConfig"))
    definitions = parser.events(settings.get("hooks")) if enabled else {}
    if parser.problems:
        raise HookConfigError(parser.problems, source=source)
    return HookConfig(
        enabled=enabled,
        definitions=frozendict(definitions),
        disabled=disabled,
        notifications=notifications,
    )
