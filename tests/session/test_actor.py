"""The session actor in real trio: its shell carries the core's effects out, with a
scripted turn peer on the bus (the turn actor's side of the protocol) and every message
of the session captured."""

from __future__ import annotations

import trio
import trio.testing

from actors.session import SessionActor, SessionWiring
from bus import Bus, Envelope, Port
from bus.messages import (
    CancelTurn,
    CloseSession,
    OpenSession,
    SessionClosed,
    SessionOpened,
    StartTurn,
    SubmitPrompt,
    TurnCancelAcknowledged,
    TurnEnded,
    TurnStarted,
)
from bus.testing import capture_session, scripted_peer

SID = "s1"
WIRING = SessionWiring(session_id=SID, address="session:s1", turn_address="turn:s1")


async def test_a_close_cancels_the_running_turn_and_the_session_stops_after_its_acknowledgement(
    autojump_clock: trio.abc.Clock,
) -> None:
    bus = Bus()
    running: list[StartTurn] = []

    async def start(env: Envelope, port: Port) -> None:
        assert isinstance(env.message, StartTurn)
        running.append(env.message)

    async def cancel(env: Envelope, port: Port) -> None:
        msg = env.message
        assert isinstance(msg, CancelTurn) and msg.turn_id == running[0].turn_id
        await trio.sleep(1)  # the turn stops its requests
        ended = TurnEnded(session_id=SID, turn_id=running[0].turn_id, stop_reason="cancelled")
        await port.send(ended, to=WIRING.address)
        ack = TurnCancelAcknowledged(session_id=SID, turn_id=msg.turn_id, requested_by=msg.requested_by)
        await port.send(ack, to=WIRING.address)

    async with trio.open_nursery() as nursery:
        capture = await nursery.start(capture_session, bus, SID)
        await nursery.start(scripted_peer, bus, WIRING.turn_address, {StartTurn: start, CancelTurn: cancel})
        client = bus.connect("client")
        done = trio.Event()

        async def run_session() -> None:
            await SessionActor(bus, WIRING).run()
            done.set()

        nursery.start_soon(run_session)
        await trio.testing.wait_all_tasks_blocked()
        # Each step waits for the session's answer: the client's sends and the session's
        # publications would otherwise interleave as trio schedules them.
        await client.send(OpenSession(session_id=SID, model="m", approval_mode="default", workspace="/w"), to=WIRING.address)
        await capture.wait_for_type(SessionOpened)
        await client.send(SubmitPrompt(session_id=SID, prompt_id="p1"), to=WIRING.address)
        await capture.wait_for_type(StartTurn)
        # Not a message of the session's inbox: ignored, the session goes on.
        await client.send(TurnStarted(session_id=SID, turn_id="x", prompt_id="p1"), to=WIRING.address)
        await client.send(CloseSession(session_id=SID, reason="bye"), to=WIRING.address)
        began = trio.current_time()
        with trio.fail_after(60):  # (virtual seconds: a bound against hangs)
            await done.wait()
        assert trio.current_time() - began == 1
        await capture.wait_for_type(SessionClosed)
        nursery.cancel_scope.cancel(reason="the test is over")
    kinds = [type(m).__name__ for m in capture.messages]
    assert kinds == [
        "OpenSession",
        "SessionOpened",
        "SubmitPrompt",
        "StartTurn",
        "TurnStarted",
        "CloseSession",
        "CancelTurn",
        "TurnEnded",
        "TurnCancelAcknowledged",
        "TurnCancelAcknowledged",
        "SessionClosed",
    ]
    assert capture.messages[-1] == SessionClosed(session_id=SID, reason="bye")
    assert not bus.is_connected(WIRING.address)


async def test_a_closed_inbox_ends_the_session(autojump_clock: trio.abc.Clock) -> None:
    bus = Bus()
    async with trio.open_nursery() as nursery:
        capture = await nursery.start(capture_session, bus, SID)
        await nursery.start(SessionActor(bus, WIRING).run)
        bus.disconnect(WIRING.address)
        with trio.fail_after(60):
            closed = await capture.wait_for_type(SessionClosed)
        nursery.cancel_scope.cancel(reason="the test is over")
    assert closed == SessionClosed(session_id=SID, reason="inbox closed")
