"""A follower's events go out in the sender's task while it waits, caught up
(``Subscription.direct``): every event arrives once, in order, as a client that catches
up from the recording sees them; and none comes after the client's unsubscribe was
answered, however the session goes on streaming."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from bus import Envelope
from bus.messages import RequestDone, TextStreamed, TurnEnded, Unsubscribe, new_id
from tests.frontends.daemon._helpers import (
    client_of,
    events_until,
    running_daemon,
    text_response,
    write_responses,
)


async def test_live_events_arrive_once_in_order_and_none_after_unsubscribing(home: Path) -> None:
    chunks = [f"c{i} " for i in range(40)]
    fake = write_responses(home / "f.responses", text_response(*chunks), text_response(*chunks))
    with trio.fail_after(30):
        async with running_daemon(home), client_of(home, "live") as live, client_of(home, "witness") as witness:
            ready = await live.create_session(
                str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash", fake_chunk_delay_ms=2
            )
            sid = ready.session_id
            await live.subscribe(sid)
            await witness.subscribe(sid)
            await live.prompt(sid, "first")
            got = await events_until(live)
            texts = [e.message.text for e in got if isinstance(e.message, TextStreamed)]
            assert "".join(texts) == "".join(chunks)
            seqs = [e.seq for e in got]
            assert seqs == sorted(set(seqs))
            # The same events as a client reading the recording from the start gets.
            async with client_of(home, "late") as late:
                await late.subscribe(sid, from_seq=seqs[0])
                again = await events_until(late)
            assert [(e.seq, type(e.message).__name__) for e in again] == [
                (e.seq, type(e.message).__name__) for e in got
            ]
            await events_until(witness)

            # Unsubscribe while the second turn streams: after the reply, nothing more.
            await live.prompt(sid, "second")
            async for event in live.events:
                if isinstance(event, Envelope) and isinstance(event.message, TextStreamed):
                    break
            request = Unsubscribe(session_id=sid, request_id=new_id())
            await live.send(request)
            after: list[object] = []
            answered = False
            async with trio.open_nursery() as nursery:

                async def read_live() -> None:
                    nonlocal answered
                    async for event in live.events:
                        if answered:
                            after.append(event)
                        elif isinstance(event, RequestDone) and event.request_id == request.request_id:
                            answered = True

                nursery.start_soon(read_live)
                rest = await events_until(witness)  # the turn streamed on to its end
                assert isinstance(rest[-1].message, TurnEnded) and len(rest) > 5
                await trio.testing.wait_all_tasks_blocked()
                nursery.cancel_scope.cancel()
            assert answered
            assert [e for e in after if isinstance(e, Envelope) and e.session_id == sid] == []
