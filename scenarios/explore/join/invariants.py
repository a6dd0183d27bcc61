"""User invariants for ``agentbus explore scenarios/explore/join --invariant ...``.

Each function gets an ``actors.frontends.explore.UserRun`` (the messages in order, the
recording, the workspace after the session) and returns None when the run is fine, or
says what is wrong (a string, several, or an ``AssertionError``).
"""

from bus.messages import RunTool, StartTurn, TurnCancelAcknowledged


def no_tool_after_cancel(run):
    """No tool starts between a cancel's acknowledgement and the next turn (holds)."""
    acknowledged = False
    for msg in run.messages:
        if isinstance(msg, StartTurn):
            acknowledged = False
        elif isinstance(msg, TurnCancelAcknowledged):
            acknowledged = True
        elif isinstance(msg, RunTool) and acknowledged:
            return f"{msg.name} ({msg.call_id}) started after a cancel was acknowledged"
    return None


def joined_file_is_whole(run):
    """c.txt, when written, holds both words (holds)."""
    joined = run.workspace / "c.txt"
    if joined.exists():
        assert joined.read_text() == "alpha beta\n", f"c.txt holds {joined.read_text()!r}"


def c_txt_is_written(run):
    """c.txt exists after the session (false: a failed or cancelled write leaves none)."""
    if not (run.workspace / "c.txt").exists():
        return "c.txt was not written"
    return None
