"""Scripted peers of the session core: a turn actor that keeps its contract, and a
helper that routes the core's effects."""

from __future__ import annotations

from typing import Any

import attrs

from actors.session import Effect, Publish, SessionCore, SessionInbox, Stop, ToTurn
from bus.messages import (
    CancelTurn,
    Message,
    StartTurn,
    StopReason,
    TurnCancelAcknowledged,
    TurnEnded,
)

SID = "s1"


@attrs.define
class ScriptedTurn:
    """The turn actor's side of the protocol (``actors.turn.TurnActor``): one turn at a
    time; a cancel with no turn running is acknowledged at once; a running turn's first
    cancel is kept, and acknowledged right after its ``TurnEnded``."""

    running: StartTurn | None = None
    cancel_requested_by: str | None = None
    started: list[StartTurn] = attrs.field(factory=list)

    def receive(self, msg: StartTurn | CancelTurn) -> list[Message]:
        """What the turn actor sends back at once."""
        if isinstance(msg, StartTurn):
            assert self.running is None, "StartTurn while a turn is running"
            self.running, self.cancel_requested_by = msg, None
            self.started.append(msg)
            return []
        if self.running is None:
            return [TurnCancelAcknowledged(session_id=msg.session_id, turn_id=msg.turn_id, requested_by=msg.requested_by)]
        if self.cancel_requested_by is None:
            self.cancel_requested_by = msg.requested_by
        return []

    def finish(self, stop_reason: StopReason = "end_turn", **fields: Any) -> list[Message]:
        """The running turn ends: ``TurnEnded`` (``cancelled`` when a cancel is due),
        then the cancel's acknowledgement."""
        running = self.running
        assert running is not None
        cancelled = self.cancel_requested_by is not None
        out: list[Message] = [
            TurnEnded(
                session_id=running.session_id,
                turn_id=running.turn_id,
                stop_reason="cancelled" if cancelled else stop_reason,
                **fields,
            )
        ]
        if self.cancel_requested_by is not None:
            out.append(
                TurnCancelAcknowledged(
                    session_id=running.session_id, turn_id=running.turn_id, requested_by=self.cancel_requested_by
                )
            )
        self.running, self.cancel_requested_by = None, None
        return out


@attrs.define
class Routed:
    """A core's effects, routed: what it published, what it sent the turn, whether it stopped."""

    published: list[Message] = attrs.field(factory=list)
    to_turn: list[StartTurn | CancelTurn] = attrs.field(factory=list)
    stopped: bool = False

    def take(self, effects: list[Effect]) -> list[StartTurn | CancelTurn]:
        sent: list[StartTurn | CancelTurn] = []
        for effect in effects:
            assert not self.stopped, f"an effect after Stop: {effect}"
            match effect:
                case Publish():
                    self.published.append(effect.message)
                case ToTurn():
                    sent.append(effect.message)
                case Stop():
                    self.stopped = True
        self.to_turn.extend(sent)
        return sent


def counter_ids(prefix: str = "t") -> Any:
    n = 0

    def new() -> str:
        nonlocal n
        n += 1
        return f"{prefix}{n}"

    return new


@attrs.define
class Session:
    """A session core wired to a scripted turn, delivering at once (no interleaving):
    for the examples; the state machine interleaves the same peers."""

    core: SessionCore = attrs.field(factory=lambda: SessionCore(SID, new_turn_id=counter_ids()))
    turn: ScriptedTurn = attrs.field(factory=ScriptedTurn)
    routed: Routed = attrs.field(factory=Routed)

    def feed(self, msg: SessionInbox, sender: str = "client") -> None:
        for sent in self.routed.take(self.core.feed(msg, sender)):
            for reply in self.turn.receive(sent):
                self.feed(_inbox(reply), "turn")

    def finish(self, stop_reason: StopReason = "end_turn", **fields: Any) -> None:
        for reply in self.turn.finish(stop_reason, **fields):
            self.feed(_inbox(reply), "turn")

    def since(self, n: int) -> list[Message]:
        return self.routed.published[n:]


def _inbox(msg: Message) -> SessionInbox:
    assert isinstance(msg, TurnEnded | TurnCancelAcknowledged)
    return msg
