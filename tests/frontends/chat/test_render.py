"""What the chat shows for a session's events, without a terminal (plain text)."""

from __future__ import annotations

import attrs

from actors.frontends.chat._render import Renderer, parse_answer
from bus import Envelope
from bus.messages import (
    ApprovalRequested,
    ApprovalSettled,
    CompletedCall,
    Message,
    PromptQueued,
    SessionClosed,
    SubmitPrompt,
    SubscriptionEnded,
    TextStreamed,
    ToolCallRequested,
    ToolCallUpdated,
    ToolOutputStreamed,
    TurnEnded,
    TurnError,
    TurnStarted,
)

S, T = "s", "t"


def show(r: Renderer, *msgs: Message, sender: str = "turn:s") -> str:
    out = ""
    for i, m in enumerate(msgs):
        out += r.on(Envelope(seq=i + 1, session_id=S, sender=sender, recipient=None, message=m), now=float(i))
    return out


def test_text_tools_and_the_end_of_a_turn_in_plain_text() -> None:
    r = Renderer(colour=False, me="client:1")
    out = show(
        r,
        TurnStarted(session_id=S, turn_id=T, prompt_id="p"),
        TextStreamed(session_id=S, turn_id=T, text="Let me look"),
        ToolCallRequested(session_id=S, turn_id=T, call_id="c1", name="run_shell_command", args={"command": "ls -l"}),
        ToolCallUpdated(session_id=S, batch_id="b", call_id="c1", name="run_shell_command", status="validating"),
        ToolCallUpdated(session_id=S, batch_id="b", call_id="c1", name="run_shell_command", status="executing"),
        ToolOutputStreamed(session_id=S, call_id="c1", text="a.txt\nb.txt\n"),
        ToolCallUpdated(session_id=S, batch_id="b", call_id="c1", name="run_shell_command", status="success"),
        TextStreamed(session_id=S, turn_id=T, text="Two files."),
        TurnEnded(session_id=S, turn_id=T, stop_reason="end_turn"),
    )
    assert out == (
        "Let me look\n"
        "⏺ run_shell_command ls -l running…\n"
        "  │ a.txt\n  │ b.txt\n"
        "✓ run_shell_command ls -l success (2.0 s)\n"
        "Two files.\n"
    )
    assert "\x1b[" not in out and not r.busy


def test_approvals_are_asked_and_settled_elsewhere_is_said() -> None:
    r = Renderer(colour=False, me="client:1")
    asked = ApprovalRequested(
        session_id=S, batch_id="b", call_id="c", correlation_id="k", name="write_file",
        args={"file_path": "n.txt"}, details={"type": "edit", "title": "WriteFile"},
    )
    out = show(r, asked)
    assert out == "? Allow WriteFile n.txt?\n  [y]es once / [a]lways / [n]o: "
    assert list(r.pending) == [asked]
    out = show(r, ApprovalSettled(session_id=S, correlation_id="k", outcome="proceed_once", answered_by="client:2"))
    assert "answered by another client: proceed_once" in out and not r.pending
    assert [parse_answer(a) for a in ("y", "Always", "n", "maybe")] == ["proceed_once", "proceed_always", "cancel", None]


def test_cancelled_errors_and_other_clients_prompts() -> None:
    r = Renderer(colour=False, me="client:1")
    out = show(r, SubmitPrompt(session_id=S, prompt_id="p", display_text="from afar"), sender="client:2")
    assert out == "» from afar\n"
    assert show(r, SubmitPrompt(session_id=S, prompt_id="p", display_text="mine"), sender="client:1") == ""
    assert show(r, TurnEnded(session_id=S, turn_id=T, stop_reason="cancelled")) == "(cancelled)\n"
    failed = TurnEnded(session_id=S, turn_id=T, stop_reason="error", error=TurnError(kind="api", type="x", message="quota\nmore"))
    assert show(r, failed) == "Error: quota\n"


def test_a_users_tool_result_shows_its_output_once() -> None:
    r = Renderer(colour=False)
    call = CompletedCall(
        call_id="u", name="read_file", status="success", result_display="",
        response_parts=({"functionResponse": {"id": "u", "name": "read_file", "response": {"output": "hello\n"}}},),
    )
    assert r.tool_result(call) == "  hello\n✓ read_file success\n"
    failed = CompletedCall(call_id="v", name="nope", status="error", error_message='Tool "nope" not found.')
    assert r.tool_result(failed) == '  Tool "nope" not found.\n✗ nope error\n'


def test_context_another_client_shared_is_mentioned_ours_is_not() -> None:
    from bus.messages import ContextAdded

    r = Renderer(colour=False, me="client:1")
    content = {"role": "user", "parts": [{"text": "I ran the following shell command: ..."}]}
    ours = ContextAdded(session_id=S, request_id="r", content=content, requested_by="client:1")
    theirs = ContextAdded(session_id=S, request_id="r", content=content, requested_by="client:2")
    assert show(r, ours, sender="session:s") == ""
    assert show(r, theirs, sender="session:s") == "(another client added a tool result to the conversation)\n"


