"""A session that can run subagents, on one bus with a scripted model.

``ScriptedModel`` answers each session from its own script, keyed by the chain of agent
names in the session id (``""`` for the main session, ``"worker"`` for a child,
``"worker/helper"`` for a grandchild), so that children running concurrently get their
own answers whatever the interleaving. A step is a list of parts (text or function
calls), optionally with a virtual delay before it; ``HANG`` never answers; a
``BackendError`` fails the request.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from actors.gateway import BackendError, GatewayActor
from actors.host import runtime
from actors.host.setup import request_config_for
from actors.host.subagents import subagents_factory
from actors.tools import AgentDefinition, AgentRegistry, InvokeAgentTool, ToolEnv, executor_kind
from bus import ALL_SESSIONS, Bus
from bus.json_values import thaw
from bus.messages import (
    ApprovalAnswered,
    ApprovalRequested,
    CancelTurn,
    CloseSession,
    ConfigureSession,
    GenerateRequest,
    SessionClosed,
    SubmitPrompt,
    ToolResult,
    TurnCancelAcknowledged,
    TurnEnded,
)
from bus.testing import Capture, capture_session

HANG = "hang"


@attrs.frozen
class Step:
    parts: tuple[Any, ...] = ()
    delay: float = 0.0
    error: BackendError | None = None
    hang: bool = False


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"functionCall": {"name": name, "args": args}}


def text(value: str) -> dict[str, Any]:
    return {"text": value}


def step(*parts: Any, delay: float = 0.0) -> Step:
    return Step(parts=parts, delay=delay)


def agent_key(session_id: str) -> str:
    """``s1.worker-1a2b3c4d.helper-5e6f7a8b`` -> ``worker/helper``."""
    names = [re.sub(r"-[0-9a-f]{8}$", "", piece) for piece in session_id.split(".")[1:]]
    return "/".join(names)


class ScriptedModel:
    """A model backend answering each (sub)session from its own script."""

    def __init__(self, scripts: Mapping[str, Sequence[Step | str]]) -> None:
        self.scripts = {k: collections.deque(v) for k, v in scripts.items()}
        self.requests: list[GenerateRequest] = []

    def requests_of(self, key: str) -> list[GenerateRequest]:
        return [r for r in self.requests if agent_key(r.session_id) == key]

    async def generate(self, request: GenerateRequest, emit: Any) -> str:
        self.requests.append(request)
        key = agent_key(request.session_id)
        script = self.scripts.get(key)
        if not script:
            raise BackendError(f"no scripted answer left for {key or 'the main session'}")
        item = script.popleft()
        if item == HANG or (isinstance(item, Step) and item.hang):
            await trio.sleep_forever()
        assert isinstance(item, Step)
        if item.delay:
            await trio.sleep(item.delay)
        if item.error is not None:
            raise item.error
        await emit(
            {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": list(item.parts)},
                        "finishReason": "STOP",
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": 10,
                    "candidatesTokenCount": 5,
                    "totalTokenCount": 15,
                },
            }
        )
        return request.model


@attrs.define
class SlowTool:
    """Sleeps ``seconds`` of (virtual) time; records when it ran."""

    name: str = "slow"
    display_name: str = "Slow"
    kind: str = "read"
    runs: list[tuple[str, float, float]] = attrs.field(factory=list)
    """(session id, start, end) of every run that finished or was cancelled."""
    started: list[tuple[str, float]] = attrs.field(factory=list)

    def declaration(self, model: str) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": "sleep",
            "parametersJsonSchema": {
                "type": "object",
                "properties": {"seconds": {"type": "number"}},
            },
        }

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        return None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        return f"sleep {args.get('seconds', 0)}"

    async def execute(
        self, args: Mapping[str, Any], env: ToolEnv, output: Any = None
    ) -> ToolResult:
        start = trio.current_time()
        self.started.append((env.session_id, start))
        try:
            await trio.sleep(float(args.get("seconds", 0)))
        finally:
            self.runs.append((env.session_id, start, trio.current_time()))
        return ToolResult(llm_content=f"slept {args.get('seconds', 0)}")


@attrs.define
class AskTool(SlowTool):
    """Like ``slow`` but the policy asks the user first."""

    name: str = "ask"
    display_name: str = "Ask"
    kind: str = "edit"


class Policy:
    """Allows everything but ``ask``."""

    def check(
        self, tool_name: str, args: Mapping[str, Any], *, approval_mode: str | None = None
    ) -> Any:
        decision = "ask_user" if tool_name == "ask" else "allow"
        return type("V", (), {"decision": decision, "deny_message": None, "rule": None})()

    def add_session_rule(self, tool_name: str, **_: Any) -> None:
        pass


def agent(name: str, **fields: Any) -> AgentDefinition:
    fields.setdefault("description", f"the {name} agent")
    fields.setdefault("system_prompt", f"You are {name}.")
    fields.setdefault("tools", ("slow", "ask"))
    return AgentDefinition(name=name, **fields)


def session_config(
    tmp_path: Path,
    agents: Sequence[AgentDefinition],
    *,
    slow: SlowTool | None = None,
    interactive: bool = False,
    max_depth: int = 3,
    broken: Mapping[str, str] | None = None,
    recording: Path | None = None,
) -> runtime.SessionConfig:
    slow = slow or SlowTool()
    ask = AskTool(runs=slow.runs, started=slow.started)
    tools: dict[str, Any] = {"slow": slow, "ask": ask, "invoke_agent": InvokeAgentTool()}
    registry = AgentRegistry(agents={a.name: a for a in agents}, broken=dict(broken or {}))
    env = ToolEnv(
        workspace=tmp_path, project_temp_dir=tmp_path / "tmp", session_id="s1", model="gemini-test"
    )
    return runtime.SessionConfig(
        session_id="s1",
        model="gemini-test",
        approval_mode="default",
        env=env,
        tools=tools,
        executor_of=executor_kind,
        policy=Policy(),
        request_config=request_config_for(tools),
        route_model=lambda m: m,
        classifier_choice=lambda c: c,
        classifier_request=None,
        wall_ms=lambda: 1000,
        interactive=interactive,
        recording=recording,
        subagents=subagents_factory(
            registry,
            max_depth=max_depth,
            environment=lambda: "ENV",
            request_config=request_config_for,
        ),
    )


@attrs.define
class Run:
    bus: Bus
    cap: Capture
    """Every message of every session (``ALL_SESSIONS``)."""
    model: ScriptedModel
    ended: TurnEnded | None = None
    acked_at: float | None = None
    """Virtual time of the root's cancel acknowledgement."""

    def of(self, session_id: str) -> list[Any]:
        return [e.message for e in self.cap.envelopes if e.session_id == session_id]

    def child_ids(self) -> list[str]:
        seen: dict[str, None] = {}
        for e in self.cap.envelopes:
            if e.session_id != "s1":
                seen.setdefault(e.session_id, None)
        return list(seen)

    def responses(self) -> list[Any]:
        """The main session's function responses, in order."""
        assert self.ended is not None
        out = []
        for content in self.ended.history_added:
            for part in thaw(content).get("parts", []):
                if "functionResponse" in part:
                    out.append(part["functionResponse"])
        return out


