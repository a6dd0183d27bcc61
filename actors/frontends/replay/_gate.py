"""The replay's bus: the recording's order, enforced at every send.

A live session's interleaving comes from trio's scheduler and the timing of its inputs;
a replay must reproduce it exactly. ``GatedBus`` is a ``Bus`` whose ``send`` waits until
the message is the next one the recording has (same sender, recipient, type and call:
``schedule_key``), then sends it. External inputs (client commands, approvals, model
chunks, tool results) and the core actors' own messages are all ordered this way, so
the replayed sequence equals the recorded one message for message whenever the actors
behave the same, whatever trio's scheduler does. A message the recording does not have
waits forever; the replay's watchdog then reports the first recorded message that was
not produced and what was waiting instead.

Content is not part of the gate: ``on_admit`` receives each admitted pair (recorded,
replayed) and decides (``--check`` compares; a plain replay of live tools goes on).

Sends that cannot be delivered (no actor at the address) fail at once, as they did
when recorded (they were never numbered, so the recording does not have them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
import trio

from actors.frontends.replay._normalise import IdLabels, schedule_key
from actors.recording import RecordedLine
from bus import Bus, Envelope
from bus.messages import Message

Key = tuple[str, str | None, str, str | None]


@attrs.define(eq=False)
class Pending:
    """A send waiting at the gate (for the stall report)."""

    key: Key
    message: Message
    sender: str
    recipient: str | None


class GatedBus(Bus):
    answers_inline = False
    """Every message waits for its turn here, a reply too: actors answer from their
    inboxes (``Bus.answer``)."""

    def __init__(
        self,
        expected: Sequence[RecordedLine],
        *,
        on_admit: Callable[[int, RecordedLine, Envelope], None],
        free: Callable[[Message, str], bool] = lambda message, sender: False,
    ) -> None:
        super().__init__()
        self.expected = list(expected)
        self.keys: list[Key] = [
            schedule_key(r.env.message, r.env.sender, r.env.recipient) for r in self.expected
        ]
        self.on_admit = on_admit
        self.free = free
        self.cursor = 0
        """Index of the next recorded message to admit."""
        self.recorded_ids = IdLabels()
        self.replayed_ids = IdLabels()
        self.pending: list[Pending] = []
        self.progress = 0
        """Bumped on every admission (the watchdog's pulse)."""
        self.finished = trio.Event()
        """Set when every recorded message has been admitted."""
        self._claimed = False
        self._changed = trio.Event()
        if not self.expected:
            self.finished.set()

    @property
    def next_expected(self) -> RecordedLine | None:
        return self.expected[self.cursor] if self.cursor < len(self.expected) else None

    async def wait_for_cursor(self, index: int) -> None:
        """Wait until the recorded message ``index`` is the next one."""
        while self.cursor < index or (self.cursor == index and self._claimed):
            await self._wait_change()
        if self.cursor > index:
            raise RuntimeError(f"recorded message {index} was admitted from elsewhere")

    async def _wait_change(self) -> None:
        event = self._changed
        await event.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def send(self, message: Message, *, sender: str, to: str | None) -> Envelope:
        if (to is not None and not self.is_connected(to)) or self.free(message, sender):
            return await super().send(message, sender=sender, to=to)
        key = schedule_key(message, sender, to)
        pending = Pending(key, message, sender, to)
        self.pending.append(pending)
        try:
            while self._claimed or self.cursor >= len(self.keys) or self.keys[self.cursor] != key:
                await self._wait_change()
        finally:
            self.pending.remove(pending)
        self._claimed = True
        index = self.cursor
        recorded_seq = self.expected[index].env.seq
        if recorded_seq > self.next_seq(message.session_id):
            # The recording has void numbers here (see actors/recording): skip them too.
            self.start_session_at(message.session_id, recorded_seq)
        try:
            env = await super().send(message, sender=sender, to=to)
        except BaseException:
            self._claimed = False
            self._notify()
            raise
        self.cursor += 1
        self._claimed = False
        self.progress += 1
        try:
            self.on_admit(index, self.expected[index], env)
        finally:
            if self.cursor >= len(self.expected):
                self.finished.set()
            self._notify()
        return env

    def recorded_id(self, kind: str, replayed: str) -> str | None:
        """The recorded id that the replay's ``replayed`` id stands for."""
        label = self.replayed_ids.peek(kind, replayed)
        return self.recorded_ids.value_of(label) if label is not None else None
