"""Piped input is a script (README: "piped input answers with lines"): each line waits
for what the line before it started, so a ``y`` after a prompt answers the question its
turn asks; at the end of input a question nobody can answer stays in the daemon and the
chat leaves."""

from __future__ import annotations

from pathlib import Path

from tests.frontends.daemon._helpers import call_response, text_response, write_responses
from tests.frontends.daemon._procs import agentbus, piped_chat

WRITE = {"file_path": "out.txt", "content": "approved\n"}


def test_a_y_after_a_prompt_answers_its_question(home: Path) -> None:
    fake = write_responses(home / "f.responses", call_response("write_file", WRITE), text_response("Written."))
    try:
        done = piped_chat(home, "--fake-responses", str(fake), "-m", "gemini-2.5-flash", typed="write a file\ny\n")
    finally:
        agentbus(home, "daemon", "stop")
    assert done.returncode == 0, done.stderr
    assert "queued" not in done.stdout and "Written." in done.stdout, done.stdout
    assert (home / "ws" / "out.txt").read_text() == "approved\n"


def test_the_end_of_input_with_a_question_open_leaves_it_in_the_daemon(home: Path) -> None:
    fake = write_responses(home / "f.responses", call_response("write_file", WRITE), text_response("Written."))
    try:
        asked = piped_chat(home, "--fake-responses", str(fake), "-m", "gemini-2.5-flash", typed="write a file\n")
        assert asked.returncode == 0, asked.stderr
        assert "a question waits: agentbus chat --resume" in asked.stdout, asked.stdout
        answered = piped_chat(home, "--resume", "latest", typed="y\n")
        assert answered.returncode == 0, answered.stderr
        assert "Written." in answered.stdout, answered.stdout
    finally:
        agentbus(home, "daemon", "stop")
    assert (home / "ws" / "out.txt").read_text() == "approved\n"
