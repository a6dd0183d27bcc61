"""Clients nobody here wrote drive ``agentbus acp`` through the ACP kit's cases.

The official Python SDK client (the kit's ``acp_probe.py`` through ``run_agent.sh``)
runs all 15 cases, acpx (TypeScript SDK, ``run_acpx.sh``) the 7 it can express. Each
transcript is compared with Gemini CLI's golden one the way ``compare.py --payload``
does (its own ``phases``): the golden phases, with exactly the deliberate differences
of ``docs/differences.md`` applied, must equal ours. The differences are written here
as edits of the golden transcript, one function each, named as in the docs.
"""

from __future__ import annotations

import concurrent.futures
import copy
import importlib
import importlib.metadata
import itertools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SHARED

KIT = SHARED / "tools" / "acp"
MODEL = "gemini-2.5-flash"
AGENT = [sys.executable, "-m", "actors.frontends", "acp", "-m", MODEL, "--fake-responses", "{SCENARIO}"]
CASES = (
    "text read_file parallel write_file_nofs write_file_fs_empty write_file_fs_error permission_reject "
    "cancel_permission cancel_running cancel_time_yolo cancel_after_first_update shell_yolo_flag "
    "thought_multiturn method_probe load_session"
).split()
ACPX_CASES = "text read_file parallel write_file_nofs write_file_fs_error permission_reject shell_yolo_flag".split()

Phases = dict[str, list[Any]]


def _kit_or_skip() -> Any:
    if not (KIT / "run_agent.sh").is_file():
        pytest.skip(f"the ACP kit is not at {KIT}")
    pytest.importorskip("acp", reason="the ACP Python SDK is missing: pip install -e '.[test]'")
    if shutil.which("bash") is None:
        pytest.skip("the kit's scripts need bash")
    sys.path.insert(0, str(KIT))
    try:
        return importlib.import_module("compare")
    finally:
        sys.path.remove(str(KIT))


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("AGENTBUS_DATA_DIR", "XDG_DATA_HOME", "GEMINI_CLI_HOME", "GEMINI_MODEL")
    }
    # Recordings go under each run's fresh HOME (shared by load_session and its prerequisite).
    env.update(ACP_PYTHON=sys.executable, ACP_PREREQ_WAIT="0", **extra)
    return env


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def probe_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    _kit_or_skip()
    out = tmp_path_factory.mktemp("acp-probe")

    def run(case: str) -> tuple[str, Path]:
        path = out / f"{case}.jsonl"
        done = _run([str(KIT / "run_agent.sh"), "--out", str(path), case, "--", *AGENT], _env(), out)
        assert path.is_file(), f"{case}: no transcript\n{done.stderr}"
        return case, path

    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        return dict(pool.map(run, CASES))


def _acpx() -> Path | None:
    explicit = os.environ.get("ACPX_BIN")
    if explicit:
        return Path(explicit)
    prefix = Path(os.environ.get("ACP_NPM_PREFIX", ".npm-acp")) / "acpx" / "node_modules" / ".bin" / "acpx"
    if prefix.is_file():
        return prefix.resolve()
    found = shutil.which("acpx")
    return Path(found) if found else None


@pytest.fixture(scope="module")
def acpx_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    _kit_or_skip()
    acpx = _acpx()
    if acpx is None or not acpx.is_file():
        if os.environ.get("AGENTBUS_REQUIRE_ACPX"):
            pytest.fail("AGENTBUS_REQUIRE_ACPX is set (.ci/run installed acpx) but acpx is not found")
        pytest.skip("acpx is not installed (kit: setup.sh --acpx; then set ACPX_BIN)")
    out = tmp_path_factory.mktemp("acpx")

    def run(case: str) -> tuple[str, Path]:
        path = out / f"{case}.acpx.ndjson"
        _run([str(KIT / "run_acpx.sh"), "--out", str(path), case, "--", *AGENT], _env(ACPX_BIN=str(acpx)), out)
        assert path.is_file() and path.stat().st_size, f"{case}: acpx wrote nothing"
        return case, path

    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        return dict(pool.map(run, ACPX_CASES))


