from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing

from bus import Bus, DeliveryError, Envelope
from bus.messages import CheckLoop, LoopVerdict, TextStreamed, TurnEnded
from bus.testing import assert_gap_free, capture_session


def text(session: str, n: int) -> TextStreamed:
    return TextStreamed(session_id=session, turn_id="t", text=str(n))


async def test_sequence_numbers_are_per_session_and_gap_free() -> None:
    bus = Bus()
    a = bus.connect("a")
    b = bus.connect("b")
    async with trio.open_nursery() as nursery:
        cap1 = await nursery.start(capture_session, bus, "s1")
        cap2 = await nursery.start(capture_session, bus, "s2")
        for i in range(5):
            await a.send(text("s1", i), to="b")
            await a.publish(text("s2", i))
        await trio.testing.wait_all_tasks_blocked()
        assert [e.seq for e in cap1.envelopes] == [1, 2, 3, 4, 5]
        assert [e.seq for e in cap2.envelopes] == [1, 2, 3, 4, 5]
        assert_gap_free(cap1.envelopes)
        got = [await b.receive() for _ in range(5)]
        assert [e.message.text for e in got] == ["0", "1", "2", "3", "4"]
        nursery.cancel_scope.cancel()


async def test_observers_see_messages_in_sequence_order_across_senders() -> None:
    bus = Bus()
    senders = [bus.connect(f"p{i}") for i in range(4)]
    bus.connect("sink", capacity=1000)
    async with trio.open_nursery() as nursery:
        cap = await nursery.start(capture_session, bus, "s")
        async with trio.open_nursery() as inner:
            for i, port in enumerate(senders):
                for n in range(10):
                    inner.start_soon(partial(port.send, text("s", i * 100 + n), to="sink"))
        await trio.testing.wait_all_tasks_blocked()
        assert [e.seq for e in cap.envelopes] == list(range(1, 41))
        nursery.cancel_scope.cancel()


async def test_sending_to_unknown_address_fails_without_consuming_a_number() -> None:
    bus = Bus()
    a = bus.connect("a")
    with pytest.raises(DeliveryError, match="no actor at 'nobody'"):
        await a.send(text("s", 1), to="nobody")
    assert bus.next_seq("s") == 1


async def test_an_address_has_one_owner() -> None:
    bus = Bus()
    bus.connect("x")
    with pytest.raises(DeliveryError, match="already connected"):
        bus.connect("x")


async def test_full_inbox_applies_backpressure(autojump_clock: trio.abc.Clock) -> None:
    bus = Bus()
    a = bus.connect("a")
    b = bus.connect("b", capacity=1)
    await a.send(text("s", 1), to="b")
    with trio.move_on_after(5) as scope:
        await a.send(text("s", 2), to="b")
    assert scope.cancelled_caught  # the sender waited: the inbox was full
    assert (await b.receive()).message.text == "1"


async def test_lagging_observer_is_marked_and_skipped_not_blocking() -> None:
    bus = Bus()
    a = bus.connect("a")
    slow = bus.subscribe("s", "slow-client", policy="lag", capacity=2)
    for i in range(5):
        await a.publish(text("s", i))
    assert slow.lagged_from == 3
    first = [slow.receive.receive_nowait().seq for _ in range(2)]
    assert first == [1, 2]
    slow.clear_lag()
    await a.publish(text("s", 9))
    assert slow.receive.receive_nowait().seq == 6


