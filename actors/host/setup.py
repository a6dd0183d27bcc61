"""What every entry point needs to start a session: the tool registry, the policy
engine, the hook configuration, the tools' environment, and the ``SessionConfig``.

Headless runs, the daemon and ACP all build sessions here, so a session behaves the
same whichever way it was started.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from actors.gateway import GATEWAY_ADDRESS
from actors.hooks import HookConfig, HookConfigError, load_hook_config
from actors.host import runtime
from actors.host import settings as _settings
from actors.host.context import SYSTEM_INSTRUCTION, session_context
from actors.host.errors import FatalConfigError
from actors.host.models import classifier_choice, classifier_request, resolve_model
from actors.scheduler import PolicyEngine, PolicyFileError
from actors.tools import (
    DEFAULT_MAX_DEPTH,
    GEMINI_CLASS_NAMES,
    AgentDefinition,
    AgentRegistry,
    Tool,
    ToolEnv,
    builtin_tools,
    enabled_by_core,
    executor_kind,
    load_registry,
    plans_dir,
)
from bus.messages import HookEvent, as_approval_mode

APPROVAL_ALIASES = {"autoEdit": "auto_edit"}


def project_slug(workspace: Path) -> str:
    slug = re.sub(r"[^a-z0-9._-]+", "-", workspace.name.lower()).strip("-")
    return slug or "project"


def approval_mode_from(flag: str | None, yolo: bool, settings: Mapping[str, Any]) -> str:
    """``--approval-mode``, else ``--yolo``, else ``general.defaultApprovalMode`` (never yolo)."""
    if flag:
        return flag
    if yolo:
        return "yolo"
    configured = _settings.get(settings, "general.defaultApprovalMode")
    if configured in ("default", "auto_edit", "autoEdit", "plan"):
        return str(APPROVAL_ALIASES.get(configured, configured))
    return "default"


def model_from(flag: str | None, settings: Mapping[str, Any]) -> str:
    """``-m``, else ``$GEMINI_MODEL``, else ``model.name``, else ``auto``."""
    name = flag or os.environ.get("GEMINI_MODEL") or _settings.get(settings, "model.name") or ""
    return str(name).strip() or "auto"


@attrs.frozen(kw_only=True)
class SessionSetup:
    session_id: str
    workspace: Path
    model: str
    approval_mode: str
    env: ToolEnv
    tools: Mapping[str, Tool]
    policy: PolicyEngine
    hooks: HookConfig
    interactive: bool
    warnings: tuple[str, ...] = ()
    agents: AgentRegistry = attrs.field(factory=lambda: AgentRegistry(agents={}))
    """Subagents ``invoke_agent`` can start (built-ins, project and user agents)."""
    max_agent_depth: int = DEFAULT_MAX_DEPTH


def session_setup(
    *,
    workspace: Path,
    settings: Mapping[str, Any],
    session_id: str,
    model: str,
    approval_mode: str,
    interactive: bool,
    policy_paths: Sequence[str] = (),
    allowed_tools: Sequence[str] = (),
    allowed_mcp_server_names: Sequence[str] | None = None,
) -> SessionSetup:
    """Registry, policy and hooks for a session; raises ``FatalConfigError`` on bad config.
    ``allowed_mcp_server_names`` (``--allowed-mcp-server-names``) stands for
    ``mcp.allowed`` in the policy too, as in Gemini CLI: those servers' tools are allowed."""
    home = _settings.gemini_home()
    env = ToolEnv(
        workspace=workspace,
        project_temp_dir=home / ".gemini" / "tmp" / project_slug(workspace),
        session_id=session_id,
        model=model,
        settings=settings,
    )
    agents_enabled = _settings.get(settings, "experimental.enableAgents") is not False
    tracker = _settings.get(settings, "experimental.taskTracker") is True
    all_tools = {
        t.name: t
        for t in builtin_tools(model, tracker_enabled=tracker, agents=agents_enabled)
        if t.name not in switched_off_tools(settings)
    }
    try:
        policy, warnings = PolicyEngine.build(
            approval_mode=approval_mode,
            interactive=interactive,
            settings=settings
            if allowed_mcp_server_names is None
            else {**settings, "mcp": {**_mapping(settings.get("mcp")), "allowed": list(allowed_mcp_server_names)}},
            policy_paths=[Path(p) for p in policy_paths],
            user_policy_dir=home / ".gemini" / "policies",
            workspace_policy_dir=workspace / ".gemini" / "policies",
            allowed_tools=list(allowed_tools),
            known_tools=tuple(all_tools),
            strict=True,
        )
    except PolicyFileError as exc:
        raise FatalConfigError(f"Error in policy file {exc}") from None
    # Tools validate in the session's mode (plan mode makes write_file and replace work
    # on plan files); each call's execution gets its batch's mode.
    env = attrs.evolve(env, approval_mode=policy.approval_mode)
    core = _settings.get(settings, "tools.core")
    core_list = [str(c) for c in core] if isinstance(core, list) else None
    registered = {n: t for n, t in all_tools.items() if enabled_by_core(n, core_list)}
    excluded = policy.excluded_tools(
        registered, approval_mode=approval_mode, class_names=GEMINI_CLASS_NAMES
    )
    tools = {n: t for n, t in registered.items() if n not in excluded}
    registry = agent_registry(settings, workspace, home, tuple(all_tools), enabled="invoke_agent" in tools)
    depth = _settings.get(settings, "agents.maxDepth")
    try:
        hooks = load_hook_config(settings)
    except HookConfigError as exc:
        raise FatalConfigError(f"Invalid hooks configuration in settings.json:\n{exc}") from None
    return SessionSetup(
        session_id=session_id,
        workspace=workspace,
        model=model,
        approval_mode=approval_mode,
        env=env,
        tools=tools,
        policy=policy,
        hooks=hooks,
        interactive=interactive,
        warnings=tuple(warnings),
        agents=registry,
        max_agent_depth=depth
        if isinstance(depth, int) and not isinstance(depth, bool) and depth >= 1
        else DEFAULT_MAX_DEPTH,
    )


