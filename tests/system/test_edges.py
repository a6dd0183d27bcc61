"""The edges of a session under arbitrary input (issue 17: defects 7 and 8, and the
property tests of the edges): prompts, tool arguments and workspace contents made of
lone surrogates, NUL, huge integers, NaN, deep nesting, paths of a thousand
components, file names that are not UTF-8.

Whatever comes in, no session dies: every request gets exactly one terminal reply
(``StartTurn`` its ``TurnEnded``, ``ScheduleBatch`` its ``BatchSettled``, ``RunTool``
its ``ToolFinished``, checked by the explored-schedule suite's ``_replies``), the
session closes, and its recording holds exactly what was delivered.

Sessions here run every real built-in tool on real files, so they run on trio's real
clock (the tools' worker threads are invisible to an autojump clock), bounded by a
generous deadline against hangs. The model is scripted (``Backend``): it calls one
tool with the drawn arguments, then answers.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from actors.frontends import tool as _tool
from actors.gateway import BackendError, GatewayActor, http_error, parse_google_error
from actors.host import runtime
from actors.host.context import session_context
from actors.loops import parse_llm_answer
from actors.recording import load_recording
from actors.tools import ToolEnv, builtin_tools
from actors.turn import parse_classifier_choice
from actors.turn import parse_next_speaker_answer as parse_next_speaker
from bus import Bus, Envelope
from bus.json_values import well_formed
from bus.messages import (
    ApprovalAnswered,
    ApprovalRequested,
    BatchSettled,
    CloseSession,
    GenerateRequest,
    ScheduleBatch,
    SessionClosed,
    SubmitPrompt,
    ToolFinished,
    ToolResult,
    TurnEnded,
)
from tests.frontends.daemon._helpers import (
    client_of,
    events_until,
    running_daemon,
    text_response,
    write_responses,
)
from tests.system import _explore
from tests.tools._file_env import remove_tree

ROOT = Path(__file__).resolve().parents[2]
SID = _explore.SID
DEADLINE_S = 60.0
"""Real seconds after which a session is declared stuck (they take milliseconds)."""
TOOLS = {t.name: t for t in builtin_tools("gemini-2.5-pro")}


# -- the harness -----------------------------------------------------------------------------
def reply(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    """One streamed response of ``parts``, finished."""
    return [{"candidates": [{"content": {"role": "model", "parts": list(parts)}, "finishReason": "STOP"}]}]


DONE = reply({"text": "done"})


class Backend:
    """Plays streamed responses in order; a tool's own model request (``web_fetch``,
    ``google_web_search``) fails as an API error would."""

    def __init__(self, responses: Sequence[list[dict[str, Any]]]) -> None:
        self.responses = list(responses)

    async def generate(self, request: GenerateRequest, emit: Any) -> str:
        if request.method != "generateContentStream" or not self.responses:
            raise BackendError("no scripted response", status=400, http_status=400)
        for chunk in self.responses.pop(0):
            await emit(chunk)
        return request.model


async def _run(
    workspace: Path,
    recording: Path,
    prompt: str,
    responses: Sequence[list[dict[str, Any]]],
    tools: Mapping[str, Any],
    history: tuple[Any, ...],
) -> list[Envelope]:
    bus = Bus()
    cfg = _explore.session_config(workspace, recording, tools, True)
    cfg = attrs.evolve(cfg, history=history)
    delivered: list[Envelope] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(GatewayActor(bus, Backend(responses)).run)
        client = bus.connect(_explore.CLIENT)
        addrs = await nursery.start(runtime.supervise_session, bus, cfg)
        view = bus.subscribe(SID, "edges", policy="block", capacity=math.inf)
        await client.send(runtime.open_session_message(cfg), to=addrs.session)
        await client.send(
            SubmitPrompt(session_id=SID, prompt_id="p1", parts=({"text": prompt},), display_text=prompt),
            to=addrs.session,
        )
        with trio.fail_after(DEADLINE_S):
            async for env in view:
                delivered.append(env)
                match env.message:
                    case ApprovalRequested(correlation_id=correlation):
                        answer = ApprovalAnswered(
                            session_id=SID, correlation_id=correlation, outcome="proceed_once", answered_by=_explore.CLIENT
                        )
                        await client.send(answer, to=addrs.scheduler)
                    case TurnEnded():
                        await client.send(CloseSession(session_id=SID, reason="done"), to=addrs.session)
                    case SessionClosed():
                        break
        bus.unsubscribe(view)
        bus.disconnect("gateway")
    return delivered


def run_session(
    workspace: Path,
    prompt: str = "go",
    responses: Sequence[list[dict[str, Any]]] = (DONE,),
    *,
    tools: Mapping[str, Any] = TOOLS,
    history: tuple[Any, ...] = (),
) -> list[Envelope]:
    """One prompt in a fresh session over ``workspace``; fails the test with every
    broken invariant (a crash of any actor propagates out of ``trio.run``)."""
    recording = workspace.parent / f"{workspace.name}.jsonl"
    recording.unlink(missing_ok=True)
    delivered = trio.run(_run, workspace, recording, prompt, responses, tools, history)
    run = _explore.Run(session=_explore.Session(model=()), recording_path=recording)
    run.timeline = [(0.0, env) for env in delivered]
    run.recording = load_recording(recording)
    problems = [v.what for v in (*_explore._replies(run), *_explore._sequence(run))]
    assert not problems, problems
    assert isinstance(delivered[-1].message, SessionClosed)
    assert len([e for e in delivered if isinstance(e.message, TurnEnded)]) == 1
    return delivered


def of_type(delivered: Sequence[Envelope], cls: type) -> list[Any]:
    return [e.message for e in delivered if isinstance(e.message, cls)]


def results_by_tool(delivered: Sequence[Envelope]) -> dict[str, ToolResult]:
    names = {c.call_id: c.name for batch in of_type(delivered, ScheduleBatch) for c in batch.calls}
    return {names[m.call_id]: m.result for m in of_type(delivered, ToolFinished)}


def call(name: str, args: Any) -> list[dict[str, Any]]:
    return reply({"functionCall": {"id": "c1", "name": name, "args": args}})


def fresh_workspace(tmp_path: Path) -> Path:
    """A new workspace (hypothesis runs every example in the same ``tmp_path``)."""
    ws = Path(tempfile.mkdtemp(dir=tmp_path, prefix="ws"))
    (ws / "notes.txt").write_text("remember the milk\n")
    return ws


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return fresh_workspace(tmp_path)


# -- what arbitrary input is made of ---------------------------------------------------------
any_text = st.text(
    st.characters(exclude_categories=())
    | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
    | st.characters(max_codepoint=0x1F),
    max_size=40,
)
"""Any code points, lone surrogates, NUL and other controls often."""
ODD_TEXTS = (
    "\ud800",
    "x\udcffy",
    "\udce2\udc82",
    "a\0b",
    "",
    " ",
    "a/" * 1000 + "x",
    "/" + "d/" * 3000,
    "../outside/x",
    "/etc/passwd",
    "{../x,y}/*",
    "**/../../*",
    "%ZZ%",
    "file:///etc/hosts",
    "@",
    "\n\r\t",
    "(" * 500,
    "[" * 300 + "a",
    "x" * 5000,
)


class Huge(int):
    """An integer of thousands of digits, shown short (Python cannot print it)."""

    def __repr__(self) -> str:
        return f"<int of {self.bit_length()} bits>"


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


odd_values = st.one_of(
    any_text,
    st.sampled_from(ODD_TEXTS),
    st.integers(),
    st.sampled_from([-(10**400), 2**63, 1e308, -0.0]),
    st.booleans(),
    st.none(),
    st.sampled_from([10, 127]).map(nested),
)
unencodable = st.sampled_from([Huge(10**5000), float("nan"), float("inf")]) | st.sampled_from([129, 1000]).map(nested)
"""What no message can carry: the model's response that holds it fails."""
json_values = st.recursive(
    odd_values,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(any_text, children, max_size=3),
    max_leaves=6,
)