def phases_of(compare: Any, path: Path) -> Phases:
    got = compare.phases(compare.acpnorm.load(str(path)), payload=True, response=False, ignore=set())
    return {name: info_and_usage(phase["items"]) for name, phase in got.items()}


def info_and_usage(items: list[Any]) -> list[Any]:
    """U: ``session_info_update`` (the title: the first prompt) and ``usage_update``
    (the context used, of the model's window), which Gemini CLI never sends: checked for
    their shape here, then left out of the comparison (their numbers are the fake
    model's; both come at the end of a turn, before its answer)."""
    kept = []
    for item in items:
        if _is_update(item, "session_info_update"):
            assert set(item) == {"sessionUpdate", "title"} and item["title"], item
        elif _is_update(item, "usage_update"):
            assert set(item) == {"sessionUpdate", "used", "size"} and item["used"] > 0, item
            assert item["size"] == 1_048_576, item
        else:
            kept.append(item)
    return kept


# -- the deliberate differences (docs/differences.md, "ACP") -------------------------------
def _is_update(item: Any, kind: str) -> bool:
    return isinstance(item, dict) and item.get("sessionUpdate") == kind


def _is_request(item: Any, method: str) -> bool:
    return isinstance(item, dict) and item.get("request") == method


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "content", "content": {"type": "text", "text": text}}]


# What A1 and A2 of docs/differences.md say agentbus sends, written out here rather than
# taken from the implementation: `about`, `help`, and the user's own calls with an input
# hint; the version is the installed package's.
USER_CALL_HINT = {"hint": 'NAME {"arg": "value"}'}
EXPECTED_COMMANDS = [
    {"name": "about", "description": "Show version and environment info"},
    {"name": "help", "description": "Show available commands"},
    {"name": "tool", "description": "Run a tool yourself (the model does not see the result)", "input": USER_CALL_HINT},
    {"name": "tool!", "description": "Run a tool yourself and add its result to the conversation", "input": USER_CALL_HINT},
    {"name": "shell", "description": "Run a shell command yourself (the model does not see its output)", "input": {"hint": "COMMAND"}},
    {"name": "shell!", "description": "Run a shell command yourself and add its output to the conversation", "input": {"hint": "COMMAND"}},
]


def commands(p: Phases) -> list[Phases]:
    """A1: ``available_commands_update`` lists the commands agentbus has."""
    p["setup"] = [
        {"sessionUpdate": "available_commands_update", "availableCommands": EXPECTED_COMMANDS}
        if _is_update(i, "available_commands_update")
        else i
        for i in p["setup"]
    ]
    return [p]


def about(p: Phases) -> list[Phases]:
    """A2: ``/about`` describes agentbus."""
    text = (
        f"agentbus Info:\n- Version: {importlib.metadata.version('agentbus')}\n- OS: {sys.platform}\n- Model: {MODEL}\n"
        "- Mode: default\n- Workspace: $CWD"
    )
    for items in p.values():
        for i, item in enumerate(items):
            if _is_update(item, "agent_message_chunk") and item["content"]["text"].startswith("Gemini CLI Info:"):
                items[i] = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    return [p]


def mode_update(p: Phases) -> list[Phases]:
    """D1: ``session/set_mode`` is reported by ``current_mode_update``, not a text chunk,
    and by ``config_option_update`` (the session's mode and model, as ``session/new``'s
    ``configOptions`` gave them, with the new mode)."""
    out: list[Any] = []
    for item in p["setup"]:
        if _is_update(item, "agent_message_chunk") and item["content"]["text"].startswith("[MODE_UPDATE]"):
            mode = item["content"]["text"].split()[-1]
            out.append({"sessionUpdate": "current_mode_update", "currentModeId": mode})
            out.append({"sessionUpdate": "config_option_update", "configOptions": _config_options(mode)})
        else:
            out.append(item)
    p["setup"] = out
    return [p]


