from __future__ import annotations

from pathlib import Path

import trio

from tests.frontends.daemon._helpers import (
    client_of,
    events_until,
    running_daemon,
    text_response,
    types,
    write_responses,
)


async def test_a_prompt_streams_to_a_subscriber(home: Path) -> None:
    fake = write_responses(home / "f.responses", text_response("Hello", " there"))
    with trio.fail_after(20):
        async with running_daemon(home), client_of(home) as client:
            ready = await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
            sid = ready.session_id
            sub = await client.subscribe(sid, from_seq=1)
            assert sub.from_seq == 1
            await client.prompt(sid, "hi")
            envs = await events_until(client)
            print(types(envs))
            assert [e.seq for e in envs] == sorted(e.seq for e in envs)
            assert "TextStreamed" in types(envs)