async def test_an_observer_that_names_types_is_handed_only_those_and_knows_what_was_passed_by() -> None:
    bus = Bus()
    a = bus.connect("a")
    await a.publish(text("s", 0))
    picky = bus.subscribe("s", "picky", policy="lag", capacity=2, wants={"TurnEnded"}.__contains__)
    everything = bus.subscribe("s", "all", policy="block", capacity=100)
    assert (picky.since, picky.position) == (2, 2)
    for i in range(5):
        await a.publish(text("s", i))  # passed by: neither handed nor counted as a lag
    await a.publish(TurnEnded(session_id="s", turn_id="t", stop_reason="end_turn"))
    assert picky.lagged_from is None
    assert picky.position == 8
    assert [picky.receive.receive_nowait().seq] == [7]
    with pytest.raises(trio.WouldBlock):
        picky.receive.receive_nowait()
    assert [everything.receive.receive_nowait().seq for _ in range(6)] == [2, 3, 4, 5, 6, 7]


async def test_a_message_the_first_observer_holds_reaches_nobody_else_until_it_lets_go() -> None:
    bus = Bus()
    a = bus.connect("a")
    inbox = bus.connect("b")
    first = bus.subscribe("s", "recorder", policy="block", capacity=0, holds={"TurnEnded"}.__contains__)
    other = bus.subscribe("s", "client", capacity=10)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(a.send, TurnEnded(session_id="s", turn_id="t", stop_reason="end_turn"), to="b"))
        held = await first.receive.receive()
        await trio.testing.wait_all_tasks_blocked()
        assert bus.held("s") == held.seq == 1
        with pytest.raises(trio.WouldBlock):
            other.receive.receive_nowait()
        first.release(held.seq)
        assert (await inbox.receive()).seq == 1
        assert other.receive.receive_nowait().seq == 1 and bus.held("s") is None
        # One it does not hold goes on at once; one held when it goes away is let go.
        nursery.start_soon(partial(a.publish, text("s", 1)))
        assert (await first.receive.receive()).seq == 2
        nursery.start_soon(partial(a.publish, TurnEnded(session_id="s", turn_id="t", stop_reason="end_turn")))
        assert (await first.receive.receive()).seq == 3
        bus.unsubscribe(first)
        await trio.testing.wait_all_tasks_blocked()
        assert [other.receive.receive_nowait().seq for _ in range(2)] == [2, 3]


async def test_a_sender_cancelled_while_its_message_is_held_still_leaves_it_with_every_observer() -> None:
    bus = Bus()
    a = bus.connect("a")
    first = bus.subscribe("s", "recorder", policy="block", capacity=0, holds={"TurnEnded"}.__contains__)
    other = bus.subscribe("s", "client", policy="lag", capacity=10, wants={"TurnEnded"}.__contains__)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(a.publish, TurnEnded(session_id="s", turn_id="t", stop_reason="end_turn")))
        held = await first.receive.receive()
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()  # the sender, waiting for the release
        first.release(held.seq)
    assert other.receive.receive_nowait().seq == held.seq and other.lagged_from is None


async def test_a_lag_observer_still_gets_a_message_whose_delivery_a_cancel_cut_short() -> None:
    # The message is recorded (the first observer has it), but a full ``block`` observer
    # before this one made the sender wait, and the sender was cancelled there. The
    # ``lag`` one after it is handed it anyway (it never waits): marked as lagged, its
    # waiting reader would never be woken, and what followed would be dropped for it.
    bus = Bus()
    a = bus.connect("a")
    recorder = bus.subscribe("s", "recorder", policy="block", capacity=10)
    full = bus.subscribe("s", "monitor", policy="block", capacity=0)
    picky = bus.subscribe("s", "client", policy="lag", capacity=10, wants={"TextStreamed"}.__contains__)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(a.publish, text("s", 1)))
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert recorder.receive.receive_nowait().seq == 1
    assert picky.lagged_from is None and picky.receive.receive_nowait().seq == 1
    with pytest.raises(trio.WouldBlock):
        full.receive.receive_nowait()
    bus.unsubscribe(full)
    with trio.fail_after(1):
        await a.publish(text("s", 2))  # what follows reaches it too
    assert picky.receive.receive_nowait().seq == 2


