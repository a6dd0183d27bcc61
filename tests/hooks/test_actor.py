"""The hook-runner actor on a real bus with real hook processes.

Each way to stop is covered: a request finishing, ``CancelHooks``, the inbox closing.
"""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from actors.hooks import HookConfig, HookRunnerActor, load_hook_config
from bus import Bus, Port
from bus.json_values import thaw
from bus.messages import CancelHooks, HookRan, HooksFinished, RunHooks
from bus.testing import Capture, capture_session

from ._helpers import ECHO_INPUT, group_alive, py

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups via /proc")

SESSION = "s1"
CLOCK = datetime.datetime(2026, 11, 20, 23, 11, 30, 775123, tzinfo=datetime.UTC)


def cmd(command: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": command, **extra}


@attrs.define
class Harness:
    bus: Bus
    client: Port
    capture: Capture
    actor: HookRunnerActor
    workspace: Path
    nursery: trio.Nursery
    replies: list[HooksFinished] = attrs.field(factory=list)

    async def request(self, event: str, target: str = "", request_id: str = "r1", **hook_input: Any) -> None:
        await self.client.send(
            RunHooks(session_id=SESSION, request_id=request_id, reply_to="client", event=event, target=target, input=hook_input),
            to="hooks",
        )

    async def reply(self, request_id: str | None = None) -> HooksFinished:
        while True:
            for r in self.replies:
                if request_id is None or r.request_id == request_id:
                    self.replies.remove(r)
                    return r
            env = await self.client.receive()
            assert isinstance(env.message, HooksFinished)
            self.replies.append(env.message)

    async def run(self, event: str, target: str = "", **hook_input: Any) -> HooksFinished:
        await self.request(event, target, **hook_input)
        return await self.reply("r1")

    def ran(self, request_id: str = "r1") -> list[HookRan]:
        return [m for m in self.capture.of_type(HookRan) if m.request_id == request_id]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path.resolve() / "ws"
    ws.mkdir()
    return ws


async def start(workspace: Path, config: HookConfig, nursery: trio.Nursery) -> Harness:
    bus = Bus()
    capture = await nursery.start(capture_session, bus, SESSION)
    actor = HookRunnerActor(
        bus,
        session_id="gemini-session-id",
        address="hooks",
        config=config,
        cwd=str(workspace),
        transcript_path="/t/session.jsonl",
        env_extra={"EXTRA": "1"},
        plans_dir="/plans",
        clock=lambda: CLOCK,
    )
    await nursery.start(actor.run)
    return Harness(bus, bus.connect("client"), capture, actor, workspace, nursery)


@pytest.fixture
async def make(workspace: Path) -> AsyncIterator[Any]:
    async with trio.open_nursery() as nursery:

        async def factory(hooks: dict[str, Any], **settings: Any) -> Harness:
            return await start(workspace, load_hook_config({"hooks": hooks, **settings}), nursery)

        yield factory
        nursery.cancel_scope.cancel(reason="test over")


async def test_nothing_matches_replies_at_once(make: Any) -> None:
    h = await make({"BeforeTool": [{"matcher": "write_file", "hooks": [cmd("exit 9")]}]})
    done = await h.run("BeforeTool", "read_file", tool_name="read_file", tool_input={})
    assert (done.ran, done.output, done.failed, done.cancelled) == (0, None, (), False)
    done = await h.run("AfterModel")
    assert done.ran == 0 and done.event == "AfterModel"
    assert h.ran() == []


async def test_base_input_fields_and_parallel_aggregation(make: Any) -> None:
    h = await make(
        {
            "BeforeTool": [
                {"matcher": "write_file", "hooks": [cmd(ECHO_INPUT, name="echo"), cmd("echo 'nope' >&2; exit 2", name="deny")]}
            ]
        }
    )
    done = await h.run("BeforeTool", "write_file", tool_name="write_file", tool_input={"file_path": "a.txt", "content": "x"})
    assert done.ran == 2 and done.failed == ("deny",) and not done.cancelled
    out = thaw(done.output)
    assert out["decision"] == "deny" and out["reason"] == "nope" and out["continue"] is True
    sent = json.loads(out["systemMessage"])
    assert sent == {
        "session_id": "gemini-session-id",
        "transcript_path": "/t/session.jsonl",
        "cwd": str(h.workspace),
        "hook_event_name": "BeforeTool",
        "timestamp": "2026-11-20T23:11:30.775Z",
        "tool_name": "write_file",
        "tool_input": {"file_path": "a.txt", "content": "x"},
    }
    assert list(sent) == list(thaw(h.ran()[0].input))  # Gemini's key order
    ran = {r.name: r for r in h.ran()}
    assert set(ran) == {"echo", "deny"}
    assert ran["deny"].exit_code == 2 and not ran["deny"].success and ran["deny"].output_format == "text"
    assert ran["deny"].stderr == "nope\n"
    assert done.duration_ms == sum(r.duration_ms for r in ran.values())


async def test_input_can_override_base_fields(make: Any, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    h = await make({"SessionEnd": [{"hooks": [cmd("pwd")]}]})
    done = await h.run("SessionEnd", "exit", reason="exit", cwd=str(other))
    assert thaw(done.output) == {"decision": "allow", "systemMessage": str(other)}


async def test_environment_reaches_the_hook(make: Any) -> None:
    h = await make({"Notification": [{"hooks": [cmd("echo $EXTRA:$GEMINI_SESSION_ID:$GEMINI_PLANS_DIR:$GEMINI_CWD")]}]})
    done = await h.run("Notification", notification_type="ToolPermission", message="m", details={})
    assert thaw(done.output) == {"systemMessage": f"1:gemini-session-id:/plans:{h.workspace}", "decision": "allow"}


async def test_sequential_chains_tool_input(make: Any) -> None:
    first = py(
        "import json; print(json.dumps({'decision': 'allow', 'hookSpecificOutput': "
        "{'hookEventName': 'BeforeTool', 'tool_input': {'content': 'rewritten', 'added': 1}}}))"
    )
    h = await make({"BeforeTool": [{"sequential": True, "hooks": [cmd(first), cmd(ECHO_INPUT)]}]})
    done = await h.run("BeforeTool", "write_file", tool_name="write_file", tool_input={"file_path": "f", "content": "orig"})
    out = thaw(done.output)
    second_saw = json.loads(out["systemMessage"])
    assert second_saw["tool_input"] == {"file_path": "f", "content": "rewritten", "added": 1}
    # the aggregated answer carries the rewrite for the scheduler
    assert out["hookSpecificOutput"]["tool_input"] == {"content": "rewritten", "added": 1}
    # HookRan reports the request's input, as Gemini's telemetry does
    assert [thaw(r.input)["tool_input"]["content"] for r in h.ran()] == ["orig", "orig"]


async def test_sequential_chains_additional_context_into_the_prompt(make: Any) -> None:
    first = py("import json; print(json.dumps({'hookSpecificOutput': {'additionalContext': 'Step 1 <ok>'}}))")
    h = await make({"BeforeAgent": [{"sequential": True, "hooks": [cmd(first), cmd(ECHO_INPUT)]}]})
    done = await h.run("BeforeAgent", prompt="Hello")
    out = thaw(done.output)
    assert json.loads(out["systemMessage"])["prompt"] == "Hello\n\nStep 1 <ok>"
    assert out["hookSpecificOutput"] == {"additionalContext": "Step 1 <ok>"}


async def test_sequential_hooks_run_one_after_the_other(make: Any) -> None:
    h = await make(
        {"AfterAgent": [{"sequential": True, "hooks": [cmd("sleep 0.2; echo a >> order"), cmd("echo b >> order")]}]}
    )
    await h.run("AfterAgent", prompt="p", prompt_response="r", stop_hook_active=False)
    assert (h.workspace / "order").read_text() == "a\nb\n"


async def test_hanging_hook_is_killed_at_timeout_and_counted_failed(make: Any) -> None:
    h = await make(
        {"BeforeTool": [{"hooks": [cmd("echo $$ > pid; sleep 30", name="hang", timeout=300), cmd("echo fine", name="ok")]}]}
    )
    started = trio.current_time()
    done = await h.run("BeforeTool", "x", tool_name="x", tool_input={})
    assert 0.3 <= trio.current_time() - started < 2.0
    assert done.ran == 2 and done.failed == ("hang",) and not done.cancelled
    assert thaw(done.output)["systemMessage"] == "fine"
    (hang,) = [r for r in h.ran() if r.name == "hang"]
    assert hang.error == "Hook timed out after 300ms" and hang.output is None
    assert not group_alive(int((h.workspace / "pid").read_text()))


async def test_garbage_output_is_text_per_gemini(make: Any) -> None:
    h = await make({"BeforeAgent": [{"hooks": [cmd("printf '{not json'; exit 1")]}]})
    done = await h.run("BeforeAgent", prompt="p")
    assert thaw(done.output) == {
        "continue": True,
        "suppressOutput": False,
        "decision": "allow",
        "systemMessage": "Warning: {not json",
    }
    assert done.failed == ("printf '{not json'; exit 1",)


async def test_cancel_hooks_kills_the_process_group_before_answering(make: Any, pid_pipe: Any) -> None:
    h = await make({"BeforeTool": [{"hooks": [cmd("echo $$ > pid; sleep 30 & sleep 30", name="slow"), cmd("echo quick", name="quick")]}]})
    pids = pid_pipe(h.workspace / "pid")
    await h.request("BeforeTool", "t", tool_name="t", tool_input={})
    [pgid] = await pids.wait()
    await h.capture.wait_for(lambda m: isinstance(m, HookRan) and m.name == "quick")
    await h.client.send(CancelHooks(session_id=SESSION, request_id="r1", reason="turn cancelled"), to="hooks")
    done = await h.reply("r1")
    assert not group_alive(pgid)  # already gone when the answer comes
    assert done.cancelled and done.ran == 2 and done.failed == ("slow",)
    assert thaw(done.output)["systemMessage"] == "quick"  # what finished still counts
    (slow,) = [r for r in h.ran() if r.name == "slow"]
    assert slow.error == "Hook cancelled: turn cancelled" and not slow.success


async def test_cancel_stops_a_sequential_plan_before_later_hooks(make: Any, pid_pipe: Any) -> None:
    h = await make({"BeforeModel": [{"sequential": True, "hooks": [cmd("echo $$ > pid; sleep 30", name="a"), cmd("echo b > b", name="b")]}]})
    pids = pid_pipe(h.workspace / "pid")
    await h.request("BeforeModel", llm_request={"model": "m", "messages": [], "config": {}})
    await pids.wait()
    await h.client.send(CancelHooks(session_id=SESSION, request_id="r1", reason="stop"), to="hooks")
    done = await h.reply("r1")
    assert done.ran == 1 and done.failed == ("a",) and done.output is None and done.cancelled
    assert not (h.workspace / "b").exists()


async def test_cancel_for_unknown_or_finished_request_is_ignored(make: Any) -> None:
    h = await make({"PreCompress": [{"hooks": [cmd("echo ok")]}]})
    done = await h.run("PreCompress", "auto", trigger="auto")
    await h.client.send(CancelHooks(session_id=SESSION, request_id="r1", reason="late"), to="hooks")
    await h.client.send(CancelHooks(session_id=SESSION, request_id="nope", reason="x"), to="hooks")
    assert not done.cancelled
    done = await h.run("PreCompress", "auto", trigger="auto")  # the actor still serves
    assert thaw(done.output) == {"decision": "allow", "systemMessage": "ok"}


async def test_a_slow_hook_does_not_block_other_requests(make: Any, pid_pipe: Any) -> None:
    h = await make({"BeforeTool": [{"matcher": "slow", "hooks": [cmd("echo $$ > pid; sleep 30")]}, {"matcher": "fast", "hooks": [cmd("echo fast")]}]})
    pids = pid_pipe(h.workspace / "pid")
    await h.request("BeforeTool", "slow", request_id="slow", tool_name="slow", tool_input={})
    await pids.wait()
    await h.request("BeforeTool", "fast", request_id="fast", tool_name="fast", tool_input={})
    fast = await h.reply("fast")
    assert thaw(fast.output)["systemMessage"] == "fast"
    await h.client.send(CancelHooks(session_id=SESSION, request_id="slow", reason="done"), to="hooks")
    assert (await h.reply("slow")).cancelled


async def test_inbox_close_cancels_and_answers_everything(workspace: Path, pid_pipe: Any) -> None:
    config = load_hook_config({"hooks": {"AfterTool": [{"hooks": [cmd("echo $$ >> pids; sleep 30")]}]}})
    pids = pid_pipe(workspace / "pids")
    async with trio.open_nursery() as nursery:
        h = await start(workspace, config, nursery)
        for i in range(3):
            await h.request("AfterTool", "t", request_id=f"r{i}", tool_name="t", tool_input={}, tool_response={})
        pgids = await pids.wait(3)
        h.bus.disconnect("hooks")
        replies = [await h.reply(f"r{i}") for i in range(3)]
        assert all(r.cancelled and r.ran == 1 and len(r.failed) == 1 for r in replies)
        assert all(r.error == "Hook cancelled: the hook runner stopped" for r in h.capture.of_type(HookRan))
        for pgid in pgids:
            assert not group_alive(pgid)
        nursery.cancel_scope.cancel(reason="test over")


async def test_supervisor_cancel_still_answers(workspace: Path, pid_pipe: Any) -> None:
    config = load_hook_config({"hooks": {"BeforeAgent": [{"hooks": [cmd("echo $$ > pid; sleep 30")]}]}})
    pids = pid_pipe(workspace / "pid")
    async with trio.open_nursery() as outer:
        bus = Bus()
        client = bus.connect("client")
        actor = HookRunnerActor(bus, session_id="g", address="hooks", config=config, cwd=str(workspace))
        async with trio.open_nursery() as inner:
            await inner.start(actor.run)
            await client.send(RunHooks(session_id=SESSION, request_id="r1", reply_to="client", event="BeforeAgent", input={"prompt": "p"}), to="hooks")
            [pgid] = await pids.wait()
            inner.cancel_scope.cancel(reason="supervisor")
        done = (await client.receive()).message
        assert isinstance(done, HooksFinished) and done.cancelled and done.failed
        assert not group_alive(pgid)
        outer.cancel_scope.cancel(reason="test over")


async def test_disabled_hooks_system_runs_nothing(make: Any) -> None:
    h = await make({"BeforeTool": [{"hooks": [cmd("exit 2")]}]}, hooksConfig={"enabled": False})
    done = await h.run("BeforeTool", "t", tool_name="t", tool_input={})
    assert done.ran == 0 and done.output is None
