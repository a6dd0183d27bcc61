"""``agentbus explore``: planted bugs found on a bundled scenario and shrunk to words, a
false user invariant reported with a recording that ``agentbus replay --check``
reproduces, and bad input as one clear line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.frontends.explore import (
    Perturbation,
    ToolTwist,
    explore,
    load_target,
    main,
    perturbations,
    run_target,
)
from actors.frontends.replay import main as replay_main
from bus.planted import SWITCHES, planting

ROOT = Path(__file__).resolve().parents[3]
JOIN = ROOT / "scenarios" / "explore" / "join"
INVARIANTS = JOIN / "invariants.py"

PLANTED = {
    "scheduler.completion_order": 1,
    "turn.end_before_tools": 2,
    "executor.two_results": 3,
    "recorder.drop_line": 4,
    "scheduler.shuffled_dispatch": 5,
    "scheduler.barrier_joins_wave": 6,
    "executor.skip_close": 7,
}


def test_every_planted_bug_is_explored() -> None:
    assert sorted(PLANTED) == sorted(SWITCHES)


@pytest.mark.property
@pytest.mark.parametrize(("switch", "invariant"), sorted(PLANTED.items()))
def test_explore_finds_a_planted_bug_and_shrinks_it(switch: str, invariant: int, tmp_path: Path) -> None:
    target = load_target(JOIN)
    out = tmp_path / "failure.jsonl"
    with planting(switch):
        found = explore(target, seed=0, out=out)  # the default budget and examples
    assert found.failure is not None, f"{switch}: {found.examples} runs found nothing"
    assert invariant in {v.invariant for v in found.failure.violations}, found.failure.problems()
    words = found.failure.perturbation.words()
    assert len(words) <= 2, words  # shrunk to what the bug needs
    assert out.is_file()


@pytest.mark.property
def test_a_false_user_invariant_is_reported_with_a_reproducing_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "failure.jsonl"
    spec = f"{INVARIANTS}:c_txt_is_written"
    status = main([str(JOIN), "--seed", "3", "--invariant", spec, "-o", str(out)])
    said = capsys.readouterr().out
    assert status == 1, said
    assert f"invariant {spec}: c.txt was not written" in said
    assert "the perturbation (shrunk):" in said and "--seed 3" in said
    assert str(out) in said
    assert replay_main([str(out), "--check"]) == 0
    assert "check OK" in capsys.readouterr().err


@pytest.mark.property
def test_true_user_invariants_hold(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status = main(
        [
            str(JOIN),
            "--examples",
            "15",
            "--seed",
            "1",
            "--invariant",
            f"{INVARIANTS}:no_tool_after_cancel",
            "--invariant",
            f"{INVARIANTS}:joined_file_is_whole",
            "-o",
            str(tmp_path / "f.jsonl"),
        ]
    )
    said = capsys.readouterr().out
    assert status == 0, said
    assert "15 run(s)" in said and "every run kept every invariant" in said
    assert not (tmp_path / "f.jsonl").exists()


def test_a_perturbation_in_words() -> None:
    p = Perturbation(tools=(ToolTwist("read_file", 2, ms=400, outcome="error"),), chunk_ms=10)
    assert p.words() == [
        "the 2nd read_file call takes 400 ms more, then fails with a tool error instead of running",
        "each streamed chunk comes 10 ms after the one before",
    ]


def test_a_tool_twist_changes_what_the_model_sees() -> None:
    run = run_target(load_target(JOIN), Perturbation(tools=(ToolTwist("write_file", 1, outcome="error"),)))
    assert not run.failed, run.problems()
    finished = [m for m in (e.message for e in run.run.envelopes) if type(m).__name__ == "ToolFinished"]
    assert any(m.result.error_message == "write_file failed (explored)" for m in finished)


# -- bad input --------------------------------------------------------------------------------------
def _explore_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    status = main(args)
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.count("\n") == 1, err
    return err


def test_a_recording_from_a_newer_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = tmp_path / "new.jsonl"
    lines = (ROOT / "scenarios/recorded/text-hello/recording.jsonl").read_text().splitlines()
    meta = json.loads(lines[0])
    meta["v"] = 99
    rec.write_text("\n".join([json.dumps(meta), *lines[1:]]) + "\n")
    err = _explore_error([str(rec)], capsys)
    assert str(rec) in err and "99" in err


def test_a_broken_recording(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = tmp_path / "broken.jsonl"
    lines = (ROOT / "scenarios/recorded/text-hello/recording.jsonl").read_text().splitlines()
    rec.write_text("\n".join([*lines[:3], lines[3][: len(lines[3]) // 2], *lines[4:]]) + "\n")
    err = _explore_error([str(rec)], capsys)
    assert f"{rec}:4" in err


def test_a_scenario_whose_workspace_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "scenario"
    shutil.copytree(JOIN, folder)
    shutil.rmtree(folder / "workspace")
    err = _explore_error([str(folder)], capsys)
    assert "workspace 'workspace' is missing" in err and str(folder) in err


def test_fake_responses_need_a_prompt(capsys: pytest.CaptureFixture[str]) -> None:
    err = _explore_error([str(JOIN / "fake.responses")], capsys)
    assert "-p PROMPT" in err


def test_an_invariant_module_that_does_not_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import no_such_module_here\n")
    err = _explore_error([str(JOIN), "--invariant", f"{broken}:check"], capsys)
    assert "does not import" in err and "no_such_module_here" in err
    err = _explore_error([str(JOIN), "--invariant", "no_such_package.checks:check"], capsys)
    assert "no_such_package" in err
    err = _explore_error([str(JOIN), "--invariant", f"{INVARIANTS}:no_such_function"], capsys)
    assert "has no function no_such_function" in err


def test_an_invariant_that_raises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raising = tmp_path / "raising.py"
    raising.write_text("def check(run):\n    return run.no_such_attribute\n")
    err = _explore_error([str(JOIN), "--examples", "5", "--invariant", f"{raising}:check"], capsys)
    assert f"--invariant {raising}:check raised AttributeError" in err


def test_an_unknown_perturbation_kind(capsys: pytest.CaptureFixture[str]) -> None:
    err = _explore_error([str(JOIN), "--perturb", "tools,weather"], capsys)
    assert "unknown kind(s) weather" in err


def test_a_recording_is_explored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = ROOT / "scenarios/recorded/waves-read-write/recording.jsonl"
    status = main([str(rec), "--examples", "10", "--seed", "2", "-o", str(tmp_path / "f.jsonl")])
    said = capsys.readouterr().out
    assert status == 0, said
    assert "10 run(s)" in said


def test_a_fake_responses_file_is_explored_in_the_given_workspace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [str(JOIN / "fake.responses"), "-p", "Join a.txt and b.txt into c.txt.", "--examples", "10", "--seed", "4"]
    status = main([*args, "--workspace", str(JOIN / "workspace"), "--invariant", f"{INVARIANTS}:joined_file_is_whole"])
    said = capsys.readouterr().out
    assert status == 0, said
    assert "10 run(s)" in said and "note:" not in said
    assert sorted(p.name for p in (JOIN / "workspace").iterdir()) == ["a.txt", "b.txt"]  # only copies were touched


def test_tools_this_build_lacks_run_as_recorded_stand_ins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An MCP server's tool in a recording: explored runs answer it from the recording, and say so."""
    from actors.frontends.explore import StandIn, Target
    from actors.gateway import FakeEntry
    from bus.messages import ToolResult

    def reply(*parts: object) -> FakeEntry:
        chunk = {"candidates": [{"content": {"role": "model", "parts": list(parts)}, "finishReason": "STOP"}]}
        return FakeEntry("generateContentStream", [chunk], 0)

    echo = {"name": "echo__say", "description": "Echo (MCP)", "parametersJsonSchema": {"type": "object"}}
    first = Target(
        name="mcp",
        kind="fake-responses",
        entries=(reply({"functionCall": {"name": "echo__say", "args": {"text": "hi"}}}), reply({"text": "Said."})),
        prompts=("Say hi.",),
        approval_mode="yolo",
        standins=(StandIn("echo__say", echo, (ToolResult(llm_content="hi (echoed)"),)),),
    )
    kept = tmp_path / "mcp.jsonl"
    # A user invariant that always fails keeps the run's recording.
    run = run_target(first, Perturbation(), invariants=[("keep", lambda r: "keep it")], keep_recording=kept)
    assert run.violations == [], run.problems()
    results = [m.result for m in (e.message for e in run.run.envelopes) if type(m).__name__ == "ToolFinished"]
    assert [r.llm_content for r in results] == ["hi (echoed)"]
    assert replay_main([str(kept), "--check", "-o", "none"]) == 0

    target = load_target(kept)
    assert [s.name for s in target.standins] == ["echo__say"]
    declared = target.standins[0].declaration  # as the model saw it (with wait_for_previous)
    assert (declared["name"], declared["description"]) == ("echo__say", "Echo (MCP)")
    status = main([str(kept), "--examples", "10", "--seed", "6", "-o", str(tmp_path / "f.jsonl")])
    said = capsys.readouterr().out
    assert status == 0, said
    assert "echo__say: not tools of this build" in said and "recorded stand-ins" in said