odd_strings = any_text | st.sampled_from(ODD_TEXTS)


def typed_value(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Values of the parameter's own type, odd in content (most calls pass the schema
    check and reach the tool), or anything at all."""
    kind = schema.get("type")
    own: st.SearchStrategy[Any]
    if kind == "string":
        own = odd_strings
    elif kind in ("integer", "number"):
        own = st.integers() | st.sampled_from([0, -1, 2**31, 2**63, Huge(10**5000)])
    elif kind == "boolean":
        own = st.booleans()
    elif kind == "array":
        own = st.lists(typed_value(schema.get("items") or {}), max_size=3)
    elif kind == "object":
        own = st.fixed_dictionaries({}, optional={k: typed_value(v) for k, v in (schema.get("properties") or {}).items()})
    else:
        own = json_values
    return st.one_of(own, own, own, json_values)


def tool_args(name: str) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments for ``name``: its own parameters (required ones mostly present) and
    stray keys, odd values. A shell command is only ever a ``printf`` of the drawn text
    (quoted), never the text."""
    schema = TOOLS[name].declaration("gemini-2.5-pro")["parametersJsonSchema"]
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())

    def value(key: str) -> st.SearchStrategy[Any]:
        if key == "delay_ms":  # a wait the call was asked for is no hang: keep it short
            return st.integers(-1000, 20) | odd_strings | st.booleans() | st.none()
        return typed_value(properties[key])

    args = st.fixed_dictionaries(
        {k: value(k) for k in properties if k in required},
        optional={k: value(k) for k in properties if k not in required},
    )
    args = st.builds(lambda a, stray: {**stray, **a}, args, st.dictionaries(any_text, json_values, max_size=1))
    if name == "run_shell_command":
        args = st.builds(
            lambda rest, text: {**rest, "command": f"printf %s {shlex.quote(text)}"}
            if isinstance(text, str)
            else {**rest, "command": text},
            args,
            st.one_of(odd_strings, odd_strings, odd_strings, json_values),
        )
    if name == "web_fetch":
        # No URL reaches the network: every "://" is broken.
        args = args.map(lambda a: json.loads(json.dumps(a).replace("://", ":/")) if _json_safe(a) else a)
    # One call in ten also carries a value no message can carry.
    poisoned = st.builds(
        lambda a, key, value: {**a, key: value},
        args,
        st.sampled_from(sorted(properties) or ["x"]),
        unencodable,
    )
    return st.integers(0, 9).flatmap(lambda n: poisoned if n == 0 else args)


