"""The chat's mark of a call says whether it ran (issue 17, defect 13): a model's
command blocked for command substitution is shown failed, never ``✓ … success``; the
user's own ``!command`` runs as typed, as in Gemini CLI's shell mode."""

from __future__ import annotations

from pathlib import Path

from tests.frontends.daemon._helpers import call_response, text_response, write_responses
from tests.frontends.daemon._procs import agentbus

from .test_chat_terminal import chat_on_fake


def test_a_blocked_model_command_is_failed_and_the_users_own_runs(home: Path) -> None:
    fake = write_responses(
        home / "chat.responses",
        call_response("run_shell_command", {"command": "echo $(echo from-model) > proof.txt"}),
        text_response("Tried."),
    )
    term = chat_on_fake(home, fake)
    try:
        term.expect("> ")
        term.type("!echo $(echo from-user)\n")
        term.expect("│ from-user")
        term.expect("✓ run_shell_command echo $(echo from-user) success")
        term.type("write the proof\n")
        term.expect("Allow Shell echo $(echo from-model) > proof.txt?")
        term.type("y\n")
        screen = term.expect("Tried.")
        assert "✗ run_shell_command echo $(echo from-model) > proof.txt error" in screen
        assert "✓ run_shell_command echo $(echo from-model)" not in screen
        term.type("/quit\n")
        assert term.wait_exit() == 0
    finally:
        term.close()
        agentbus(home, "daemon", "stop")
    assert not (home / "ws" / "proof.txt").exists()
