"""``CallTool.add_to_context`` over the socket: the user shares a call's result; the next
model request carries it once. A call that did not run adds nothing."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from bus.json_values import thaw
from bus.messages import ContextAdded, GenerateRequest
from tests.frontends.daemon._helpers import (
    client_of,
    events_until,
    running_daemon,
    text_response,
    write_responses,
)


async def test_a_shared_result_reaches_the_next_model_request_once(home: Path) -> None:
    fake = write_responses(home / "f.responses", text_response("ok"), text_response("ok again"))
    with trio.fail_after(20):
        async with running_daemon(home), client_of(home, "me") as me:
            sid = (await me.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")).session_id
            await me.subscribe(sid, from_seq=1, full=True)
            private = await me.call_tool(sid, "run_shell_command", {"command": "echo private-output"})
            shared = await me.call_tool(sid, "run_shell_command", {"command": "echo shared-output"}, add_to_context=True)
            refused = await me.call_tool(sid, "no_such_tool", {}, add_to_context=True)
            assert (private.added_to_context, shared.added_to_context, refused.added_to_context) == (False, True, False)
            await me.prompt(sid, "what did I run?")
            first = await events_until(me)
            await me.prompt(sid, "and before?")
            second = await events_until(me)
    added = [e.message for e in first if isinstance(e.message, ContextAdded)]
    assert len(added) == 1 and added[0].requested_by.startswith("client:")
    for events in (first, second):
        [request] = [e.message for e in events if isinstance(e.message, GenerateRequest) and e.message.role == "main"]
        text = json.dumps(thaw(request.contents))
        assert text.count("I ran the following shell command:") == 1
        assert text.count("echo shared-output") == 1
        assert "private-output" not in text and "no_such_tool" not in text
