"""The session's cancel / turn-end / acknowledgement orderings, as a hypothesis state
machine over the pure core.

A client's message reaches the session at once; what the session sends the scripted
turn actor (``_peers.ScriptedTurn``, the turn actor's side of the protocol) and what the
turn sends back wait in queues (in order, as on the bus), so the rules interleave the
clients' messages, the turn's and the turn's own progress in any order. Invariants are
checked on the core's effects after every step (see ``Orderings``).
"""

from __future__ import annotations

import collections

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from actors.session import Effect, Publish, SessionCore, SessionInbox, ToTurn
from bus.messages import (
    AddContext,
    CancelTurn,
    CloseSession,
    ContextAdded,
    HistoryCompressed,
    OpenSession,
    SessionClosed,
    StartTurn,
    SubmitPrompt,
    TurnCancelAcknowledged,
    TurnEnded,
)

from ._peers import SID, Routed, ScriptedTurn, counter_ids


class Orderings(RuleBasedStateMachine):
    """Rules: clients submit prompts, cancel (whichever turn runs, the last one started,
    or one that never ran), add context and close; the session takes the next message
    of the clients' queue or of the turn's; the turn takes the next message the session
    sent it; the running turn ends (after compressing the history, or not); the inbox closes.

    Invariants:
    - at most one turn runs: the turn is never sent ``StartTurn`` while one runs (the
      scripted turn asserts it), and the session never has two turns started unended;
    - no turn starts while a cancel's acknowledgement is due, nor after ``CloseSession``;
    - prompts start in the order they came, none skipped (but those a close dropped);
    - context added while a turn ran is added before the next turn starts;
    - every cancel is acknowledged (to its requester) unless it was folded into a cancel
      already due; a cancel of a turn that does not run is acknowledged at once;
    - ``SessionClosed`` is published once, last, and only when neither a turn nor a
      cancel's acknowledgement is due (unless the inbox closed);
    - when every queue is empty and the turn is idle, the session is too (no turn, no
      cancel due, no prompt waiting): nothing is left waiting for ever.
    """

    def __init__(self) -> None:
        super().__init__()
        self.core = SessionCore(SID, new_turn_id=counter_ids())
        self.turn = ScriptedTurn()
        self.routed = Routed()
        self.from_turn: collections.deque[SessionInbox] = collections.deque()
        self.to_turn: collections.deque[StartTurn | CancelTurn] = collections.deque()
        self.n = 0
        # What the session was fed and did, as observed from outside.
        self.prompts_fed: list[str] = []
        self.started: list[str] = []
        self.running: str | None = None
        """The turn started and not yet ended, as the session's outputs tell it."""
        self.cancel_due: str | None = None
        """The turn whose cancel the session forwarded and whose acknowledgement it has
        not yet been fed."""
        self.close_fed = False
        self.inbox_closed = False
        self.context_fed: set[str] = set()
        self.context_added: set[str] = set()
        self.cancels_owed: set[str] = set()
        """Requesters whose cancel must still be acknowledged."""
        self.feed(OpenSession(session_id=SID, model="m", approval_mode="default", workspace="/w"), "client")

    def next_id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    # -- clients ---------------------------------------------------------------------
    @precondition(lambda self: not self.routed.stopped)
    @rule()
    def submit(self) -> None:
        self.feed(SubmitPrompt(session_id=SID, prompt_id=self.next_id("p")), "client")

    @precondition(lambda self: not self.routed.stopped)
    @rule(which=st.sampled_from(["whichever", "last started", "never ran"]))
    def cancel(self, which: str) -> None:
        turn_id = {"whichever": None, "last started": self.started[-1] if self.started else None, "never ran": "x"}
        by = self.next_id("c")
        msg = CancelTurn(session_id=SID, turn_id=turn_id[which], reason="user", requested_by=by)
        self.feed(msg, by)

    @precondition(lambda self: not self.routed.stopped)
    @rule()
    def add_context(self) -> None:
        rid = self.next_id("a")
        self.feed(AddContext(session_id=SID, request_id=rid, parts=({"text": rid},)), "client")

    @precondition(lambda self: self.started and not self.close_fed and not self.routed.stopped)  # (else it ends most runs early)
    @rule()
    def close(self) -> None:
        self.feed(CloseSession(session_id=SID, reason="bye"), self.next_id("closer"))

    @precondition(lambda self: self.routed.stopped)
    @rule()
    def a_message_after_the_session_stopped_is_never_read(self) -> None:
        pass

    # -- the session's inbox ---------------------------------------------------------
    @precondition(lambda self: self.from_turn and not self.routed.stopped)
    @rule()
    def session_takes_a_turns_message(self) -> None:
        self.feed(self.from_turn.popleft(), "turn")

    @precondition(lambda self: len(self.started) >= 2 and not self.routed.stopped)  # (else it ends most runs early)
    @rule()
    def inbox_closes(self) -> None:
        self.inbox_closed = True
        self.check_effects(self.core.inbox_closed())

    # -- the turn actor --------------------------------------------------------------
    @precondition(lambda self: self.to_turn)
    @rule()
    def turn_takes_a_message(self) -> None:
        for reply in self.turn.receive(self.to_turn.popleft()):
            assert isinstance(reply, TurnCancelAcknowledged)
            self.from_turn.append(reply)

    @precondition(lambda self: self.turn.running is not None)
    @rule(compressed_first=st.booleans())
    def turn_ends(self, compressed_first: bool) -> None:
        running = self.turn.running
        assert running is not None
        if compressed_first:
            summary = {"role": "user", "parts": [{"text": "summary"}]}
            self.from_turn.append(
                HistoryCompressed(
                    session_id=SID,
                    turn_id=running.turn_id,
                    status="COMPRESSED",
                    original_token_count=10,
                    new_token_count=1,
                    history=(summary,),
                )
            )
        for reply in self.turn.finish(history_added=({"role": "model", "parts": [{"text": running.turn_id}]},)):
            assert isinstance(reply, TurnEnded | TurnCancelAcknowledged)
            self.from_turn.append(reply)

    # -- feeding and the per-step invariants -----------------------------------------
    def feed(self, msg: SessionInbox, sender: str) -> None:
        folded = False
        match msg:
            case SubmitPrompt() if not self.close_fed:
                self.prompts_fed.append(msg.prompt_id)
            case AddContext():
                self.context_fed.add(msg.request_id)
            case CancelTurn():
                names_running = msg.turn_id is None or msg.turn_id == self.running
                folded = self.running is not None and names_running and self.cancel_due == self.running
                if not folded:
                    self.cancels_owed.add(msg.requested_by)
            case CloseSession():
                self.close_fed = True
                self.prompts_fed = list(self.started)  # the queued ones are dropped
            case TurnEnded():
                assert msg.turn_id == self.running
                self.running = None
            case TurnCancelAcknowledged() if msg.turn_id is not None and msg.turn_id == self.cancel_due:
                self.cancel_due = None
            case _:
                pass
        self.check_effects(self.core.feed(msg, sender))
        if isinstance(msg, CancelTurn) and not folded and (self.running is None or msg.turn_id not in (None, self.running)):
            # A cancel of nothing running is answered at once.
            assert msg.requested_by not in self.cancels_owed, "a cancel of no running turn was not acknowledged at once"

    def check_effects(self, effects: list[Effect]) -> None:
        for effect in effects:
            self.routed.take([effect])
            match effect:
                case ToTurn(message=StartTurn() as start):
                    assert self.running is None, "a turn started while another runs"
                    assert self.cancel_due is None, "a turn started while a cancel's acknowledgement is due"
                    assert not self.close_fed, "a turn started after CloseSession"
                    assert self.context_fed <= self.context_added, "a turn started before the context added"
                    self.running = start.turn_id
                    self.started.append(start.prompt_id)
                    self.to_turn.append(start)
                case ToTurn(message=CancelTurn() as cancel):
                    assert cancel.turn_id == self.running, "a cancel forwarded for a turn that does not run"
                    assert self.cancel_due is None, "a second cancel forwarded for one turn"
                    self.cancel_due = cancel.turn_id
                    self.to_turn.append(cancel)
                case Publish(message=ContextAdded() as added):
                    self.context_added.add(added.request_id)
                case Publish(message=TurnCancelAcknowledged() as ack):
                    self.cancels_owed.discard(ack.requested_by)
                case Publish(message=SessionClosed()):
                    if not self.inbox_closed:
                        assert self.running is None, "closed before the running turn ended"
                        assert self.cancel_due is None, "closed before the cancel's acknowledgement"
                case _:
                    pass

    @invariant()
    def prompts_start_in_order(self) -> None:
        assert self.started == self.prompts_fed[: len(self.started)]

    @invariant()
    def session_closed_is_the_last_message_and_only_one(self) -> None:
        closed = [i for i, m in enumerate(self.routed.published) if isinstance(m, SessionClosed)]
        assert closed == ([len(self.routed.published) - 1] if self.routed.stopped else [])

    @invariant()
    def nothing_waits_for_ever(self) -> None:
        quiet = not (self.from_turn or self.to_turn) and self.turn.running is None
        if not quiet or self.inbox_closed:
            return
        st = self.core.state
        assert st.running_turn is None and st.cancelling is None and not st.queue
        assert self.started == self.prompts_fed, "a prompt was left waiting"
        assert not self.cancels_owed, f"cancels never acknowledged: {self.cancels_owed}"
        assert self.routed.stopped == self.close_fed


# Cheap (pure code: about 2 ms an example): four times the profile's examples, so that
# a run finds a wrong ordering of six steps among the nine rules nearly every time.
Orderings.TestCase.settings = settings(max_examples=4 * settings().max_examples, stateful_step_count=50)
TestOrderings = Orderings.TestCase
