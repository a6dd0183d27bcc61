"""Failures a user meets end in one line naming the real cause, never a traceback
(issue 17, defect 14); a closed output pipe ends the run quietly with status 0, as
Gemini CLI does on EPIPE (``nonInteractiveCli.ts``: ``process.exit(0)``)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.frontends.daemon._helpers import text_response, write_responses
from tests.frontends.daemon._procs import env_for

AGENTBUS = str(Path(sys.executable).with_name("agentbus"))


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "home").mkdir()
    (tmp_path / "ws").mkdir()
    yield tmp_path
    # A chat starts a daemon; stop it (nothing to stop is fine).
    subprocess.run([AGENTBUS, "daemon", "stop"], env=env_for(tmp_path), capture_output=True, timeout=30, check=False)


def run(home: Path, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AGENTBUS, *args],
        cwd=home / "ws",
        env={**env_for(home), **env},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def assert_one_line(done: subprocess.CompletedProcess[str], code: int, start: str) -> None:
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr and "Exception" not in done.stderr, done.stderr
    assert done.stderr.startswith(start) and done.stderr.count("\n") == 1, done.stderr


def test_chat_without_credentials_says_so_in_one_line(home: Path) -> None:
    done = run(home, "chat", stdin="hi\n")
    assert_one_line(done, 41, "agentbus chat: Please set an Auth method")  # FatalAuthenticationError, as headless


def test_chat_with_an_unusable_data_dir_names_the_cause(home: Path) -> None:
    (home / "blocker").write_text("a file where the data directory should be")
    script = write_responses(home / "hi.responses", text_response("never shown"))
    done = run(
        home,
        "chat",
        "--fake-responses",
        str(script),
        "-m",
        "gemini-2.5-flash",
        stdin="hi\n",
        AGENTBUS_DATA_DIR=str(home / "blocker" / "data"),
    )
    assert_one_line(done, 1, "agentbus chat: the session could not start: cannot open recording ")
    assert "Not a directory" in done.stderr


@pytest.mark.parametrize("mode", ["stream-json", "text"])
def test_a_reader_that_stops_early_ends_the_run_quietly(home: Path, mode: str) -> None:
    # More than a pipe buffer of output, so the writer is still writing when the
    # reader goes away (text that never repeats, or the loop detector steps in).
    chunks = ["".join(hashlib.sha256(f"{i}.{j}".encode()).hexdigest() for j in range(16)) + "\n" for i in range(300)]
    script = write_responses(home / "long.responses", text_response(*chunks))
    argv = [AGENTBUS, "-p", "go", "-m", "gemini-2.5-flash", "--fake-responses", str(script), "-o", mode]
    with subprocess.Popen(
        argv, cwd=home / "ws", env=env_for(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        first = [proc.stdout.readline(), proc.stdout.readline()]  # head -2
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=30) == 0, err
    assert err == ""
    if mode == "stream-json":
        assert [json.loads(line)["type"] for line in first] == ["init", "message"]


@pytest.mark.parametrize(
    "args",
    [
        ("-p", "hi", "-o", "text"),
        ("-p", "hi", "-o", "json"),
        ("-p", "hi", "-o", "stream-json"),
        ("--list-sessions",),
        ("tool", "--list"),
        ("chat",),
    ],
    ids=lambda args: " ".join(args),
)
def test_a_closed_stdout_loses_the_output_not_the_run(home: Path, args: tuple[str, ...]) -> None:
    # ``cmd >&-`` (cron, a service manager): Gemini CLI runs and exits 0; so does this,
    # the model asked all the same (its answer is recorded), and nothing on stderr.
    script = write_responses(home / "hi.responses", text_response("Hello"))
    fake = ("-m", "gemini-2.5-flash", "--fake-responses", str(script)) if args[0] in ("-p", "chat") else ()
    done = subprocess.run(
        ["bash", "-c", '"$@" >&-', "bash", AGENTBUS, *args, *fake],
        cwd=home / "ws",
        env=env_for(home),
        input="hi\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    if fake:
        (recording,) = (home / "data" / "sessions").glob("*.jsonl")
        assert '"text":"Hello"' in recording.read_text()