MODES = [
    ("default", "Default", "Prompts for approval"),
    ("autoEdit", "Auto Edit", "Auto-approves edit tools"),
    ("yolo", "YOLO", "Auto-approves all tools"),
    ("plan", "Plan", "Read-only mode"),
]
MODELS = ["gemini-3.1-pro-preview", "gemini-3-flash-preview", "gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite"]


def _config_options(mode: str) -> list[dict[str, Any]]:
    """The config options of docs/differences.md (A4), written out: mode, then model."""
    auto = "Let agentbus choose per prompt: gemini-3.1-pro-preview, gemini-3-flash-preview"
    return [
        {
            "id": "mode", "name": "Mode", "description": "How tool calls are approved", "category": "mode",
            "type": "select", "currentValue": mode,
            "options": [{"value": v, "name": n, "description": d} for v, n, d in MODES],
        },
        {
            "id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": MODEL,
            "options": [{"value": "auto", "name": "Auto", "description": auto}, *({"value": m, "name": m} for m in MODELS)],
        },
    ]  # fmt: skip


def _announce(p: Phases, after: Callable[[dict[str, Any]], list[Any]]) -> list[Phases]:
    for name, items in p.items():
        out: list[Any] = []
        for item in items:
            if _is_request(item, "session/request_permission"):
                call = item["params"]["toolCall"]
                out += [{"sessionUpdate": "tool_call", **call}, item, *after(call)]
            else:
                out.append(item)
        p[name] = out
    return [p]


def announce_approved(p: Phases) -> list[Phases]:
    """D2: a permission-gated call gets its ``tool_call`` (pending) before
    ``session/request_permission``, and ``in_progress`` when it starts."""
    return _announce(p, lambda call: [{"sessionUpdate": "tool_call_update", "toolCallId": call["toolCallId"], "status": "in_progress"}])


def _failed(call: dict[str, Any], text: str) -> dict[str, Any]:
    return {**call, "sessionUpdate": "tool_call_update", "status": "failed", "content": _text(text)}


def announce_rejected(p: Phases) -> list[Phases]:
    """D2 + D3: announced, then rejected: it ends ``failed``."""
    return _announce(p, lambda call: [_failed(call, "User denied execution.")])


def announce_cancelled(p: Phases) -> list[Phases]:
    """D2 + D3: announced, then the turn is cancelled while it waits: it ends ``failed``."""
    return _announce(p, lambda call: [_failed(call, "Operation cancelled")])


def cancelled_fails(p: Phases) -> list[Phases]:
    """D4: a cancelled shell command ends ``failed`` (same text), not ``completed``."""
    for items in p.values():
        for i, item in enumerate(items):
            if _is_update(item, "tool_call_update") and item.get("content") == _text("Command cancelled by user."):
                items[i] = {**item, "status": "failed"}
    return [p]


def unstarted_calls_vanish(p: Phases) -> list[Phases]:
    """D5: no tool starts after a cancel, and a running one is stopped. Where the cancel
    lands is a race with the client: the call had not started (no ``tool_call`` at
    all), it was running (it ends ``failed``), or it had already finished (as in
    Gemini's run)."""
    never, stopped = copy.deepcopy(p), copy.deepcopy(p)
    for name in p:
        if name == "setup":
            continue
        never[name] = [i for i in p[name] if not (isinstance(i, dict) and "toolCallId" in i)]
        stopped[name] = [
            {**i, "status": "failed", "content": _text("User cancelled tool execution.")}
            if _is_update(i, "tool_call_update") and i.get("status") == "completed"
            else i
            for i in p[name]
        ]
    return [p, never, stopped]


def parallel(p: Phases) -> list[Phases]:
    """P: the calls of one response run in parallel: every ``tool_call`` comes before the
    first completion; completions arrive in either order."""
    items = p["1"]
    n = next(i for i, item in enumerate(items) if not (isinstance(item, dict) and "toolCallId" in item))
    calls = [i for i in items[:n] if _is_update(i, "tool_call")]
    done = [i for i in items[:n] if _is_update(i, "tool_call_update")]
    return [{**p, "1": [*calls, *order, *items[n:]]} for order in itertools.permutations(done)]


