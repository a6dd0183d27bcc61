"""Rules that come from settings rather than policy files (all user tier).

``mcp.excluded`` deny 4.9, ``tools.exclude`` deny 4.4, ``tools.confirmationRequired`` ask
4.35, ``tools.allowed`` / ``--allowed-tools`` allow 4.3 (``run_shell_command(git status)``
becomes a command-prefix rule plus a narrowing deny at 4.29), ``tools.core`` allow 4.25
plus a ``*`` deny at 4.24 (not in plan mode), trusted MCP servers 4.2, ``mcp.allowed``
4.1 (and ``mcp.autoAllowInHeadless``). Pure code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from actors.common import LazyPattern, compile_js_regex

from ._policy_args import build_args_patterns
from ._policy_rules import (
    MCP_PREFIX,
    NON_PLAN_MODES,
    SHELL_TOOL_NAME,
    SHELL_TOOL_NAMES,
    USER_POLICY_TIER,
    Rule,
)

_MCP_EXCLUDED_PRIORITY: Final = USER_POLICY_TIER + 0.9
_EXCLUDE_TOOLS_PRIORITY: Final = USER_POLICY_TIER + 0.4
_CONFIRMATION_REQUIRED_PRIORITY: Final = USER_POLICY_TIER + 0.35
_ALLOWED_TOOLS_PRIORITY: Final = USER_POLICY_TIER + 0.3
_CORE_TOOLS_PRIORITY: Final = USER_POLICY_TIER + 0.25
_TRUSTED_MCP_PRIORITY: Final = USER_POLICY_TIER + 0.2
_ALLOWED_MCP_PRIORITY: Final = USER_POLICY_TIER + 0.1


def str_list(value: Any) -> list[str]:
    if isinstance(value, list | tuple):
        return [v for v in value if isinstance(v, str)]
    return []


def setting(mapping: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


_LEGACY_TOOL_ARGS = LazyPattern(r"([a-zA-Z0-9_-]+)\(([^\n\r\u2028\u2029]*)\)")


def _tool_list_rules(
    tools: Sequence[str],
    priority: float,
    source: str,
    modes: tuple[str, ...] | None,
    narrowing_deny: bool,
) -> list[Rule]:
    rules: list[Rule] = []
    narrowed: list[str] = []
    for tool in tools:
        match = _LEGACY_TOOL_ARGS.fullmatch(tool)
        if match:
            raw_name, args = match.groups()
            name = SHELL_TOOL_NAME if raw_name in SHELL_TOOL_NAMES else raw_name
            if name == SHELL_TOOL_NAME:
                if name not in narrowed:
                    narrowed.append(name)
                for pattern in build_args_patterns(None, args, None):
                    if pattern:
                        rules.append(
                            Rule(
                                tool_name=name,
                                decision="allow",
                                priority=priority,
                                modes=modes,
                                args_pattern=compile_js_regex(pattern),
                                args_pattern_source=pattern,
                                source=source,
                            )
                        )
            else:  # arguments only ever narrowed shell commands: allow the whole tool
                rules.append(
                    Rule(
                        tool_name=name,
                        decision="allow",
                        priority=priority,
                        modes=modes,
                        source=source,
                    )
                )
        else:
            name = SHELL_TOOL_NAME if tool in SHELL_TOOL_NAMES else tool
            rules.append(
                Rule(tool_name=name, decision="allow", priority=priority, modes=modes, source=source)
            )
    if narrowing_deny:
        for name in narrowed:
            rules.append(
                Rule(
                    tool_name=name,
                    decision="deny",
                    priority=priority - 0.01,
                    modes=modes,
                    source=f"{source} (narrowing)",
                )
            )
    return rules


def settings_rules(
    settings: Mapping[str, Any],
    *,
    allowed_tools: Sequence[str],
    excluded_tools: Sequence[str],
    interactive: bool,
) -> list[Rule]:
    rules: list[Rule] = []
    mcp = setting(settings, "mcp")
    mcp_servers = setting(settings, "mcpServers")
    servers = mcp_servers if isinstance(mcp_servers, Mapping) else {}

    def server_pattern(server: str) -> str:
        return f"{MCP_PREFIX}*" if server == "*" else f"{MCP_PREFIX}{server}_*"

    for server in str_list(setting(mcp, "excluded")):
        rules.append(
            Rule(
                tool_name=server_pattern(server),
                mcp_name=server,
                decision="deny",
                priority=_MCP_EXCLUDED_PRIORITY,
                source="settings: mcp.excluded",
            )
        )
    for tool in excluded_tools:
        rules.append(
            Rule(
                tool_name=tool,
                decision="deny",
                priority=_EXCLUDE_TOOLS_PRIORITY,
                source="settings: tools.exclude",
            )
        )
    if allowed_tools:
        rules += _tool_list_rules(
            allowed_tools, _ALLOWED_TOOLS_PRIORITY, "settings: tools.allowed", None, True
        )
    for tool in str_list(setting(settings, "tools", "confirmationRequired")):
        rules.append(
            Rule(
                tool_name=SHELL_TOOL_NAME if tool in SHELL_TOOL_NAMES else tool,
                decision="ask_user",
                priority=_CONFIRMATION_REQUIRED_PRIORITY,
                source="settings: tools.confirmationRequired",
            )
        )
    core = setting(settings, "tools", "core")
    if isinstance(core, list | tuple):
        rules += _tool_list_rules(
            str_list(core), _CORE_TOOLS_PRIORITY, "settings: tools.core", NON_PLAN_MODES, False
        )
        rules.append(
            Rule(
                tool_name="*",
                decision="deny",
                priority=_CORE_TOOLS_PRIORITY - 0.01,
                modes=NON_PLAN_MODES,
                source="settings: tools.core (allowlist enforcement)",
            )
        )
    for server, config in servers.items():
        if isinstance(config, Mapping) and config.get("trust"):
            rules.append(
                Rule(
                    tool_name=f"{MCP_PREFIX}{server}_*",
                    mcp_name=server,
                    decision="allow",
                    priority=_TRUSTED_MCP_PRIORITY,
                    modes=NON_PLAN_MODES,
                    source="settings: mcpServers.trust",
                )
            )
    mcp_allowed = str_list(setting(mcp, "allowed"))
    for server in mcp_allowed:
        rules.append(
            Rule(
                tool_name=server_pattern(server),
                mcp_name=server,
                decision="allow",
                priority=_ALLOWED_MCP_PRIORITY,
                modes=NON_PLAN_MODES,
                source="settings: mcp.allowed",
            )
        )
    if not interactive and setting(mcp, "autoAllowInHeadless") and servers:
        for server, config in servers.items():
            trusted = isinstance(config, Mapping) and bool(config.get("trust"))
            if server in mcp_allowed or "*" in mcp_allowed or trusted:
                continue
            rules.append(
                Rule(
                    tool_name=server_pattern(server),
                    mcp_name=server,
                    decision="allow",
                    priority=_ALLOWED_MCP_PRIORITY,
                    modes=NON_PLAN_MODES,
                    source="settings: mcp.autoAllowInHeadless",
                )
            )
    return rules
