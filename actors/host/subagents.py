"""Wiring for subagents: how ``invoke_agent`` starts a child session.

``Subagents`` is the ``SubagentAccess`` capability a session's tools get
(``ToolEnv.agents``). A child session is a whole session — session, turn, scheduler,
executors, loop detector, recorder — started by ``open_session`` (``actors.host.opening``) inside
the ``invoke_agent`` call, so it lives exactly as long as that call: when the call is
cancelled, the child's running turn is cancelled and acknowledged, the child closes,
and only then does the call report its cancelled result -- a call cancelled while its
child is being opened too: the opening finishes and the child is closed.

The child gets the agent's tools (a subset of its parent's) plus ``complete_task``, the
parent's policy engine and approval mode, its own ``maxSessionTurns`` (the agent's
``max_turns``), soft rejection of calls the user rejects, and a recording beside the
parent's (``<parent recording>.agents/<child id>.jsonl``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from actors.host import runtime
from actors.host.opening import open_session
from actors.tools import COMPLETE_TASK, AgentDefinition, AgentRegistry, Tool, agent_tool_names
from bus import Bus, DeliveryError
from bus.messages import CloseSession, SessionClosed, as_approval_mode, new_id

CLOSE_GRACE_S = 5.0
"""How long a closing child gets to acknowledge its cancel and close before its
actors are cancelled outright."""


@attrs.define(eq=False)
class _Child:
    session_id: str
    depth: int
    parent_session_id: str
    port: Any
    sub: Any
    session_address: str

    async def send(self, message: Any) -> None:
        await self.port.send(message, to=self.session_address)

    async def receive(self) -> Any:
        env = await self.sub.receive.receive()
        return env.message

    async def publish_parent(self, message: Any) -> None:
        await self.port.publish(message)


class Subagents:
    """``SubagentAccess`` for one session (``depth`` 0: the main session)."""

    def __init__(
        self,
        bus: Bus,
        cfg: runtime.SessionConfig,
        *,
        registry: AgentRegistry,
        depth: int,
        max_depth: int,
        environment: Any,
        request_config: Any,
    ) -> None:
        self.bus = bus
        self.cfg = cfg
        self.registry = registry
        self.depth = depth
        self.max_depth = max_depth
        self._environment = environment
        self._request_config = request_config

    def environment(self) -> str:
        return str(self._environment())

    def definitions(self) -> Mapping[str, AgentDefinition]:
        return self.registry.agents

    def broken(self) -> Mapping[str, str]:
        return self.registry.broken

    def child_config(
        self,
        definition: AgentDefinition,
        child_id: str,
        system_instruction: str,
        *,
        model: str,
        approval_mode: str,
    ) -> runtime.SessionConfig:
        """The child's session: the parent's, with the agent's tools, prompt, limits and
        model (``inherit``: the model the parent's turn uses), in the parent's current
        approval mode."""
        # The subagent tool's module (about 0.7 ms) is imported by a session's first subagent.
        from actors.tools import REJECTED_MESSAGE, CompleteTaskTool

        parent = self.cfg
        names = agent_tool_names(
            definition, tuple(parent.tools), may_nest=self.depth + 1 < self.max_depth
        )
        tools: dict[str, Tool] = {n: parent.tools[n] for n in names}
        tools[COMPLETE_TASK] = CompleteTaskTool(definition.output_name, definition.output_schema)
        model = model if definition.model == "inherit" else definition.model
        recording = None
        if parent.recording is not None:
            recording = (
                parent.recording.with_name(parent.recording.stem + ".agents") / f"{child_id}.jsonl"
            )
        return attrs.evolve(
            parent,
            session_id=child_id,
            model=model,
            approval_mode=as_approval_mode(approval_mode),
            env=attrs.evolve(parent.env, session_id=child_id, model=model, agents=None),
            tools=tools,
            request_config=self._request_config(
                tools,
                system_instruction=system_instruction,
                temperature=definition.temperature,
                top_p=definition.top_p,
            ),
            classifier_request=None,
            history=(),
            recording=recording,
            max_session_turns=definition.max_turns,
            registered_names=tuple(tools),
            hooks=None,
            finish_tool=COMPLETE_TASK,
            reject_message=REJECTED_MESSAGE,
            subagents=functools.partial(self._for_child, depth=self.depth + 1),
            # The parent's MCP tools (those the agent may use) run on the parent's
            # connections: the child connects nothing of its own.
            mcp_servers={},
            mcp_errors=(),
        )

    def _for_child(self, bus: Bus, cfg: runtime.SessionConfig, *, depth: int) -> Subagents:
        return Subagents(
            bus,
            cfg,
            registry=self.registry,
            depth=depth,
            max_depth=self.max_depth,
            environment=self._environment,
            request_config=self._request_config,
        )

    @asynccontextmanager
    async def open_child(
        self,
        definition: AgentDefinition,
        *,
        system_instruction: str,
        parent_call_id: str,
        model: str,
        approval_mode: str,
    ) -> AsyncIterator[_Child]:
        child_id = f"{self.cfg.session_id}.{definition.name}-{new_id()[:8]}"
        cfg = self.child_config(definition, child_id, system_instruction, model=model, approval_mode=approval_mode)
        if cfg.recording is not None:
            cfg.recording.parent.mkdir(parents=True, exist_ok=True)
        address = f"agent:{child_id}"
        sub = self.bus.subscribe(child_id, address, capacity=math.inf)
        port = self.bus.connect(address)
        # The child's actors run shielded: a cancel of this call closes the child the
        # orderly way (below) instead of tearing its actors down mid-message.
        scope = trio.CancelScope(shield=True)
        ready = _Ready()
        done = trio.Event()

        async def run_child() -> None:
            try:
                with scope:
                    async with trio.open_nursery() as child_nursery:
                        ready.started(await open_session(child_nursery, self.bus, cfg, port))
            finally:
                done.set()
                ready.settled.set()

        def child_of(addrs: runtime.SessionAddresses) -> _Child:
            return _Child(
                session_id=child_id,
                depth=self.depth + 1,
                parent_session_id=self.cfg.session_id,
                port=port,
                sub=sub,
                session_address=addrs.session,
            )

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run_child)
                try:
                    await ready.event.wait()
                    assert ready.addrs is not None
                    yield child_of(ready.addrs)
                finally:
                    with trio.CancelScope(shield=True):
                        with trio.move_on_after(CLOSE_GRACE_S):
                            # The opening runs shielded and may have sent OpenSession
                            # already when this call is cancelled before seeing the
                            # addresses: let it finish, then close the child like any other.
                            await ready.settled.wait()
                            if ready.addrs is not None and not done.is_set():
                                await _close(child_of(ready.addrs))
                                await done.wait()
                        scope.cancel(reason="the subagent call ended")
        finally:
            self.bus.unsubscribe(sub)
            port.close()
            self.bus.disconnect(address)
            self.bus.forget_session(child_id)


@attrs.define
class _Ready:
    """The child supervisor's ``task_status``: its addresses once it accepts messages."""

    addrs: runtime.SessionAddresses | None = None
    event: trio.Event = attrs.field(factory=trio.Event)
    settled: trio.Event = attrs.field(factory=trio.Event)
    """Set when the opening is over: the child opened (``addrs``) or its task ended."""

    def started(self, value: runtime.SessionAddresses | None = None) -> None:
        self.addrs = value
        self.event.set()
        self.settled.set()


async def _close(child: _Child) -> None:
    """Close the child: its session cancels a running turn and waits for the turn's end
    and acknowledgement before ``SessionClosed``."""
    try:
        await child.send(CloseSession(session_id=child.session_id, reason="subagent finished"))
    except DeliveryError:
        return
    while not isinstance(await child.receive(), SessionClosed):
        pass


def registry_summary(registry: AgentRegistry) -> list[tuple[str, str]]:
    return [(a.name, a.description) for a in registry.agents.values()]


def subagents_factory(
    registry: AgentRegistry, *, max_depth: int, environment: Any, request_config: Any
) -> Any:
    """``SessionConfig.subagents`` for a main session."""

    def make(bus: Bus, cfg: runtime.SessionConfig) -> Subagents:
        return Subagents(
            bus,
            cfg,
            registry=registry,
            depth=0,
            max_depth=max_depth,
            environment=environment,
            request_config=request_config,
        )

    return make
