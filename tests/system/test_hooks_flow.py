"""Hooks in a whole session: the turn and the scheduler reach their hook points."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import trio

from actors.gateway import FakeEntry, FakeResponsesBackend, GatewayActor
from actors.hooks import load_hook_config
from actors.host import runtime
from actors.tools import ToolEnv
from bus import Bus
from bus.messages import (
    BatchSettled,
    CancelTurn,
    CloseSession,
    HookRan,
    SessionClosed,
    SubmitPrompt,
    TextStreamed,
    TurnEnded,
)
from bus.testing import capture_session
from tests.system.test_text_turn import AllowAll, stream


class EchoTool:
    name = "echo"
    display_name = "Echo"
    kind = "read"

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": "echo", "parametersJsonSchema": {"type": "object"}}

    def validate(self, args: Any, env: Any) -> str | None:
        return None

    def describe(self, args: Any, env: Any) -> str:
        return "echo"

    async def execute(self, args: Any, env: Any, output: Any = None) -> Any:
        from bus.messages import ToolResult

        return ToolResult(llm_content=json.dumps(dict(args)), return_display="echoed")


def call_chunk(name: str, args: dict[str, Any]) -> FakeEntry:
    return FakeEntry(
        "generateContentStream",
        [{"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": name, "args": args}}]}, "finishReason": "STOP"}]}],
        1,
    )


def hook(command: str, matcher: str | None = None, timeout_ms: int = 5000) -> dict[str, Any]:
    entry: dict[str, Any] = {"hooks": [{"type": "command", "command": command, "timeout": timeout_ms}]}
    if matcher:
        entry["matcher"] = matcher
    return entry


def python_hook(code: str) -> str:
    return f"{sys.executable} -c {json.dumps(code)}"


async def run_session(tmp_path: Path, entries: list[FakeEntry], hooks: dict[str, Any], *, cancel_when: Any = None):
    bus = Bus()
    cfg = runtime.SessionConfig(
        session_id="s1",
        model="gemini-test",
        approval_mode="yolo",
        env=ToolEnv(workspace=tmp_path, project_temp_dir=tmp_path / "tmp", session_id="s1"),
        tools={"echo": EchoTool()},
        executor_of=lambda t: "files",
        policy=AllowAll(),
        request_config=lambda m: {},
        route_model=lambda m: m,
        classifier_choice=lambda c: c,
        classifier_request=None,
        wall_ms=lambda: 1000,
        hooks=load_hook_config({"hooks": hooks}),
    )
    async with trio.open_nursery() as nursery:
        cap = await nursery.start(capture_session, bus, "s1")
        await nursery.start(GatewayActor(bus, FakeResponsesBackend(entries)).run)
        client = bus.connect("client")
        addrs = await nursery.start(runtime.supervise_session, bus, cfg)
        await client.send(runtime.open_session_message(cfg), to=addrs.session)
        await client.send(SubmitPrompt(session_id="s1", prompt_id="p", parts=[{"text": "go"}]), to=addrs.session)
        if cancel_when is not None:
            await cancel_when()
            await client.send(CancelTurn(session_id="s1", turn_id=None, reason="test", requested_by="client"), to=addrs.session)
        ended = await cap.wait_for_type(TurnEnded)
        await client.send(CloseSession(session_id="s1", reason="done"), to=addrs.session)
        await cap.wait_for_type(SessionClosed)
        bus.disconnect("gateway")
        nursery.cancel_scope.cancel()
    return cap, ended


async def test_before_tool_block_becomes_a_policy_violation(tmp_path: Path) -> None:
    block = python_hook('import json; print(json.dumps({"decision": "block", "reason": "nope"}))')
    cap, ended = await run_session(
        tmp_path, [call_chunk("echo", {"x": 1}), stream("done")], {"BeforeTool": [hook(block, "echo")]}
    )
    settled = cap.of_type(BatchSettled)[0].calls[0]
    assert (settled.status, settled.error_type, settled.error_message) == (
        "error",
        "policy_violation",
        "Tool execution blocked: nope",
    )
    assert ended.stop_reason == "end_turn"


async def test_before_tool_rewrites_input_and_the_model_is_told(tmp_path: Path) -> None:
    rewrite = python_hook(
        'import json; print(json.dumps({"hookSpecificOutput": {"tool_input": {"x": 2}}}))'
    )
    cap, _ = await run_session(
        tmp_path, [call_chunk("echo", {"x": 1}), stream("done")], {"BeforeTool": [hook(rewrite, "ech.")]}
    )
    call = cap.of_type(BatchSettled)[0].calls[0]
    output = call.response_parts[0]["functionResponse"]["response"]["output"]
    assert output == '{"x": 2}\n\n[System] Tool input parameters were modified by a hook before execution.'


async def test_a_hook_that_times_out_is_killed_and_the_turn_goes_on(tmp_path: Path) -> None:
    cap, ended = await run_session(
        tmp_path, [stream("hello")], {"BeforeAgent": [hook("sleep 30", timeout_ms=200)]}
    )
    ran = cap.of_type(HookRan)[0]
    assert not ran.success and "timed out" in (ran.error or "")
    assert [m.text for m in cap.of_type(TextStreamed)] == ["hello"]
    assert ended.stop_reason == "end_turn"


async def test_cancelling_a_turn_kills_its_running_hook(tmp_path: Path) -> None:
    fifo = tmp_path / "hook.pid"
    os.mkfifo(fifo)
    slow = f"echo $$ > {fifo}; exec sleep 30"
    pids: list[int] = []

    async def hook_started() -> None:
        # Blocks (in a thread) until the hook has written its pid: no polling, no sleep.
        text = await trio.to_thread.run_sync(fifo.read_text)
        pids.append(int(text))

    started = trio.current_time()
    _, ended = await run_session(
        tmp_path,
        [call_chunk("echo", {}), stream("done")],
        {"BeforeTool": [hook(slow, "echo", timeout_ms=60_000)]},
        cancel_when=hook_started,
    )
    assert ended.stop_reason == "cancelled"
    assert trio.current_time() - started < 10  # not the hook's 30 s
    try:
        os.kill(pids[0], 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive
