"""A child session's turn that crashes is the ``invoke_agent`` call's error; the parent
session goes on. (The crash is planted in the turn actor, hence a test of the turn.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from tests.host.subagents._harness import (
    ScriptedModel,
    agent,
    run_session,
    session_config,
    step,
    text,
)
from tests.host.subagents.test_termination import invoke, output_of


async def test_a_crashing_child_is_the_calls_error(
    tmp_path: Path, autojump_clock: trio.abc.Clock, monkeypatch: Any
) -> None:
    from actors.turn import _actor as turn_actor

    original = turn_actor._Turn.run

    async def crash_in_children(self: Any) -> None:
        if "." in self.sid:
            raise RuntimeError("the child's turn broke")
        await original(self)

    monkeypatch.setattr(turn_actor._Turn, "run", crash_in_children)
    model = ScriptedModel({"": [invoke(), step(text("the parent goes on"))]})
    run = await run_session(session_config(tmp_path, [agent("worker")]), model)
    assert output_of(run) == "Subagent 'worker' failed. Error: RuntimeError: the child's turn broke"
    assert run.ended is not None and run.ended.stop_reason == "end_turn"
