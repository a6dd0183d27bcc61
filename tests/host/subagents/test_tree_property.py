"""Random trees of subagents (depth <= 3) with a cancel at a random moment.

Invariants: nothing of any descendant happens after the root's cancel acknowledgement
(no message of a child session, no tool still running); every ``invoke_agent`` call,
at every level, ends exactly once; every child session ends closed. Each example is a
fresh ``trio.run`` on a MockClock, with trio's scheduling seeded by hypothesis.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import example, given
from hypothesis import strategies as st

from bus.messages import SessionClosed, ToolCallRequested, ToolCallUpdated, TurnCancelAcknowledged

from ._harness import (
    HANG,
    ScriptedModel,
    SlowTool,
    Step,
    agent,
    call,
    run_session,
    session_config,
    step,
    text,
)

TERMINAL = ("success", "error", "cancelled")


@attrs.frozen
class Node:
    work: float
    """Virtual seconds of tool work before it invokes its children."""
    tool: str
    """``slow``, or ``ask`` (needs an approval first)."""
    timeout_mins: int
    children: tuple[Node, ...]
    ending: str
    """``complete``, ``text`` (then completes in the recovery turn) or ``hang``."""


def nodes(depth: int) -> st.SearchStrategy[Node]:
    kids = st.lists(st.deferred(lambda: nodes(depth + 1)), max_size=2 if depth < 3 else 0).map(
        tuple
    )
    return st.builds(
        Node,
        work=st.sampled_from([0.0, 1.0, 7.0, 40.0]),
        tool=st.sampled_from(["slow", "slow", "ask"]),
        timeout_mins=st.sampled_from([1, 1000]),
        children=kids if depth < 3 else st.just(()),
        ending=st.sampled_from(["complete", "complete", "text", "hang"]),
    )


def scripts(
    root_children: tuple[Node, ...],
) -> tuple[dict[str, list[Any]], list[str], dict[str, int]]:
    out: dict[str, list[Any]] = {}
    names: list[str] = []
    limits: dict[str, int] = {}

    def add(node: Node, path: list[str]) -> None:
        name = f"n{len(names)}"
        names.append(name)
        limits[name] = node.timeout_mins
        key = "/".join([*path, name])
        steps: list[Step | str] = []
        if node.work:
            steps.append(step(call(node.tool, seconds=node.work)))
        if node.children:
            child_names = []
            for child in node.children:
                child_names.append(f"n{len(names)}")
                add(child, [*path, name])
            steps.append(
                step(*(call("invoke_agent", agent_name=c, prompt="go") for c in child_names))
            )
        if node.ending == "hang":
            steps.append(HANG)
        elif node.ending == "text":
            steps += [step(text("done?")), step(call("complete_task", result=f"{name} late"))]
        else:
            steps.append(step(call("complete_task", result=f"{name} done")))
        out[key] = steps

    top = []
    for child in root_children:
        top.append(f"n{len(names)}")
        add(child, [])
    out[""] = [
        step(*(call("invoke_agent", agent_name=n, prompt="go") for n in top)),
        step(text("all done")),
    ]
    return out, names, limits


# Found by hypothesis: n3's one second of work ends as the root is cancelled, so the
# cancel reaches n3's invoke_agent call while n4 is being opened; n4 was left opened and
# never closed. (An explicit example runs with hypothesis's PRNG, hence trio's
# scheduling, seeded 0; test_cancel_while_opening.py pins the race without a seed.)
@example(
    tree=(
        Node(
            work=0.0,
            tool="slow",
            timeout_mins=1,
            children=(
                Node(
                    work=0.0,
                    tool="slow",
                    timeout_mins=1,
                    children=(Node(7.0, "slow", 1, (), "complete"),),
                    ending="complete",
                ),
                Node(
                    work=1.0,
                    tool="slow",
                    timeout_mins=1,
                    children=(Node(0.0, "slow", 1, (), "complete"),),
                    ending="complete",
                ),
            ),
            ending="complete",
        ),
    ),
    cancel_at=1.0,
    answer="proceed_once",
    answer_after=0.0,
    seed=None,
)
@given(
    tree=st.lists(nodes(1), min_size=1, max_size=2).map(tuple),
    cancel_at=st.one_of(st.none(), st.sampled_from([0.5, 1.0, 3.0, 8.0, 45.0, 200.0])),
    answer=st.sampled_from(["proceed_once", "cancel"]),
    answer_after=st.sampled_from([0.0, 20.0, 90.0]),
    seed=st.random_module(),
)
def test_cancelling_a_tree_of_subagents(
    tree: tuple[Node, ...],
    cancel_at: float | None,
    answer: str,
    answer_after: float,
    seed: Any,
    tmp_path_factory: Any,
) -> None:
    tmp: Path = tmp_path_factory.mktemp("tree")
    script, names, limits = scripts(tree)
    slow = SlowTool()
    defs = [agent(n, tools=("slow", "ask", "invoke_agent"), timeout_mins=limits[n]) for n in names]
    cfg = session_config(tmp, defs, slow=slow, interactive=True)
    model = ScriptedModel(script)
    # A hang without a cancel would never end: cancel at the latest then.
    when = cancel_at if cancel_at is not None else 10_000.0
    run = trio.run(
        functools.partial(
            run_session,
            cfg,
            model,
            cancel_at=when,
            approve={"ask": answer},
            approve_after=answer_after,
        ),
        clock=trio.testing.MockClock(autojump_threshold=0),
    )
    envs = run.cap.envelopes
    acks = [
        i
        for i, e in enumerate(envs)
        if e.session_id == "s1" and isinstance(e.message, TurnCancelAcknowledged)
    ]
    if acks:
        after = [e for e in envs[acks[0] :] if e.session_id != "s1"]
        assert after == [], f"descendant messages after the root's acknowledgement: {after[:3]}"
        # Every tool run of every descendant had ended by then.
        assert len(slow.runs) == len(slow.started)
        assert run.acked_at is not None
        assert all(end <= run.acked_at for _, _, end in slow.runs), (run.acked_at, slow.runs)
    # Every invoke_agent call of every session ends exactly once.
    sessions = {e.session_id for e in envs}
    for sid in sessions:
        msgs = [e.message for e in envs if e.session_id == sid]
        asked = {
            m.call_id for m in msgs if isinstance(m, ToolCallRequested) and m.name == "invoke_agent"
        }
        ends: dict[str, int] = {}
        for m in msgs:
            if isinstance(m, ToolCallUpdated) and m.status in TERMINAL:
                ends[m.call_id] = ends.get(m.call_id, 0) + 1
        assert all(n == 1 for n in ends.values()), (sid, ends)
        started = {
            m.call_id for m in msgs if isinstance(m, ToolCallUpdated) and m.name == "invoke_agent"
        }
        assert started <= asked and all(ends.get(c) == 1 for c in started), (sid, started, ends)
        if sid != "s1":
            assert isinstance(msgs[-1], SessionClosed), (sid, msgs[-1])
    # The root's history answers every call it made.
    responses = [r for r in run.responses() if r["name"] == "invoke_agent"]
    assert len(responses) == len(tree)
    if cancel_at is None and all(_finishes(n) for n in tree):
        assert run.ended is not None and run.ended.stop_reason == "end_turn"
        assert all(r["response"]["output"].startswith("Subagent 'n") for r in responses)


def _finishes(node: Node) -> bool:
    return node.ending != "hang" and all(_finishes(c) for c in node.children)
