"""Routing: addresses, per-session sequence numbers, bounded inboxes, observers.

The bus knows nothing of actors. An actor (or a client) ``connect``s an address and
gets a ``Port``: it sends through it and reads its inbox from it. Every message belongs
to a session (``message.session_id``); the bus numbers each session's messages from 1
without gaps and hands each one, in that order, to the session's observers and then to
its recipient. Delivery order per session therefore equals sequence order for every
observer, and for every recipient.

Backpressure: inboxes are bounded and a sender waits while its recipient's inbox is
full. Observers choose: ``block`` (core observers such as the recorder: the bus waits
for them) or ``lag`` (remote clients: when full they are marked lagging, miss messages,
and learn from ``Subscription.lagged_from`` where to resynchronise from the recording).

An observer may also name the message types it wants (``wants``, a test on the type's
name): the bus passes the others by without handing them over (and without waking the
observer), so a subscription's messages then have gaps. ``Subscription.since`` and
``Subscription.position`` say which gaps are the filter's: from ``since`` on, every
message reached the subscription or was passed by, and ``position`` is the next one the
bus will offer it.

The first observer may ask the bus to *hold* some types (``holds``): the bus hands such
a message to it and waits until it ``release``s it before anyone else is handed it (the
recorder, which fsyncs those in a worker thread, keeps its "on disk before anyone sees
it" that way).

One observer of a session may be a *tap* (``tap``): a function the bus calls with each
message, in the sender's task, before anyone else has it (a tap is the session's first
observer, whenever it subscribed). It must not block; it says
whether the message is also handed to the subscription (to be held, when ``holds``
names its type). The recorder writes its lines this way: no task switch a message, and
nobody can see a message before its line is written. While the tap runs, the message
counts as held (``held``): a worker thread reading the file can find its line there
the moment it is written, before the fsync.

An actor may *answer* some requests in their sender's task (``Bus.answer``): when it is
idle, a request it can answer at once is answered there and the reply delivered, with
no task switch; the recording shows the request and its reply as it would have. The
loop detector answers the turn's checks of each chunk this way. A sender that *asks*
(``Bus.ask``) gets such a reply back from the send instead of in its inbox, and may
publish what the reply lets it show in the same step (``then``): the turn shows a chunk
the detector let through so.

A ``lag`` observer may take a message *directly* (``Subscription.direct``): while its
reader waits with nothing queued, the bus offers it the message in the sender's task,
and one it takes is neither queued nor wakes the reader. A daemon connection's follower
writes the client's frame so.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Literal

import attrs
import trio

from .codec import Envelope
from .errors import DeliveryError

if TYPE_CHECKING:
    from .messages import Message  # the union: imported when first used (bus.messages)

Answerer = Callable[[Envelope], "Message | None"]
"""A request's answer, made in its sender's task, or None (``Bus.answer``)."""
Follow = Callable[[Envelope], "Message | None"]
"""Given a reply ``Bus.ask`` returns, the event its sender publishes next, or None."""

DEFAULT_INBOX = 256
_RELEASED = 1 << 62
"""Every message released (an observer that went away holds nothing)."""

ALL_SESSIONS = "*"


def _held_by_tap(route: _SessionRoute, message: Message) -> bool:
    """Whether the session's first observer holds ``message``'s type (a sync point)."""
    return any(o.holds is not None and o.holds(type(message).__name__) for o in route.observers[:1])


@attrs.define(eq=False)
class _SessionRoute:
    next_seq: int = 1
    held: int | None = None
    lock: trio.StrictFIFOLock = attrs.field(factory=trio.StrictFIFOLock)
    observers: list[Subscription] = attrs.field(factory=list)


@attrs.define(eq=False)
class Subscription:
    """An observer's view of one session (or of all sessions)."""

    name: str
    session_id: str
    policy: Literal["block", "lag"]
    _send: trio.MemorySendChannel[Envelope]
    receive: trio.MemoryReceiveChannel[Envelope]
    lagged_from: int | None = None
    """First sequence number this observer missed (``lag`` policy), or None."""
    wants: Callable[[str], bool] | None = None
    """The message types (by name) it is handed; None: every message."""
    since: int = 0
    """The first sequence number of its session it is offered (the session's next one
    when it subscribed; 0 for an observer of every session)."""
    position: int = 0
    """The next sequence number the bus will offer it: every message before it (from
    ``since``) was handed over, passed by (``wants``) or missed (``lagged_from``)."""
    holds: Callable[[str], bool] | None = None
    """The message types (by name) nobody else is handed until this (first) observer
    ``release``s them; None: none."""
    tap: Callable[[Envelope], bool] | None = None
    """Called with each message before anyone else has it (the session's first observer:
    one a session); True: hand it over too. See the module doc."""
    direct: Callable[[Envelope], bool] | None = None
    """A ``lag`` observer's way to take a message in the sender's task: called, when its
    reader waits for the next message and none is queued, with the message it would be
    handed; True: taken (nothing is queued, its reader is not woken), False: queued as
    usual. It must not raise (an exception it raises is taken for False) or yield."""
    _released: int = 0
    _release: trio.Event | None = None

    def __aiter__(self) -> AsyncIterator[Envelope]:
        return self.receive.__aiter__()

    def clear_lag(self) -> None:
        """Call after resynchronising; delivery resumes with the next message."""
        self.lagged_from = None

    def release(self, seq: int) -> None:
        """The observer is done with message ``seq`` (and those before it): a held one
        goes on to the others."""
        if seq > self._released:
            self._released = seq
            if self._release is not None:
                self._release.set()
                self._release = None

    async def _held(self, seq: int) -> None:
        while self._released < seq:
            event = self._release = trio.Event()
            await event.wait()

    def _hand(self, env: Envelope) -> bool:
        """Hand ``env`` over without waiting; False when a ``block`` observer's buffer
        is full (the bus then waits in ``_offer``)."""
        if self.lagged_from is not None and self.policy == "lag":
            return True
        if self.direct is not None:
            state = self._send.statistics()
            if state.tasks_waiting_receive and not state.current_buffer_used:
                try:
                    if self.direct(env):
                        return True
                except Exception:  # noqa: BLE001 - queued instead: its reader meets it
                    pass
        try:
            self._send.send_nowait(env)
        except trio.WouldBlock:
            if self.policy == "block":
                return False
            self.lagged_from = env.seq
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the observer went away; it is unsubscribed on close
        return True

    async def _offer(self, env: Envelope) -> None:
        if self.policy == "block":
            try:
                await self._send.send(env)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the observer went away; it is unsubscribed on close
            return
        if self.lagged_from is not None:
            return
        try:
            self._send.send_nowait(env)
        except trio.WouldBlock:
            self.lagged_from = env.seq
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