def replay_from_recording(p: Phases) -> list[Phases]:
    """L: ``session/load`` replays the recording as the client saw it live: no session
    context or ``[Function Response: …]`` user chunks; a call as its live ``tool_call``
    (title, locations) with its final status."""
    live = {"title": "hello.py", "locations": [{"path": "$CWD/hello.py"}]}
    out = []
    for item in p["setup"]:
        if _is_update(item, "user_message_chunk") and item["content"]["text"].startswith(
            ("<session_context>", "[Function Response:")
        ):
            continue
        out.append({**item, **live} if _is_update(item, "tool_call") else item)
    p["setup"] = out
    return [p]


DIFFERENCES: dict[str, tuple[Callable[[Phases], list[Phases]], ...]] = {
    "text": (commands,),
    "read_file": (commands,),
    "parallel": (commands, parallel),
    "write_file_nofs": (commands, announce_approved),
    "write_file_fs_empty": (commands, announce_approved),
    "write_file_fs_error": (commands, announce_approved),  # + D7: the golden of fs_empty
    "permission_reject": (commands, announce_rejected),
    "cancel_permission": (commands, announce_cancelled),
    "cancel_running": (commands, announce_approved, cancelled_fails),
    "cancel_time_yolo": (commands, mode_update, cancelled_fails),
    "cancel_after_first_update": (commands, unstarted_calls_vanish),
    "shell_yolo_flag": (commands,),
    "thought_multiturn": (commands, about),
    "method_probe": (commands,),
    "load_session": (commands, replay_from_recording),
}
BASE = {"write_file_fs_error": "write_file_fs_empty"}
"""D7: with a client's -32002 for the missing file, write_file_fs_error behaves exactly
like write_file_fs_empty (the file is new; the write goes through the client)."""


def expected(compare: Any, case: str) -> list[Phases]:
    alternatives = [phases_of(compare, KIT / "golden" / f"{BASE.get(case, case)}.jsonl")]
    for difference in DIFFERENCES[case]:
        alternatives = [alt for p in alternatives for alt in difference(copy.deepcopy(p))]
    return alternatives


def assert_only_listed_differences(compare: Any, case: str, ours: Path) -> None:
    got = phases_of(compare, ours)
    options = expected(compare, case)
    if got in options:
        return
    want = options[0]
    lines = [f"{case}: differences beyond the listed ones ({[d.__name__ for d in DIFFERENCES[case]]})"]
    for name in sorted(set(want) | set(got)):
        if want.get(name) != got.get(name):
            lines.append(f"-- {name}: expected")
            lines += [f"   {json.dumps(i, sort_keys=True)[:300]}" for i in want.get(name, [])]
            lines.append(f"-- {name}: got")
            lines += [f"   {json.dumps(i, sort_keys=True)[:300]}" for i in got.get(name, [])]
    raise AssertionError("\n".join(lines))


@pytest.mark.parametrize("case", CASES)
def test_sdk_client_sees_only_the_listed_differences(case: str, probe_runs: dict[str, Path]) -> None:
    compare = _kit_or_skip()
    assert_only_listed_differences(compare, case, probe_runs[case])
    rows = [json.loads(line) for line in probe_runs[case].read_text().splitlines() if line.strip()]
    summary = next(r for r in rows if r.get("type") == "summary")
    assert summary["schema_errors"] == 0
    assert summary["agent_returncode"] == 0


@pytest.mark.parametrize("case", ACPX_CASES)
def test_acpx_sees_only_the_listed_differences(case: str, acpx_runs: dict[str, Path]) -> None:
    assert_only_listed_differences(_kit_or_skip(), case, acpx_runs[case])


