"""An approval shows what it approves: the scheduler puts the tool's confirmation
details (an edit's diff, the whole command) into ``ApprovalRequested.details``, next to
its own ``type`` and ``title``; a tool whose details fail is still asked about."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import trio
import trio.testing

from actors.scheduler import PolicyEngine, SchedulerActor, SchedulerWiring, ToolSpec
from actors.tools import ExecutorActor, ToolEnv, builtin_tools
from bus import Bus
from bus.json_values import thaw
from bus.messages import (
    ApprovalAnswered,
    ApprovalRequested,
    BatchSettled,
    HooksFinished,
    RunHooks,
    ScheduleBatch,
    ToolCallRequest,
)

SID = "s"
TOOLS = {t.name: t for t in builtin_tools()}


async def _asked(
    tool: Any,
    args: dict[str, Any],
    env: ToolEnv,
    details: Callable[[Mapping[str, Any], str], Mapping[str, Any]],
    notified: list[Any] | None = None,
) -> dict[str, Any]:
    """Schedule one call of ``tool`` and deny it; the details its approval showed (and
    the ``Notification`` hooks' input in ``notified``, when given)."""
    bus = Bus()
    spec = ToolSpec(
        name=tool.name, display_name=tool.display_name, kind=tool.kind, schema={"type": "object"}, executor="exec", details=details
    )
    shown: list[dict[str, Any]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(ExecutorActor(bus, address="exec", tools={tool.name: tool}, env=env).run)
        wiring = SchedulerWiring(
            session_id=SID,
            address="sched",
            tools={tool.name: spec},
            policy=PolicyEngine(interactive=True),
            hooks_address="hooks" if notified is not None else None,
            has_hooks=lambda event, target: event == "Notification",
        )
        await nursery.start(SchedulerActor(bus, wiring).run)
        turn, client = bus.connect("turn"), bus.connect("client")
        if notified is not None:
            hooks = bus.connect("hooks")

            async def hook_runner() -> None:
                while True:
                    run = (await hooks.receive()).message
                    assert isinstance(run, RunHooks)
                    notified.append(thaw(run.input))
                    finished = HooksFinished(session_id=SID, request_id=run.request_id, event=run.event)
                    await hooks.send(finished, to="sched")

            nursery.start_soon(hook_runner)

        async def approver() -> None:
            async for envelope in bus.subscribe(SID, "approver"):
                if isinstance(msg := envelope.message, ApprovalRequested):
                    shown.append(thaw(msg.details))
                    await client.send(
                        ApprovalAnswered(session_id=SID, correlation_id=msg.correlation_id, outcome="cancel", answered_by="client"),
                        to="sched",
                    )

        nursery.start_soon(approver)
        await trio.testing.wait_all_tasks_blocked()
        call = ToolCallRequest(call_id="c1", name=tool.name, args=args)
        await turn.send(
            ScheduleBatch(session_id=SID, batch_id="b", reply_to="turn", approval_mode="default", calls=(call,), interactive=True),
            to="sched",
        )
        while not isinstance((await turn.receive()).message, BatchSettled):
            pass
        nursery.cancel_scope.cancel()
    [details] = shown
    return details


async def test_an_edit_approval_carries_its_diff(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    env = ToolEnv(workspace=tmp_path, project_temp_dir=tmp_path / "tmp")
    tool: Any = TOOLS["replace"]
    args = {"file_path": "calc.py", "old_string": "a - b", "new_string": "a + b"}
    details = await _asked(tool, args, env, lambda a, mode: tool.confirmation_details(a, env))
    assert details["type"] == "edit" and details["title"] == "Edit"
    assert details["fileName"] == "calc.py" and details["filePath"] == str(tmp_path / "calc.py")
    assert "-    return a - b\n+    return a + b\n" in details["fileDiff"]
    assert (tmp_path / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"  # denied


async def test_a_shell_approval_carries_the_whole_command(tmp_path: Path) -> None:
    env = ToolEnv(workspace=tmp_path, project_temp_dir=tmp_path / "tmp")
    tool: Any = TOOLS["run_shell_command"]
    command = "echo " + "x" * 300 + " && ls | wc -l"
    details = await _asked(tool, {"command": command}, env, lambda a, mode: tool.confirmation_details(a, env))
    assert details == {"type": "exec", "title": "Shell", "command": command, "rootCommand": "echo, ls, wc"}


async def test_details_that_fail_still_ask(tmp_path: Path) -> None:
    env = ToolEnv(workspace=tmp_path, project_temp_dir=tmp_path / "tmp")

    def broken(args: Mapping[str, Any], mode: str) -> Mapping[str, Any]:
        raise RuntimeError("no details")

    details = await _asked(TOOLS["run_shell_command"], {"command": "rm -r build"}, env, broken)
    assert details == {"type": "exec", "title": "Shell"}


async def test_the_permission_notification_hook_gets_the_command_as_gemini_cli_sends_it(tmp_path: Path) -> None:
    env = ToolEnv(workspace=tmp_path, project_temp_dir=tmp_path / "tmp")
    tool: Any = TOOLS["run_shell_command"]
    notified: list[Any] = []
    await _asked(tool, {"command": "rm -r build", "dir_path": "sub"}, env, lambda a, mode: tool.confirmation_details(a, env), notified)
    [hook_input] = notified
    assert hook_input["message"] == "Tool Shell requires execution"
    assert hook_input["details"] == {"type": "exec", "title": "Shell", "command": "rm -r build", "rootCommand": "rm"}