async def run_session(
    cfg: runtime.SessionConfig,
    model: ScriptedModel,
    *,
    prompt: str = "go",
    approve: Mapping[str, str] | None = None,
    approve_after: float = 0.0,
    cancel_at: float | None = None,
    cancel_child_at: float | None = None,
    configure: Mapping[str, Any] | None = None,
) -> Run:
    """One prompt to the main session; answers approvals (tool name -> outcome) after
    ``approve_after`` seconds; cancels the main turn at virtual ``cancel_at``."""
    bus = Bus()
    async with trio.open_nursery() as nursery:
        cap = await nursery.start(capture_session, bus, ALL_SESSIONS)
        run = Run(bus=bus, cap=cap, model=model)
        await nursery.start(GatewayActor(bus, model).run)
        client = bus.connect("client")
        addrs = await nursery.start(runtime.supervise_session, bus, cfg)

        async def answer() -> None:
            handled: set[str] = set()
            while True:
                msg = await cap.wait_for(
                    lambda m: (
                        isinstance(m, ApprovalRequested)
                        and m.session_id == "s1"
                        and m.correlation_id not in handled
                    )
                )
                assert isinstance(msg, ApprovalRequested)
                handled.add(msg.correlation_id)
                await trio.sleep(approve_after)
                outcome = (approve or {}).get(msg.name, "proceed_once")
                await client.send(
                    ApprovalAnswered(
                        session_id=msg.answer_session_id or msg.session_id,
                        correlation_id=msg.correlation_id,
                        outcome=outcome,
                        answered_by="client",
                    ),
                    to=msg.answer_to or addrs.scheduler,
                )

        nursery.start_soon(answer)

        async def cancel_child(at: float) -> None:
            await trio.sleep_until(at)
            [child, *_] = run.child_ids()
            await client.send(
                CancelTurn(session_id=child, turn_id=None, reason="user", requested_by="client"),
                to=f"session:{child}",
            )

        if cancel_child_at is not None:
            nursery.start_soon(cancel_child, cancel_child_at)
        await client.send(runtime.open_session_message(cfg), to=addrs.session)
        if configure:
            await client.send(
                ConfigureSession(session_id="s1", request_id="cfg", **configure), to=addrs.session
            )
        await client.send(
            SubmitPrompt(session_id="s1", prompt_id="p1", parts=[{"text": prompt}]),
            to=addrs.session,
        )
        if cancel_at is not None:
            with trio.move_on_at(cancel_at):
                run.ended = await _ended(cap)
            if run.ended is None:
                await client.send(
                    CancelTurn(session_id="s1", turn_id=None, reason="user", requested_by="client"),
                    to=addrs.session,
                )
                await cap.wait_for(
                    lambda m: isinstance(m, TurnCancelAcknowledged) and m.session_id == "s1"
                )
                run.acked_at = trio.current_time()
        run.ended = await _ended(cap)
        await client.send(CloseSession(session_id="s1", reason="done"), to=addrs.session)
        await cap.wait_for(lambda m: isinstance(m, SessionClosed) and m.session_id == "s1")
        bus.disconnect("gateway")
        nursery.cancel_scope.cancel()
    return run


async def _ended(cap: Capture) -> TurnEnded:
    msg = await cap.wait_for(lambda m: isinstance(m, TurnEnded) and m.session_id == "s1")
    assert isinstance(msg, TurnEnded)
    return msg