def test_initialize_alone_is_answered(tmp_path: Path) -> None:
    """``initialize`` alone gets its answer (how fast is ``make bench``'s row)."""
    request = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
    with subprocess.Popen(
        [sys.executable, "-m", "actors.frontends", "acp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(request.encode() + b"\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        proc.stdin.close()
        assert proc.wait(timeout=20) == 0
    assert answer["id"] == 0 and answer["result"]["protocolVersion"] == 1


# -- the shell in the client's terminal (T: not in Gemini CLI, which never uses terminal/*)
def in_terminal(p: Phases) -> list[Phases]:
    """T: with ``clientCapabilities.terminal`` the shell's command runs in the client's
    terminal: ``terminal/create`` (``bash -c`` the command, in the cwd), the terminal
    shown in the call, ``wait_for_exit``, ``release``; the call's content keeps the
    terminal when it completes. (``terminal/output`` polls are timing: left out.)"""
    out: list[Any] = []
    for item in p["1"]:
        if _is_update(item, "tool_call") and item.get("kind") == "execute":
            command = item["title"]
            ids = {"terminalId": "term1"}
            out += [
                item,
                {
                    "request": "terminal/create",
                    "params": {
                        "args": ["-c", f"shopt -u promptvars nullglob extglob nocaseglob dotglob; {command}"],
                        "command": "bash",
                        "cwd": "$CWD",
                        "env": "<env>",
                        "outputByteLimit": 16 * 1024 * 1024,
                    },
                },
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": item["toolCallId"],
                    "content": [{"type": "terminal", "terminalId": "term1"}, *item["content"]],
                },
                {"request": "terminal/wait_for_exit", "params": ids},
                {"request": "terminal/release", "params": ids},
            ]
        elif _is_update(item, "tool_call_update") and item.get("kind") == "execute":
            out.append({**item, "content": [{"type": "terminal", "terminalId": "term1"}]})
        else:
            out.append(item)
    p["1"] = out
    return [p]


def _terminal_phases(compare: Any, path: Path) -> Phases:
    got = phases_of(compare, path)
    items = []
    for item in got["1"]:
        if _is_request(item, "terminal/output"):
            continue
        if _is_request(item, "terminal/create"):
            params = dict(item["params"])
            names = {v["name"] for v in params["env"]}
            assert {"GEMINI_CLI", "PAGER", "GIT_PAGER"} <= names, params["env"]
            params["env"] = "<env>"
            params["command"] = Path(params["command"]).name
            item = {**item, "params": params}
        items.append(item)
    got["1"] = items
    return got


def test_sdk_client_runs_the_shell_in_its_terminal(tmp_path: Path) -> None:
    compare = _kit_or_skip()
    path = tmp_path / "shell_terminal.jsonl"
    _run([str(KIT / "run_agent.sh"), "--out", str(path), "shell_yolo_flag", "--terminal", "--", *AGENT], _env(), tmp_path)
    golden = phases_of(compare, KIT / "golden" / "shell_yolo_flag.jsonl")
    (want,) = in_terminal(commands(golden)[0])
    assert _terminal_phases(compare, path) == want


def test_acpx_runs_the_shell_in_its_terminal(tmp_path: Path) -> None:
    compare = _kit_or_skip()
    acpx = _acpx()
    if acpx is None or not acpx.is_file():
        if os.environ.get("AGENTBUS_REQUIRE_ACPX"):
            pytest.fail("AGENTBUS_REQUIRE_ACPX is set (.ci/run installed acpx) but acpx is not found")
        pytest.skip("acpx is not installed (kit: setup.sh --acpx; then set ACPX_BIN)")
    path = tmp_path / "shell_terminal.acpx.ndjson"
    cmd = [str(KIT / "run_acpx.sh"), "--terminal", "--out", str(path), "shell_yolo_flag", "--", *AGENT]
    _run(cmd, _env(ACPX_BIN=str(acpx)), tmp_path)
    golden = phases_of(compare, KIT / "golden" / "shell_yolo_flag.jsonl")
    (want,) = in_terminal(commands(golden)[0])
    assert _terminal_phases(compare, path) == want
