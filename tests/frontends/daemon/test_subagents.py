"""A subagent in a daemon session, over the native protocol: its activity reaches the
client nested under the parent's call, and its approval is answered like any other."""

from __future__ import annotations

from pathlib import Path

import trio

from bus.messages import ApprovalRequested, ApprovalSettled, SubagentActivity, TurnEnded

from ._helpers import (
    call_response,
    client_of,
    events_until,
    running_daemon,
    text_response,
    write_responses,
)


async def test_a_subagents_approval_and_activity_over_the_socket(home: Path) -> None:
    notes = home / "ws" / "notes.txt"
    fake = write_responses(
        home / "fake.responses",
        call_response("invoke_agent", {"agent_name": "generalist", "prompt": "Write milk to notes.txt."}),
        call_response("write_file", {"file_path": str(notes), "content": "milk\n"}),
        call_response("complete_task", {"result": {"response": "notes.txt written"}}),
        text_response("The generalist wrote it."),
    )
    with trio.fail_after(30):
        async with running_daemon(home), client_of(home, "a") as a:
            ready = await a.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
            sid = ready.session_id
            await a.subscribe(sid, from_seq=1)
            await a.prompt(sid, "Have the generalist write my note.")
            asked = await events_until(a, lambda m: isinstance(m, ApprovalRequested))
            request = asked[-1].message
            assert isinstance(request, ApprovalRequested)
            assert request.session_id == sid and request.name == "write_file"
            assert request.answer_session_id.startswith(f"{sid}.generalist-")  # the child's call
            assert not notes.exists()
            await a.answer(sid, request.correlation_id, "proceed_once")  # routed to the child
            rest = await events_until(a, lambda m: isinstance(m, TurnEnded) and m.session_id == sid)
            events = [e.message for e in asked + rest]
            assert notes.read_text() == "milk\n"
            settled = [m for m in events if isinstance(m, ApprovalSettled)]
            assert settled and settled[0].outcome == "proceed_once"
            activity = [m for m in events if isinstance(m, SubagentActivity)]
            assert {m.agent_name for m in activity} == {"generalist"}
            assert [m.kind for m in activity][0] == "started"
            assert ("tool_call", "write_file") in {(m.kind, m.tool_name) for m in activity}
            assert activity[-1].kind == "finished" and activity[-1].status == "GOAL"
            ended = events[-1]
            assert isinstance(ended, TurnEnded) and ended.stop_reason == "end_turn"