def switched_off_tools(settings: Mapping[str, Any]) -> frozenset[str]:
    """Built-in tools a setting turns off in Gemini CLI: ``useWriteTodos: false`` (no
    ``write_todos``) and ``general.topicUpdateNarration: false`` (else the deprecated
    ``experimental.topicUpdateNarration``; no ``update_topic``)."""
    off: set[str] = set()
    if _settings.get(settings, "useWriteTodos") is False:
        off.add("write_todos")
    narration = _settings.get(settings, "general.topicUpdateNarration")
    if not isinstance(narration, bool):
        narration = _settings.get(settings, "experimental.topicUpdateNarration")
    if narration is False:
        off.add("update_topic")
    return frozenset(off)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def agent_registry(
    settings: Mapping[str, Any], workspace: Path, home: Path, tool_names: Sequence[str], *, enabled: bool
) -> AgentRegistry:
    """The session's agents, with ``agents.overrides.<name>`` applied (``enabled: false``
    drops an agent; ``runConfig.maxTurns``/``maxTimeMinutes``, ``modelConfig.model`` and
    ``tools`` replace its own)."""
    registry = load_registry(workspace=workspace, home=home, known_tools=tool_names, enabled=enabled)
    overrides = _settings.get(settings, "agents.overrides")
    if not isinstance(overrides, Mapping) or not registry.agents:
        return registry
    agents: dict[str, AgentDefinition] = {}
    for name, agent in registry.agents.items():
        o = overrides.get(name)
        if isinstance(o, Mapping):
            if o.get("enabled") is False:
                continue
            run = _mapping(o.get("runConfig"))
            model = _mapping(o.get("modelConfig"))
            changes: dict[str, Any] = {}
            if isinstance(run.get("maxTurns"), int) and run["maxTurns"] > 0:
                changes["max_turns"] = run["maxTurns"]
            if isinstance(run.get("maxTimeMinutes"), int | float) and run["maxTimeMinutes"] > 0:
                changes["timeout_mins"] = float(run["maxTimeMinutes"])
            if isinstance(model.get("model"), str) and model["model"]:
                changes["model"] = model["model"]
            if isinstance(o.get("tools"), list):
                changes["tools"] = tuple(str(t) for t in o["tools"])
            agent = attrs.evolve(agent, **changes)
        agents[name] = agent
    return attrs.evolve(registry, agents=agents)


def print_warnings(setup: SessionSetup) -> None:
    for warning in setup.warnings:
        sys.stderr.write(f"Warning: {warning}\n")
    for error in setup.agents.errors:
        sys.stderr.write(f"{error}\n")


def environment_context(setup: SessionSetup) -> Any:
    """The first user turn of a new session: what the model should know about where it runs."""
    return {"role": "user", "parts": [{"text": session_context(setup.workspace, setup.env.project_temp_dir)}]}


