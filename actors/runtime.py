"""Wiring: starts a session's actors on a bus and connects their addresses.

This is the only module (besides the entry points) that sees several actors. Each
session gets a session actor, a turn actor, a tool scheduler, one executor per tool
kind and a recorder; the model gateway is shared by every session of the process.
Addresses are ``<role>:<session id>``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from bus import Bus
from bus.messages import OpenSession

from .recorder import RecorderActor
from .scheduler import PolicyLike, SchedulerActor, SchedulerWiring, ToolSpec
from .session import SessionActor, SessionWiring
from .tools._base import Tool, ToolEnv
from .tools._executor import ExecutorActor
from .turn import TurnActor, TurnWiring


@attrs.frozen(kw_only=True)
class SessionConfig:
    session_id: str
    model: str
    approval_mode: str
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
    gateway_address: str = "gateway"
    interactive: bool = False
    max_session_turns: int = -1
    wall_ms: Callable[[], int] | None = None
    registered_names: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class SessionAddresses:
    session: str
    turn: str
    scheduler: str
    executors: Mapping[str, str]


def addresses_for(session_id: str, kinds: Sequence[str]) -> SessionAddresses:
    return SessionAddresses(
        session=f"session:{session_id}",
        turn=f"turn:{session_id}",
        scheduler=f"scheduler:{session_id}",
        executors={k: f"exec.{k}:{session_id}" for k in kinds},
    )


def tool_specs(cfg: SessionConfig, addrs: SessionAddresses) -> dict[str, ToolSpec]:
    specs: dict[str, ToolSpec] = {}
    for name, tool in cfg.tools.items():
        decl = tool.declaration(cfg.model)

        def validate(args: Mapping[str, Any], tool: Tool = tool) -> str | None:
            return tool.validate(args, cfg.env)

        specs[name] = ToolSpec(
            name=name,
            display_name=tool.display_name,
            kind=tool.kind,
            schema=decl.get("parametersJsonSchema") or decl.get("parameters") or {"type": "object"},
            executor=addrs.executors[cfg.executor_of(tool)],
            validate=validate,
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
    kinds = sorted({cfg.executor_of(t) for t in cfg.tools.values()})
    addrs = addresses_for(cfg.session_id, kinds)
    async with trio.open_nursery() as nursery:
        if cfg.recording is not None:
            await nursery.start(RecorderActor(bus, session_id=cfg.session_id, path=cfg.recording).run)
        for kind in kinds:
            tools = {n: t for n, t in cfg.tools.items() if cfg.executor_of(t) == kind}
            await nursery.start(
                ExecutorActor(
                    bus,
                    address=addrs.executors[kind],
                    tools=tools,
                    env=cfg.env,
                    gateway_address=cfg.gateway_address,
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
                ),
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


def open_session_message(cfg: SessionConfig) -> OpenSession:
    return OpenSession(
        session_id=cfg.session_id,
        model=cfg.model,
        approval_mode=cfg.approval_mode,
        workspace=str(cfg.env.workspace),
        history=cfg.history,
    )
