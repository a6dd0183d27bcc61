"""Fields added after a recording was made are compared only when the recording has them."""

from __future__ import annotations

from actors.frontends.replay._normalise import Normalised, forgive_later_fields


def batch(model: str) -> Normalised:
    return Normalised(seq=1, sender="turn:s", recipient="scheduler:s", message={"type": "ScheduleBatch", "model": model})


def test_an_older_recording_does_not_compare_the_new_field() -> None:
    assert forgive_later_fields(batch(""), batch("gemini-2.5-pro")) == batch("")


def test_a_recording_that_has_the_field_compares_it() -> None:
    assert forgive_later_fields(batch("gemini-2.5-pro"), batch("gemini-2.5-flash")) == batch("gemini-2.5-flash")
    other = Normalised(seq=1, sender="a", recipient=None, message={"type": "TextStreamed", "model": ""})
    assert forgive_later_fields(other, batch("x")) == batch("x")


def test_a_users_call_recorded_before_run_tool_said_so_replays() -> None:
    def run_tool(user: bool) -> Normalised:
        message = {"type": "RunTool", "approval_mode": "default", "model": "m", "client_initiated": user}
        return Normalised(seq=1, sender="scheduler:s", recipient="executor:s", message=message)

    assert forgive_later_fields(run_tool(False), run_tool(True)) == run_tool(False)
    assert forgive_later_fields(run_tool(True), run_tool(True)) == run_tool(True)
