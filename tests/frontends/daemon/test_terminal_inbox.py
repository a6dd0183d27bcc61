"""A connection that ends with a shell command still waiting in its inbox (sent to its
editor's terminal, not yet read, so never sent on): the command ends as failed, as one
the editor was running does — it was never answered, and its turn waited until a
cancel."""

from __future__ import annotations

from types import SimpleNamespace

import trio

from actors.frontends.daemon._connection import ConnectionActor, Limits
from bus import Bus
from bus.messages import RunInTerminal, TerminalExited


async def test_a_command_left_in_the_inbox_of_a_closing_connection_fails() -> None:
    bus = Bus()
    executor = bus.connect("shell:s")
    actor = ConnectionActor(SimpleNamespace(bus=bus), None, address="conn:1", limits=Limits())  # type: ignore[arg-type]
    inbox = bus.connect("conn:1")
    run = RunInTerminal(session_id="s", request_id="r1", reply_to="shell:s", call_id="c1", command="sleep", cwd="/")
    await executor.send(run, to="conn:1")
    with trio.fail_after(5):
        await actor._end_terminal_runs(inbox)
        answer = await executor.receive()
    assert isinstance(answer.message, TerminalExited) and answer.message.request_id == "r1"
    assert "disconnected" in (answer.message.error or "")
