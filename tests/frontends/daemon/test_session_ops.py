"""Session requests over the socket: the user's own tool calls (issue 11), a mode
change between turns, listing."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from actors.frontends.daemon.client import DaemonError
from bus import Envelope
from bus.json_values import thaw
from bus.messages import (
    ApprovalRequested,
    ApprovalSettled,
    GenerateRequest,
    SessionOpened,
    SubscriptionEnded,
    TextStreamed,
    ToolCallUpdated,
)
from tests.frontends.daemon._helpers import (
    alive,
    call_response,
    client_of,
    events_until,
    running_daemon,
    text_response,
    types,
    write_responses,
)


async def test_a_users_tool_call_runs_through_the_scheduler_and_stays_out_of_the_model_history(home: Path) -> None:
    fake = write_responses(home / "f.responses", text_response("ok"))
    fifo = home / "pid"
    os.mkfifo(fifo)
    with trio.fail_after(20):
        async with running_daemon(home), client_of(home, "me") as me, client_of(home, "other") as other:
            sid = (await me.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")).session_id
            await other.subscribe(sid, from_seq=1, full=True)
            result = await me.call_tool(sid, "run_shell_command", {"command": "echo user-secret-output"})
            assert result.call.status == "success"
            assert "user-secret-output" in json.dumps(thaw(result.call.response_parts))
            bad = await me.call_tool(sid, "no_such_tool", {})
            assert bad.call.status == "error" and "no_such_tool" in (bad.call.error_message or "")
            invalid = await me.call_tool(sid, "read_file", {"file_path": 3})
            assert invalid.call.status == "error"
            # Cancelling it kills its process.
            async with trio.open_nursery() as nursery:
                got: list[object] = []

                async def run() -> None:
                    got.append(await me.call_tool(sid, "run_shell_command", {"command": f"echo $$ > {fifo}; exec sleep 30"}, request_id="slow"))

                nursery.start_soon(run)
                pid = int(await trio.to_thread.run_sync(fifo.read_text))
                await me.cancel(sid, tool_request_id="slow")
            assert got[0].call.status == "cancelled"  # type: ignore[attr-defined]
            assert not alive(pid)
            # The next model request does not carry the user's results.
            await me.prompt(sid, "hello")
            envs = await events_until(other)
            request = next(e.message for e in envs if isinstance(e.message, GenerateRequest))
            assert "user-secret-output" not in json.dumps(thaw(request.contents))
            # Other clients see the calls run; only the asker got the results.
            user_calls = {e.message.call_id for e in envs if isinstance(e.message, ToolCallUpdated)}
            assert len(user_calls) == 4
            assert "ToolCallResult" not in types(envs)


async def test_a_mode_change_restarts_the_session_between_turns_without_a_gap(home: Path) -> None:
    fake = write_responses(
        home / "f.responses",
        call_response("write_file", {"file_path": "a.txt", "content": "a\n"}),
        text_response("asked"),
    )
    after = write_responses(
        home / "g.responses",
        call_response("write_file", {"file_path": "b.txt", "content": "b\n"}),
        text_response("done without asking"),
    )
    with trio.fail_after(20):
        async with running_daemon(home), client_of(home) as c, client_of(home, "watcher") as w:
            sid = (await c.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")).session_id
            await w.subscribe(sid, from_seq=1, full=True)
            await c.subscribe(sid, from_seq=1)
            await c.prompt(sid, "write a")
            asked = await events_until(c, lambda m: isinstance(m, ApprovalRequested))
            try:
                await c.set_mode(sid, "plan")
            except DaemonError as exc:
                assert exc.code == "busy"
            else:
                raise AssertionError("a change to plan mode mid-turn must be refused")
            await c.answer(sid, asked[-1].message.correlation_id, "proceed_once")  # type: ignore[attr-defined]
            await events_until(c)
            await c.load_session(sid, fake_responses=str(after))  # (no restart: it runs)
            await c.set_mode(sid, "yolo")
            listed = (await c.list_sessions(str(home / "ws"))).sessions
            assert [(s.session_id, s.approval_mode, s.title) for s in listed] == [(sid, "yolo", "write a")]
            await c.prompt(sid, "write b")
            rest = await events_until(c)
            assert "ApprovalRequested" not in types(rest)
            assert (home / "ws" / "b.txt").read_text() == "b\n"
            seen = await collect_until_second_end(w)
            seqs = [e.seq for e in seen]
            assert seqs == list(range(1, len(seqs) + 1))  # one numbering, no gap across the restart
            kinds = types(seen)
            restart = kinds.index("SessionClosed")
            assert "SessionOpened" in kinds[restart:]
            opened = next(e.message for e in seen[restart:] if isinstance(e.message, SessionOpened))
            assert opened.approval_mode == "yolo" and opened.resumed


async def collect_until_second_end(client: object) -> list[Envelope]:
    from bus.messages import TurnEnded

    out: list[Envelope] = []
    ends = 0
    async for event in client.events:  # type: ignore[attr-defined]
        if isinstance(event, Envelope):
            out.append(event)
            if isinstance(event.message, TurnEnded):
                ends += 1
                if ends == 2:
                    return out
    raise AssertionError("closed")


async def test_a_listing_mid_stream_counts_the_messages_the_monitor_is_not_handed(home: Path) -> None:
    # The daemon's monitor is handed only the messages it looks into (not the chunks):
    # a session listed while its answer streams is still at its latest message.
    fake = write_responses(home / "f.responses", text_response("one ", "two ", "three"))
    with trio.fail_after(20):
        async with running_daemon(home), client_of(home) as c:
            sid = (
                await c.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash", fake_chunk_delay_ms=200)
            ).session_id
            await c.subscribe(sid, from_seq=1)
            await c.prompt(sid, "count")
            streamed = (await events_until(c, lambda m: isinstance(m, TextStreamed)))[-1]
            (listed,) = (await c.list_sessions(str(home / "ws"))).sessions
            assert listed.busy and listed.next_seq == streamed.seq + 1
            await events_until(c)


async def test_sessions_outlive_the_daemon_and_end_when_a_client_ends_them(home: Path) -> None:
    fake = write_responses(home / "f.responses", text_response("one"), text_response("two"))
    with trio.fail_after(20):
        async with running_daemon(home), client_of(home) as c:
            sid = (await c.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")).session_id
            await c.subscribe(sid, from_seq=1)
            await c.prompt(sid, "first")
            first = await events_until(c)
        async with running_daemon(home), client_of(home) as c:
            listed = (await c.list_sessions()).sessions
            assert [(s.session_id, s.state) for s in listed] == [(sid, "dormant")]
            # Subscribing resumes it; the catch-up spans both daemons' parts of the log.
            await c.subscribe(sid, from_seq=1)
            again = await events_until(c)
            assert [(e.seq, type(e.message)) for e in again] == [(e.seq, type(e.message)) for e in first]
            await c.load_session(sid, fake_responses=str(write_responses(home / "g.responses", text_response("two"))))
            await c.prompt(sid, "second")
            second = await events_until(c)
            assert second[0].seq > first[-1].seq
            assert [e.message.text for e in second if isinstance(e.message, TextStreamed)] == ["two"]
            await c.end_session(sid)
            ended = [e async for e in until_notice(c)]
            assert any(isinstance(e, SubscriptionEnded) and e.reason == "end" for e in ended)
            listed = (await c.list_sessions(str(home / "ws"))).sessions
            assert [(s.session_id, s.state, s.title) for s in listed] == [(sid, "recorded", "first")]
            try:
                await c.prompt(sid, "gone?")
            except DaemonError as exc:
                assert exc.code == "unknown_session"
            else:
                raise AssertionError("an ended session takes no prompts")


async def test_a_prompt_that_finds_its_session_just_stopped_is_refused_not_failed(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The window between the daemon's checks and the send: the session's actors have
    # stopped (it failed, or was ended) and it is not forgotten yet.
    fake = write_responses(home / "f.responses", text_response("Hello"))
    with trio.fail_after(20):
        async with running_daemon(home) as daemon, client_of(home) as c:
            sid = (await c.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")).session_id
            addrs = daemon.core.sessions[sid].addrs
            assert addrs is not None
            daemon.core.bus.disconnect(addrs.session)
            with pytest.raises(DaemonError) as refused:
                await c.prompt(sid, "hi")
            assert (await c.list_sessions()).sessions  # the connection carries on
    assert refused.value.code == "unknown_session"
    assert f"session {sid!r} is not running (it stopped just now)" in str(refused.value)
    assert "Prompt failed" not in caplog.text  # no traceback: a refusal, not a daemon fault


async def until_notice(client: object) -> AsyncIterator[object]:
    async for event in client.events:  # type: ignore[attr-defined]
        yield event
        if isinstance(event, SubscriptionEnded):
            return


async def test_a_mode_change_mid_turn_applies_to_the_waiting_call_and_the_next_turns(home: Path) -> None:
    fake = write_responses(
        home / "f.responses",
        call_response("write_file", {"file_path": "a.txt", "content": "a\n"}),
        text_response("written"),
        call_response("write_file", {"file_path": "b.txt", "content": "b\n"}),
        text_response("written without asking"),
    )
    with trio.fail_after(20):
        async with running_daemon(home), client_of(home) as c:
            sid = (await c.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")).session_id
            await c.subscribe(sid, from_seq=1)
            await c.prompt(sid, "write a")
            asked = await events_until(c, lambda m: isinstance(m, ApprovalRequested))
            request = asked[-1].message
            assert isinstance(request, ApprovalRequested)
            await c.set_mode(sid, "yolo")  # Gemini CLI: the waiting call is approved at once
            rest = await events_until(c)
            settled = [e.message for e in rest if isinstance(e.message, ApprovalSettled)]
            assert [(m.correlation_id, m.outcome) for m in settled] == [(request.correlation_id, "proceed_once")]
            assert (home / "ws" / "a.txt").read_text() == "a\n"
            assert rest[-1].message.stop_reason == "end_turn"  # type: ignore[attr-defined]
            listed = (await c.list_sessions(str(home / "ws"))).sessions
            assert [(s.session_id, s.approval_mode) for s in listed] == [(sid, "yolo")]
            await c.prompt(sid, "write b")  # the next turn starts in yolo: nothing to ask
            after = await events_until(c)
            assert "ApprovalRequested" not in types(after)
            assert (home / "ws" / "b.txt").read_text() == "b\n"


async def test_a_stricter_mode_mid_turn_holds_for_the_rest_of_the_turn(home: Path) -> None:
    fake = write_responses(
        home / "f.responses",
        call_response("run_shell_command", {"command": "sleep 2"}),
        call_response("write_file", {"file_path": "c.txt", "content": "c\n"}),
        text_response("done"),
    )
    with trio.fail_after(20):
        async with running_daemon(home), client_of(home) as c:
            created = await c.create_session(
                str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash", approval_mode="yolo"
            )
            sid = created.session_id
            await c.subscribe(sid, from_seq=1)
            await c.prompt(sid, "sleep, then write c")
            await events_until(
                c, lambda m: isinstance(m, ToolCallUpdated) and m.name == "run_shell_command" and m.status == "executing"
            )
            await c.set_mode(sid, "default")  # while the shell call runs
            asked = await events_until(c, lambda m: isinstance(m, ApprovalRequested))
            request = asked[-1].message
            assert isinstance(request, ApprovalRequested) and request.name == "write_file"
            assert not (home / "ws" / "c.txt").exists()
            await c.answer(sid, request.correlation_id, "cancel")
            await events_until(c)
            assert not (home / "ws" / "c.txt").exists()