def request_config_for(
    tools: Mapping[str, Tool],
    *,
    system_instruction: str = SYSTEM_INSTRUCTION,
    temperature: float = 1,
    top_p: float = 0.95,
    agents: Sequence[tuple[str, str]] = (),
    plans_dir: str | None = None,
) -> Any:
    """The request config for a model, built once per model and tool set and frozen:
    every model request carries it, and freezing the tool declarations of each
    request again cost more than the rest of the request. The system instruction lists
    the subagents ``invoke_agent`` can start, when it is registered. In plan mode
    (``plans_dir``), ``write_file`` and ``replace`` say that they write plans only, and
    where, as Gemini CLI's registry does."""
    if agents and "invoke_agent" in tools:
        system_instruction = system_instruction + subagents_section(agents)
    from actors.scheduler import with_wait_for_previous

    built: dict[tuple[str, tuple[tuple[str, int], ...]], Mapping[str, Any]] = {}

    def config(model: str) -> Mapping[str, Any]:
        key = (model, tuple((name, id(tool)) for name, tool in tools.items()))
        cached = built.get(key)
        if cached is None:
            cached = built[key] = _frozen_config(build(model))
        return cached

    def build(model: str) -> dict[str, Any]:
        decls = []
        for tool in tools.values():
            decl = dict(tool.declaration(model))
            if plans_dir is not None and tool.name in ("write_file", "replace"):
                decl["description"] = (
                    f"PLANS ONLY: {decl.get('description', '')}. Plan Mode is on: use this "
                    f"tool only for plan files (.md) in {plans_dir}/ (paths are relative to "
                    "it); source code cannot be changed."
                )
            schema = decl.pop("parametersJsonSchema", None) or decl.pop("parameters", None) or {}
            decl["parametersJsonSchema"] = with_wait_for_previous(schema)
            decls.append(decl)
        out: dict[str, Any] = {
            "systemInstruction": system_instruction,
            "temperature": temperature,
            "topP": top_p,
            "topK": 64,
            "thinkingConfig": {"includeThoughts": True},
        }
        if decls:
            out["tools"] = [{"functionDeclarations": decls}]
        return out

    return config


_FROZEN_CONFIGS: dict[str, Mapping[str, Any]] = {}
"""Request configs frozen so far in this process, by their JSON text: the sessions of a
daemon (and a session's subagents) built from the same tools share one frozen config."""
_FROZEN_CONFIGS_MAX = 64


