"""``SessionView`` as a pure state machine: bus messages in, ACP effects out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.frontends.acp._present import Presenter
from actors.frontends.acp._view import (
    AskPermission,
    NeedOriginal,
    PromptDone,
    SessionView,
    TurnBegan,
    Update,
    collapse_replay,
    stop_reason,
)
from actors.tools import ToolEnv, builtin_tools
from bus.messages import (
    ApprovalRequested,
    GenerateRequest,
    ModelChunk,
    ModelFinished,
    SessionConfigured,
    SessionOpened,
    SubmitPrompt,
    TextStreamed,
    ThoughtStreamed,
    ToolCallRequested,
    ToolCallUpdated,
    ToolFinished,
    ToolResult,
    TurnEnded,
    TurnError,
    TurnNotice,
    TurnStarted,
)

WS = Path("/work/ws")
SID = "s1"


def view(**kw: Any) -> SessionView:
    env = ToolEnv(workspace=WS, project_temp_dir=WS / "tmp")
    tools = {t.name: t for t in builtin_tools("gemini-2.5-flash")}
    return SessionView(Presenter(tools, env), **kw)


def updates(effects: list[Any]) -> list[dict[str, Any]]:
    return [dict(e.update) for e in effects if isinstance(e, Update)]


def status(call_id: str, state: str, name: str = "read_file", detail: str = "") -> ToolCallUpdated:
    return ToolCallUpdated(session_id=SID, batch_id="b", call_id=call_id, name=name, status=state, detail=detail)


def requested(call_id: str, name: str, args: dict[str, Any]) -> ToolCallRequested:
    return ToolCallRequested(session_id=SID, turn_id="t", call_id=call_id, name=name, args=args)


def test_text_and_thoughts_are_chunks() -> None:
    v = view()
    assert updates(v.feed(TextStreamed(session_id=SID, turn_id="t", text="Hi"))) == [
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hi"}}
    ]
    thought = ThoughtStreamed(session_id=SID, turn_id="t", subject="Planning", description="Greet back.")
    assert updates(v.feed(thought)) == [
        {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "**Planning**\nGreet back."}}
    ]
    assert v.feed(TextStreamed(session_id=SID, turn_id="t", text="")) == []


def test_a_free_call_starts_in_progress_and_completes_with_its_display() -> None:
    v = view()
    v.feed(requested("c1", "glob", {"pattern": "**/*.txt"}))
    assert v.feed(status("c1", "validating", "glob")) == []
    assert v.feed(status("c1", "scheduled", "glob")) == []
    started = updates(v.feed(status("c1", "executing", "glob")))
    assert started == [
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c1",
            "status": "in_progress",
            "title": "'**/*.txt'",
            "content": [],
            "locations": [],
            "kind": "search",
        }
    ]
    v.feed(ToolFinished(session_id=SID, call_id="c1", result=ToolResult(return_display="Found 1 matching file(s)")))
    done = updates(v.feed(status("c1", "success", "glob")))
    assert done[0]["sessionUpdate"] == "tool_call_update" and done[0]["status"] == "completed"
    assert done[0]["content"] == [{"type": "content", "content": {"type": "text", "text": "Found 1 matching file(s)"}}]


def test_an_edit_is_announced_with_its_diff_before_the_permission_request() -> None:
    v = view()
    args = {"file_path": "out.txt", "content": "new\n"}
    v.feed(requested("c1", "write_file", args))
    need = v.feed(status("c1", "awaiting_approval", "write_file"))
    assert need == [NeedOriginal("c1", str(WS / "out.txt"))]
    announced = updates(v.original_read("c1", "old\n"))
    assert announced[0]["sessionUpdate"] == "tool_call" and announced[0]["status"] == "pending"
    assert announced[0]["content"] == [
        {"type": "diff", "path": str(WS / "out.txt"), "oldText": "old\n", "newText": "new\n", "_meta": {"kind": "modify"}}
    ]
    asks = v.feed(
        ApprovalRequested(
            session_id=SID, batch_id="b", call_id="c1", correlation_id="k", name="write_file", args=args, details={"type": "edit"}
        )
    )
    assert len(asks) == 1 and isinstance(asks[0], AskPermission)
    assert asks[0].tool_call == {k: v for k, v in announced[0].items() if k != "sessionUpdate"}
    assert [o["optionId"] for o in asks[0].options] == ["proceed_always", "proceed_once", "cancel"]
    assert updates(v.feed(status("c1", "executing", "write_file"))) == [
        {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress"}
    ]


def test_rejected_and_cancelled_calls_end_failed_or_never_appear() -> None:
    v = view()
    v.feed(requested("c1", "run_shell_command", {"command": "ls", "description": "list"}))
    v.feed(requested("c2", "read_file", {"file_path": "a.py"}))
    shown = updates(v.feed(status("c1", "awaiting_approval", "run_shell_command")))
    assert shown[0]["content"] == [
        {"type": "content", "content": {"type": "text", "text": f"[current working directory {WS}] (list)"}}
    ]
    assert shown[0]["title"] == "ls" and shown[0]["kind"] == "execute"
    rejected = updates(v.feed(status("c1", "cancelled", "run_shell_command", "User denied execution.")))
    assert rejected[0]["status"] == "failed"
    assert rejected[0]["content"][0]["content"]["text"] == "User denied execution."
    # c2 never started: the client never hears of it (reference D5).
    assert v.feed(status("c2", "cancelled", detail="User cancelled operation")) == []


def test_a_cancelled_running_shell_fails_with_the_shells_words() -> None:
    v = view(approval_mode="yolo")
    v.feed(requested("c1", "run_shell_command", {"command": "sleep 9"}))
    v.feed(status("c1", "executing", "run_shell_command"))
    ended = updates(v.feed(status("c1", "cancelled", "run_shell_command", "User cancelled tool execution.")))
    assert ended[0]["status"] == "failed"
    assert ended[0]["content"][0]["content"]["text"] == "Command cancelled by user."


def test_an_error_before_the_call_started_is_one_failed_tool_call() -> None:
    v = view()
    v.feed(requested("c1", "no_such_tool", {}))
    out = updates(v.feed(status("c1", "error", "no_such_tool", 'Tool "no_such_tool" not found.')))
    assert out == [
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c1",
            "status": "failed",
            "title": "no_such_tool",
            "content": [{"type": "content", "content": {"type": "text", "text": 'Tool "no_such_tool" not found.'}}],
            "locations": [],
            "kind": "other",
        }
    ]


def test_a_turn_answers_its_prompt_with_the_main_requests_usage() -> None:
    v = view()
    assert v.feed(TurnStarted(session_id=SID, turn_id="t", prompt_id="p")) == [TurnBegan("p", "t")]
    for rid, role, prompt_tokens in (("r1", "main", 120), ("r2", "classifier", 999), ("r3", "main", 160)):
        v.feed(GenerateRequest(session_id=SID, request_id=rid, reply_to="turn:s1", method="m", model="x", role=role))
        usage = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": 10}
        v.feed(ModelChunk(session_id=SID, request_id=rid, index=0, chunk={"usageMetadata": usage}))
        v.feed(ModelFinished(session_id=SID, request_id=rid, model="gemini-2.5-flash"))
    done = v.feed(TurnEnded(session_id=SID, turn_id="t", stop_reason="end_turn"))
    # First what the conversation holds of the context window (the last main response).
    assert done == [
        Update({"sessionUpdate": "usage_update", "used": 170, "size": 1_048_576}),
        PromptDone(
            "p",
            {
                "stopReason": "end_turn",
                "_meta": {
                    "quota": {
                        "token_count": {"input_tokens": 280, "output_tokens": 20},
                        "model_usage": [
                            {"model": "gemini-2.5-flash", "token_count": {"input_tokens": 280, "output_tokens": 20}}
                        ],
                    }
                },
            },
        )
    ]


def test_the_first_prompt_titles_the_session_once() -> None:
    v = view()
    assert v.feed(SubmitPrompt(session_id=SID, prompt_id="p0", display_text="/about")) == []  # not a title
    assert v.feed(SubmitPrompt(session_id=SID, prompt_id="p1", display_text="Fix the\n  bug")) == []
    v.feed(TurnStarted(session_id=SID, turn_id="t1", prompt_id="p1"))
    ended = v.feed(TurnEnded(session_id=SID, turn_id="t1", stop_reason="cancelled"))
    assert ended[0] == Update({"sessionUpdate": "session_info_update", "title": "Fix the bug"})  # when its turn ends
    assert v.feed(SubmitPrompt(session_id=SID, prompt_id="p2", display_text="And more")) == []
    v.feed(TurnStarted(session_id=SID, turn_id="t2", prompt_id="p2"))
    assert len(v.feed(TurnEnded(session_id=SID, turn_id="t2", stop_reason="end_turn"))) == 1  # the answer alone
    # A loaded session's replay saw its title: the next prompt does not retitle it.
    loaded = view(replay=True)
    loaded.feed(SubmitPrompt(session_id=SID, prompt_id="p1", display_text="Fix the bug"))
    loaded.follow_on(approval_mode="default", model="m")
    loaded.feed(SubmitPrompt(session_id=SID, prompt_id="p2", display_text="Next"))
    loaded.feed(TurnStarted(session_id=SID, turn_id="t2", prompt_id="p2"))
    assert len(loaded.feed(TurnEnded(session_id=SID, turn_id="t2", stop_reason="end_turn"))) == 1


def test_a_failed_turn_is_an_error_with_the_http_status() -> None:
    v = view()
    v.feed(TurnStarted(session_id=SID, turn_id="t", prompt_id="p"))
    error = TurnError(kind="api", type="ApiError", message="quota", status=429)
    (done,) = v.feed(TurnEnded(session_id=SID, turn_id="t", stop_reason="error", error=error))
    assert isinstance(done, PromptDone) and done.error is not None
    assert (done.error.code, done.error.message) == (429, "quota")


@pytest.mark.parametrize(
    ("ours", "notice", "acp"),
    [
        ("end_turn", None, "end_turn"),
        ("cancelled", None, "cancelled"),
        ("loop_detected", None, "max_turn_requests"),
        ("max_session_turns", None, "max_turn_requests"),
        ("context_window_overflow", None, "max_tokens"),
        ("agent_blocked", None, "refusal"),
        ("invalid_stream", "The model response was blocked due to safety settings.", "refusal"),
        ("invalid_stream", "Invalid stream: empty", "end_turn"),
    ],
)
def test_stop_reasons(ours: str, notice: str | None, acp: str) -> None:
    assert stop_reason(ours, notice) == acp
    v = view()
    v.feed(TurnStarted(session_id=SID, turn_id="t", prompt_id="p"))
    if notice:
        v.feed(TurnNotice(session_id=SID, turn_id="t", kind="invalid_stream", severity="error", message=notice))
    (done,) = v.feed(TurnEnded(session_id=SID, turn_id="t", stop_reason=ours))
    assert isinstance(done, PromptDone) and done.result is not None
    assert done.result["stopReason"] == acp


def _current(update: dict[str, Any]) -> dict[str, Any]:
    return {o["id"]: o["currentValue"] for o in update["configOptions"]}


def test_a_mode_change_is_reported_once_in_both_apis() -> None:
    v = view(model="m")
    changed = updates(v.feed(SessionConfigured(session_id=SID, request_id="r", approval_mode="auto_edit", model="m")))
    assert changed[0] == {"sessionUpdate": "current_mode_update", "currentModeId": "autoEdit"}
    assert changed[1]["sessionUpdate"] == "config_option_update" and len(changed) == 2
    assert _current(changed[1]) == {"mode": "autoEdit", "model": "m"}
    # A model change alone: only the config options say it (modes did not change).
    (model,) = updates(v.feed(SessionConfigured(session_id=SID, request_id="r2", approval_mode="auto_edit", model="m2")))
    assert model["sessionUpdate"] == "config_option_update" and _current(model) == {"mode": "autoEdit", "model": "m2"}
    assert updates(v.feed(SessionConfigured(session_id=SID, request_id="r3", approval_mode="auto_edit", model="m2"))) == []


def test_a_replay_shows_prompts_and_asks_nothing() -> None:
    v = view(replay=True)
    assert updates(v.feed(SubmitPrompt(session_id=SID, prompt_id="p", display_text="Do it"))) == [
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "Do it"}}
    ]
    v.feed(requested("c1", "write_file", {"file_path": "a", "content": "x"}))
    v.feed(status("c1", "awaiting_approval", "write_file"))
    asked = v.feed(
        ApprovalRequested(session_id=SID, batch_id="b", call_id="c1", correlation_id="k", name="write_file", args={"file_path": "a", "content": "x"})
    )
    assert not any(isinstance(e, AskPermission) for e in asked)
    assert v.feed(TurnStarted(session_id=SID, turn_id="t", prompt_id="p")) == []


def test_collapse_replay_folds_calls_and_joins_text() -> None:
    chunk = {"sessionUpdate": "agent_message_chunk"}
    got = collapse_replay(
        [
            {**chunk, "content": {"type": "text", "text": "Hel"}},
            {**chunk, "content": {"type": "text", "text": "lo"}},
            {"sessionUpdate": "tool_call", "toolCallId": "c", "status": "in_progress", "title": "t", "content": []},
            {"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "in_progress"},
            {"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "completed", "content": ["x"]},
            {**chunk, "content": {"type": "text", "text": "Bye"}},
        ]
    )
    assert got == [
        {**chunk, "content": {"type": "text", "text": "Hello"}},
        {"sessionUpdate": "tool_call", "toolCallId": "c", "status": "completed", "title": "t", "content": ["x"]},
        {**chunk, "content": {"type": "text", "text": "Bye"}},
    ]


# The scheduler's state machine for one call (actors/scheduler/_actor.py).
NEXT = {
    "validating": ["error", "cancelled", "scheduled", "awaiting_approval"],
    "awaiting_approval": ["cancelled", "scheduled"],
    "scheduled": ["executing", "cancelled"],
    "executing": ["success", "error", "cancelled"],
}


@st.composite
def call_paths(draw: st.DrawFn) -> list[str]:
    path = ["validating"]
    while path[-1] in NEXT:
        path.append(draw(st.sampled_from(NEXT[path[-1]])))
    return path


@given(path=call_paths(), name=st.sampled_from(["read_file", "write_file", "run_shell_command", "glob", "nope"]))
def test_every_announced_call_ends_exactly_once(path: list[str], name: str) -> None:
    """Whatever route a call takes, the client sees nothing (it never started) or one
    ``tool_call`` first and exactly one terminal status, last."""
    v = view()
    v.feed(requested("c", name, {"file_path": "f.py", "content": "x", "command": "ls", "pattern": "*"}))
    seen: list[dict[str, Any]] = []
    for state in path:
        for effect in v.feed(status("c", state, name, "why")):
            if isinstance(effect, NeedOriginal):
                seen += updates(v.original_read("c", ""))
            elif isinstance(effect, Update):
                seen.append(dict(effect.update))
    if not seen:
        assert "executing" not in path and "awaiting_approval" not in path and path[-1] == "cancelled"
        return
    assert seen[0]["sessionUpdate"] == "tool_call"
    assert all(u["sessionUpdate"] == "tool_call_update" for u in seen[1:])
    terminal = [u for u in seen if u.get("status") in ("completed", "failed")]
    assert terminal == [seen[-1]]
    assert seen[-1]["status"] == ("completed" if path[-1] == "success" else "failed")


def test_subagent_activity_is_the_content_of_its_call() -> None:
    from bus.messages import SubagentActivity

    env = ToolEnv(workspace=WS, project_temp_dir=WS / "tmp")
    tools = {t.name: t for t in builtin_tools("gemini-2.5-flash", agents=True)}
    v = SessionView(Presenter(tools, env))
    v.feed(requested("c1", "invoke_agent", {"agent_name": "worker", "prompt": "go"}))
    [announced] = updates(v.feed(status("c1", "executing", "invoke_agent")))
    assert announced["sessionUpdate"] == "tool_call" and announced["status"] == "in_progress"

    def act(kind: str, depth: int = 1, **fields: Any) -> SubagentActivity:
        return SubagentActivity(
            session_id=SID, call_id="c1", agent_name="worker" if depth == 1 else "inner",
            child_session_id="s1.worker-1", kind=kind, depth=depth, **fields,
        )

    v.feed(act("started"))
    v.feed(act("tool_call", tool_name="read_file"))
    [last] = updates(v.feed(act("tool_call", depth=2, tool_name="glob")))
    assert last == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": "in_progress",
        "content": [
            {"type": "content", "content": {"type": "text", "text": "worker started\nworker: read_file\n  inner: glob"}}
        ],
    }
    assert v.feed(act("text", text="thinking out loud")) == []
    other = SubagentActivity(session_id=SID, call_id="nope", agent_name="x", child_session_id="y", kind="started")
    assert v.feed(other) == []  # not a call of this session's view


def test_a_terminal_stays_in_the_calls_content_whichever_comes_first() -> None:
    term = {"type": "terminal", "terminalId": "t1"}
    shell = {"command": "make", "description": "build"}
    # Announced first: the terminal is added by an update of its own.
    v = view()
    v.feed(requested("c1", "run_shell_command", shell))
    (announced,) = updates(v.feed(status("c1", "executing", "run_shell_command")))
    assert term not in announced["content"]
    (attached,) = updates(v.terminal_attached("c1", "run_shell_command", "t1"))
    assert attached["content"][0] == term and attached["sessionUpdate"] == "tool_call_update"
    (failed,) = updates(v.feed(status("c1", "error", "run_shell_command", detail="boom")))
    assert failed["content"][0] == term and failed["status"] == "failed"
    # The terminal first (the executor's request overtook the observed update): the
    # tool_call carries it.
    w = view()
    w.feed(requested("c2", "run_shell_command", shell))
    assert w.terminal_attached("c2", "run_shell_command", "t2") == []
    (first,) = updates(w.feed(status("c2", "executing", "run_shell_command")))
    assert first["sessionUpdate"] == "tool_call" and first["content"][0] == {"type": "terminal", "terminalId": "t2"}


def test_an_interrupted_replay_ends_the_calls_it_left_open() -> None:
    v = view(replay=True)
    v.feed(requested("c1", "read_file", {"file_path": "a.py"}))
    v.feed(status("c1", "executing"))
    v.feed(requested("c2", "read_file", {"file_path": "b.py"}))
    v.feed(status("c2", "executing"))
    v.feed(ToolFinished(session_id=SID, call_id="c2", result=ToolResult(llm_content="ok")))
    v.feed(status("c2", "success"))
    (ended,) = updates(v.interrupted("The session was interrupted before the tool finished."))
    assert ended["toolCallId"] == "c1" and ended["status"] == "failed"
    assert ended["content"] == [{"type": "content", "content": {"type": "text", "text": "The session was interrupted before the tool finished."}}]
    assert v.interrupted("again") == []  # ended once


@pytest.mark.parametrize("replay", [True, False])
def test_a_session_whose_actors_restart_ends_what_its_killed_process_left_open(replay: bool) -> None:
    # ``acp --attach`` to a session a killed daemon left mid-call: the catch-up from the
    # recording reaches the session's reopening (or a failover's, live), after which
    # nothing runs that call, and nothing will end the editor's prompt.
    v = view(replay=replay)
    opened = {"session_id": SID, "model": "gemini-2.5-flash", "approval_mode": "default", "workspace": str(WS)}
    assert v.feed(SessionOpened(**opened)) == []  # nothing was open
    v.feed(TurnStarted(session_id=SID, turn_id="t1", prompt_id="p1"))
    v.feed(requested("c1", "read_file", {"file_path": "a.py"}))
    v.feed(status("c1", "executing"))
    effects = v.feed(SessionOpened(**opened, resumed=True))
    (ended,) = updates(effects)
    assert (ended["toolCallId"], ended["status"]) == ("c1", "failed")
    done = [e for e in effects if isinstance(e, PromptDone)]
    assert [(d.prompt_id, d.result) for d in done] == ([] if replay else [("p1", {"stopReason": "cancelled"})])
    assert v.current_turn is None and not v.turns
    assert v.feed(SessionOpened(**opened, resumed=True)) == []  # ended once