def _json_safe(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (ValueError, RecursionError):
        return False
    return True


EDGE_SETTINGS = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
"""The profile's example count (ci: 60; each example is one real session, ~50 ms)."""


# -- prompts ---------------------------------------------------------------------------------
@EDGE_SETTINGS
@given(prompt=any_text | st.sampled_from(ODD_TEXTS))
def test_any_prompt_gets_its_turn_and_reaches_the_model_well_formed(tmp_path: Path, prompt: str) -> None:
    """A lone surrogate in a prompt killed the session silently (no TurnEnded): the
    recorder could not encode it. A prompt's text is made well-formed where it enters
    the message (U+FFFD for a lone surrogate) and the turn runs."""
    ws = fresh_workspace(tmp_path)
    delivered = run_session(ws, prompt)
    [ended] = of_type(delivered, TurnEnded)
    assert ended.stop_reason == "end_turn"
    [request] = of_type(delivered, GenerateRequest)
    assert request.contents[-1]["parts"][-1] == {"text": well_formed(prompt)}
    [submitted] = of_type(delivered, SubmitPrompt)
    assert submitted.display_text == well_formed(prompt)


# -- tool arguments --------------------------------------------------------------------------
@EDGE_SETTINGS
@given(data=st.data(), name=st.sampled_from(sorted(TOOLS)))
def test_any_arguments_to_any_tool_get_exactly_one_result(tmp_path: Path, data: st.DataObject, name: str) -> None:
    """Every registered tool, called by the model with arbitrary arguments, answers
    its call once; arguments no message can carry (NaN, nesting deeper than the
    bus allows, integers JSON cannot write) fail the model's response instead."""
    ws = fresh_workspace(tmp_path)
    args = data.draw(tool_args(name), label="args")
    try:
        delivered = run_session(ws, responses=(call(name, args), DONE))
    finally:
        remove_tree(ws)
    finished = of_type(delivered, ToolFinished)
    assert len(finished) <= 1
    for done in finished:
        assert done.result.error_type != "unhandled_exception", done.result.error_message
    [settled] = of_type(delivered, BatchSettled) or [None]
    event(f"{name}: " + ("no call (the response was refused)" if settled is None else str(settled.calls[0].error_type or "ran")))


def test_a_path_of_a_thousand_components_is_a_tool_error_not_a_dead_session(workspace: Path) -> None:
    """Defect 8: ``realpath`` recursed once per component; the RecursionError killed
    the scheduler, so the call got no result and the session died."""
    deep = "a/" * 1000 + "x"
    delivered = run_session(workspace, responses=(call("read_file", {"file_path": deep}), DONE))
    [done] = of_type(delivered, ToolFinished)
    assert done.result.error_type == "file_not_found"
    assert done.result.error_message == f"File not found: {workspace / deep}"
    # As Node's recursive mkdir, write_file makes the thousand directories
    # (os.makedirs recursed once per directory: RecursionError).
    try:
        delivered = run_session(workspace, responses=(call("write_file", {"file_path": deep, "content": "x"}), DONE))
        [done] = of_type(delivered, ToolFinished)
        assert done.result.error_type is None, done.result.error_message
        with open(os.path.join(os.fsencode(workspace), os.fsencode(deep))) as written:
            assert written.read() == "x"
    finally:
        remove_tree(workspace)


class ThrowingTool:
    """A tool with a bug: its checks or its execution raise."""

    display_name = "Throwing"
    kind = "read"

    def __init__(self, name: str, where: str) -> None:
        self.name = name
        self.where = where

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": self.name, "description": "throws", "parametersJsonSchema": {"type": "object"}}

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        if self.where == "validate":
            raise RecursionError("maximum recursion depth exceeded")
        return None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        return self.name

    async def execute(self, args: Mapping[str, Any], env: ToolEnv, output: Any = None) -> Any:
        if self.where == "execute":
            raise KeyError("no such thing")
        return "not a ToolResult"


def test_a_tool_that_throws_fails_its_call_and_the_session_goes_on(workspace: Path) -> None:
    """A tool's bug is that call's error (Gemini CLI: ``invalid_tool_params`` when its
    checks throw, ``unhandled_exception`` when its execution does), never the
    scheduler's or the executor's end."""
    tools = {name: ThrowingTool(name, name) for name in ("validate", "execute", "returns")}
    responses = (
        reply(*({"functionCall": {"id": name, "name": name, "args": {}}} for name in tools)),
        DONE,
    )
    delivered = run_session(workspace, responses=responses, tools=tools)
    results = results_by_tool(delivered)
    assert set(results) == {"execute", "returns"}  # the failed check never ran
    assert (results["execute"].error_type, results["execute"].error_message) == (
        "unhandled_exception",
        "KeyError: 'no such thing'",
    )
    assert results["returns"].error_type == "unhandled_exception"
    [settled] = of_type(delivered, BatchSettled)
    by_name = {c.name: c for c in settled.calls}
    assert (by_name["validate"].error_type, by_name["validate"].error_message) == (
        "invalid_tool_params",
        "maximum recursion depth exceeded",
    )


# -- workspace contents ----------------------------------------------------------------------
name_bytes = st.binary(min_size=1, max_size=40).filter(lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b".."))


@EDGE_SETTINGS
@given(
    files=st.dictionaries(name_bytes, st.binary(max_size=200), min_size=1, max_size=5),
    dirs=st.lists(name_bytes, max_size=2),
)
def test_odd_file_names_and_bytes_are_listed_searched_and_read(
    tmp_path: Path, files: dict[bytes, bytes], dirs: list[bytes]
) -> None:
    """A file whose name is not UTF-8 made the environment context unencodable: no
    session could start in that workspace. Names are shown as Node shows them (U+FFFD
    for bytes that are not UTF-8), in the context and in every tool's listing, and the
    tools work on such files."""
    ws = fresh_workspace(tmp_path)
    (ws / "notes.txt").unlink()
    root = os.fsencode(ws)
    for d in dirs:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    written = []
    for name, content in files.items():
        parent = os.path.join(root, dirs[0]) if dirs and len(written) % 2 else root
        path = os.path.join(parent, name)
        if os.path.isdir(path):  # a directory of that name: the file goes inside it
            path = os.path.join(path, name)
        with open(path, "wb") as handle:
            handle.write(content)
        written.append(path)
    context = session_context(ws, tmp_path / "temp")
    history = ({"role": "user", "parts": [{"text": context}]},)
    calls = [
        ("list_directory", {"dir_path": "."}),
        ("glob", {"pattern": "**/*"}),
        ("grep_search", {"pattern": "."}),
        ("read_file", {"file_path": os.fsdecode(written[0][len(root) + 1 :])}),
    ]
    responses = (
        reply(*({"functionCall": {"id": n, "name": n, "args": a}} for n, a in calls)),
        DONE,
    )
    delivered = run_session(ws, responses=responses, history=history)
    [request, _] = of_type(delivered, GenerateRequest)
    shown = request.contents[0]["parts"][0]["text"]
    results = results_by_tool(delivered)
    for path in written:
        node_name = os.path.basename(path).decode("utf-8", "replace")
        assert node_name in shown
        if "%" not in node_name:  # Gemini's glob URI-decodes real paths: `a%20b` is dropped (kept quirk)
            assert node_name in results["glob"].llm_content
    for name in ("list_directory", "glob", "grep_search"):
        result: ToolResult = results[name]
        assert result.error_type is None, (name, result.error_message)


