"""``agentbus chat`` ends with headless's exit codes (issue 17): a broken settings file
52, a ``--resume`` naming no session 42, no credentials 41; what it can check itself
(settings, credentials of a new session) it checks before it starts a daemon, so a
refused chat leaves none running."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from actors.host.errors import FatalAuthenticationError, FatalConfigError, FatalInputError
from actors.recording import SessionClaim
from tests.frontends.daemon._helpers import text_response, write_responses
from tests.frontends.daemon._procs import agentbus, piped_chat


def _chat(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return piped_chat(home, "-m", "gemini-2.5-flash", *args)


def _no_daemon(home: Path) -> bool:
    status = agentbus(home, "daemon", "status")
    return status.returncode == 1 and "not running" in status.stdout


def test_a_broken_settings_file_exits_52_as_headless_and_starts_no_daemon(home: Path) -> None:
    settings = home / "home" / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text("{ not json")
    fake = write_responses(home / "f.responses", text_response("unused"))
    try:
        done = _chat(home, "--fake-responses", str(fake))
        headless = agentbus(home, "-p", "hi", "--fake-responses", str(fake))
        assert _no_daemon(home), "a refused chat left its daemon running"
    finally:
        agentbus(home, "daemon", "stop")
    assert headless.returncode == FatalConfigError.exit_code == 52
    assert done.returncode == 52, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr == "agentbus chat: " + headless.stderr


def test_no_credentials_exits_41_and_starts_no_daemon(home: Path) -> None:
    try:
        done = _chat(home)
        assert _no_daemon(home), "a refused chat left its daemon running"
    finally:
        agentbus(home, "daemon", "stop")
    assert done.returncode == FatalAuthenticationError.exit_code == 41, done.stderr
    assert done.stderr.startswith("agentbus chat: Please set an Auth method")
    assert len(done.stderr.splitlines()) == 1


def test_resume_of_no_such_session_exits_42_as_headless(home: Path) -> None:
    fake = write_responses(home / "f.responses", text_response("Hello."))
    try:
        first = _chat(home, "--fake-responses", str(fake))
        assert first.returncode == 0, first.stderr
        by_number = _chat(home, "--resume", "99", "--fake-responses", str(fake))
        by_id = _chat(home, "--resume", "no-such-session", "--fake-responses", str(fake))
    finally:
        agentbus(home, "daemon", "stop")
    assert by_number.returncode == FatalInputError.exit_code == 42, by_number.stderr
    assert by_number.stderr == "agentbus chat: no session number 99\n"
    assert by_id.returncode == 42, by_id.stderr
    assert by_id.stderr.startswith("agentbus chat: ") and len(by_id.stderr.splitlines()) == 1


def test_resume_of_a_session_another_run_holds_exits_42_as_headless(home: Path) -> None:
    fake = write_responses(home / "f.responses", text_response("Hello."))
    try:
        assert _chat(home, "--fake-responses", str(fake)).returncode == 0
        agentbus(home, "daemon", "stop")
        [path] = (home / "data" / "sessions").glob("*.jsonl")
        claim = SessionClaim(path)  # a headless run resuming it meanwhile
        try:
            held = _chat(home, "--resume", "latest", "--fake-responses", str(fake))
        finally:
            claim.close()
    finally:
        agentbus(home, "daemon", "stop")
    assert held.returncode == FatalInputError.exit_code, held.stderr
    assert "in use by another agentbus process" in held.stderr and len(held.stderr.splitlines()) == 1, held.stderr


def test_chat_help_lists_its_exit_codes() -> None:
    helped = subprocess.run(
        [sys.executable, "-m", "actors.frontends", "chat", "--help"], capture_output=True, text=True, timeout=30, check=False
    )
    codes = helped.stdout.split("Exit codes")[1]
    for code in ("0", "1", "41", "42", "52", "130"):
        assert f"\n  {code} " in codes, codes
