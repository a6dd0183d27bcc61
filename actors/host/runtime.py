"""Wiring: starts a session's actors on a bus and connects their addresses.

This is the only module (besides the entry points) that sees several actors. Each
session gets a session actor, a turn actor, a tool scheduler, one executor per tool
kind, a recorder, and (``loop_detection``) a loop detector; the model gateway is shared
by every session of the process.
Addresses are ``<role>:<session id>``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from actors.hooks import HookConfig
from actors.loops import LoopDetectorActor, LoopWiring
from actors.recorder import RecorderActor
from actors.recording import Scrubber
from actors.scheduler import PolicyLike, SchedulerActor, SchedulerWiring, ToolSpec
from actors.session import SessionActor, SessionWiring
from actors.tools import ExecutorActor, Tool, ToolEnv, plans_dir
from actors.turn import TurnActor, TurnWiring
from bus import Bus, DeliveryError, Port
from bus.messages import ApprovalMode, ApprovalModeChanged, ConfigureSession, OpenSession


@attrs.frozen(kw_only=True)
class SessionConfig:
    session_id: str
    model: str
    approval_mode: ApprovalMode
    env: ToolEnv
    tools: Mapping[str, Tool]
    """The registry: tools the model may call, by name, in registry order."""
    executor_of: Callable[[Tool], str]
    """Tool -> executor kind (``files``, ``shell``...)."""
    policy: PolicyLike
    request_config: Callable[[str], Mapping[str, Any]]
    route_model: Callable[[str], str]
    classifier_choice: Callable[[str], str]
    classifier_request: Callable[[Sequence[Any]], tuple[Any, Mapping[str, Any]]] | None
    history: tuple[Any, ...] = ()
    recording: Path | None = None
    sync_recording_inline: bool = False
    """fsync the recording on the event loop, not in a worker thread: a process that
    serves this session and its subagents alone (``RecorderActor``'s ``sync_inline``;
    a subagent's config is its parent's, this too)."""
    gateway_address: str = "gateway"
    file_access_address: str | None = None
    """A client that serves the session's files (``ReadTextFile``/``WriteTextFile``,
    e.g. an ACP editor); None: tools use the local disk."""
    terminal_address: str | Callable[[], str | None] | None = None
    """A client that runs the shell's commands in terminals it shows (``RunInTerminal``,
    e.g. an ACP editor with ``terminal/*``); None: the shell runs them here. A callable
    names it for each command (None then: this one runs here): the daemon's sessions,
    whose editors come and go."""
    interactive: bool = False
    max_session_turns: int = -1
    wall_ms: Callable[[], int] | None = None
    registered_names: tuple[str, ...] = ()
    hooks: HookConfig | None = None
    """Configured hooks; a hook runner actor starts when there are any."""
    hook_runner: Callable[[Bus, str], Any] | None = attrs.field(default=None, repr=False)
    """Builds the actor that answers the session's ``RunHooks`` at the given address in
    place of a ``HookRunnerActor`` running ``hooks``' commands (its ``run`` is started
    the same way): a replay's or an explored run's recorded stand-in. None: the commands
    run."""
    loop_detection: bool = False
    """Start the loop detector (``not model.disableLoopDetection``; entry points turn it
    on from settings). Off by default so that recordings made without the detector
    replay as they were."""
    compression_threshold: float | None = None
    """``model.compressionThreshold`` (unset: 0.5 of the model's token limit)."""
    skip_next_speaker_check: bool = True
    """``model.skipNextSpeakerCheck`` (Gemini CLI's default: skip)."""
    truncate_tool_output_threshold: int = 40_000
    """``tools.truncateToolOutputThreshold``."""
    finish_tool: str | None = None
    """A subagent's session: the tool that completes its task (``complete_task``)."""
    reject_message: str | None = None
    """A subagent's session: the model's error for a call the user rejected (soft
    rejection; the session goes on)."""
    subagents: Callable[[Bus, SessionConfig], Any] | None = None
    """Builds the session's ``SubagentAccess`` (``ToolEnv.agents``) once its bus is
    known; None: ``invoke_agent`` has nothing to start."""
    secrets: tuple[str, ...] = attrs.field(default=(), repr=False)
    """Values the recorder scrubs besides this process's API keys: the keys of the
    client whose credentials a daemon session uses."""
    scrubber: Scrubber | None = attrs.field(default=None, repr=False)
    """The recorder's scrubber, when its owner adds secrets while the session runs (the
    daemon: a later client's keys); None: one made from ``secrets``."""
    mcp_servers: Mapping[str, Any] = attrs.field(factory=dict)
    """MCP servers whose tools the session gets (``mcp_config.McpServerConfig`` by name):
    ``opening.open_session`` connects them and adds their tools before the session's
    actors start (``actors/host/mcp.py``)."""
    mcp_errors: tuple[str, ...] = ()
    """One line per server whose configuration could not be read (reported at start)."""
    mcp_report: Callable[[str], None] | None = attrs.field(default=None, repr=False)
    """Where MCP lines go (a server that failed, hung or went away); None: stderr."""


def guard_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The turn guards' ``SessionConfig`` fields from settings.json (Gemini CLI's
    defaults for what is missing or malformed)."""

    def get(dotted: str) -> Any:
        node: Any = settings
        for key in dotted.split("."):
            if not isinstance(node, Mapping) or key not in node:
                return None
            node = node[key]
        return node

    threshold = get("model.compressionThreshold")
    truncate = get("tools.truncateToolOutputThreshold")
    return {
        "loop_detection": get("model.disableLoopDetection") is not True,
        "compression_threshold": float(threshold)
        if isinstance(threshold, int | float) and not isinstance(threshold, bool)
        else None,
        "skip_next_speaker_check": get("model.skipNextSpeakerCheck") is not False,
        "truncate_tool_output_threshold": int(truncate)
        if isinstance(truncate, int | float) and not isinstance(truncate, bool)
        else 40_000,
    }


@attrs.frozen(kw_only=True)
class SessionAddresses:
    session: str
    turn: str
    scheduler: str
    executors: Mapping[str, str]
    hooks: str | None = None
    loops: str | None = None
    mcp: Any = attrs.field(default=None, eq=False, repr=False)
    """What the session's MCP servers offer its front ends (``mcp_session.SessionMcp``:
    state, prompt commands, resources); None: it has no MCP servers."""


def addresses_for(
    session_id: str, kinds: Sequence[str], *, hooks: bool = False, loops: bool = False
) -> SessionAddresses:
    return SessionAddresses(
        session=f"session:{session_id}",
        turn=f"turn:{session_id}",
        scheduler=f"scheduler:{session_id}",
        executors={k: f"exec.{k}:{session_id}" for k in kinds},
        hooks=f"hooks:{session_id}" if hooks else None,
        loops=f"loops:{session_id}" if loops else None,
    )


async def change_mode_mid_turn(
    port: Port, bus: Bus, session_id: str, approval_mode: ApprovalMode, *, new_id: Callable[[], str]
) -> None:
    """The rest of an approval-mode change made while ``session_id`` runs a turn (its
    own ``ConfigureSession`` is the caller's, for its next turns), as Gemini CLI: the
    turn's scheduler decides from now on in ``approval_mode`` and grants the waiting
    approvals it allows; so do the subagent sessions the turn runs
    (``<session_id>.<agent>-<n>``, at any depth), which also take it for their next turns.
    Raises ``DeliveryError`` when the session's scheduler is gone; a subagent that ended
    meanwhile is skipped. Not for a change to or from plan mode: that changes the tool
    registry, which a running turn must not see change under it."""
    own = addresses_for(session_id, ())
    await port.send(
        ApprovalModeChanged(session_id=session_id, approval_mode=approval_mode, requested_by="mode change"),
        to=own.scheduler,
    )
    for address in bus.addresses(f"{own.session}."):
        child_id = address.split(":", 1)[1]
        child = addresses_for(child_id, ())
        try:
            await port.send(
                ConfigureSession(
                    session_id=child_id, request_id=new_id(), approval_mode=approval_mode, requested_by=port.address
                ),
                to=child.session,
            )
            await port.send(
                ApprovalModeChanged(session_id=child_id, approval_mode=approval_mode, requested_by="mode change"),
                to=child.scheduler,
            )
        except DeliveryError:
            pass  # a subagent that ended meanwhile


def tool_specs(cfg: SessionConfig, addrs: SessionAddresses) -> dict[str, ToolSpec]:
    specs: dict[str, ToolSpec] = {}
    for name, tool in cfg.tools.items():
        decl = tool.declaration(cfg.model)

        def validate(args: Mapping[str, Any], approval_mode: str, tool: Tool = tool) -> str | None:
            # The batch's mode, not the session's first: the mode changes between turns.
            env = cfg.env if approval_mode in ("", cfg.env.approval_mode) else attrs.evolve(cfg.env, approval_mode=approval_mode)
            return tool.validate(args, env)

        def details(args: Mapping[str, Any], approval_mode: str, tool: Tool = tool) -> Mapping[str, Any]:
            shows = getattr(tool, "confirmation_details", None)  # tools._base.ShowsConfirmation
            if shows is None:
                return {}
            env = cfg.env if approval_mode in ("", cfg.env.approval_mode) else attrs.evolve(cfg.env, approval_mode=approval_mode)
            shown: Mapping[str, Any] = shows(args, env)
            return shown

        specs[name] = ToolSpec(
            name=name,
            display_name=tool.display_name,
            kind=tool.kind,
            schema=decl.get("parametersJsonSchema") or decl.get("parameters") or {"type": "object"},
            executor=addrs.executors[cfg.executor_of(tool)],
            validate=validate,
            details=details,
            annotations=getattr(tool, "policy_annotations", None),
            mcp_context=getattr(tool, "mcp_context", None),
        )
    return specs


async def supervise_session(
    bus: Bus,
    cfg: SessionConfig,
    *,
    task_status: trio.TaskStatus[SessionAddresses] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run every actor of a session until the session closes; the session's supervisor.

    Hands back the addresses once the session accepts messages (a client talks to
    ``session``; subscribe to ``cfg.session_id`` on the bus to observe it). When the
    session actor stops (after ``CloseSession``: its running turn was cancelled and
    acknowledged, ``SessionClosed`` published), the other actors' inboxes are closed and
    they finish in turn. A crash of any actor cancels the others (structured concurrency)
    and propagates.
    """
    if cfg.subagents is not None:
        cfg = attrs.evolve(cfg, env=attrs.evolve(cfg.env, agents=cfg.subagents(bus, cfg)))
    kinds = sorted({cfg.executor_of(t) for t in cfg.tools.values()})
    hooks = cfg.hooks if cfg.hooks is not None and cfg.hooks.hook_count else None
    addrs = addresses_for(cfg.session_id, kinds, hooks=hooks is not None, loops=cfg.loop_detection)
    has_hooks = hooks.has_hooks if hooks is not None else (lambda event, target: False)
    async with trio.open_nursery() as nursery:
        if hooks is not None:
            assert addrs.hooks is not None
            from actors.hooks import HookRunnerActor  # only a session with hooks runs them

            runner = (
                cfg.hook_runner(bus, addrs.hooks)
                if cfg.hook_runner is not None
                else HookRunnerActor(
                    bus,
                    session_id=cfg.session_id,
                    address=addrs.hooks,
                    config=hooks,
                    cwd=str(cfg.env.workspace),
                    transcript_path=str(cfg.recording or ""),
                    plans_dir=plans_dir(cfg.env),
                )
            )
            await nursery.start(runner.run)
        if cfg.recording is not None:
            # First, so that it is the session's first observer (see actors/recorder.py).
            await nursery.start(
                RecorderActor(
                    bus,
                    session_id=cfg.session_id,
                    path=cfg.recording,
                    meta=recording_meta(cfg),
                    scrubber=cfg.scrubber or (session_scrubber(cfg.secrets) if cfg.secrets else None),
                    sync_inline=cfg.sync_recording_inline,
                ).run
            )
        for kind in kinds:
            tools = {n: t for n, t in cfg.tools.items() if cfg.executor_of(t) == kind}
            await nursery.start(
                ExecutorActor(
                    bus,
                    address=addrs.executors[kind],
                    tools=tools,
                    env=cfg.env,
                    gateway_address=cfg.gateway_address,
                    file_access_address=cfg.file_access_address,
                    terminal_address=cfg.terminal_address,
                ).run
            )
        await nursery.start(
            SchedulerActor(
                bus,
                SchedulerWiring(
                    session_id=cfg.session_id,
                    address=addrs.scheduler,
                    tools=tool_specs(cfg, addrs),
                    policy=cfg.policy,
                    model=lambda: cfg.model,
                    registered_names=cfg.registered_names or tuple(cfg.tools),
                    hooks_address=addrs.hooks,
                    has_hooks=has_hooks,
                    reject_message=cfg.reject_message,
                ),
            ).run
        )
        if addrs.loops is not None:
            await nursery.start(
                LoopDetectorActor(
                    bus,
                    LoopWiring(session_id=cfg.session_id, address=addrs.loops, gateway_address=cfg.gateway_address),
                ).run
            )
        turn_kwargs: dict[str, Any] = {}
        if cfg.wall_ms is not None:
            turn_kwargs["wall_ms"] = cfg.wall_ms
        await nursery.start(
            TurnActor(
                bus,
                TurnWiring(
                    session_id=cfg.session_id,
                    address=addrs.turn,
                    session_address=addrs.session,
                    gateway_address=cfg.gateway_address,
                    scheduler_address=addrs.scheduler,
                    request_config=cfg.request_config,
                    route_model=cfg.route_model,
                    classifier_choice=cfg.classifier_choice,
                    classifier_request=cfg.classifier_request,
                    interactive=cfg.interactive,
                    hooks_address=addrs.hooks,
                    has_hooks=has_hooks,
                    loops_address=addrs.loops,
                    compression_threshold=cfg.compression_threshold,
                    skip_next_speaker_check=cfg.skip_next_speaker_check,
                    project_temp_dir=str(cfg.env.project_temp_dir),
                    truncate_tool_output_threshold=cfg.truncate_tool_output_threshold,
                    finish_tool=cfg.finish_tool,
                    **turn_kwargs,
                ),
            ).run
        )
        session = SessionActor(
            bus,
            SessionWiring(
                session_id=cfg.session_id,
                address=addrs.session,
                turn_address=addrs.turn,
                max_session_turns=cfg.max_session_turns,
            ),
        )
        done = trio.Event()

        async def run_session(*, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                await session.run(task_status=task_status)
            finally:
                done.set()

        await nursery.start(run_session)
        task_status.started(addrs)
        await done.wait()
        for address in (addrs.turn, addrs.scheduler, *addrs.executors.values()):
            bus.disconnect(address)
        if addrs.hooks is not None:
            bus.disconnect(addrs.hooks)
        if addrs.loops is not None:
            bus.disconnect(addrs.loops)


def session_scrubber(secrets: tuple[str, ...]) -> Scrubber:
    """The process environment's keys and ``secrets``, longest first."""
    return Scrubber(tuple(sorted({*Scrubber.from_env().secrets, *secrets}, key=len, reverse=True)))


def recording_meta(cfg: SessionConfig) -> dict[str, Any]:
    """What a recording's meta line says about the session (listing, replay)."""
    return {
        "workspace": str(cfg.env.workspace),
        "model": cfg.model,
        "approval_mode": cfg.approval_mode,
        "interactive": cfg.interactive,
        "max_session_turns": cfg.max_session_turns,
        "loop_detection": cfg.loop_detection,
        "compression_threshold": cfg.compression_threshold,
        "skip_next_speaker_check": cfg.skip_next_speaker_check,
        "truncate_tool_output_threshold": cfg.truncate_tool_output_threshold,
        "hooks": bool(cfg.hooks is not None and cfg.hooks.hook_count),
        "tools": list(cfg.registered_names or tuple(cfg.tools)),
        "pid": os.getpid(),
    }


def open_session_message(cfg: SessionConfig) -> OpenSession:
    return OpenSession(
        session_id=cfg.session_id,
        model=cfg.model,
        approval_mode=cfg.approval_mode,
        workspace=str(cfg.env.workspace),
        history=cfg.history,
    )
