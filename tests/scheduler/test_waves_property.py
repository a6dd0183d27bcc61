"""The scheduler under explored schedules: waves, approvals, cancellation.

Fake tools sleep for a virtual duration and log when they run. Each example builds a
fresh MockClock and calls ``trio.run`` so hypothesis also drives trio's scheduling
choices (``seed=st.random_module()``); a failure shrinks to a small batch and a seed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from actors.scheduler import SchedulerActor, SchedulerWiring, ToolSpec, plan_waves
from actors.tools import ExecutorActor, ToolEnv
from bus import Bus
from bus.messages import (
    ApprovalAnswered,
    ApprovalRequested,
    BatchCancelAcknowledged,
    BatchSettled,
    CancelBatch,
    CancelHooks,
    HooksFinished,
    RunHooks,
    ScheduleBatch,
    ToolCallRequest,
    ToolResult,
)
from bus.testing import capture_session

SID = "s"


@attrs.define
class Log:
    runs: dict[str, tuple[float, float | None]] = attrs.field(factory=dict)


@attrs.define
class SleepTool:
    """Sleeps ``args.d`` virtual seconds; fails when ``args.fail``."""

    name: str
    log: Log
    display_name: str = "Sleep"
    kind: str = "read"

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": self.name, "parametersJsonSchema": {"type": "object"}}

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        return None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        return self.name

    async def execute(self, args: Mapping[str, Any], env: ToolEnv, output: Any = None) -> ToolResult:
        call = str(args["id"])
        self.log.runs[call] = (trio.current_time(), None)
        await trio.sleep(float(args["d"]))
        self.log.runs[call] = (self.log.runs[call][0], trio.current_time())
        if args.get("fail"):
            return ToolResult(error_type="execution_failed", error_message="boom")
        return ToolResult(llm_content=f"slept {args['d']}")


@attrs.frozen
class Verdict:
    decision: str
    deny_message: str | None = None


@attrs.define
class ScriptedPolicy:
    asks: frozenset[str]

    def check(self, tool_name: str, args: Mapping[str, Any], *, approval_mode: str | None = None) -> Verdict:
        return Verdict("ask_user" if str(args["id"]) in self.asks else "allow")

    def add_session_rule(self, tool_name: str, **_: Any) -> None:
        pass


TOOL_NAMES = ("read_a", "read_b", "write_file", "replace")

call_st = st.fixed_dictionaries(
    {
        "name": st.sampled_from(TOOL_NAMES),
        "d": st.integers(0, 5),
        "fail": st.booleans(),
        "wait": st.sampled_from([None, True, False]),
        "ask": st.booleans(),
        "answer_after": st.integers(0, 4),
        "answer": st.sampled_from(["proceed_once", "proceed_once", "cancel"]),
    }
)


def build_calls(specs: list[dict[str, Any]]) -> list[ToolCallRequest]:
    calls = []
    for i, spec in enumerate(specs):
        args: dict[str, Any] = {"id": f"c{i}", "d": spec["d"], "fail": spec["fail"]}
        if spec["wait"] is not None:
            args["wait_for_previous"] = spec["wait"]
        calls.append(ToolCallRequest(call_id=f"c{i}", name=spec["name"], args=args))
    return calls


async def run_batch(
    specs: list[dict[str, Any]], cancel_at: float | None, log: Log
) -> tuple[BatchSettled, dict[str, float], float | None, float, float]:
    bus = Bus()
    tools = {n: SleepTool(n, log) for n in TOOL_NAMES}
    env = ToolEnv(workspace=Path("/"), project_temp_dir=Path("/tmp"))
    asks = frozenset(f"c{i}" for i, s in enumerate(specs) if s["ask"])
    answers = {f"c{i}": (s["answer_after"], s["answer"]) for i, s in enumerate(specs)}
    approved_at: dict[str, float] = {}
    ack_at: float | None = None
    async with trio.open_nursery() as nursery:
        cap = await nursery.start(capture_session, bus, SID)
        await nursery.start(ExecutorActor(bus, address="exec", tools=tools, env=env).run)
        specs_map = {
            n: ToolSpec(name=n, display_name="Sleep", kind="read", schema={"type": "object"}, executor="exec")
            for n in TOOL_NAMES
        }
        await nursery.start(
            SchedulerActor(bus, SchedulerWiring(session_id=SID, address="sched", tools=specs_map, policy=ScriptedPolicy(asks))).run
        )
        turn = bus.connect("turn")
        client = bus.connect("client")

        async def approver() -> None:
            async for env_ in bus.subscribe(SID, "approver"):
                msg = env_.message
                if isinstance(msg, ApprovalRequested):
                    after, outcome = answers[msg.call_id]

                    async def answer(msg: ApprovalRequested = msg, after: int = after, outcome: str = outcome) -> None:
                        await trio.sleep(after)
                        approved_at[msg.call_id] = trio.current_time()
                        await client.send(
                            ApprovalAnswered(session_id=SID, correlation_id=msg.correlation_id, outcome=outcome, answered_by="client"),
                            to="sched",
                        )

                    nursery.start_soon(answer)

        nursery.start_soon(approver)
        await trio.testing.wait_all_tasks_blocked()
        start = trio.current_time()
        await turn.send(
            ScheduleBatch(session_id=SID, batch_id="b", reply_to="turn", approval_mode="default", calls=tuple(build_calls(specs)), interactive=True),
            to="sched",
        )
        if cancel_at is not None:

            async def cancel() -> None:
                await trio.sleep(cancel_at)
                await turn.send(CancelBatch(session_id=SID, batch_id="b", reason="test"), to="sched")

            nursery.start_soon(cancel)
        settled: BatchSettled | None = None
        while True:
            msg = (await turn.receive()).message
            if isinstance(msg, BatchSettled):
                settled = msg
                if cancel_at is None:
                    break
            elif isinstance(msg, BatchCancelAcknowledged):
                ack_at = trio.current_time()
                break
        end = trio.current_time()
        # after the acknowledgement nothing may still run: let virtual time pass
        await trio.sleep(100)
        del cap
        nursery.cancel_scope.cancel()
    assert settled is not None
    return settled, approved_at, ack_at, start, end


def waves_of(specs: list[dict[str, Any]]) -> list[list[int]]:
    pairs = []
    for s in specs:
        args: dict[str, Any] = {}
        if s["wait"] is not None:
            args["wait_for_previous"] = s["wait"]
        pairs.append((s["name"], args))
    return plan_waves(pairs)


@given(
    specs=st.lists(call_st, min_size=1, max_size=8),
    cancel=st.none() | st.integers(0, 20),
    seed=st.random_module(),
)
def test_scheduler_invariants(specs: list[dict[str, Any]], cancel: int | None, seed: Any) -> None:
    log = Log()
    settled, approved_at, ack_at, start, end = trio.run(
        run_batch, specs, cancel, log, clock=trio.testing.MockClock(autojump_threshold=0)
    )
    ids = [f"c{i}" for i in range(len(specs))]
    # one terminal result per call, in request order
    assert [c.call_id for c in settled.calls] == ids
    assert all(c.status in ("success", "error", "cancelled") for c in settled.calls)
    status = {c.call_id: c.status for c in settled.calls}
    waves = waves_of(specs)
    for wave in waves:
        members = [f"c{i}" for i in wave]
        ran = [m for m in members if m in log.runs]
        # nothing executes before every approval of its wave was answered
        answered = [approved_at[m] for m in members if m in approved_at]
        for m in ran:
            assert all(t <= log.runs[m][0] for t in answered)
        # calls of a wave start together (so they overlap)
        assert len({log.runs[m][0] for m in ran}) <= 1
        # a barrier (a wave of one) overlaps no other call
        if len(members) == 1 and ran:
            s0, e0 = log.runs[ran[0]]
            for other, (s1, e1) in log.runs.items():
                if other != ran[0] and e0 is not None and e1 is not None:
                    assert e1 <= s0 or s1 >= e0
    # a call that never ran is cancelled or an error; a call that ran to its end is not cancelled
    for cid in ids:
        if cid not in log.runs:
            assert status[cid] in ("cancelled", "error")
    if cancel is None:
        for _, finished in log.runs.values():
            assert finished is not None
        if not any(s["ask"] for s in specs):
            # virtual duration = sum over waves of the longest call
            expected = sum(max(specs[i]["d"] for i in wave) for wave in waves)
            assert end - start == expected
    else:
        assert ack_at is not None
        # nothing the batch started runs after the acknowledgement
        for cid, (s, e) in log.runs.items():
            assert s <= ack_at
            if e is None:
                assert status[cid] == "cancelled"
            else:
                assert e <= ack_at


async def test_read_read_write_read_read_runs_in_three_waves(autojump_clock: trio.abc.Clock) -> None:
    specs = [
        {"name": n, "d": d, "fail": False, "wait": None, "ask": False, "answer_after": 0, "answer": "proceed_once"}
        for n, d in [("read_a", 2), ("read_b", 3), ("write_file", 1), ("read_a", 1), ("read_b", 4)]
    ]
    log = Log()
    settled, _, _, start, end = await run_batch(specs, None, log)
    assert end - start == 3 + 1 + 4
    assert log.runs["c0"][0] == log.runs["c1"][0] == start
    assert log.runs["c2"][0] == start + 3
    assert log.runs["c3"][0] == log.runs["c4"][0] == start + 4
    assert [c.status for c in settled.calls] == ["success"] * 5


async def test_rejecting_an_approval_cancels_later_waves(autojump_clock: trio.abc.Clock) -> None:
    base = {"fail": False, "wait": None, "answer_after": 1, "d": 1}
    specs = [
        {**base, "name": "write_file", "ask": True, "answer": "cancel"},
        {**base, "name": "read_a", "ask": False, "answer": "proceed_once"},
    ]
    settled, _, _, _, _ = await run_batch(specs, None, Log())
    assert [c.status for c in settled.calls] == ["cancelled", "cancelled"]
    assert settled.calls[0].response_parts[0]["functionResponse"]["response"]["error"] == (
        "[Operation Cancelled] Reason: User denied execution."
    )
    assert settled.calls[1].response_parts[0]["functionResponse"]["response"]["error"] == (
        "[Operation Cancelled] Reason: User cancelled operation"
    )


@pytest.mark.parametrize(
    ("calls", "expected"),
    [
        ([("read_file", {}), ("read_file", {}), ("write_file", {}), ("read_file", {}), ("read_file", {})], [[0, 1], [2], [3, 4]]),
        ([("a", {}), ("a", {}), ("write_file", {"wait_for_previous": True}), ("b", {})], [[0, 1], [2], [3]]),
        ([("a", {"wait_for_previous": True}), ("b", {"wait_for_previous": True})], [[0], [1]]),
        ([("replace", {"wait_for_previous": False}), ("a", {})], [[0], [1]]),
        ([("update_topic", {}), ("a", {})], [[0], [1]]),
    ],
)
def test_plan_waves_follows_gemini_cli(calls: list[tuple[str, dict[str, Any]]], expected: list[list[int]]) -> None:
    assert plan_waves(calls) == expected


async def test_a_cancel_while_the_permission_notification_hook_runs_asks_nobody(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A batch cancelled while its call's ``Notification`` (ToolPermission) hook runs
    settles the call as cancelled and acknowledges; it used to ask for the approval
    anyway and wait for an answer nobody would give (the cancel had been consumed)."""
    bus = Bus()
    log = Log()
    tools = {n: SleepTool(n, log) for n in TOOL_NAMES}
    env = ToolEnv(workspace=Path("/"), project_temp_dir=Path("/tmp"))
    specs_map = {
        n: ToolSpec(name=n, display_name="Sleep", kind="edit", schema={"type": "object"}, executor="exec")
        for n in TOOL_NAMES
    }
    wiring = SchedulerWiring(
        session_id=SID,
        address="sched",
        tools=specs_map,
        policy=ScriptedPolicy(frozenset({"c0"})),
        hooks_address="hooks",
        has_hooks=lambda event, target: event == "Notification",
    )
    published: list[object] = []
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(ExecutorActor(bus, address="exec", tools=tools, env=env).run)
            await nursery.start(SchedulerActor(bus, wiring).run)
            hooks = bus.connect("hooks")
            turn = bus.connect("turn")

            async def watch() -> None:
                async for env_ in bus.subscribe(SID, "watch"):
                    published.append(env_.message)

            async def hook_runner() -> None:
                run = (await hooks.receive()).message
                assert isinstance(run, RunHooks) and run.event == "Notification"
                await turn.send(CancelBatch(session_id=SID, batch_id="b", reason="user cancelled"), to="sched")
                cancel = (await hooks.receive()).message
                assert isinstance(cancel, CancelHooks) and cancel.request_id == run.request_id
                await hooks.send(
                    HooksFinished(session_id=SID, request_id=run.request_id, event="Notification", cancelled=True),
                    to="sched",
                )

            nursery.start_soon(watch)
            nursery.start_soon(hook_runner)
            await turn.send(
                ScheduleBatch(
                    session_id=SID,
                    batch_id="b",
                    reply_to="turn",
                    approval_mode="default",
                    calls=tuple(build_calls([{"name": "write_file", "d": 1, "fail": False, "wait": None}])),
                    interactive=True,
                ),
                to="sched",
            )
            settled = (await turn.receive()).message
            acknowledged = (await turn.receive()).message
            nursery.cancel_scope.cancel(reason="test done")
    assert isinstance(settled, BatchSettled) and [c.status for c in settled.calls] == ["cancelled"]
    assert isinstance(acknowledged, BatchCancelAcknowledged)
    assert not any(isinstance(m, ApprovalRequested) for m in published)
    assert log.runs == {}