async def test_the_first_observer_has_each_message_before_anyone_else_does() -> None:
    # The recorder's guarantee (actors/recorder.py, "Durability"): subscribed first with
    # no buffer, it takes each message before the other observers or the recipient can
    # run with it, whatever order trio runs the woken tasks in.
    bus = Bus()
    sender = bus.connect("a")
    inbox = bus.connect("b", capacity=1000)
    first = bus.subscribe("s", "recorder", policy="block", capacity=0)
    others = [
        bus.subscribe("s", "monitor", policy="block", capacity=1000),
        bus.subscribe("s", "client", policy="lag", capacity=1000),
    ]
    taken: list[int] = []
    early: list[tuple[str, int]] = []
    n = 200

    async def take_first() -> None:
        async for env in first:
            taken.append(env.seq)

    async def check(name: str, channel: trio.MemoryReceiveChannel[Any]) -> None:
        for _ in range(n):
            env = await channel.receive()
            if env.seq not in taken:
                early.append((name, env.seq))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(take_first)
        for name, channel in (("monitor", others[0].receive), ("client", others[1].receive), ("inbox", inbox.inbox)):
            nursery.start_soon(check, name, channel)
        for i in range(n):
            await sender.send(text("s", i), to="b")
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert len(taken) == n
    assert early == []


async def test_a_tap_sees_each_message_in_the_senders_task_before_anyone_else() -> None:
    # The recorder's way (actors/recorder.py): called inline, it has each message while
    # nobody else can, whatever order trio runs the woken tasks in.
    bus = Bus()
    sender = bus.connect("a")
    inbox = bus.connect("b", capacity=1000)
    tapped: list[int] = []
    seen_by_others: list[int] = []

    def tap(env: Any) -> bool:
        assert trio.lowlevel.current_task() is sending
        assert env.seq not in seen_by_others
        tapped.append(env.seq)
        return False

    sending = trio.lowlevel.current_task()
    first = bus.subscribe("s", "recorder", capacity=math.inf, tap=tap)
    other = bus.subscribe("s", "client", policy="lag", capacity=1000)
    for i in range(50):
        env = await sender.send(text("s", i), to="b")
        seen_by_others.append(env.seq)
    assert tapped == list(range(1, 51))
    with pytest.raises(trio.WouldBlock):
        first.receive.receive_nowait()  # it said no: nothing handed to it
    assert [other.receive.receive_nowait().seq for _ in range(50)] == tapped
    assert [inbox.inbox.receive_nowait().seq for _ in range(50)] == tapped


async def test_a_tap_can_take_a_message_too_and_hold_it_until_it_lets_go() -> None:
    bus = Bus()
    a = bus.connect("a")
    first = bus.subscribe(
        "s", "recorder", capacity=math.inf, holds={"TurnEnded"}.__contains__,
        tap=lambda env: isinstance(env.message, TurnEnded),
    )
    other = bus.subscribe("s", "client", capacity=10)
    async with trio.open_nursery() as nursery:
        await a.publish(text("s", 1))  # not taken: it goes on at once
        nursery.start_soon(partial(a.publish, TurnEnded(session_id="s", turn_id="t", stop_reason="end_turn")))
        held = await first.receive.receive()
        await trio.testing.wait_all_tasks_blocked()
        assert held.seq == 2 and bus.held("s") == 2
        assert other.receive.receive_nowait().seq == 1
        with pytest.raises(trio.WouldBlock):
            other.receive.receive_nowait()
        first.release(held.seq)
        await trio.testing.wait_all_tasks_blocked()
        assert other.receive.receive_nowait().seq == 2 and bus.held("s") is None


