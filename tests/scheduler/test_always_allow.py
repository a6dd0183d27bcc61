"""An "always allow" answer to a shell command allows what Gemini CLI's shell tool says it
allows: every root command of the (unwrapped) command line, with redirection when the
approved command redirected (``getPolicyUpdateOptions``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from actors.scheduler import PolicyEngine, SchedulerActor, SchedulerWiring, ToolSpec
from actors.scheduler._policy_args import shell_always_allow
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
SHELL = "run_shell_command"


@pytest.mark.parametrize(
    ("command", "prefixes", "redirection"),
    [
        ("git status", ["git"], None),
        ("cd x && make > log", ["cd", "make"], True),
        ("ls; ls | wc -l", ["ls", "wc"], None),
        ('bash -c "npm test && npm run lint"', ["npm"], None),
        ("a=1", "a=1", None),  # no root command: the command itself
    ],
)
def test_shell_always_allow(command: str, prefixes: str | list[str], redirection: bool | None) -> None:
    assert shell_always_allow(command) == (prefixes, redirection)


@attrs.define
class FakeShell:
    """Records the commands it was asked to run."""

    ran: list[str] = attrs.field(factory=list)
    name: str = SHELL
    display_name: str = "Shell"
    kind: str = "execute"

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": self.name, "parametersJsonSchema": {"type": "object"}}

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        return None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        return str(args["command"])

    async def execute(self, args: Mapping[str, Any], env: ToolEnv, output: Any = None) -> ToolResult:
        self.ran.append(str(args["command"]))
        return ToolResult(llm_content="ok")


async def test_always_allow_covers_every_root_command_and_its_redirection() -> None:
    bus = Bus()
    shell = FakeShell()
    policy = PolicyEngine(interactive=True)
    asked: list[str] = []
    spec = ToolSpec(name=SHELL, display_name="Shell", kind="execute", schema={"type": "object"}, executor="exec")
    env = ToolEnv(workspace=Path("/"), project_temp_dir=Path("/tmp"))
    async with trio.open_nursery() as nursery:
        await nursery.start(ExecutorActor(bus, address="exec", tools={SHELL: shell}, env=env).run)
        wiring = SchedulerWiring(session_id=SID, address="sched", tools={SHELL: spec}, policy=policy)
        await nursery.start(SchedulerActor(bus, wiring).run)
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
                        outcome="proceed_always",
                        answered_by="client",
                    )
                    await client.send(answer, to="sched")

        nursery.start_soon(approver)
        await trio.testing.wait_all_tasks_blocked()
        for batch, command in (("b1", "cd x && make > log"), ("b2", "cd y && make > log2")):
            call = ToolCallRequest(call_id=batch, name=SHELL, args={"command": command})
            await turn.send(
                ScheduleBatch(
                    session_id=SID,
                    batch_id=batch,
                    reply_to="turn",
                    approval_mode="default",
                    calls=(call,),
                    interactive=True,
                ),
                to="sched",
            )
            while not isinstance((await turn.receive()).message, BatchSettled):
                pass
        nursery.cancel_scope.cancel()
    assert asked == ["b1"]
    assert shell.ran == ["cd x && make > log", "cd y && make > log2"]