def test_headless_runs_in_a_workspace_with_a_file_name_that_is_not_utf8(workspace: Path) -> None:
    """Defect 7 as a user met it: ``agentbus -p`` in such a workspace printed a
    traceback. Also a prompt argument with bytes that are not UTF-8."""
    write_named(workspace, b"bad\xffname.txt", b"\xfe\xff")
    home = workspace.parent / "home"
    home.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "actors.frontends", "-p", b"hi \xff", "-m", "gemini-2.5-flash", "--fake-responses", str(ROOT / "scenarios" / "bench" / "hi.responses")],
        cwd=workspace,
        env={
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "GEMINI_CLI_HOME": str(home),
            "AGENTBUS_DATA_DIR": str(home / "data"),
            "GEMINI_API_KEY": "fake",
            "PYTHONPATH": str(ROOT),
        },
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert b"Traceback" not in proc.stderr
    [recording] = (home / "data" / "sessions").glob("*.jsonl")
    requests = [e.message for e in load_recording(recording).envelopes if isinstance(e.message, GenerateRequest)]
    parts = requests[0].contents[-1]["parts"]
    assert "bad\ufffdname.txt" in parts[0]["text"]
    assert parts[-1] == {"text": "hi \ufffd"}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ('{"file_path": ' + "[" * 100_000 + "]" * 100_000 + "}", "JSON nested deeper than 128 levels"),
        ('{"file_path": ' + "[" * 300 + "]" * 300 + "}", "JSON nested deeper than 128 levels"),
        ('{"file_path": 1' + "0" * 5000 + "}", "an integer of more than 4300 digits"),
        ('{"file_path": NaN}', "nan is not a JSON number"),
    ],
    ids=["deeper than the parser", "deeper than a message", "huge integer", "NaN"],
)
def test_agentbus_tool_refuses_arguments_no_message_can_carry_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: str, needle: str
) -> None:
    """``agentbus tool`` printed a traceback (RecursionError, ValueError) or let NaN
    into a message the recorder could not write; now bad input: exit 42, one line."""
    monkeypatch.chdir(fresh_workspace(tmp_path))
    for var in ("HOME", "GEMINI_CLI_HOME"):
        monkeypatch.setenv(var, str(tmp_path))
    monkeypatch.setenv("AGENTBUS_DATA_DIR", str(tmp_path / "data"))
    assert _tool.main(["read_file", "--args", args]) == 42
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("agentbus tool: --args cannot be used: ")
    assert needle in err and err.count("\n") == 1
    assert not (tmp_path / "data").exists()  # no session was started