class Port:
    """An address on the bus: send from it, read its inbox."""

    def __init__(self, bus: Bus, address: str, receive: trio.MemoryReceiveChannel[Envelope]):
        self.bus = bus
        self.address = address
        self.inbox = receive

    async def send(self, message: Message, *, to: str | None = None) -> Envelope:
        """Send ``message`` to address ``to`` (None: observers only)."""
        return await self.bus.send(message, sender=self.address, to=to)

    async def publish(self, message: Message) -> Envelope:
        """An event for observers only."""
        return await self.bus.send(message, sender=self.address, to=None)

    async def ask(self, request: Message, *, to: str, then: Follow | None = None) -> Envelope | None:
        """Send ``request`` (its ``reply_to`` this address) to ``to``: the reply when
        ``to`` answered it in this task (``Bus.answer``), handed here instead of to this
        inbox; None: the reply comes to the inbox as usual. ``then``: see ``Bus.ask``."""
        return await self.bus.ask(request, sender=self.address, to=to, then=then)

    def __aiter__(self) -> AsyncIterator[Envelope]:
        return self.inbox.__aiter__()

    async def receive(self) -> Envelope:
        return await self.inbox.receive()

    def close(self) -> None:
        self.bus.disconnect(self.address)

    def answer(self, answerer: Answerer) -> None:
        """Answer requests to this address in their sender's task (``Bus.answer``)."""
        self.bus.answer(self.address, answerer)


