"""Subagent termination modes, the recovery turn and the result shape, under MockClock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from actors.gateway import BackendError
from actors.tools import REJECTED_MESSAGE, final_warning
from bus.json_values import thaw
from bus.messages import ApprovalRequested, SubagentActivity, ToolCallUpdated, TurnEnded

from ._harness import (
    HANG,
    ScriptedModel,
    SlowTool,
    agent,
    call,
    run_session,
    session_config,
    step,
    text,
)

REPORT = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def invoke(name: str = "worker", prompt: str = "do it") -> Any:
    return step(call("invoke_agent", agent_name=name, prompt=prompt))


def output_of(run: Any) -> str:
    [response] = [r for r in run.responses() if r["name"] == "invoke_agent"]
    body = response["response"]
    return str(body.get("output", body.get("error")))


def child_texts(run: Any, key: str) -> list[str]:
    """The user texts of each model request of one subagent."""
    out = []
    for req in run.model.requests_of(key):
        last = thaw(req.contents)[-1]
        out.append(" ".join(p.get("text", "") for p in last["parts"] if "text" in p))
    return out


async def test_goal_returns_the_completed_output(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    model = ScriptedModel(
        {
            "": [invoke(), step(text("done"))],
            "worker": [
                step(call("slow", seconds=5)),
                step(call("complete_task", result="42 lines")),
            ],
        }
    )
    run = await run_session(session_config(tmp_path, [agent("worker")]), model)
    assert (
        output_of(run) == "Subagent 'worker' finished.\nTermination Reason: GOAL\nResult:\n42 lines"
    )
    assert run.ended is not None and run.ended.stop_reason == "end_turn"
    # The child's own session: its query first, then the tool's response.
    [first, second] = model.requests_of("worker")
    assert thaw(first.contents)[-1]["parts"] == [{"text": "do it"}]
    assert "functionResponse" in thaw(second.contents)[-1]["parts"][0]
    assert thaw(first.config)["systemInstruction"].startswith(
        "You are worker.\n\n# Environment Context\nENV"
    )
    declared = [d["name"] for d in thaw(first.config)["tools"][0]["functionDeclarations"]]
    assert declared == ["slow", "ask", "complete_task"]  # its own tools, no invoke_agent
    kinds = [m.kind for m in run.of("s1") if isinstance(m, SubagentActivity)]
    assert kinds[0] == "started" and kinds[-1] == "finished" and "tool_call" in kinds


async def test_output_failing_its_schema_is_an_error_back_to_the_agent(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    model = ScriptedModel(
        {
            "": [invoke(), step(text("done"))],
            "worker": [
                step(call("complete_task", report={"answer": 7})),
                step(call("complete_task", report={"answer": "seven"})),
            ],
        }
    )
    worker = agent("worker", output_name="report", output_schema=REPORT)
    run = await run_session(session_config(tmp_path, [worker]), model)
    second = thaw(model.requests_of("worker")[1].contents)[-1]["parts"][0]["functionResponse"]
    assert second["name"] == "complete_task" and "error" in second["response"]
    assert "answer" in second["response"]["error"]
    assert output_of(run).endswith('Termination Reason: GOAL\nResult:\n{\n  "answer": "seven"\n}')


async def test_no_complete_task_gets_one_recovery_turn(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    model = ScriptedModel(
        {
            "": [invoke(), step(text("ok"))],
            "worker": [
                step(text("I think I am done.")),
                step(call("complete_task", result="late answer")),
            ],
        }
    )
    run = await run_session(session_config(tmp_path, [agent("worker")]), model)
    assert child_texts(run, "worker")[1] == final_warning("ERROR_NO_COMPLETE_TASK_CALL")
    assert output_of(run).endswith("Termination Reason: GOAL\nResult:\nlate answer")


async def test_failed_recovery_reports_the_original_reason(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    model = ScriptedModel(
        {
            "": [invoke(), step(text("ok"))],
            "worker": [step(text("no tools")), step(text("still no tools"))],
        }
    )
    run = await run_session(session_config(tmp_path, [agent("worker")]), model)
    assert output_of(run) == (
        "Subagent 'worker' finished.\nTermination Reason: ERROR_NO_COMPLETE_TASK_CALL\nResult:\n"
        "Agent stopped calling tools but did not call 'complete_task'."
    )


async def test_max_turns_then_recovery(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel(
        {
            "": [invoke(), step(text("ok"))],
            "worker": [
                step(call("slow", seconds=1)),
                step(call("slow", seconds=1)),
                step(call("complete_task", result="recovered")),
            ],
        }
    )
    run = await run_session(session_config(tmp_path, [agent("worker", max_turns=2)]), model)
    texts = child_texts(run, "worker")
    assert len(texts) == 3 and texts[2] == final_warning("MAX_TURNS")
    assert output_of(run).endswith("Termination Reason: GOAL\nResult:\nrecovered")
    data = [m for m in run.of("s1") if isinstance(m, SubagentActivity) and m.kind == "finished"][0]
    assert data.status == "GOAL"


async def test_max_turns_recovery_is_one_model_turn(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    model = ScriptedModel(
        {
            "": [invoke(), step(text("ok"))],
            "worker": [
                step(call("slow", seconds=1)),
                step(call("slow", seconds=1)),
                step(call("slow", seconds=1)),
            ],
        }
    )
    run = await run_session(session_config(tmp_path, [agent("worker", max_turns=1)]), model)
    assert len(model.requests_of("worker")) == 2  # one turn, one recovery turn, no more
    assert output_of(run).endswith(
        "Termination Reason: MAX_TURNS\nResult:\nAgent reached max turns limit (1)."
    )


async def test_timeout_in_virtual_time_with_recovery(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    slow = SlowTool()
    model = ScriptedModel(
        {
            "": [invoke(), step(text("ok"))],
            "worker": [
                step(call("slow", seconds=3600)),
                step(call("complete_task", result="partial")),
            ],
        }
    )
    start = trio.current_time()
    run = await run_session(
        session_config(tmp_path, [agent("worker", timeout_mins=10)], slow=slow), model
    )
    assert output_of(run).endswith("Termination Reason: GOAL\nResult:\npartial")
    assert child_texts(run, "worker")[1] == final_warning("TIMEOUT")
    [(_, began, ended)] = slow.runs
    assert ended - began == 600  # cancelled at the 10-minute deadline
    assert trio.current_time() - start == 600


async def test_timeout_when_the_grace_period_runs_out(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    model = ScriptedModel(
        {"": [invoke(), step(text("ok"))], "worker": [step(call("slow", seconds=3600)), HANG]}
    )
    start = trio.current_time()
    run = await run_session(session_config(tmp_path, [agent("worker", timeout_mins=1)]), model)
    assert output_of(run).endswith(
        "Termination Reason: TIMEOUT\nResult:\nAgent timed out after 1 minutes."
    )
    assert trio.current_time() - start == 60 + 60  # the deadline, then the 60 s grace period


async def test_deadline_pauses_while_waiting_for_approval(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    model = ScriptedModel(
        {
            "": [invoke(), step(text("ok"))],
            "worker": [
                step(call("ask", seconds=30)),
                step(call("complete_task", result="approved and done")),
            ],
        }
    )
    cfg = session_config(tmp_path, [agent("worker", timeout_mins=1)], interactive=True)
    run = await run_session(cfg, model, approve_after=300)  # 5 minutes to answer, 1-minute limit
    assert output_of(run).endswith("Termination Reason: GOAL\nResult:\napproved and done")
    asked = [m for m in run.of("s1") if isinstance(m, ApprovalRequested)]
    assert len(asked) == 1 and asked[0].answer_session_id.startswith("s1.worker-")
    assert asked[0].answer_to == f"scheduler:{asked[0].answer_session_id}"
    # The call ran after its approval, within the deadline: no recovery turn was needed.
    second = thaw(model.requests_of("worker")[1].contents)[-1]["parts"][0]
    assert second["functionResponse"]["name"] == "ask"
    assert second["functionResponse"]["response"] == {"output": "slept 30"}


async def test_rejected_call_is_a_soft_rejection(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    model = ScriptedModel(
        {
            "": [invoke(), step(text("ok"))],
            "worker": [
                step(call("ask", seconds=1)),
                step(call("complete_task", result="did it another way")),
            ],
        }
    )
    cfg = session_config(tmp_path, [agent("worker")], interactive=True)
    run = await run_session(cfg, model, approve={"ask": "cancel"})
    response = thaw(model.requests_of("worker")[1].contents)[-1]["parts"][0]["functionResponse"]
    assert response["response"] == {"error": REJECTED_MESSAGE}
    assert output_of(run).endswith("Result:\ndid it another way")


async def test_model_error_is_the_calls_error(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    model = ScriptedModel(
        {
            "": [invoke(), step(text("the agent failed"))],
            "worker": [step(call("slow", seconds=1)), step_error("quota gone")],
        }
    )
    run = await run_session(session_config(tmp_path, [agent("worker")]), model)
    assert output_of(run).startswith("Subagent 'worker' failed. Error: ")
    assert "quota gone" in output_of(run)
    updates = [
        m for m in run.of("s1") if isinstance(m, ToolCallUpdated) and m.name == "invoke_agent"
    ]
    assert updates[-1].status == "error"
    assert run.ended is not None and run.ended.stop_reason == "end_turn"  # the parent goes on


def step_error(message: str) -> Any:
    from ._harness import Step

    return Step(error=BackendError(message, status=400))


async def test_unknown_agent_and_depth_bound(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    model = ScriptedModel({"": [invoke("nobody"), step(text("ok"))]})
    run = await run_session(session_config(tmp_path, [agent("worker")]), model)
    assert output_of(run) == "Subagent 'nobody' not found."

    model = ScriptedModel({"": [invoke("broken"), step(text("ok"))]})
    run = await run_session(
        session_config(
            tmp_path, [agent("worker")], broken={"broken": "Failed to load agent from x.md: bad"}
        ),
        model,
    )
    assert (
        output_of(run)
        == "Subagent 'broken' could not be loaded: Failed to load agent from x.md: bad"
    )

    nester = agent("nester", tools=("invoke_agent",))
    model = ScriptedModel(
        {
            "": [invoke("nester"), step(text("ok"))],
            "nester": [invoke("nester"), step(call("complete_task", result="could not nest"))],
        }
    )
    run = await run_session(session_config(tmp_path, [nester], max_depth=1), model)
    first = thaw(model.requests_of("nester")[1].contents)[-1]["parts"][0]["functionResponse"]
    assert first["response"]["error"] == (
        "Subagent 'nester' cannot be started: subagents may nest 1 deep (agents.maxDepth) and this "
        "session is at depth 1."
    )


async def test_subagents_of_one_wave_run_concurrently(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    slow = SlowTool()
    model = ScriptedModel(
        {
            "": [
                step(
                    call("invoke_agent", agent_name="a", prompt="x"),
                    call("invoke_agent", agent_name="b", prompt="y"),
                ),
                step(text("both done")),
            ],
            "a": [step(call("slow", seconds=100)), step(call("complete_task", result="A"))],
            "b": [step(call("slow", seconds=100)), step(call("complete_task", result="B"))],
        }
    )
    start = trio.current_time()
    run = await run_session(session_config(tmp_path, [agent("a"), agent("b")], slow=slow), model)
    assert trio.current_time() - start == 100
    outputs = [r["response"]["output"] for r in run.responses() if r["name"] == "invoke_agent"]
    assert [o.rsplit("\n", 1)[-1] for o in outputs] == ["A", "B"]  # request order


async def test_nested_agents_report_through_every_level(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    outer = agent("outer", tools=("invoke_agent", "slow"))
    inner = agent("inner")
    model = ScriptedModel(
        {
            "": [invoke("outer"), step(text("ok"))],
            "outer": [invoke("inner"), step(call("complete_task", result="outer done"))],
            "outer/inner": [
                step(call("slow", seconds=1)),
                step(call("complete_task", result="inner done")),
            ],
        }
    )
    run = await run_session(session_config(tmp_path, [outer, inner]), model)
    assert output_of(run).endswith("Result:\nouter done")
    nested = [m for m in run.of("s1") if isinstance(m, SubagentActivity) and m.depth == 2]
    assert nested and all(m.agent_name == "inner" for m in nested)
    assert {m.call_id for m in run.of("s1") if isinstance(m, SubagentActivity)} == {
        next(r["id"] for r in run.responses() if r["name"] == "invoke_agent")
    }


async def test_cancelling_the_parent_stops_every_descendant_first(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    slow = SlowTool()
    outer = agent("outer", tools=("invoke_agent", "slow"))
    model = ScriptedModel(
        {
            "": [invoke("outer")],
            "outer": [invoke("inner")],
            "outer/inner": [step(call("slow", seconds=1000))],
        }
    )
    run = await run_session(
        session_config(tmp_path, [outer, agent("inner")], slow=slow), model, cancel_at=50
    )
    assert run.ended is not None and run.ended.stop_reason == "cancelled"
    [(_, began, ended)] = slow.runs
    assert ended == 50
    acked = next(
        i
        for i, e in enumerate(run.cap.envelopes)
        if e.session_id == "s1" and type(e.message).__name__ == "TurnCancelAcknowledged"
    )
    later_children = [e for e in run.cap.envelopes[acked:] if e.session_id != "s1"]
    assert later_children == []  # nothing of any descendant after the root's acknowledgement
    for child in run.child_ids():
        kinds = [type(m).__name__ for m in run.of(child)]
        assert kinds[-1] == "SessionClosed"
        ends = [m for m in run.of(child) if isinstance(m, TurnEnded)]
        assert ends and ends[-1].stop_reason == "cancelled"
    [response] = run.responses()
    assert "error" in response["response"]  # the cancelled call still has its one response


async def test_a_timeout_during_a_model_request_keeps_the_agents_work(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    from ._harness import Step

    model = ScriptedModel(
        {
            "": [invoke(), step(text("ok"))],
            "worker": [
                step(call("slow", seconds=10)),
                Step(
                    parts=(text("thinking..."),), delay=600
                ),  # the model is still answering at the deadline
                step(call("complete_task", result="from what I had")),
            ],
        }
    )
    run = await run_session(session_config(tmp_path, [agent("worker", timeout_mins=1)]), model)
    assert output_of(run).endswith("Termination Reason: GOAL\nResult:\nfrom what I had")
    recovery = thaw(model.requests_of("worker")[2].contents)
    texts = [p.get("text") for c in recovery for p in c["parts"] if "text" in p]
    assert texts[0] == "do it" and texts[-1] == final_warning("TIMEOUT")
    assert any(
        "functionResponse" in p for c in recovery for p in c["parts"]
    )  # the slow call's answer


async def test_an_outside_cancel_of_the_child_is_aborted(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    from bus.messages import CancelTurn

    model = ScriptedModel(
        {"": [invoke(), step(text("ok"))], "worker": [step(call("slow", seconds=100))]}
    )
    cfg = session_config(tmp_path, [agent("worker")])
    run = await run_session(cfg, model, cancel_child_at=30)
    [child] = run.child_ids()
    assert any(
        isinstance(m, CancelTurn) for m in run.of(child)
    )  # a client cancelled the child itself
    updates = [
        m for m in run.of("s1") if isinstance(m, ToolCallUpdated) and m.name == "invoke_agent"
    ]
    assert updates[-1].status == "cancelled"  # ABORTED: the call ends cancelled
    finished = [m for m in run.of("s1") if isinstance(m, SubagentActivity) and m.kind == "finished"]
    assert [m.status for m in finished] == ["ABORTED"]
    assert run.ended is not None and run.ended.stop_reason == "end_turn"


async def test_a_cancel_while_the_child_starts(
    tmp_path: Path, autojump_clock: trio.abc.Clock, monkeypatch: Any
) -> None:
    from actors.host import runtime
    from actors.host import subagents as _subagents

    original = runtime.supervise_session

    async def slow_start(
        bus: Any, cfg: Any, *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        if "." in cfg.session_id:
            await trio.sleep(5)
        await original(bus, cfg, task_status=task_status)

    monkeypatch.setattr(_subagents.runtime, "supervise_session", slow_start)
    model = ScriptedModel({"": [invoke()], "worker": [step(call("slow", seconds=100))]})
    start = trio.current_time()
    run = await run_session(session_config(tmp_path, [agent("worker")]), model, cancel_at=2)
    assert run.ended is not None and run.ended.stop_reason == "cancelled"
    assert trio.current_time() - start < 5 + 1


async def test_the_child_uses_the_parents_current_mode_and_model(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    from bus.messages import ScheduleBatch

    model = ScriptedModel(
        {
            "": [invoke(), step(text("ok"))],
            "worker": [step(call("slow", seconds=1)), step(call("complete_task", result="done"))],
        }
    )
    run = await run_session(
        session_config(tmp_path, [agent("worker")]),
        model,
        configure={"approval_mode": "yolo", "model": "gemini-other"},
    )
    assert {r.model for r in model.requests_of("worker")} == {"gemini-other"}
    child_batches = [m for c in run.child_ids() for m in run.of(c) if isinstance(m, ScheduleBatch)]
    assert child_batches and {b.approval_mode for b in child_batches} == {"yolo"}


async def test_complete_task_needs_a_result(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel(
        {
            "": [invoke(), step(text("ok"))],
            "worker": [
                step(call("complete_task", result="   ")),
                step(call("complete_task", result="real")),
            ],
        }
    )
    run = await run_session(session_config(tmp_path, [agent("worker")]), model)
    error = thaw(model.requests_of("worker")[1].contents)[-1]["parts"][0]["functionResponse"][
        "response"
    ]["error"]
    assert error == (
        'Missing required "result" argument. You must provide your findings when calling complete_task.'
    )
    assert output_of(run).endswith("Result:\nreal")
    data = [m for m in run.of("s1") if isinstance(m, SubagentActivity) and m.kind == "finished"]
    assert data[0].status == "GOAL"
