"""``agentbus replay`` on bad input: a precise error naming the file (and line), exit 2;
a replay that differs from its recording: both messages, exit 1."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from actors.frontends.replay import main

ROOT = Path(__file__).resolve().parents[3]
TEXT = ROOT / "scenarios" / "recorded" / "text-hello" / "recording.jsonl"
WAVES = ROOT / "scenarios" / "recorded" / "waves-read-write"


def replay(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def mutated(tmp_path: Path, source: Path, line: int, old: str, new: str) -> Path:
    lines = source.read_text().splitlines()
    assert old in lines[line - 1], lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    target = tmp_path / "r.jsonl"
    target.write_text("\n".join(lines) + "\n")
    return target


def line_of(source: Path, needle: str) -> int:
    return next(i for i, t in enumerate(source.read_text().splitlines(), start=1) if needle in t)


def test_a_recording_from_a_newer_format_version(tmp_path: Path) -> None:
    path = mutated(tmp_path, TEXT, 1, '"v":1', '"v":9')
    code, _, err = replay(str(path))
    assert code == 2
    assert err == f"agentbus replay: {path}:1: format version 9 is newer than this agentbus reads (2); upgrade agentbus\n"


def test_a_corrupted_line_in_the_middle(tmp_path: Path) -> None:
    lines = TEXT.read_text().splitlines()
    lines[4] = lines[4][:30]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code, _, err = replay(str(path), "--check")
    assert code == 2
    assert err.startswith(f"agentbus replay: {path}:5: malformed JSON: ")


def test_an_unknown_message_tag(tmp_path: Path) -> None:
    n = line_of(TEXT, '"type":"TextStreamed"')
    path = mutated(tmp_path, TEXT, n, '"type":"TextStreamed"', '"type":"TextShouted"')
    code, _, err = replay(str(path))
    assert (code, err) == (2, f"agentbus replay: {path}:{n}: unknown message type 'TextShouted'\n")


def test_a_missing_workspace_for_live_tools(tmp_path: Path) -> None:
    rec = WAVES / "recording.jsonl"
    workspace = json.loads(rec.read_text().splitlines()[0])["workspace"]
    code, _, err = replay(str(rec), "--tools", "live", "--workspace", str(tmp_path / "nowhere"))
    assert code == 2
    assert err == (
        f"agentbus replay: {rec}: --tools=live: workspace {tmp_path / 'nowhere'} does not exist "
        f"(the session ran in {workspace}, line 1)\n"
    )
    code, _, err = replay(str(rec), "--tools", "live")
    assert code == 2 and "--tools=live needs --workspace DIR" in err


def test_other_unusable_inputs(tmp_path: Path) -> None:
    assert replay(str(tmp_path / "none.jsonl"))[2] == f"agentbus replay: {tmp_path / 'none.jsonl'}: no such file\n"
    fake = ROOT / "scenarios" / "bench" / "hi.responses"
    assert "--check needs a recording" in replay(str(fake), "--check")[2]
    assert "give one with -p PROMPT" in replay(str(fake))[2]
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\n")
    assert replay(str(junk))[2] == f"agentbus replay: {junk}:1: not JSON; expected a recording or a fake-responses file\n"
    assert replay(str(tmp_path))[2] == f"agentbus replay: {tmp_path}: a folder must be a scenario (no scenario.json in it)\n"


def test_a_changed_message_is_a_divergence_showing_both(tmp_path: Path) -> None:
    n = line_of(TEXT, '"type":"TextStreamed"')
    path = mutated(tmp_path, TEXT, n, '"text":"Hello"', '"text":"Howdy"')
    code, _, err = replay(str(path), "--check", "-o", "none")
    assert code == 1
    lines = err.splitlines()
    assert lines[0] == f"agentbus replay: replay diverges from the recording at {path}:{n} (seq {n - 1})"
    assert '"text":"Howdy"' in lines[1] and lines[1].startswith("  recorded: seq")
    assert '"text":"Hello"' in lines[2] and lines[2].startswith("  replayed: seq")


def test_a_message_the_replay_never_produces_is_a_stall(tmp_path: Path) -> None:
    source = WAVES / "recording.jsonl"
    n = line_of(source, '"type":"ToolCallRequested"')
    path = mutated(tmp_path, source, n, '"call_id":"read_file__', '"call_id":"other__')
    code, _, err = replay(str(path), "--check", "-o", "none")
    assert code == 1
    assert err.startswith(f"agentbus replay: replay stalled at {path}:{n} (seq {n - 1}): the recorded message was not produced\n")
    assert '"call_id":"other__' in err.splitlines()[1]
    assert err.splitlines()[2].startswith("  waiting : ") and '"call_id":"read_file__' in err.splitlines()[2]


@pytest.mark.parametrize("fmt", ["text", "json", "stream-json"])
def test_headless_formats_print_what_the_client_printed(fmt: str) -> None:
    code, out, err = replay(str(TEXT), "-o", fmt)
    assert code == 0, err
    assert "world." in out and "Hello" in out


def test_hooks_the_replayed_session_does_not_ask_for_are_a_stall_at_their_line(tmp_path: Path) -> None:
    """Hooks replay with their recorded answers where the session asks for them; a
    recorded ``RunHooks`` the session never sends is where the replay parts from it."""
    lines = TEXT.read_text().splitlines()
    n = line_of(TEXT, '"type":"TextStreamed"')
    data = json.loads(lines[n - 1])
    data["msg"] = {
        "type": "RunHooks", "session_id": data["session_id"], "request_id": "r", "reply_to": "turn:x", "event": "BeforeAgent",
    }
    lines[n - 1] = json.dumps(data)
    path = tmp_path / "hooks.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code, _, err = replay(str(path), "--check")
    assert code == 1
    assert err.startswith(f"agentbus replay: replay stalled at {path}:{n} (seq {n - 1}): the recorded message was not produced\n")
    assert '"type":"RunHooks"' in err.splitlines()[1]


def test_a_scenario_approval_answer_that_is_no_outcome_is_refused_by_name() -> None:
    """A scenario's scripted approval answers are ``ApprovalOutcome`` words; another
    word (``yes``) is refused when the scenario is read — it reached the scheduler,
    which took any answer but a cancel as an accept."""
    from actors.frontends.replay.record import processes_of

    [[turn]] = processes_of({"prompt": "p", "approvals": ["proceed_once", "cancel"]})
    assert turn.approvals == ["proceed_once", "cancel"]
    with pytest.raises(ValueError, match="unknown approval outcome 'yes' \\(one of proceed_once, "):
        processes_of({"prompt": "p", "approvals": ["yes"]})