class Bus:
    """Routes messages between addresses, numbering each session's messages."""

    def __init__(self) -> None:
        self._inboxes: dict[str, trio.MemorySendChannel[Envelope]] = {}
        self._sessions: dict[str, _SessionRoute] = {}
        self._global_observers: list[Subscription] = []
        self._answerers: dict[str, Answerer] = {}

    # -- addresses ---------------------------------------------------------------
    def connect(self, address: str, *, capacity: int = DEFAULT_INBOX) -> Port:
        """Claim ``address`` and return its port. An address has one owner."""
        if address in self._inboxes:
            raise DeliveryError(f"address {address!r} is already connected")
        send, receive = trio.open_memory_channel[Envelope](capacity)
        self._inboxes[address] = send
        return Port(self, address, receive)

    def disconnect(self, address: str) -> None:
        self._answerers.pop(address, None)
        send = self._inboxes.pop(address, None)
        if send is not None:
            send.close()

    answers_inline = True
    """Whether ``answer`` takes effect (a bus that orders every message itself, as a
    replay's does, says no: its actors then answer from their inboxes)."""

    def answer(self, address: str, answerer: Answerer) -> None:
        """Let ``answerer`` answer requests to ``address`` in their sender's task.

        A request (a message with a ``reply_to``) sent to ``address`` while its actor is
        idle (waiting for its next message, none queued) is handed to ``answerer``
        after the observers have it; a reply it returns is numbered next, observed and
        put in ``reply_to``'s inbox, all without a yield, and the request does not go to
        the inbox. ``None``: the request goes to the inbox as usual. The answerer does
        what the actor would do with the request, synchronously, on the actor's own
        state: the actor is idle, so nothing of its own runs meanwhile. The bus takes
        the usual way whenever the two deliveries could have to wait (``reply_to``'s
        inbox full, a ``block`` observer without room, a tap holding the request); a
        reply must not be of a type a tap holds."""
        if address not in self._inboxes:
            raise DeliveryError(f"address {address!r} is not connected")
        if self.answers_inline:
            self._answerers[address] = answerer

    def is_connected(self, address: str) -> bool:
        return address in self._inboxes

    def addresses(self, prefix: str) -> list[str]:
        """The connected addresses that start with ``prefix``, sorted."""
        return sorted(a for a in self._inboxes if a.startswith(prefix))

    # -- observers -----------------------------------------------------------------
    def subscribe(
        self,
        session_id: str,
        name: str,
        *,
        policy: Literal["block", "lag"] = "block",
        capacity: float = DEFAULT_INBOX,
        wants: Callable[[str], bool] | None = None,
        holds: Callable[[str], bool] | None = None,
        tap: Callable[[Envelope], bool] | None = None,
    ) -> Subscription:
        """Observe every message of ``session_id`` (``ALL_SESSIONS``: of every session),
        or only those whose type name ``wants`` accepts; ``holds`` and ``tap``: see the
        module doc (``holds``: for the session's first observer, with ``block``)."""
        send, receive = trio.open_memory_channel[Envelope](
            math.inf if capacity == math.inf else capacity
        )
        sub = Subscription(name, session_id, policy, send, receive, wants=wants, holds=holds, tap=tap)
        if session_id == ALL_SESSIONS:
            if tap is not None:
                raise ValueError(f"{name}: a tap observes one session")
            self._global_observers.append(sub)
        else:
            route = self._route(session_id)
            sub.since = sub.position = route.next_seq
            if tap is None:
                route.observers.append(sub)
            elif any(o.tap is not None for o in route.observers):
                raise ValueError(f"{name}: session {session_id!r} already has a tap")
            else:
                route.observers.insert(0, sub)  # first, whoever subscribed before it
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        if sub.session_id == ALL_SESSIONS:
            if sub in self._global_observers:
                self._global_observers.remove(sub)
        else:
            route = self._sessions.get(sub.session_id)
            if route is not None and sub in route.observers:
                route.observers.remove(sub)
        sub._send.close()
        sub.release(_RELEASED)

    def next_seq(self, session_id: str) -> int:
        """The sequence number the next message of ``session_id`` will get."""
        return self._route(session_id).next_seq

    def held(self, session_id: str) -> int | None:
        """The message of ``session_id`` its first observer holds now, or None: one its
        tap is writing (or fsyncing), or one handed to it and not yet released
        (``holds``). Safe to ask from a worker thread: a reader of the recording stops
        before it."""
        route = self._sessions.get(session_id)
        return route.held if route is not None else None

    def start_session_at(self, session_id: str, seq: int) -> None:
        """Continue a resumed session's numbering after its recording's last message."""
        route = self._route(session_id)
        route.next_seq = max(route.next_seq, seq)

    def forget_session(self, session_id: str) -> None:
        route = self._sessions.pop(session_id, None)
        if route is not None:
            for sub in route.observers:
                sub._send.close()
                sub.release(_RELEASED)

    # -- delivery ------------------------------------------------------------------
    async def send(self, message: Message, *, sender: str, to: str | None) -> Envelope:
        """Number ``message`` in its session and deliver it to observers and ``to``.

        Raises ``DeliveryError`` when ``to`` is not connected (then nothing is numbered
        or observed, so the sequence stays gap-free).
        """
        return (await self._send(message, sender, to))[0]

    async def ask(self, request: Message, *, sender: str, to: str, then: Follow | None = None) -> Envelope | None:
        """``send`` a request whose ``reply_to`` is ``sender``: when ``to`` answers it in
        this task (``answer``), its reply is returned instead of put in ``sender``'s
        inbox (no hop, no wait); None: the reply comes to the inbox as usual. ``then``
        is called with a reply returned so; the event it returns, if any, is
        ``sender``'s next message, numbered and observed right after the reply, still
        without a yield (what the sender would publish next on that reply: a streamed
        chunk shown once the loop detector let it through)."""
        if not self.answers_inline or to not in self._answerers:
            await self.send(request, sender=sender, to=to)
            return None
        return (await self._send(request, sender, to, keep_reply=True, then=then))[1]

    async def _send(
        self, message: Message, sender: str, to: str | None, *, keep_reply: bool = False, then: Follow | None = None
    ) -> tuple[Envelope, Envelope | None]:
        """``send``; with ``keep_reply``, the reply of a request answered in this task
        is returned, not put in the sender's inbox (``Port.ask``)."""
        # Every message of a streamed answer passes here, and each yield is a task step
        # of the sender: it yields where the order of what runs next matters, not at
        # every hand-over: at the lock (before the message is numbered), at the first
        # ``block`` observer unless it is a tap (the recorder, subscribed first, runs
        # before anyone else has the message: a tap here, in this task) and at the
        # recipient's inbox (the recipient runs before the sender goes on; an answered
        # request has none). Explored sessions' replays depend on the yield at the lock
        # (without it, replays of sessions cancelled mid-turn diverged: a message's
        # content then depends on timing the recorded order does not fix). The other
        # observers are handed the message without a yield unless a ``block``
        # one's buffer is full.
        route = self._route(message.session_id)
        lock = route.lock
        await lock.acquire()
        try:
            inbox = None
            if to is not None:
                inbox = self._inboxes.get(to)
                if inbox is None:
                    raise DeliveryError(f"no actor at {to!r} for {type(message).__name__}")
            answers = self._answerable(route, message, inbox, to, extra=0 if then is None else 1)
            # A cancel that came while the lock was awaited stops the send here, before
            # the message is numbered: from here to the recipient's inbox nothing yields (a
            # tap does not) unless a hold or a full ``block`` observer makes it wait, so
            # a message a tap recorded is delivered too.
            await trio.lowlevel.checkpoint_if_cancelled()
            env = await self._numbered(route, message, sender, to)
            if answers is not None:
                reply = answers[0](env)
                if reply is not None:
                    # Answered in this task (see ``answer``): the reply follows the
                    # request, observed and delivered without a yield.
                    assert to is not None and reply.session_id == message.session_id
                    if _held_by_tap(route, reply):
                        raise RuntimeError(f"{to}: a {type(reply).__name__} is held: not an answer")
                    reply_env = await self._numbered(route, reply, to, answers[1])
                    if keep_reply and answers[1] == sender:
                        await self._show_after(route, reply_env, answers[2], sender, then)
                        return env, reply_env
                    answers[2].send_nowait(reply_env)
                    inbox = None
            if inbox is not None:
                try:
                    await inbox.send(env)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    raise DeliveryError(
                        f"actor at {to!r} stopped before {type(message).__name__} arrived"
                    ) from None
        finally:
            lock.release()
        return env, None

    async def _numbered(self, route: _SessionRoute, message: Message, sender: str, to: str | None) -> Envelope:
        """``message`` numbered next in its session and handed to its observers."""
        env = Envelope(seq=route.next_seq, session_id=message.session_id, sender=sender, recipient=to, message=message)
        route.next_seq += 1
        await self._observe(route, env)
        return env

    async def _show_after(
        self,
        route: _SessionRoute,
        reply_env: Envelope,
        reply_inbox: trio.MemorySendChannel[Envelope],
        sender: str,
        then: Follow | None,
    ) -> None:
        """``ask``'s ``then``: what the sender shows on the reply, numbered right after
        it. A ``then`` that raises, or shows a type the tap holds, leaves the reply in
        the sender's inbox (it is recorded: it is not lost)."""
        if then is None:
            return
        try:
            follow = then(reply_env)
            if follow is not None:
                assert follow.session_id == reply_env.session_id
                if _held_by_tap(route, follow):
                    raise RuntimeError(f"{sender}: a {type(follow).__name__} is held: not shown with a reply")
        except BaseException:
            reply_inbox.send_nowait(reply_env)
            raise
        if follow is not None:
            await self._numbered(route, follow, sender, None)

    def _answerable(
        self,
        route: _SessionRoute,
        message: Message,
        inbox: trio.MemorySendChannel[Envelope] | None,
        to: str | None,
        *,
        extra: int = 0,
    ) -> tuple[Answerer, str, trio.MemorySendChannel[Envelope]] | None:
        """The answerer of ``to``, the reply's address and inbox, when ``message`` can be
        answered in the sender's task: ``to`` idle (waiting for its next message, none
        queued), the request naming a ``reply_to`` whose inbox has room, and no observer
        that would make the deliveries wait (a tap holding the request, a ``block`` one
        without room for the request, its reply and ``extra`` messages after them — what
        ``ask``'s ``then`` publishes —, or one that is the first to be handed them
        without a tap before it)."""
        answer = self._answerers.get(to) if to is not None else None
        if answer is None or inbox is None:
            return None
        reply_to = getattr(message, "reply_to", None)
        if not isinstance(reply_to, str):
            return None
        reply_inbox = self._inboxes.get(reply_to)
        if reply_inbox is None:
            return None
        mine = inbox.statistics()
        if mine.current_buffer_used or not mine.tasks_waiting_receive:
            return None
        theirs = reply_inbox.statistics()
        if theirs.current_buffer_used >= theirs.max_buffer_size:
            return None
        tapped = False
        for sub in (*route.observers, *self._global_observers):
            if sub.tap is not None:
                if sub.holds is not None and sub.holds(type(message).__name__):
                    return None
                tapped = True
            elif sub.policy == "block":
                room = sub._send.statistics()
                if not tapped or room.current_buffer_used + 2 + extra > room.max_buffer_size:
                    return None
        return answer, reply_to, reply_inbox

    async def _observe(self, route: _SessionRoute, env: Envelope) -> None:
        """Hand ``env`` to the session's observers, in order (see ``send``)."""
        first = True
        name = type(env.message).__name__
        observers = (*route.observers, *self._global_observers)
        offered = 0
        try:
            for sub in observers:
                offered += 1
                sub.position = env.seq + 1
                if sub.wants is not None and not sub.wants(name):
                    continue
                if first and sub.tap is not None:
                    # In this task, without a yield: see the module doc. Held from
                    # before the tap writes its line: a worker thread reading the file
                    # (a subscriber catching up) can see the line as soon as it is
                    # written, while this thread waits in the write or the fsync, and
                    # must find it held then (``held``).
                    first = False
                    route.held = env.seq
                    try:
                        if sub.tap(env):
                            sub._hand(env)
                            if sub.holds is not None and sub.holds(name):
                                with trio.CancelScope(shield=True):
                                    await sub._held(env.seq)
                    finally:
                        route.held = None
                    continue
                if (first and sub.policy == "block") or not sub._hand(env):
                    if first and sub.holds is not None and sub.holds(name):
                        # Held from before the observer has it to after it let go
                        # (an fsync: not cut short, so a cancel loses no one the message).
                        route.held = env.seq
                        try:
                            await sub._offer(env)
                            with trio.CancelScope(shield=True):
                                await sub._held(env.seq)
                        finally:
                            route.held = None
                    else:
                        await sub._offer(env)
                    first = False
        except BaseException:
            # Cancelled while a later ``block`` observer's buffer was full (the first
            # has the message: it is recorded): that one misses it, and so would those
            # after it. The ``lag`` ones are handed it still (it never waits): one that
            # names types would take a gap for the filter's, and one only marked as
            # lagged, its reader waiting with nothing queued, would not be woken to
            # resync while the messages after were dropped for it.
            if not first:
                for sub in observers[offered:]:
                    if sub.policy == "lag" and (sub.wants is None or sub.wants(name)):
                        sub.position = env.seq + 1
                        sub._hand(env)
            raise

    def _route(self, session_id: str) -> _SessionRoute:
        route = self._sessions.get(session_id)
        if route is None:
            route = self._sessions[session_id] = _SessionRoute()
        return route
