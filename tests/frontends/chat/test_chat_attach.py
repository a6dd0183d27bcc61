"""Attaching a chat to a session shows the conversation so far (issue 21): ``chat
--resume`` of a finished conversation, and a second chat attaching while a tool runs
sees the call's header and its output so far, then what follows live."""

from __future__ import annotations

from pathlib import Path

import trio

from bus.messages import ToolOutputStreamed, TurnEnded
from tests.frontends.daemon._helpers import (
    call_response,
    client_of,
    events_until,
    running_daemon,
    text_response,
    write_responses,
)
from tests.frontends.daemon._procs import agentbus, killed_mid_approval, piped_chat


def test_resume_prints_the_conversation_in_order(home: Path) -> None:
    (home / "ws" / "a.txt").write_text("alpha\n")
    fake = write_responses(
        home / "f.responses",
        call_response("read_file", {"file_path": "a.txt"}),
        text_response("It says alpha."),
        text_response("Second answer."),
    )
    try:
        first = piped_chat(home, "--fake-responses", str(fake), "-m", "gemini-2.5-flash", typed="read a.txt\nagain please\n")
        assert first.returncode == 0, first.stderr
        resumed = piped_chat(home, "--resume", "latest", typed="")
        assert resumed.returncode == 0, resumed.stderr
        # The second prompt was sent while the first turn ran: it is shown with its turn.
        assert (
            "> read a.txt\n"
            "⏺ read_file a.txt running…\n"
            "✓ read_file a.txt success\n"
            "It says alpha.\n"
            "> again please\n"
            "Second answer.\n"
        ) in resumed.stdout, resumed.stdout
        assert "queued" not in resumed.stdout
    finally:
        agentbus(home, "daemon", "stop")


async def test_a_chat_attaching_mid_tool_sees_its_header_and_output_so_far(home: Path) -> None:
    fake = write_responses(
        home / "f.responses",
        call_response("run_shell_command", {"command": "echo started; sleep 600"}),
        text_response("Stopped."),
    )
    with trio.fail_after(60):
        async with running_daemon(home), client_of(home, "first") as first:
            sid = (
                await first.create_session(
                    str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash", approval_mode="yolo"
                )
            ).session_id
            await first.subscribe(sid, from_seq=1)
            await first.prompt(sid, "run it")
            await events_until(first, lambda m: isinstance(m, ToolOutputStreamed) and "started" in m.text)
            attached = await trio.to_thread.run_sync(lambda: piped_chat(home, "--resume", sid, typed="/quit\n"))
            await first.cancel(sid)
            [*_, ended] = await events_until(first)
            assert isinstance(ended.message, TurnEnded) and ended.message.stop_reason == "cancelled"
    assert attached.returncode == 0, attached.stderr
    assert "> run it\n⏺ run_shell_command echo started; sleep 600 running…\n  │ started\n" in attached.stdout, attached.stdout


def test_latest_and_n_name_the_sessions_list_sessions_numbers(home: Path) -> None:
    """A session with no prompt (only a ``!command``) is not numbered: ``latest`` is the
    last session with a prompt, as ``agentbus --list-sessions`` says (it was the
    prompt-less one, listed after)."""
    fake = write_responses(home / "f.responses", text_response("Hello."))
    try:
        assert piped_chat(home, "--fake-responses", str(fake), "-m", "gemini-2.5-flash", typed="hi\n").returncode == 0
        assert piped_chat(home, "--fake-responses", str(fake), "-m", "gemini-2.5-flash", typed="!echo x\n").returncode == 0
        listed = agentbus(home, "--list-sessions")
        assert "1. hi" in listed.stdout and "2." not in listed.stdout, listed.stdout
        for ident in ("latest", "1"):
            resumed = piped_chat(home, "--resume", ident, typed="/sessions\n")
            assert resumed.returncode == 0, resumed.stderr
            assert "> hi\nHello.\n" in resumed.stdout, resumed.stdout
            assert "*  1. hi" in resumed.stdout and "   - (no prompt yet)" in resumed.stdout, resumed.stdout
    finally:
        agentbus(home, "daemon", "stop")


def test_resume_shows_the_output_of_the_users_own_tool_calls(home: Path) -> None:
    """``/tool`` and ``!command`` output reached only the chat that ran them; attaching
    later, the history shows it with the call (it showed the status line only)."""
    (home / "ws" / "notes.txt").write_text("first line\nsecond line\n")
    fake = write_responses(home / "f.responses", text_response("Hello."))
    try:
        ran = piped_chat(
            home, "--fake-responses", str(fake), "-m", "gemini-2.5-flash",
            typed='hi\n/tool read_file {"file_path": "notes.txt"}\n',
        )  # fmt: skip
        assert ran.returncode == 0 and "second line" in ran.stdout, ran.stdout + ran.stderr
        resumed = piped_chat(home, "--resume", "latest", typed="")
        assert resumed.returncode == 0, resumed.stderr
        assert "✓ read_file notes.txt success\n" in resumed.stdout, resumed.stdout
        assert "  first line\n  second line\n" in resumed.stdout, resumed.stdout
    finally:
        agentbus(home, "daemon", "stop")


async def test_resume_prints_a_live_model_conversation(home: Path) -> None:
    """The live backend (the real google-genai SDK over HTTP to the fake Gemini server):
    a chat's turns, then a resumed chat shows them."""
    from tests.fakes.gemini_server import FakeGeminiServer
    from tests.frontends.daemon.test_live_model import answers, creds, live_daemon

    server = FakeGeminiServer(answers("Hello from the live model.", "A second answer."))
    with trio.fail_after(60):
        async with live_daemon(home, server):
            env = creds(server, "key-one-0123456789")
            first = await trio.to_thread.run_sync(
                lambda: piped_chat(home, "-m", "gemini-2.5-flash", typed="hi\nagain\n", extra_env=env)
            )
            assert first.returncode == 0, first.stderr
            resumed = await trio.to_thread.run_sync(lambda: piped_chat(home, "--resume", "latest", typed="", extra_env=env))
    assert resumed.returncode == 0, resumed.stderr
    assert "> hi\nHello from the live model.\n> again\nA second answer.\n" in resumed.stdout, resumed.stdout


async def test_a_chat_resuming_what_a_killed_daemon_left_mid_turn_sees_the_turn_and_its_call_end(home: Path) -> None:
    """The recording of a daemon killed while a call waited for its approval ends in the
    middle of the turn: attaching later, the call ends as interrupted and nothing is
    asked (it ran forever, and the turn never ended: no prompt came)."""
    with trio.fail_after(60):
        sid = await killed_mid_approval(home)
        try:
            resumed = await trio.to_thread.run_sync(lambda: piped_chat(home, "--resume", sid, typed="/quit\n"))
        finally:
            agentbus(home, "daemon", "stop")
    assert resumed.returncode == 0, resumed.stderr
    assert (
        "? Allow WriteFile notes.txt?\n"
        "✗ write_file notes.txt error: The session was interrupted before the tool finished.\n"
        "(interrupted: the process running this turn stopped)\n"
    ) in resumed.stdout, resumed.stdout
    assert resumed.stdout.count("Allow") == 1, resumed.stdout  # not asked once caught up