async def test_a_message_is_held_while_the_tap_writes_it_whatever_the_tap_says_then() -> None:
    # A worker thread reading the recording (a daemon client catching up) may read a
    # line the moment the tap wrote it, the loop's thread still in the write or the
    # fsync: it must find that message held, or a client sees a turn's end that may not
    # be on disk (a CI run saw one: the session was then gone before the next prompt).
    bus = Bus()
    a = bus.connect("a")
    during_tap: list[tuple[int, int | None]] = []

    def tap(env: Envelope) -> bool:
        during_tap.append((env.seq, bus.held("s")))
        return isinstance(env.message, TurnEnded)

    recorder = bus.subscribe("s", "recorder", capacity=math.inf, holds={"TurnEnded"}.__contains__, tap=tap)
    other = bus.subscribe("s", "client", capacity=10)
    await a.publish(text("s", 1))
    assert bus.held("s") is None  # not held once written: it goes on at once
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(a.publish, TurnEnded(session_id="s", turn_id="t", stop_reason="end_turn")))
        await trio.testing.wait_all_tasks_blocked()
        assert bus.held("s") == 2
        assert (await recorder.receive.receive()).seq == 2
        recorder.release(2)
    assert during_tap == [(1, 1), (2, 2)] and bus.held("s") is None
    assert [other.receive.receive_nowait().seq for _ in range(2)] == [1, 2]


async def test_a_tap_is_first_whoever_subscribed_before_it_and_a_session_has_one() -> None:
    bus = Bus()
    a = bus.connect("a")
    order: list[str] = []
    early = bus.subscribe("s", "client", policy="block", capacity=0)

    def tap(env: Any) -> bool:
        order.append("tap")
        return False

    bus.subscribe("s", "recorder", capacity=math.inf, tap=tap)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(a.publish, text("s", 1)))
        await early.receive.receive()
        order.append("client")
    assert order == ["tap", "client"]
    with pytest.raises(ValueError, match="already has a tap"):
        bus.subscribe("s", "another", capacity=math.inf, tap=tap)
    with pytest.raises(ValueError, match="one session"):
        bus.subscribe("*", "everything", capacity=math.inf, tap=tap)


async def _send_while_cancelled() -> tuple[list[int], list[int], int]:
    """One send, its sender cancelled by a task trio may run before or after it: what
    the tap saw, what reached the recipient, the session's next number."""
    bus = Bus()
    a = bus.connect("a")
    inbox = bus.connect("b")
    tapped: list[int] = []
    bus.subscribe("s", "recorder", capacity=math.inf, tap=lambda env: tapped.append(env.seq) or False)
    scope = trio.CancelScope()

    async def send() -> None:
        with scope:
            await a.send(text("s", 0), to="b")

    async def cancel() -> None:
        scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send)
        nursery.start_soon(cancel)
    delivered = []
    with contextlib.suppress(trio.WouldBlock):
        delivered.append(inbox.inbox.receive_nowait().seq)
    return tapped, delivered, bus.next_seq("s")


async def test_a_message_a_tap_has_seen_reaches_its_recipient_whenever_the_sender_is_cancelled() -> None:
    # The cancel lands before the message is numbered (while the sender waits for the
    # session's lock) or not at all: never between the tap (the recording) and the
    # recipient, which a replay could not reproduce. Trio runs the two tasks in either
    # order, so repeat.
    for _ in range(30):
        tapped, delivered, next_seq = await _send_while_cancelled()
        assert delivered == tapped
        assert next_seq == 1 + len(tapped)


class _Steps(trio.abc.Instrument):
    """Counts the task steps trio runs while it is installed."""

    def __init__(self) -> None:
        self.count = 0

    def before_task_step(self, task: Any) -> None:
        self.count += 1


@contextlib.contextmanager
def _counting_steps() -> Iterator[_Steps]:
    steps = _Steps()
    trio.lowlevel.add_instrument(steps)
    try:
        yield steps
    finally:
        trio.lowlevel.remove_instrument(steps)


def _check(n: int, text: str = "") -> CheckLoop:
    return CheckLoop(session_id="s", request_id=f"r{n}", reply_to="turn", prompt_id="p", kind="content", text=text)


