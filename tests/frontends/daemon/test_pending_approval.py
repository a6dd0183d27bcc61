"""An approval outlives the client that was asked (issue 17, defect 12): a client that
attaches later is asked it, whatever its start, and its answer runs the call. Through the
client library, and through ``agentbus chat`` as a person resumes it (the asked chat
killed, a new ``chat --resume`` with ``y`` typed at once)."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from bus import Envelope
from bus.messages import ApprovalRequested, ApprovalSettled, TurnEnded
from tests.frontends.chat.test_chat_terminal import Terminal
from tests.frontends.daemon._helpers import (
    call_response,
    client_of,
    events_until,
    running_daemon,
    text_response,
    write_responses,
)
from tests.frontends.daemon._procs import agentbus, env_for, piped_chat

WRITE = {"file_path": "out.txt", "content": "approved\n"}


async def asked_then_gone(home: Path) -> tuple[str, str]:
    """A session whose turn waits on an approval its client never answers (the client
    goes away): its id and the approval's correlation id."""
    fake = write_responses(home / "f.responses", call_response("write_file", WRITE), text_response("Written."))
    async with client_of(home, "asked") as asked:
        sid = (await asked.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")).session_id
        await asked.subscribe(sid, from_seq=1)
        await asked.prompt(sid, "write it")
        [*_, question] = await events_until(asked, lambda m: isinstance(m, ApprovalRequested))
        assert isinstance(question.message, ApprovalRequested)
        return sid, question.message.correlation_id


async def test_a_client_attaching_at_the_live_point_is_asked_and_its_answer_runs_the_call(home: Path) -> None:
    with trio.fail_after(30):
        async with running_daemon(home):
            sid, cid = await asked_then_gone(home)
            async with client_of(home, "later") as later:
                await later.load_session(sid)
                subscribed = await later.subscribe(sid)
                assert subscribed.pending_approvals == (cid,)
                first = await later.events.receive()
                assert isinstance(first, Envelope) and isinstance(first.message, ApprovalRequested)
                assert first.message.correlation_id == cid and first.seq < subscribed.from_seq
                await later.answer(sid, cid, "proceed_once")
                events = await events_until(later)
                assert isinstance(events[-1].message, TurnEnded) and events[-1].message.stop_reason == "end_turn"
                assert [e.message.correlation_id for e in events if isinstance(e.message, ApprovalSettled)] == [cid]
    assert (home / "ws" / "out.txt").read_text() == "approved\n"


async def test_a_client_catching_up_from_the_start_is_asked_once(home: Path) -> None:
    with trio.fail_after(30):
        async with running_daemon(home):
            sid, cid = await asked_then_gone(home)
            async with client_of(home, "later") as later:
                subscribed = await later.subscribe(sid, from_seq=1)
                assert subscribed.pending_approvals == (cid,)
                events = await events_until(later, lambda m: isinstance(m, ApprovalRequested))
                await later.answer(sid, cid, "proceed_once")
                events += await events_until(later)
                asked = [e for e in events if isinstance(e.message, ApprovalRequested)]
                assert len(asked) == 1
                seqs = [e.seq for e in events]
                assert seqs == sorted(set(seqs))  # in order, no duplicate


async def test_a_question_whose_turn_was_cancelled_is_asked_of_nobody_later(home: Path) -> None:
    """Cancelling the turn closes the question for every client: a later subscriber is
    not asked it (it used to be, for good: the cancel settles no approval)."""
    with trio.fail_after(30):
        async with running_daemon(home):
            sid, _cid = await asked_then_gone(home)
            async with client_of(home, "canceller") as canceller:
                await canceller.subscribe(sid)
                await canceller.cancel(sid)
                ended = await events_until(canceller)
                assert isinstance(ended[-1].message, TurnEnded) and ended[-1].message.stop_reason == "cancelled"
            async with client_of(home, "later") as later:
                subscribed = await later.subscribe(sid, from_seq=1)
                assert subscribed.pending_approvals == ()


def test_chat_resume_shows_the_pending_question_and_y_answers_it(home: Path) -> None:
    fake = write_responses(home / "chat.responses", call_response("write_file", WRITE), text_response("Written."))
    env = {**env_for(home), "TERM": "xterm-256color"}
    argv = [sys.executable, "-m", "actors.frontends", "chat", "--fake-responses", str(fake), "-m", "gemini-2.5-flash"]
    first = Terminal(argv, env, home / "ws")
    try:
        first.expect("> ")
        first.type("write it\n")
        first.expect("Allow")
    finally:
        first.close()  # killed while it asks
    try:
        # Typed before anything shows: the answer, not a prompt.
        resumed = resume_chat(home, "y\n")
        assert "Allow" in resumed, resumed
        assert "Written." in resumed, resumed
        again = resume_chat(home, "")
        assert "[y]es once" not in again, again  # answered: nobody is asked again
        # The conversation so far shows the question with the answer it got.
        assert "> write it\n? Allow WriteFile out.txt?\n  → yes, once\n" in again, again
    finally:
        agentbus(home, "daemon", "stop")
    assert (home / "ws" / "out.txt").read_text() == "approved\n"


def resume_chat(home: Path, typed: str) -> str:
    """``agentbus chat --resume latest`` with ``typed`` piped in: what it printed."""
    done = piped_chat(home, "--resume", "latest", typed=typed)
    assert done.returncode == 0, done.stderr
    return done.stdout