def test_agentbus_tool_makes_surrogates_in_arguments_well_formed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = fresh_workspace(tmp_path)
    monkeypatch.chdir(ws)
    for var in ("HOME", "GEMINI_CLI_HOME"):
        monkeypatch.setenv(var, str(tmp_path))
    monkeypatch.setenv("AGENTBUS_DATA_DIR", str(tmp_path / "data"))
    assert _tool.main(["write_file", "--args", '{"file_path": "a\\ud800.txt", "content": "x\\udcff"}', "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["args"] == {"file_path": "a\ufffd.txt", "content": "x\ufffd"}
    assert (ws / "a\ufffd.txt").read_text() == "x\ufffd"


def write_named(directory: Path, name: bytes, content: bytes) -> None:
    """A file whose name is bytes (not necessarily UTF-8)."""
    with open(os.path.join(os.fsencode(directory), name), "wb") as handle:
        handle.write(content)


async def test_a_daemon_session_in_a_workspace_with_a_non_utf8_file_name(home: Path) -> None:
    """Defects 7 and 8 in the daemon: ``CreateSession`` failed in such a workspace (its
    environment context could not be recorded), and a path of a thousand components
    killed the session with no ``ToolCallResult``."""
    ws = home / "ws"
    write_named(ws, b"bad\xffname.txt", b"\xff\xfe")
    fake = write_responses(home / "ok.responses", text_response("ok"))
    with trio.fail_after(30):
        async with running_daemon(home), client_of(home) as client:
            ready = await client.create_session(str(ws), fake_responses=str(fake), model="gemini-2.5-flash")
            await client.subscribe(ready.session_id, from_seq=1)
            deep = await client.call_tool(ready.session_id, "read_file", {"file_path": "a/" * 1000 + "x"})
            assert deep.call.error_type == "file_not_found"
            listed = await client.call_tool(ready.session_id, "list_directory", {"dir_path": "."})
            assert "bad\ufffdname.txt" in json.dumps(listed.call.response_parts, ensure_ascii=False)
            await client.prompt(ready.session_id, "go")
            events = await events_until(client)
            assert events[-1].message.stop_reason == "end_turn"
    recorded = load_recording(home / "data" / "sessions" / f"{ready.session_id}.jsonl").envelopes
    [request] = [e.message for e in recorded if isinstance(e.message, GenerateRequest)]
    assert "bad\ufffdname.txt" in request.contents[0]["parts"][0]["text"]


@pytest.mark.parametrize(
    "parse",
    [parse_llm_answer, parse_next_speaker, parse_classifier_choice],
    ids=["loop check", "next speaker", "model router"],
)
@pytest.mark.parametrize("text", ["[" * 100_000, "{" + '"a":[' * 50_000, "```json\n" + "[" * 100_000 + "\n```"])
def test_a_model_answer_nested_past_the_parser_is_no_answer(parse: Any, text: str) -> None:
    """The utility checks parse the model's text as JSON; nesting deeper than Python's
    parser goes raised RecursionError in the loop detector's or the turn's actor."""
    assert parse(text) is None


def test_an_http_error_body_nested_past_the_parser_is_kept_as_text() -> None:
    """An error response's JSON body nested deeper than Python's parser raised
    RecursionError while the gateway classified the error."""
    deep = "[" * 100_000
    error = http_error(500, deep, content_type="application/json")
    assert error.http_status == 500 and deep[:20] in error.message
    assert parse_google_error(deep) is None