def _verdict(env: Any) -> LoopVerdict | None:
    return LoopVerdict(session_id="s", request_id=env.message.request_id) if env.message.text != "inbox" else None


def _turn_and_detector(bus: Bus, *, turn_capacity: int | None = None) -> tuple[Any, Any]:
    """A turn's port and a loop detector's that answers its checks (``_verdict``)."""
    turn = bus.connect("turn") if turn_capacity is None else bus.connect("turn", capacity=turn_capacity)
    loops = bus.connect("loops")
    loops.answer(_verdict)
    return turn, loops


async def _idle(port: Any, answered: list[str]) -> None:
    async for env in port:
        answered.append(f"inbox:{env.message.request_id}")
        await port.send(LoopVerdict(session_id="s", request_id=env.message.request_id), to="turn")


async def test_an_idle_actor_answers_a_request_in_its_senders_task() -> None:
    bus = Bus()
    turn, loops = _turn_and_detector(bus)
    lines: list[str] = []
    bus.subscribe("s", "recorder", capacity=math.inf, tap=lambda env: lines.append(type(env.message).__name__) or False)
    client = bus.subscribe("s", "client", policy="block", capacity=100)  # after a tap, with room: no wait
    inboxed: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_idle, loops, inboxed)
        await trio.testing.wait_all_tasks_blocked()
        with _counting_steps() as steps:
            for n in range(5):
                await turn.send(_check(n), to="loops")
                reply = turn.inbox.receive_nowait()  # there already: answered in this task
                assert isinstance(reply.message, LoopVerdict) and reply.message.request_id == f"r{n}"
                assert reply.sender == "loops" and reply.recipient == "turn"
        assert steps.count <= 5  # the turn's own steps: the loop detector's task never ran
        # One it does not answer goes to its inbox, as does one while it is busy.
        await turn.send(_check(9, "inbox"), to="loops")
        assert (await turn.receive()).message.request_id == "r9"
        nursery.cancel_scope.cancel()
    assert inboxed == ["inbox:r9"]
    assert lines == ["CheckLoop", "LoopVerdict"] * 6
    assert [client.receive.receive_nowait().seq for _ in range(12)] == list(range(1, 13))


async def test_an_asked_request_answered_in_the_senders_task_hands_the_reply_back() -> None:
    """``ask``: the reply of a request answered inline is returned, numbered and observed
    after the request, and never reaches the asker's inbox; one answered from the inbox
    (not answered inline, or on a bus that answers nothing inline) returns None and the
    reply comes to the inbox."""
    for inline in (True, False):

        class Ordering(Bus):
            answers_inline = inline

        bus = Ordering()
        turn, loops = _turn_and_detector(bus)
        lines: list[tuple[int, str]] = []
        bus.subscribe("s", "recorder", capacity=math.inf, tap=lambda env, lines=lines: lines.append((env.seq, type(env.message).__name__)) or False)
        inboxed: list[str] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_idle, loops, inboxed)
            await trio.testing.wait_all_tasks_blocked()
            reply = await turn.ask(_check(1), to="loops")
            if inline:
                assert reply is not None and reply.seq == 2 and reply.recipient == "turn"
                assert isinstance(reply.message, LoopVerdict) and reply.message.request_id == "r1"
                with pytest.raises(trio.WouldBlock):
                    turn.inbox.receive_nowait()
            else:
                assert reply is None
                assert (await turn.receive()).message.request_id == "r1"
            assert await turn.ask(_check(2, "inbox"), to="loops") is None  # not answered inline
            assert (await turn.receive()).message.request_id == "r2"
            nursery.cancel_scope.cancel()
        assert lines == [(1, "CheckLoop"), (2, "LoopVerdict"), (3, "CheckLoop"), (4, "LoopVerdict")]
        assert inboxed == (["inbox:r2"] if inline else ["inbox:r1", "inbox:r2"])


