"""``agentbus -p`` with subagents, as a user runs it: a project agent, fake responses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from actors.recording import load_recording

ROOT = Path(__file__).resolve().parents[3]


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(cwd / "home"),
        "GEMINI_CLI_HOME": str(cwd / "home"),
        "AGENTBUS_DATA_DIR": str(cwd / "data"),
        "GEMINI_API_KEY": "fake",
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        [sys.executable, "-m", "actors.frontends", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def answer(*parts: Any) -> str:
    return json.dumps(
        {
            "method": "generateContentStream",
            "response": [
                {
                    "candidates": [
                        {"content": {"role": "model", "parts": list(parts)}, "finishReason": "STOP"}
                    ]
                }
            ],
        }
    )


def fc(name: str, **args: Any) -> dict[str, Any]:
    return {"functionCall": {"name": name, "args": args}}


def test_a_project_agent_runs_as_a_child_session(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("remember the milk\n")
    agents = tmp_path / ".gemini" / "agents"
    agents.mkdir(parents=True)
    (agents / "reader.md").write_text(
        "---\nname: reader\ndescription: Reads files\ntools: [read_file]\nmax_turns: 4\n---\nYou read ${query}.\n"
    )
    (tmp_path / "fake.responses").write_text(
        "\n".join(
            [
                answer(fc("invoke_agent", agent_name="reader", prompt="notes.txt")),
                answer(fc("read_file", file_path=str(tmp_path / "notes.txt"))),
                answer(fc("complete_task", result="It says: remember the milk")),
                answer({"text": "The note says to remember the milk."}),
            ]
        )
        + "\n"
    )
    unacked = run(
        [
            "-p",
            "x",
            "-m",
            "gemini-2.5-pro",
            "--fake-responses",
            "fake.responses",
            "-o",
            "stream-json",
        ],
        tmp_path,
    )
    assert "Subagent 'reader' could not be loaded: the project agent" in unacked.stdout
    assert "is not acknowledged (run `agentbus agents --acknowledge`" in unacked.stdout

    listed = run(["agents", "--acknowledge"], tmp_path)
    assert listed.returncode == 0 and "acknowledged: reader" in listed.stdout
    proc = run(
        [
            "-p",
            "what does the note say?",
            "-m",
            "gemini-2.5-pro",
            "--fake-responses",
            "fake.responses",
            "-o",
            "stream-json",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    [result] = [e for e in events if e["type"] == "tool_result"]
    assert result["status"] == "success"
    assert result["output"] == (
        "Subagent 'reader' finished.\nTermination Reason: GOAL\nResult:\nIt says: remember the milk"
    )
    assert events[-1]["type"] == "result" and events[-1]["status"] == "success"
    # The child's recording sits beside the parent's.
    [child] = list((tmp_path / "data" / "sessions").glob("*.agents/*.jsonl"))
    kinds = [type(env.message).__name__ for env in load_recording(child).envelopes]
    assert "TurnEnded" in kinds and kinds[-1] == "SessionClosed"


def test_a_broken_definition_is_reported_and_the_run_goes_on(tmp_path: Path) -> None:
    agents = tmp_path / ".gemini" / "agents"
    agents.mkdir(parents=True)
    (agents / "bad.md").write_text("---\nname: bad\ntools: [nope]\n---\n")
    (tmp_path / "fake.responses").write_text(
        answer(fc("invoke_agent", agent_name="bad", prompt="x"))
        + "\n"
        + answer({"text": "ok"})
        + "\n"
    )
    proc = run(
        [
            "-p",
            "x",
            "-m",
            "gemini-2.5-pro",
            "--fake-responses",
            "fake.responses",
            "-o",
            "stream-json",
        ],
        tmp_path,
    )
    assert proc.returncode == 0
    assert "Agent loading error: Failed to load agent from" in proc.stderr
    assert "tools: unknown tool 'nope'" in proc.stderr
    [result] = [json.loads(line) for line in proc.stdout.splitlines() if '"tool_result"' in line]
    assert result["status"] == "error"
    assert "Subagent 'bad' could not be loaded" in result["error"]["message"]
