"""A session's MCP servers: connected, their tools discovered and added to the session's
registry and request config, before the session's actors start (``opening.open_session``
runs ``supervise_with_mcp`` instead of ``runtime.supervise_session`` when the session has
servers).

Each server gets one connection (``actors.mcp.McpConnection``) held in a nursery that
lives exactly as long as the session: when the session's actors have stopped, the
connections are cancelled and every stdio server's process group is stopped. Discovery
runs for all servers at once, each bounded by its ``timeout`` (Gemini CLI's default: 10
minutes); a server that fails or hangs is one line on stderr naming it, and the session
starts with the others. The tools of a server run on an executor of their own (kind
``mcp.<server>``), so one slow server never holds another's calls.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from actors.host import runtime
from actors.host import settings as _settings
from bus import Bus

if TYPE_CHECKING:
    from actors.host.mcp_config import McpServerConfig
    from actors.host.mcp_session import SessionMcp
    from actors.mcp import ServerParams

EXECUTOR_PREFIX = "mcp."
"""MCP tools run on the executor ``mcp.<server>`` (no ``:``: an executor's address is
``exec.<kind>:<session>``)."""


def stderr_report(line: str) -> None:
    sys.stderr.write(f"{line}\n")
    sys.stderr.flush()


def server_params(config: McpServerConfig, settings: Mapping[str, Any]) -> ServerParams:
    """``actors.mcp.ServerParams`` of one configured server: a stdio server's environment
    and a remote server's headers as Gemini gives them (``mcp_config.server_environment``,
    ``server_headers``), its transport by Gemini's order (``httpUrl``, ``url`` by
    ``type`` — streamable HTTP, then SSE when it fails, without one —, ``command``)."""
    from actors.host.mcp_config import redaction_lists, server_environment, server_headers
    from actors.mcp import ServerParams

    allowed, blocked = redaction_lists(settings)
    common: dict[str, Any] = {
        "name": config.name,
        "timeout_s": config.request_timeout_ms / 1000,
        "trust": config.trust,
        "include_tools": config.include_tools,
        "exclude_tools": config.exclude_tools,
    }
    if config.transport != "stdio":
        return ServerParams(
            url=config.endpoint,
            transport=config.transport,
            sse_fallback=config.sse_fallback,
            headers=server_headers(config, allowed=allowed, blocked=blocked),
            **common,
        )
    return ServerParams(
        command=config.command,
        args=config.args,
        env=server_environment(config, allowed=allowed, blocked=blocked),
        cwd=config.cwd,
        transport="stdio",
        **common,
    )


async def start_servers(
    nursery: trio.Nursery, cfg: runtime.SessionConfig, *, report: Callable[[str], None]
) -> tuple[runtime.SessionConfig, SessionMcp]:
    """Connect ``cfg.mcp_servers`` (their connections held in ``nursery``), discover their
    tools, prompts and resources, and return ``cfg`` with the tools: in the registry
    after the built-in tools (servers by name, each server's tools in its order, as
    Gemini sorts them), declared to the model, each on its server's executor; and what
    the servers offer the front ends (``mcp_session.SessionMcp``)."""
    from actors.host.mcp_config import mcp_tool_name
    from actors.host.mcp_session import SessionMcp
    from actors.mcp import McpConnection, McpTool, discover, schema_problem
    from actors.tools import agentbus_version

    for error in cfg.mcp_errors:
        report(error)
    last_error: dict[str, str] = {}

    def noting(server: str) -> Callable[[str], None]:
        def noted(line: str) -> None:
            last_error[server] = line
            report(line)

        return noted

    connections = [
        McpConnection(
            server_params(config, cfg.env.settings),
            report=noting(config.name),
            roots=cfg.env.workspace_dirs(),
            client_version=agentbus_version(),
        )
        for config in cfg.mcp_servers.values()
    ]
    for conn in connections:
        await nursery.start(conn.run)
    found = await discover(connections)
    excluded_of = getattr(cfg.policy, "excluded_tools", None)

    def offered(mine: dict[str, Any]) -> dict[str, Any]:
        """A server's tools less those the settings or the policy do not offer (before
        names are shared out, so that a tool not offered shadows no other)."""
        mine = {n: t for n, t in mine.items() if not excluded_by_settings(t, cfg.env.settings)}
        if excluded_of is None or not mine:
            return mine
        excluded = excluded_of(
            mine,
            approval_mode=cfg.approval_mode,
            tool_annotations={n: t.policy_annotations for n, t in mine.items()},
        )
        return {n: t for n, t in mine.items() if n not in excluded}

    tools: dict[str, Any] = {}
    for d in sorted(found, key=lambda d: (d.connection.name.lower(), d.connection.name)):
        if d.error is not None:
            report(d.error)
            continue
        taken: list[str] = []
        mine: dict[str, Any] = {}
        for definition in d.tools:
            name = mcp_tool_name(d.connection.name, str(definition.get("name")))
            if name in mine:
                taken.append(name)
                continue
            tool = McpTool(name=name, connection=d.connection, definition=definition)
            problem = schema_problem(tool.schema)
            if problem is not None:  # declared, it would fail every request of the session
                report(
                    f"MCP server '{d.connection.name}': skipped tool '{tool.server_tool_name}': "
                    f"its input schema is not valid JSON Schema ({problem})"
                )
                continue
            mine[name] = tool
        for name, tool in offered(mine).items():
            if name in cfg.tools or name in tools:
                taken.append(name)
                continue
            tools[name] = tool
        if taken:
            report(
                f"MCP server '{d.connection.name}': skipped {len(taken)} tool(s) whose names "
                f"another server's or a built-in tool has: {', '.join(taken)}"
            )
    servers = SessionMcp(
        found,
        tools=tools,
        descriptions={c.name: c.description for c in cfg.mcp_servers.values() if getattr(c, "description", None)},
        last_error=last_error,
    )
    for d in found:
        for note in d.notes:
            report(note)
    if not tools:
        return cfg, servers
    return attrs.evolve(
        cfg,
        tools={**cfg.tools, **tools},
        executor_of=_executor_of(cfg.executor_of),
        registered_names=(*(cfg.registered_names or tuple(cfg.tools)), *tools),
        request_config=with_mcp_declarations(cfg.request_config, list(tools.values())),
    ), servers


def excluded_by_settings(tool: Any, settings: Mapping[str, Any]) -> bool:
    """``tools.exclude`` as Gemini's registry reads it for an MCP tool: its registered
    name, its name on the server, or its class (``DiscoveredMCPTool``: every MCP tool)."""
    listed = _settings.get(settings, "tools.exclude")
    if not isinstance(listed, list):
        return False
    return bool({tool.name, tool.server_tool_name, "DiscoveredMCPTool"} & {str(e) for e in listed})


def _executor_of(base: Callable[[Any], str]) -> Callable[[Any], str]:
    from actors.mcp import McpTool

    def executor_of(tool: Any) -> str:
        if isinstance(tool, McpTool):
            return EXECUTOR_PREFIX + tool.server.replace(":", "_")
        return base(tool)

    return executor_of


def with_mcp_declarations(
    base: Callable[[str], Mapping[str, Any]], tools: Sequence[Any]
) -> Callable[[str], Mapping[str, Any]]:
    """``base``'s request config with the MCP tools' declarations after the others
    (schemas with ``wait_for_previous``, as every declaration), built once per model."""
    from actors.scheduler import with_wait_for_previous
    from bus.json_values import freeze, thaw

    built: dict[str, Mapping[str, Any]] = {}

    def config(model: str) -> Mapping[str, Any]:
        cached = built.get(model)
        if cached is None:
            out = dict(thaw(base(model)))
            groups = list(out.get("tools") or [{"functionDeclarations": []}])
            decls = list(groups[0].get("functionDeclarations") or [])
            for tool in tools:
                decl = dict(tool.declaration(model))
                decl["parametersJsonSchema"] = with_wait_for_previous(decl.get("parametersJsonSchema") or {})
                decls.append(decl)
            groups[0] = {**groups[0], "functionDeclarations": decls}
            out["tools"] = groups
            cached = built[model] = freeze(out)
        return cached

    return config


async def supervise_with_mcp(
    bus: Bus,
    cfg: runtime.SessionConfig,
    *,
    task_status: trio.TaskStatus[runtime.SessionAddresses] = trio.TASK_STATUS_IGNORED,
) -> None:
    """``runtime.supervise_session`` with ``cfg``'s MCP servers connected first; the
    connections end with the session. The addresses handed back carry what the servers
    offer (``SessionAddresses.mcp``)."""
    report = cfg.mcp_report or stderr_report
    async with trio.open_nursery() as servers:
        cfg, offered = await start_servers(servers, cfg, report=report)
        async with trio.open_nursery() as session:
            addrs: runtime.SessionAddresses = await session.start(runtime.supervise_session, bus, cfg)
            task_status.started(attrs.evolve(addrs, mcp=offered))
        servers.cancel_scope.cancel()