async def test_what_an_asker_publishes_on_an_inline_reply_follows_it_without_a_yield() -> None:
    """``then``: the event the asker shows once the reply lets it, numbered and observed
    right after the reply, in the asker's one task step; none when ``then`` says so, and
    ``then`` is not called for a reply that comes through the inbox."""
    bus = Bus()
    turn, loops = _turn_and_detector(bus)
    lines: list[tuple[int, str, str]] = []
    bus.subscribe("s", "recorder", capacity=math.inf, tap=lambda env: lines.append((env.seq, type(env.message).__name__, env.sender)) or False)
    shown = TextStreamed(session_id="s", turn_id="t", text="shown")
    called: list[str] = []

    def then(reply: Any) -> Any:
        called.append(reply.message.request_id)
        return shown if reply.message.request_id == "r1" else None

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_idle, loops, [])
        await trio.testing.wait_all_tasks_blocked()
        with _counting_steps() as steps:
            assert await turn.ask(_check(1), to="loops", then=then) is not None
        assert steps.count <= 1
        assert await turn.ask(_check(2), to="loops", then=then) is not None
        assert await turn.ask(_check(3, "inbox"), to="loops", then=then) is None
        assert (await turn.receive()).message.request_id == "r3"
        nursery.cancel_scope.cancel()
    assert called == ["r1", "r2"]
    assert lines == [
        (1, "CheckLoop", "turn"),
        (2, "LoopVerdict", "loops"),
        (3, "TextStreamed", "turn"),
        (4, "CheckLoop", "turn"),
        (5, "LoopVerdict", "loops"),
        (6, "CheckLoop", "turn"),
        (7, "LoopVerdict", "loops"),
    ]


async def test_a_request_goes_to_the_inbox_when_the_actor_is_busy_or_the_reply_could_wait() -> None:
    bus = Bus()
    turn, loops = _turn_and_detector(bus, turn_capacity=1)
    inboxed: list[str] = []
    # Not idle (nobody reads its inbox): the inbox.
    await turn.send(_check(1), to="loops")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_idle, loops, inboxed)
        assert (await turn.receive()).message.request_id == "r1"
        await trio.testing.wait_all_tasks_blocked()
        # The reply's inbox full: the inbox (the actor waits for room, not the sender).
        await bus.connect("other").send(TextStreamed(session_id="s", turn_id="t", text="x"), to="turn")
        await turn.send(_check(2), to="loops")
        assert (await turn.receive()).message.text == "x"
        assert (await turn.receive()).message.request_id == "r2"
        await trio.testing.wait_all_tasks_blocked()
        # A ``block`` observer, the first to be handed messages (it would wait): the inbox.
        monitor = bus.subscribe("s", "monitor", policy="block", capacity=100)
        await turn.send(_check(3), to="loops")
        assert (await turn.receive()).message.request_id == "r3"
        bus.unsubscribe(monitor)
        await trio.testing.wait_all_tasks_blocked()
        # After a tap, but without room for both: the inbox.
        tap = bus.subscribe("s", "recorder", capacity=math.inf, tap=lambda env: False)
        monitor = bus.subscribe("s", "monitor", policy="block", capacity=1)
        drained: list[int] = []

        async def drain() -> None:
            async for env in monitor:
                drained.append(env.seq)

        nursery.start_soon(drain)
        await trio.testing.wait_all_tasks_blocked()
        await turn.send(_check(5), to="loops")
        assert (await turn.receive()).message.request_id == "r5"
        await trio.testing.wait_all_tasks_blocked()
        assert len(drained) == 2
        bus.unsubscribe(monitor)
        bus.unsubscribe(tap)
        await trio.testing.wait_all_tasks_blocked()
        await turn.send(_check(4), to="loops")  # idle again, nothing in the way: answered
        assert turn.inbox.receive_nowait().message.request_id == "r4"
        nursery.cancel_scope.cancel()
    assert inboxed == ["inbox:r1", "inbox:r2", "inbox:r3", "inbox:r5"]