def _frozen_config(plain: dict[str, Any]) -> Mapping[str, Any]:
    """``freeze(plain)``, or the equal config frozen before (same JSON text, so 1 and
    1.0 stay apart). Every session of a daemon froze its own at its first model request
    (0.19 ms with the built-in tools, 0.07 ms to write the JSON and find it) and held
    its own copy (about 20 KiB)."""
    from bus.json_values import freeze

    try:
        text = json.dumps(plain, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        frozen: Mapping[str, Any] = freeze(plain)  # not plain JSON: freeze says what is wrong, or keeps it
        return frozen
    known = _FROZEN_CONFIGS.get(text)
    if known is not None:
        return known
    if len(_FROZEN_CONFIGS) >= _FROZEN_CONFIGS_MAX:
        _FROZEN_CONFIGS.clear()
    frozen = _FROZEN_CONFIGS[text] = freeze(plain)
    return frozen


def subagents_section(agents: Sequence[tuple[str, str]]) -> str:
    listed = "\n".join(
        f"  <subagent>\n    <name>{name}</name>\n    <description>{description}</description>\n  </subagent>"
        for name, description in agents
    )
    return (
        "\n# Subagents\n"
        "Subagents are specialised agents you can hand a task to with the `invoke_agent` tool "
        "(`agent_name`, and a `prompt` that holds everything the subagent needs to know). A "
        "subagent works in its own context and returns one summary, which keeps this "
        "conversation short: delegate work that takes many steps or produces a lot of output, "
        "and do small things yourself. Run several subagents at once only when their tasks "
        "do not touch the same files.\n"
        f"<available_subagents>\n{listed}\n</available_subagents>\n"
    )


def agent_wiring(setup: SessionSetup) -> dict[str, Any]:
    """The ``SessionConfig`` fields that depend on the session's subagents: its request
    config (the system instruction lists them) and the ``invoke_agent`` capability."""
    from actors.host.subagents import registry_summary, subagents_factory

    plans = plans_dir(setup.env) if setup.env.approval_mode == "plan" else None
    if "invoke_agent" not in setup.tools:
        return {"request_config": request_config_for(setup.tools, plans_dir=plans)}
    return {
        "request_config": request_config_for(
            setup.tools, agents=registry_summary(setup.agents), plans_dir=plans
        ),
        "subagents": subagents_factory(
            setup.agents,
            max_depth=setup.max_agent_depth,
            environment=lambda: session_context(setup.workspace, setup.env.project_temp_dir),
            request_config=request_config_for,
        ),
    }


def session_config(
    setup: SessionSetup,
    *,
    history: Sequence[Any],
    recording: Path | None,
    settings: Mapping[str, Any],
    secrets: tuple[str, ...] = (),
    mcp_allowed_names: Sequence[str] | None = None,
    mcp_extra: Sequence[Any] = (),
    settings_from_files: bool = False,
    one_session_process: bool = False,
) -> runtime.SessionConfig:
    """The ``SessionConfig`` that ``actors.host.opening.open_session`` opens: the
    setup's registry, policy and hooks, the turn guards of ``settings``, the MCP servers
    of ``settings`` (``mcp_allowed_names``: ``--allowed-mcp-server-names``; ``mcp_extra``:
    a client's own, ``mcp_config.McpServerConfig`` entries; ``settings_from_files``: the
    settings are the workspace's files merged, so ``mcp.allowed``/``mcp.excluded`` are
    consolidated across them as Gemini CLI does), and ``secrets`` (besides this
    process's keys) scrubbed from the recording. ``one_session_process``: the process
    serves this session (and its subagents) alone (``-p``, ``agentbus tool``): its
    recordings are fsynced on the loop."""
    max_turns = _settings.get(settings, "model.maxSessionTurns", -1)
    mcp: dict[str, Any] = {}
    if mcp_extra or settings.get("mcpServers") or _settings.get(settings, "mcp.serverCommand"):
        from actors.host.mcp_config import mcp_servers, settings_scopes

        scopes = settings_scopes(setup.workspace) if settings_from_files else None
        servers, errors = mcp_servers(settings, allowed_names=mcp_allowed_names, scopes=scopes, extra=mcp_extra)
        mcp = {"mcp_servers": servers, "mcp_errors": tuple(errors)}
    return runtime.SessionConfig(
        **runtime.guard_settings(settings),
        secrets=secrets,
        scrubber=runtime.session_scrubber(secrets) if secrets else None,
        session_id=setup.session_id,
        model=setup.model,
        approval_mode=as_approval_mode(setup.approval_mode),
        env=setup.env,
        tools=setup.tools,
        executor_of=executor_kind,
        policy=setup.policy,
        route_model=resolve_model,
        classifier_choice=classifier_choice,
        classifier_request=classifier_request,
        history=tuple(history),
        recording=recording,
        sync_recording_inline=one_session_process,
        gateway_address=GATEWAY_ADDRESS,
        interactive=setup.interactive,
        max_session_turns=int(max_turns) if isinstance(max_turns, int) else -1,
        registered_names=tuple(setup.tools),
        hooks=setup.hooks,
        **agent_wiring(setup),
        **mcp,
    )


# -- SessionStart / SessionEnd: the hook points a session's client runs ---------------------------
async def run_hooks(
    client: Any, addrs: runtime.SessionAddresses, session_id: str, event: HookEvent, target: str, data: Mapping[str, Any]
) -> dict[str, Any] | None:
    """A client-side hook point (SessionStart, SessionEnd): ask the runner, wait for its
    answer on ``client`` (a ``Port``; what else arrives there meanwhile is dropped)."""
    from bus.json_values import thaw
    from bus.messages import HooksFinished, RunHooks, new_id

    if addrs.hooks is None:
        return None
    rid = new_id()
    await client.send(
        RunHooks(session_id=session_id, request_id=rid, reply_to=client.address, event=event, target=target, input=data),
        to=addrs.hooks,
    )
    while True:
        msg = (await client.receive()).message
        if isinstance(msg, HooksFinished) and msg.request_id == rid:
            out = thaw(msg.output)
            return out if isinstance(out, dict) else None


async def session_start_context(client: Any, addrs: runtime.SessionAddresses, session_id: str, source: str) -> str:
    """Run the SessionStart hooks (``source``: ``startup`` or ``resume``); their
    ``additionalContext`` with ``<``/``>`` escaped, empty when there is none."""
    output = await run_hooks(client, addrs, session_id, "SessionStart", source, {"source": source})
    if output is None:  # no hooks, or no output: nothing to read, nor the readers to import
        return ""
    from actors.hooks import additional_context

    return additional_context(output) or ""


def hook_context_turn(context: str) -> dict[str, Any]:
    """SessionStart context in an interactive session: a user turn of its own at the end
    of the history, as Gemini CLI's interactive mode adds it. (A headless run puts it in
    front of its prompt instead; a resumed session drops the old turn and gets the
    context of its ``resume`` hooks.)"""
    return {"role": "user", "parts": [{"text": f"<hook_context>{context}</hook_context>"}]}


async def open_interactive_session(
    client: Any, addrs: runtime.SessionAddresses, cfg: runtime.SessionConfig, source: str
) -> None:
    """Open an interactive session (the daemon's, ACP's) as Gemini CLI starts one: run
    the SessionStart hooks, then send ``OpenSession`` with their context as the last
    turn of the history. Nothing else may read ``client``'s inbox meanwhile."""
    context = await session_start_context(client, addrs, cfg.session_id, source)
    history = (*cfg.history, hook_context_turn(context)) if context else cfg.history
    await client.send(runtime.open_session_message(attrs.evolve(cfg, history=history)), to=addrs.session)
