"""Bad input at the command line: a one-line error, Gemini CLI's exit code, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HELLO = ROOT / "scenarios" / "bench" / "hi.responses"


def run(args: list[str], cwd: Path, *, stdin: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": os.environ["PATH"],
        "HOME": str(cwd),
        "GEMINI_CLI_HOME": str(cwd),
        "AGENTBUS_DATA_DIR": str(cwd / "data"),
        "GEMINI_API_KEY": "fake",
    }
    return subprocess.run(
        [sys.executable, "-m", "actors.frontends", *args],
        cwd=cwd,
        env={**base, **(env or {}), "PYTHONPATH": str(ROOT)},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_clean_failure(proc: subprocess.CompletedProcess[str], code: int, needle: str) -> None:
    assert proc.returncode == code, proc.stderr
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_missing_fake_responses_file(tmp_path: Path) -> None:
    proc = run(["-p", "hi", "--fake-responses", str(tmp_path / "nope.responses")], tmp_path)
    assert_clean_failure(proc, 1, "fake responses file not found")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_malformed_fake_responses_line_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.responses"
    bad.write_text('{"method":"generateContentStream","response":[]}\n{oops\n')
    proc = run(["-p", "hi", "--fake-responses", str(bad)], tmp_path)
    assert_clean_failure(proc, 1, f"{bad}:2: malformed JSON")


def test_unknown_flag(tmp_path: Path) -> None:
    proc = run(["--bogus", "-p", "hi"], tmp_path)
    assert_clean_failure(proc, 1, "Unknown argument: bogus")


def test_invalid_choice_is_worded_like_gemini_cli(tmp_path: Path) -> None:
    proc = run(["--approval-mode", "bad", "-p", "hi"], tmp_path)
    assert_clean_failure(
        proc, 1, 'Invalid values:\n  Argument: approval-mode, Given: "bad", Choices: "default", "auto_edit", "yolo", "plan"'
    )


def test_yolo_and_approval_mode_conflict(tmp_path: Path) -> None:
    proc = run(["-y", "--approval-mode", "yolo", "-p", "hi"], tmp_path)
    assert_clean_failure(proc, 1, "Cannot use both --yolo (-y) and --approval-mode together.")


@pytest.mark.parametrize("content", ["{not json", "", "[1]", '{"x":' * 5000 + "1" + "}" * 5000])
def test_unreadable_settings_exit_52_naming_the_file(tmp_path: Path, content: str) -> None:
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(content)
    proc = run(["-p", "hi", "--fake-responses", str(HELLO)], tmp_path)
    assert_clean_failure(proc, 52, f"Error in {settings}")
    assert "Please fix the configuration file(s) and try again." in proc.stderr


def test_no_input_exits_42(tmp_path: Path) -> None:
    proc = run(["--fake-responses", str(HELLO)], tmp_path)
    assert_clean_failure(proc, 42, "No input provided via stdin.")


def test_enforced_auth_mismatch_exits_41_with_json_error(tmp_path: Path) -> None:
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"security": {"auth": {"enforcedType": "vertex-ai"}}}))
    proc = run(["-p", "hi", "-o", "json", "--fake-responses", str(HELLO)], tmp_path)
    assert proc.returncode == 41
    error = json.loads(proc.stderr)["error"]
    assert error == {
        "type": "Error",
        "message": "The enforced authentication type is 'vertex-ai', but the current type is "
        "'gemini-api-key'. Please re-authenticate with the correct type.",
        "code": 41,
    }


def test_stdin_is_prepended_to_the_prompt(tmp_path: Path) -> None:
    proc = run(
        ["-p", "question", "-m", "gemini-2.5-flash", "-o", "stream-json", "--fake-responses", str(HELLO)],
        tmp_path,
        stdin="context",
    )
    assert proc.returncode == 0, proc.stderr
    user = [json.loads(line) for line in proc.stdout.splitlines()][1]
    assert user == {**user, "type": "message", "role": "user", "content": "context\n\nquestion"}


def test_policy_file_with_a_syntax_error_refuses_to_start(tmp_path: Path) -> None:
    policy = tmp_path / "bad.toml"
    policy.write_text('[[rule]]\ntoolName = "run_shell_command"\ndecision = "allow"\npriority = \n')
    proc = run(["-p", "hi", "--policy", str(policy), "--fake-responses", str(HELLO)], tmp_path)
    assert_clean_failure(proc, 52, f"Error in policy file {policy}:4:")


@pytest.mark.parametrize("name", ["missing.toml", "rules.txt"])
def test_a_policy_path_that_is_not_a_policy_refuses_to_start(tmp_path: Path, name: str) -> None:
    """Gemini CLI skips a ``--policy`` path that does not exist (or is no ``.toml``)
    without a word; like a malformed file, that would run without the user's rules."""
    policy = tmp_path / name
    if name.endswith(".txt"):
        policy.write_text('[[rule]]\ntoolName = "run_shell_command"\ndecision = "allow"\npriority = 1\n')
    proc = run(["-p", "hi", "--policy", str(policy), "--fake-responses", str(HELLO)], tmp_path)
    assert_clean_failure(proc, 52, f"Error in policy file {policy}: ")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_api_error_in_text_mode_is_said_once_without_object_object(tmp_path: Path) -> None:
    """Gemini CLI also prints "An unexpected critical error occurred:[object Object]" (it
    stringifies an object); ours names the error once and says nothing meaningless."""
    empty = tmp_path / "empty.responses"
    empty.write_text("")
    proc = run(["-p", "hi", "-m", "gemini-2.5-flash", "--fake-responses", str(empty)], tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("Error when talking to Gemini API: No more mock responses for generateContentStream")
    assert "[object Object]" not in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("chunk", "why"),
    [
        ({"candidates": 5}, "candidates is a number, not a list"),
        ([1, 2], "a chunk is a list, not an object"),
        ({"candidates": [5]}, "a candidate is a number, not an object"),
        ({"candidates": [{"content": "x"}]}, "a candidate's content is a string, not an object"),
        ({"candidates": [{"content": {"parts": {}}}]}, "a candidate's parts is an object, not a list"),
        ({"candidates": [], "usageMetadata": [1]}, "usageMetadata is a list, not an object"),
        ({"candidates": [{"content": {"parts": [{"functionCall": {"name": "read_file", "id": 5}}]}}]}, "a functionCall's id is a number, not a string"),
        ({"candidates": [{"content": {"parts": [{"functionCall": "read_file"}]}}]}, "a functionCall is a string, not an object"),
    ],
)
def test_a_response_chunk_of_the_wrong_shape_fails_the_response_in_one_line(tmp_path: Path, chunk: object, why: str) -> None:
    # Gemini CLI meets these with a TypeError (``chunk?.candidates?.find is not a
    # function``): a failed turn, exit 1. Here they took the gateway down with them.
    bad = tmp_path / "bad.responses"
    bad.write_text(json.dumps({"method": "generateContentStream", "response": [chunk]}) + "\n")
    proc = run(["-p", "hi", "-m", "gemini-2.5-flash", "--fake-responses", str(bad)], tmp_path)
    assert_clean_failure(proc, 1, f"the response cannot be used: {why}")
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_usage_counts_that_are_not_numbers_count_as_none(tmp_path: Path) -> None:
    usage = {"promptTokenCount": "abc", "candidatesTokenCount": None, "totalTokenCount": True}
    chunk = {"candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]}, "finishReason": "STOP"}], "usageMetadata": usage}
    answer = tmp_path / "usage.responses"
    answer.write_text(json.dumps({"method": "generateContentStream", "response": [chunk]}) + "\n")
    proc = run(["-p", "hi", "-m", "gemini-2.5-flash", "-o", "json", "--fake-responses", str(answer)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["response"] == "x"
    assert out["stats"]["models"]["gemini-2.5-flash"]["tokens"]["prompt"] == 0


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('{"method":"generateContentStream","response":[{"x":' + "9" * 5000 + "}]}", "an integer of more than 4,300 digits"),
        ('{"method":"generateContentStream","response":[' + "[" * 5000 + "]" * 5000 + "]}", "nested too deep"),
    ],
    ids=["huge integer", "deep nesting"],
)
def test_a_fake_responses_line_python_cannot_hold_is_named(tmp_path: Path, line: str, why: str) -> None:
    bad = tmp_path / "bad.responses"
    bad.write_text(line + "\n")
    proc = run(["-p", "hi", "--fake-responses", str(bad)], tmp_path)
    assert_clean_failure(proc, 1, f"{bad}:1: unusable JSON: {why}")


def test_a_fake_responses_file_that_never_ends_is_refused_not_read_into_memory(tmp_path: Path) -> None:
    proc = run(["-p", "hi", "--fake-responses", "/dev/zero"], tmp_path)
    assert_clean_failure(proc, 1, "fake responses file /dev/zero is larger than 256 MiB")


@pytest.mark.parametrize(
    ("number", "why"),
    [("9" * 5000, "an integer of more than 4,300 digits"), ("1e400", "a number beyond 1e308 (it would be Infinity)")],
    ids=["huge integer", "infinite"],
)
def test_a_settings_number_no_setting_can_take_exits_52_naming_it(tmp_path: Path, number: str, why: str) -> None:
    # JSON.parse makes both Infinity; the settings that read a number (a threshold, a
    # limit) then failed further on, each its own way.
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"tools": {"truncateToolOutputThreshold": ' + number + "}}")
    proc = run(["-p", "hi", "-m", "gemini-2.5-flash", "--fake-responses", str(HELLO)], tmp_path)
    assert_clean_failure(proc, 52, f"Error in {settings}: {why}")


@pytest.mark.parametrize(
    ("value", "why"),
    [("[" * 5000 + "]" * 5000, "nested too deep"), ("9" * 5000, "an integer of more than 4,300 digits")],
    ids=["deep", "huge integer"],
)
def test_a_policy_file_python_cannot_read_refuses_to_start(tmp_path: Path, value: str, why: str) -> None:
    policy = tmp_path / "odd.toml"
    policy.write_text(f"x = {value}\n")
    proc = run(["-p", "hi", "--policy", str(policy), "--fake-responses", str(HELLO)], tmp_path)
    assert_clean_failure(proc, 52, f"Error in policy file {policy}:1: TOML parsing failed: {why}")


@pytest.mark.parametrize(
    ("frontmatter", "why"),
    [
        ("x: " + "[" * 5000 + "]" * 5000, "nested too deep"),
        ("max_turns: " + "9" * 5000, "an integer of more than 4,300 digits"),
        ("when: 2024-02-30", "day is out of range for month"),
    ],
    ids=["deep", "huge integer", "no such date"],
)
def test_an_agent_file_python_cannot_read_is_skipped_in_one_line(tmp_path: Path, frontmatter: str, why: str) -> None:
    agent = tmp_path / ".gemini" / "agents" / "odd.md"
    agent.parent.mkdir(parents=True)
    agent.write_text(f"---\nname: odd\ndescription: d\n{frontmatter}\n---\nbody\n")
    proc = run(["-p", "hi", "-m", "gemini-2.5-flash", "--fake-responses", str(HELLO)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Hello! How can I help you today?"
    # (Once as the user's agent too: this test's home is the workspace.)
    assert set(proc.stderr.splitlines()) == {f"Agent loading error: Failed to load agent from {agent}: YAML frontmatter parsing failed: {why}"}
