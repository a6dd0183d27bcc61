"""An MCP call answered "always allow this server" allows the server's other tools for
the rest of the session, as Gemini CLI's allowlist of the server does; not another
server's."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

from actors.scheduler import PolicyEngine, SchedulerActor, SchedulerWiring, ToolSpec
from actors.tools import ExecutorActor, ToolEnv
from bus import Bus
from bus.messages import (
    ApprovalAnswered,
    ApprovalRequested,
    BatchSettled,
    ScheduleBatch,
    ToolCallRequest,
    ToolResult,
)

SID = "s"
TOOLS = {"mcp_my_srv_a": "my_srv", "mcp_my_srv_b": "my_srv", "mcp_other_c": "other"}


@attrs.define
class FakeMcpTool:
    name: str
    display_name: str = "MCP"
    kind: str = "other"

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": self.name, "parametersJsonSchema": {"type": "object"}}

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        return None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        return self.name

    async def execute(self, args: Mapping[str, Any], env: ToolEnv, output: Any = None) -> ToolResult:
        return ToolResult(llm_content="ok")


async def test_always_allow_this_server_allows_its_other_tools_and_no_other_servers() -> None:
    bus = Bus()
    policy = PolicyEngine(interactive=True)
    asked: list[str] = []
    specs = {
        name: ToolSpec(
            name=name,
            display_name=name,
            kind="other",
            schema={"type": "object"},
            executor="exec",
            annotations={"_serverName": server},
        )
        for name, server in TOOLS.items()
    }
    env = ToolEnv(workspace=Path("/"), project_temp_dir=Path("/tmp"))
    async with trio.open_nursery() as nursery:
        tools = {name: FakeMcpTool(name) for name in TOOLS}
        await nursery.start(ExecutorActor(bus, address="exec", tools=tools, env=env).run)
        await nursery.start(SchedulerActor(bus, SchedulerWiring(session_id=SID, address="sched", tools=specs, policy=policy)).run)
        turn = bus.connect("turn")
        client = bus.connect("client")

        async def approver() -> None:
            async for envelope in bus.subscribe(SID, "approver"):
                msg = envelope.message
                if isinstance(msg, ApprovalRequested):
                    asked.append(msg.call_id)
                    answer = ApprovalAnswered(
                        session_id=SID,
                        correlation_id=msg.correlation_id,
                        outcome="proceed_always_server",
                        answered_by="client",
                    )
                    await client.send(answer, to="sched")

        nursery.start_soon(approver)
        await trio.testing.wait_all_tasks_blocked()
        for call_id, name in (("1", "mcp_my_srv_a"), ("2", "mcp_my_srv_b"), ("3", "mcp_other_c")):
            await turn.send(
                ScheduleBatch(
                    session_id=SID,
                    batch_id=call_id,
                    reply_to="turn",
                    approval_mode="default",
                    calls=(ToolCallRequest(call_id=call_id, name=name, args={}),),
                    interactive=True,
                ),
                to="sched",
            )
            while not isinstance((await turn.receive()).message, BatchSettled):
                pass
        nursery.cancel_scope.cancel()
    assert asked == ["1", "3"]
