"""A prompt larger than the daemon's frame limit (issue 17): ``agentbus chat`` says so
in one line and stays usable; one within it (a pasted file of a megabyte or more, as
``agentbus acp`` takes) is answered."""

from __future__ import annotations

from pathlib import Path

from actors.frontends.daemon import MAX_FRAME
from tests.frontends.daemon._helpers import text_response, write_responses
from tests.frontends.daemon._procs import agentbus, piped_chat


def test_a_big_prompt_is_answered_and_one_over_the_limit_is_refused_in_one_line_leaving_the_chat_usable(
    home: Path,
) -> None:
    fake = write_responses(home / "big.responses", text_response("Read it all."), text_response("Still here."))
    big = "a" * 1_200_000  # over the old 1 MiB frame limit: never answered, the chat wedged
    too_big = "b" * (MAX_FRAME + 100_000)
    try:
        done = piped_chat(
            home, "--fake-responses", str(fake), "-m", "gemini-2.5-flash", typed=f"{big}\n{too_big}\nare you there?\n"
        )
        out = done.stdout
        assert done.returncode == 0, done.stderr[-2000:]  # and it ended with its input
        assert "Read it all." in out and "Still here." in out, out[-2000:]
        errors = [line for line in out.splitlines() if line.startswith("error:")]
        assert errors == ["error: the prompt is 64.1 MiB; the daemon accepts prompts up to 64 MiB"], out[-2000:]
        assert out.index(errors[0]) < out.index("Still here.")
    finally:
        agentbus(home, "daemon", "stop")