async def test_a_replays_bus_has_every_request_answered_from_the_inbox() -> None:
    class Ordering(Bus):
        answers_inline = False

    bus = Ordering()
    turn, loops = _turn_and_detector(bus)
    inboxed: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_idle, loops, inboxed)
        await trio.testing.wait_all_tasks_blocked()
        await turn.send(_check(1), to="loops")
        assert (await turn.receive()).message.request_id == "r1"
        nursery.cancel_scope.cancel()
    assert inboxed == ["inbox:r1"]


async def test_a_send_is_a_schedule_point_even_with_nothing_to_wait_for() -> None:
    bus = Bus()
    sender = bus.connect("a")
    bus.subscribe("s", "client", policy="lag", capacity=1000)
    ran = False

    async def other() -> None:
        nonlocal ran
        ran = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        for i in range(10):  # no block observer, no recipient: no hand-over waits
            await sender.publish(text("s", i))
        assert ran


async def test_a_direct_observer_takes_messages_in_the_senders_task_only_while_its_reader_waits() -> None:
    """``Subscription.direct``: called while the observer's reader waits with nothing
    queued; True takes the message (not queued, the reader not woken), False or an
    exception leaves it queued; not called while the reader has a message to read, so
    what it reads and what was taken keep the bus's order."""
    bus = Bus()
    sender = bus.connect("a")
    sub = bus.subscribe("s", "client", policy="lag", capacity=100)
    calls: list[int] = []
    answers: list[Any] = []

    def direct(env: Any) -> bool:
        calls.append(env.seq)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return bool(answer)

    sub.direct = direct
    read: list[int] = []

    async def reader() -> None:
        async for env in sub:
            read.append(env.seq)

    def text(n: int) -> TextStreamed:
        return TextStreamed(session_id="s", turn_id="t", text=str(n))

    async with trio.open_nursery() as nursery:
        await sender.publish(text(1))  # no reader waiting: queued, not asked
        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        assert read == [1] and calls == []
        answers[:] = [True, False, RuntimeError("boom")]
        for n in (2, 3, 4):
            await sender.publish(text(n))
            await trio.testing.wait_all_tasks_blocked()
        assert calls == [2, 3, 4] and read == [1, 3, 4]  # 2 was taken
        # The reader handed 5 but not yet run: 6 is queued behind it without asking.
        answers[:] = [False]
        sub._hand(Envelope(seq=5, session_id="s", sender="a", recipient=None, message=text(5)))
        sub._hand(Envelope(seq=6, session_id="s", sender="a", recipient=None, message=text(6)))
        await trio.testing.wait_all_tasks_blocked()
        assert calls == [2, 3, 4, 5] and read == [1, 3, 4, 5, 6]
        nursery.cancel_scope.cancel()


async def test_an_ask_whose_shown_event_would_wait_goes_the_usual_way() -> None:
    """A ``block`` observer with room for the request and its reply but not for what
    ``then`` shows: not answered inline (the send would wait holding the lock, and a
    cancel there would lose the recorded reply); the reply comes to the inbox."""
    bus = Bus()
    turn, loops = _turn_and_detector(bus)
    slow = bus.subscribe("s", "slow", policy="block", capacity=2)
    bus.subscribe("s", "recorder", capacity=math.inf, tap=lambda env: False)
    inboxed: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_idle, loops, inboxed)
        await trio.testing.wait_all_tasks_blocked()
        with trio.fail_after(1):
            shown = TextStreamed(session_id="s", turn_id="t", text="x")
            assert await turn.ask(_check(1), to="loops", then=lambda reply: shown) is None
            assert slow.receive.receive_nowait().message.request_id == "r1"  # room made
            assert (await turn.receive()).message.request_id == "r1"
        nursery.cancel_scope.cancel()
    assert inboxed == ["inbox:r1"]