def test_write_todos_renders_as_a_block() -> None:
    from bus.messages import BatchSettled, CompletedCall

    r = Renderer(colour=False)
    todos = [
        {"description": "read the code", "status": "completed"},
        {"description": "fix the bug", "status": "in_progress"},
        {"description": "run the tests", "status": "pending"},
    ]
    out = r.message(
        BatchSettled(
            session_id="s",
            batch_id="b",
            calls=(CompletedCall(call_id="c", name="write_todos", result_display={"todos": todos}),),
        )
    )
    assert out.splitlines()[-4:] == [
        "  Todos",
        "  [x] read the code",
        "  [>] fix the bug",
        "  [ ] run the tests",
    ]


def test_subagent_activity_is_indented_under_its_call() -> None:
    from bus.messages import SubagentActivity

    def act(kind: str, depth: int = 1, **fields: object) -> SubagentActivity:
        return SubagentActivity(
            session_id=S, call_id="c1", agent_name="inner" if depth > 1 else "worker",
            child_session_id="s.worker-1", kind=kind, depth=depth, **fields,  # type: ignore[arg-type]
        )

    r = Renderer(colour=False, me="client:1")
    out = show(
        r,
        act("started", text="go"),
        act("tool_call", tool_call_id="k", tool_name="read_file", args={"file_path": "a.py"}),
        act("tool_update", tool_call_id="k", tool_name="read_file", status="success"),
        act("tool_call", depth=2, tool_call_id="k2", tool_name="glob", args={"pattern": "*.py"}),
        act("tool_update", depth=2, tool_call_id="k2", tool_name="glob", status="error"),
        act("finished", status="GOAL", text="done"),
    )
    assert out == (
        "    ↳ [worker] started\n"
        "    ↳ [worker] read_file a.py\n"
        "      ↳ [inner] glob *.py\n"
        "      ↳ [inner] glob: error\n"
        "    ↳ [worker] finished: GOAL\n"
    )


def test_history_shows_each_prompt_with_its_turn_and_answered_questions_with_their_answer() -> None:
    """Attaching, the conversation so far is shown: a prompt sent while another turn ran
    comes with its own turn, a call's status without a duration nobody measured, an
    answered question with its answer (not asked again), and a question still waiting
    only asked once the history is shown."""
    r = Renderer(colour=False, me="client:new", catching_up=True)
    asked = ApprovalRequested(
        session_id=S, batch_id="b1", call_id="c1", correlation_id="k1", name="write_file",
        args={"file_path": "a.txt"}, details={"type": "edit", "title": "WriteFile"},
    )  # fmt: skip
    waiting = attrs.evolve(asked, batch_id="b2", call_id="c2", correlation_id="k2", args={"file_path": "b.txt"})
    out = show(
        r,
        SubmitPrompt(session_id=S, prompt_id="p1", display_text="write a"),
        TurnStarted(session_id=S, turn_id="t1", prompt_id="p1"),
        SubmitPrompt(session_id=S, prompt_id="p2", display_text="then b"),
        PromptQueued(session_id=S, prompt_id="p2", position=1),
        asked,
        ApprovalSettled(session_id=S, correlation_id="k1", outcome="proceed_once", answered_by="client:old"),
        ToolCallUpdated(session_id=S, batch_id="b1", call_id="c1", name="write_file", status="executing"),
        ToolCallUpdated(session_id=S, batch_id="b1", call_id="c1", name="write_file", status="success"),
        TextStreamed(session_id=S, turn_id="t1", text="Wrote a."),
        TurnEnded(session_id=S, turn_id="t1", stop_reason="end_turn"),
        TurnStarted(session_id=S, turn_id="t2", prompt_id="p2"),
        waiting,
        sender="client:old",
    )
    assert out == (
        "> write a\n"
        "? Allow WriteFile a.txt?\n"
        "  → yes, once\n"
        "⏺ write_file a.txt running…\n"
        "✓ write_file a.txt success\n"
        "Wrote a.\n"
        "> then b\n"
        "? Allow WriteFile b.txt?\n"
    )
    assert [p.correlation_id for p in r.pending] == ["k2"]
    r.catching_up = False
    assert r.approval_prompt().startswith("? Allow WriteFile b.txt?\n")


def test_live_events_after_the_history_are_shown_as_before() -> None:
    r = Renderer(colour=False, me="client:1", catching_up=True)
    show(r, SubmitPrompt(session_id=S, prompt_id="p1", display_text="hi"), sender="client:old")
    r.catching_up = False
    out = show(
        r,
        SubmitPrompt(session_id=S, prompt_id="p2", display_text="from elsewhere"),
        TurnStarted(session_id=S, turn_id="t1", prompt_id="p1"),
        sender="client:other",
    )
    # Another client's prompt as it comes; the history's own when its turn starts.
    assert out == "» from elsewhere\n> hi\n"


def test_questions_end_with_the_subscription_or_the_session() -> None:
    """Nobody can answer through a subscription that ended (or a closed session): the
    questions go (an answer typed meanwhile waited for them to settle, for good)."""
    for end in (SubscriptionEnded(session_id=S, reason="closed"), SessionClosed(session_id=S, reason="closed")):
        r = Renderer(colour=False, me="client:1")
        show(
            r,
            ApprovalRequested(
                session_id=S, batch_id="b", call_id="c", correlation_id="k", name="write_file",
                args={"file_path": "n.txt"}, details={"type": "edit", "title": "WriteFile"},
            ),
        )  # fmt: skip
        assert r.pending
        r.on(end) if isinstance(end, SubscriptionEnded) else show(r, end)
        assert not r.pending
