"""A replay shows each approval with the details its recording showed: the tools give
Gemini CLI's confirmation details (a diff, new content, the whole command), which the
replay's recorded tools cannot make again from a workspace they do not have."""

from __future__ import annotations

import io
import json
from pathlib import Path

from actors.frontends.replay import replay_file
from actors.frontends.replay.record import record
from actors.recording import load_recording
from bus.json_values import thaw
from bus.messages import ApprovalRequested


def _call(name: str, args: dict[str, str]) -> str:
    part = {"functionCall": {"name": name, "args": args}}
    return json.dumps({"method": "generateContentStream", "response": [
        {"candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0, "finishReason": "STOP"}]}
    ]})


def _text(text: str) -> str:
    return json.dumps({"method": "generateContentStream", "response": [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "index": 0, "finishReason": "STOP"}]}
    ]})


def _scenario(folder: Path) -> None:
    """A session asking three approvals: a new file, an edit, a shell command (the
    same write asked twice, so each ask must get its own recorded details)."""
    (folder / "workspace").mkdir(parents=True)
    (folder / "workspace" / "a.txt").write_text("one\ntwo\n")
    (folder / "fake.responses").write_text("\n".join([
        _call("write_file", {"file_path": "notes.txt", "content": "milk\n"}),
        _call("replace", {"file_path": "a.txt", "old_string": "two", "new_string": "three", "instruction": "x"}),
        _call("run_shell_command", {"command": "echo hi; echo there", "description": "greet"}),
        _call("write_file", {"file_path": "notes.txt", "content": "milk\n"}),
        _text("Done."),
    ]) + "\n")
    (folder / "scenario.json").write_text(json.dumps({
        "name": "approval-details",
        "args": ["-m", "gemini-2.5-flash", "--approval-mode", "default"],
        "fixture": "fake.responses",
        "interactive": True,
        "processes": [[{"prompt": "Go.", "approvals": ["proceed_once"] * 4}]],
    }))


def test_a_new_recording_with_approvals_replays_with_their_details(tmp_path: Path) -> None:
    _scenario(tmp_path)
    path, ended = record(tmp_path)
    assert [e.stop_reason for e in ended] == ["end_turn"]
    recording = load_recording(path)
    recorded = [thaw(e.message.details) for e in recording.envelopes if isinstance(e.message, ApprovalRequested)]
    # Today's tools show what they approve (else this test proves nothing).
    assert len(recorded) == 4 and all(set(d) - {"type", "title"} for d in recorded)
    assert "fileDiff" in recorded[1] and recorded[2]["command"] == "echo hi; echo there"
    assert recorded[0]["isNewFile"] is True and recorded[3]["isNewFile"] is False

    err = io.StringIO()
    code, result = replay_file(
        recording, check=True, tools_mode="recorded", workspace=None, fmt="human", out=io.StringIO(), err=err
    )
    assert code == 0, err.getvalue()
    replayed = [thaw(e.message.details) for e in result.envelopes if isinstance(e.message, ApprovalRequested)]
    assert replayed == recorded