_JOIN_TARGET = load_target(JOIN)


def _whole(run: object) -> str | None:
    from actors.frontends.explore import UserRun

    assert isinstance(run, UserRun)
    joined = run.workspace / "c.txt"
    return None if not joined.exists() or joined.read_text() == "alpha beta\n" else "c.txt is torn"


@settings(max_examples=max(10, settings.default.max_examples // 100), deadline=None)  # deep profile: 100
@given(p=perturbations(_JOIN_TARGET.calls, len(_JOIN_TARGET.entries)), scheduling=st.random_module())
def test_a_users_own_property_over_the_public_api(p: Perturbation, scheduling: object) -> None:
    """The README's example: a pytest property of one's own session."""
    run = run_target(_JOIN_TARGET, p, invariants=[("whole", _whole)])
    assert not run.failed, run.problems()


# -- hooks ----------------------------------------------------------------------------------------
BLOCKED = """
def write_blocked(run):
    assert not (run.workspace / "c.txt").exists(), "c.txt was written: the hook's block was lost"
    ran = [m.name for m in run.messages if type(m).__name__ == "RunTool"]
    assert "write_file" not in ran, ran
    asked = {(m.event, m.target) for m in run.messages if type(m).__name__ == "RunHooks"}
    assert asked <= {("BeforeTool", "write_file")}, asked
"""


def _hooked_recording(tmp_path: Path) -> Path:
    """A real headless run of the join session's first prompt whose BeforeTool hook
    (a command) denies write_file: its recording."""
    import shlex
    import subprocess
    import sys

    workspace = tmp_path / "ws"
    shutil.copytree(JOIN / "workspace", workspace)
    deny = shlex.quote("import json; print(json.dumps({'decision': 'deny', 'reason': 'no writes here'}))")
    hook = {"type": "command", "name": "no-writes", "command": f"{shlex.quote(sys.executable)} -c {deny}"}
    (workspace / ".gemini").mkdir()
    (workspace / ".gemini" / "settings.json").write_text(
        json.dumps({"hooks": {"BeforeTool": [{"matcher": "write_file", "hooks": [hook]}]}})
    )
    (tmp_path / "home").mkdir()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "GEMINI_CLI_HOME": str(tmp_path / "home"),
        "AGENTBUS_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": str(ROOT),
    }
    args = ["-p", "Join a.txt and b.txt into c.txt.", "-m", "gemini-2.5-flash", "--approval-mode", "yolo"]
    done = subprocess.run(
        [sys.executable, "-m", "actors.frontends", *args, "--fake-responses", str(JOIN / "fake.responses")],
        cwd=workspace, env=env, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "blocked: no writes here" in done.stderr and not (workspace / "c.txt").exists()
    (recording,) = (tmp_path / "data" / "sessions").glob("*.jsonl")
    return recording


@pytest.mark.property
def test_a_recordings_hooks_run_as_recorded_stand_ins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A command hook that blocked a write in the recorded session: explored runs ask for
    it where the session did and get its recorded answer back, at perturbed times, so the
    write stays blocked in every run; the output names the stand-in; a planted bug is
    still found; a kept run replays exactly."""
    import attrs

    from actors.frontends.explore import HookTwist, When
    from bus.messages import HooksFinished

    recording = _hooked_recording(tmp_path)
    assert replay_main([str(recording), "--check", "-o", "none"]) == 0  # the hooks' answers are played
    workspace = tmp_path / "ws"
    target = load_target(recording, workspace=workspace)
    assert [(h.event, h.target, h.names) for h in target.hooks] == [("BeforeTool", "write_file", ("no-writes",))]

    late = Perturbation(hooks=(HookTwist("BeforeTool", 1, ms=3000),))
    assert late.words() == ["the 1st BeforeTool hooks answer 3000 ms later"]
    kept = tmp_path / "late.jsonl"
    run = run_target(target, late, invariants=[("keep", lambda r: "keep it")], keep_recording=kept)
    assert run.violations == [], run.problems()
    messages = [e.message for e in run.run.envelopes]
    finished = [m for m in messages if type(m).__name__ == "HooksFinished"]
    assert [(m.output["decision"], m.ran) for m in finished] == [("deny", 1)]
    results = {m.call_id: m.result for m in messages if type(m).__name__ == "ToolFinished"}
    refused = [m for m in messages if type(m).__name__ == "ToolCallUpdated" and m.name == "write_file" and m.status == "error"]
    assert len(refused) == 1 and len(results) == 2  # only the reads ran
    answered_at = run.run.time_of(HooksFinished)
    assert answered_at is not None and answered_at >= 3.0  # the recorded answer came when the perturbation said
    assert replay_main([str(kept), "--check", "-o", "none"]) == 0

    # A cancel while the hook's answer is awaited cuts it short as the real runner does.
    cut = run_target(target, attrs.evolve(late, cancels=(When(at_ms=1000),)))
    assert cut.violations == [], cut.problems()
    finished = [m for m in (e.message for e in cut.run.envelopes) if isinstance(m, HooksFinished)]
    assert [(m.cancelled, m.failed) for m in finished] == [(True, ("no-writes",))]

    invariant = tmp_path / "blocked.py"
    invariant.write_text(BLOCKED)
    args = [str(recording), "--workspace", str(workspace), "--examples", "25", "--seed", "5"]
    status = main([*args, "--invariant", f"{invariant}:write_blocked", "-o", str(tmp_path / "f.jsonl")])
    said = capsys.readouterr().out
    assert status == 0, said
    assert "note: hooks BeforeTool no-writes: run as recorded stand-ins" in said

    # Without a recording there is nothing to stand in for the hooks: said so.
    fake = load_target(JOIN / "fake.responses", prompt="Join a.txt and b.txt into c.txt.", workspace=workspace)
    assert fake.hooks == () and any("hooks are configured: explored runs leave them out" in n for n in fake.notes)

    with planting("scheduler.completion_order"):
        found = explore(target, seed=0, out=tmp_path / "planted.jsonl")
    assert found.failure is not None, f"{found.examples} runs found nothing"
    assert 1 in {v.invariant for v in found.failure.violations}, found.failure.problems()
