"""A user's call result: what is shown, and the context text when it is shared
(Gemini CLI's shell-mode shape)."""

from __future__ import annotations

from typing import Any

import pytest

from actors.host.user_calls import (
    MAX_CONTEXT_OUTPUT,
    context_parts,
    parse_tool_call,
    ran,
    shell_output,
    shown_text,
)
from bus.messages import CompletedCall


def shell(
    display: str, llm: str, *, status: str = "success", error: str | None = None, command: str = "make"
) -> CompletedCall:
    return CompletedCall(
        call_id="c",
        name="run_shell_command",
        args={"command": command},
        status=status,
        response_parts=({"functionResponse": {"id": "c", "name": "run_shell_command", "response": {"output": llm}}},),
        result_display=display,
        error_message=error,
        decision="accept",
    )


def wrapped(*lines: str) -> str:
    return "<untrusted_context>\n" + "\n".join(lines) + "\n</untrusted_context>"


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (shell("built", wrapped("Output: built", "Process Group PGID: 9")), "built"),
        (shell("oops", wrapped("Output: oops", "Exit Code: 2", "Process Group PGID: 9")), "Command exited with code 2.\noops"),
        (shell("Command exited with code: 1", wrapped("Output: (empty)", "Exit Code: 1")), "Command exited with code 1.\n"),
        (shell("", wrapped("Output: (empty)", "Signal: 15", "Process Group PGID: 9")), "Command terminated by signal: 15.\n"),
        # A line of the output that looks like a trailer is not one.
        (shell("Exit Code: 7\nok", wrapped("Output: Exit Code: 7\nok", "Process Group PGID: 9")), "Exit Code: 7\nok"),
        (
            shell("Command cancelled by user.\n\nOutput before cancellation:\npartial", "", status="cancelled"),
            "Command was cancelled.\npartial",
        ),
    ],
)
def test_shell_output_as_gemini_cli_records_shell_mode(call: CompletedCall, expected: str) -> None:
    assert shell_output(call) == expected


def test_the_shell_context_text_is_escaped_and_cut() -> None:
    long = "x" * (MAX_CONTEXT_OUTPUT + 5)
    [part] = context_parts(shell(long, wrapped(f"Output: {long}"), command="echo `date` \\n"))
    text = part["text"]
    assert text.startswith("I ran the following shell command:\n```sh\necho \\`date\\` \\\\n\n```\n\n")
    assert text.endswith("x" * 10 + "\n... (truncated)\n```")
    assert text.count("x") == MAX_CONTEXT_OUTPUT


def test_another_tools_context_names_it_with_its_arguments_and_carries_images() -> None:
    image = {"inlineData": {"mimeType": "image/png", "data": "AAAA"}}
    call = CompletedCall(
        call_id="c",
        name="read_file",
        args={"file_path": "logo.png"},
        response_parts=(
            {"functionResponse": {"id": "c", "name": "read_file", "response": {"output": "Binary content"}, "parts": [image]}},
        ),
        decision="accept",
    )
    text, media = context_parts(call)
    assert text == {
        "text": 'I ran the tool read_file with these arguments:\n```json\n{"file_path": "logo.png"}\n```\n\n'
        "This produced the following result:\n```\nBinary content\n```"
    }
    assert media == image


def test_what_the_user_is_shown() -> None:
    listing = CompletedCall(
        call_id="c",
        name="glob",
        response_parts=({"functionResponse": {"response": {"output": "Found 1 file(s):\n/w/a.txt"}}},),
        result_display="Found 1 matching file(s)",
    )
    assert shown_text(listing) == "Found 1 file(s):\n/w/a.txt"  # the listing, not the summary
    edit = CompletedCall(call_id="c", name="write_file", result_display={"fileDiff": "+x\n", "fileName": "a"})
    assert shown_text(edit) == "+x\n"
    assert shown_text(shell("out", wrapped("Output: out"))) == "out"
    failed = CompletedCall(call_id="c", name="read_file", status="error", error_message="File not found: a")
    assert shown_text(failed) == "File not found: a"


def test_only_calls_cleared_to_run_count_as_run() -> None:
    assert ran(shell("x", "x"))
    assert not ran(CompletedCall(call_id="c", name="nope", status="error", error_type="tool_not_registered"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('read_file {"file_path": "a"}', ("read_file", {"file_path": "a"})),
        ("list_directory", ("list_directory", {})),
        ('  glob   {"pattern": "*"}  ', ("glob", {"pattern": "*"})),
    ],
)
def test_parse_tool_call(text: str, expected: tuple[str, dict[str, Any]]) -> None:
    assert parse_tool_call(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'name the tool: NAME {"arg": "value"}'),
        ("read_file {oops", "the arguments are not valid JSON: Expecting property name enclosed in double quotes (line 1, column 2)"),
        ("read_file [1]", "the arguments must be a JSON object, not list"),
        # What no message can carry (issue 17): chat and ACP's /tool died on these.
        ('read_file {"a": ' + "[" * 100_000, "the arguments cannot be used: JSON nested deeper than 128 levels"),
        ('read_file {"a": ' + "[" * 200 + "]" * 200 + "}", "the arguments cannot be used: JSON nested deeper than 128 levels"),
        ('read_file {"a": 1' + "0" * 5000 + "}", "the arguments cannot be used: an integer of more than 4300 digits is not a JSON number"),
        ('read_file {"a": NaN}', "the arguments cannot be used: nan is not a JSON number"),
    ],
)
def test_parse_tool_call_refuses_with_one_line(text: str, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_tool_call(text)
    assert str(refused.value) == message


def test_resume_takes_the_turns_own_batch_not_a_users_call_that_settled_first() -> None:
    from actors.host.sessions import conversation_of
    from bus.messages import (
        BatchSettled,
        CompletedCall,
        GenerateRequest,
        ModelChunk,
        ModelFinished,
        OpenSession,
        ScheduleBatch,
        StartTurn,
        ToolCallRequested,
    )

    sid = "s1"
    call = {"functionCall": {"name": "read_file", "args": {"file_path": "a"}, "id": "c1"}}

    def settled(batch: str, call_id: str, name: str, output: str) -> BatchSettled:
        part = {"functionResponse": {"id": call_id, "name": name, "response": {"output": output}}}
        return BatchSettled(
            session_id=sid,
            batch_id=batch,
            calls=(CompletedCall(call_id=call_id, name=name, response_parts=(part,)),),
        )

    history = conversation_of(
        [
            OpenSession(session_id=sid, model="m", approval_mode="default", workspace="/w"),
            StartTurn(session_id=sid, turn_id="t1", prompt_id="p1", model="m", approval_mode="default", parts=({"text": "hi"},)),
            GenerateRequest(session_id=sid, request_id="g1", reply_to="turn:s1", method="generateContentStream", model="m", role="main"),
            ModelChunk(session_id=sid, request_id="g1", index=0, chunk={"candidates": [{"content": {"role": "model", "parts": [call]}}]}),
            ToolCallRequested(session_id=sid, turn_id="t1", call_id="c1", name="read_file", args={"file_path": "a"}),
            ModelFinished(session_id=sid, request_id="g1", model="m"),
            ScheduleBatch(session_id=sid, batch_id="model", reply_to="turn:s1", approval_mode="default"),
            # the user's own call, queued ahead of the model's batch, settles first
            settled("user", "run_shell_command__user_x", "run_shell_command", "USER-ONLY"),
            settled("model", "c1", "read_file", "file a"),
        ]
    )
    import json

    text = json.dumps(history)
    assert "USER-ONLY" not in text  # never in the model's history
    assert '"output": "file a"' in text  # the turn's own result is kept for the resume
