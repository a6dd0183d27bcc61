"""Bytes typed at the chat's terminal that are not UTF-8 end nowhere but in the prompt:
they reach the model as U+FFFD (as every other edge makes text encodable), the chat
goes on (issue 17: ``a\\xff`` ended it with a UnicodeEncodeError traceback). And a
``/tool`` call's error is shown once."""

from __future__ import annotations

import os
from pathlib import Path

from tests.frontends.chat.test_chat_terminal import chat_on_fake
from tests.frontends.daemon._helpers import text_response, write_responses
from tests.frontends.daemon._procs import agentbus


def _prompts_sent(home: Path) -> list[str]:
    from actors.recording import load_recording
    from bus.json_values import thaw
    from bus.messages import GenerateRequest

    [recording] = (home / "data" / "sessions").glob("*.jsonl")
    last = [
        e.message.contents
        for e in load_recording(recording).envelopes
        if isinstance(e.message, GenerateRequest) and e.message.role == "main"
    ][-1]
    return [
        part["text"]
        for content in thaw(last)
        if content["role"] == "user"
        for part in content["parts"]
        if "text" in part
    ]


def test_bytes_that_are_not_utf8_typed_at_the_terminal_become_u_fffd(home: Path) -> None:
    fake = write_responses(home / "b.responses", text_response("First."), text_response("Second."))
    term = chat_on_fake(home, fake)
    try:
        term.expect("> ")
        os.write(term.fd, b"a\xff\n")
        term.expect("First.")
        term.expect("> ")
        os.write(term.fd, b"b\xed\xa0\x80\n")  # an encoded surrogate: not UTF-8 either
        term.expect("Second.")
        term.expect("> ")
        term.type("/quit\n")
        assert term.wait_exit() == 0, term.screen
    finally:
        term.close()
        agentbus(home, "daemon", "stop")
    assert "Traceback" not in term.screen
    prompts = _prompts_sent(home)
    assert "a\ufffd" in prompts
    # (Each invalid sequence one U+FFFD, as ``bus.json_values.well_formed`` makes it.)
    assert any(p.startswith("b\ufffd") and set(p[1:]) == {"\ufffd"} for p in prompts), prompts


def test_a_tool_call_error_is_shown_once(home: Path) -> None:
    fake = write_responses(home / "t.responses", text_response("unused"))
    term = chat_on_fake(home, fake)
    try:
        term.expect("> ")
        term.type('/tool read_file {"file_path": "missing.txt"}\n')
        term.expect("✗ read_file")
        term.expect("> ")
        term.type("/quit\n")
        assert term.wait_exit() == 0
    finally:
        term.close()
        agentbus(home, "daemon", "stop")
    assert "✗ read_file missing.txt error" in term.screen
    error_lines = [line for line in term.screen.splitlines() if "File not found" in line]
    assert len(error_lines) == 1, term.screen


async def test_the_daemon_client_refuses_an_unencodable_message_with_a_daemon_error() -> None:
    """``DaemonClient.send`` never dies of a lone surrogate: a ``DaemonError`` the chat
    shows as one line, nothing written on the connection."""
    import pytest
    import trio.testing

    from actors.frontends.daemon.client import DaemonClient, DaemonError
    from bus.codec import decode
    from bus.messages import Prompt

    ours, theirs = trio.testing.memory_stream_pair()
    client = DaemonClient(ours)  # type: ignore[arg-type]
    with pytest.raises(DaemonError) as caught:
        await client.send(Prompt(session_id="s", request_id="r", text="a\udcff"))
    assert caught.value.code == "invalid"
    assert "not valid Unicode" in caught.value.message
    # Nothing of it went out: the first frame the daemon reads is the next one.
    await client.send(Prompt(session_id="s", request_id="r2", text="a\ufffd"))
    received = b""
    while b"\n" not in received:
        received += await theirs.receive_some()
    first = decode(received.split(b"\n")[0])
    assert isinstance(first, Prompt) and first.request_id == "r2" and first.text == "a\ufffd"
