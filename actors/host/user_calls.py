"""A tool call the user ran: what to show of its result, and how it becomes context.

Pure functions over ``CompletedCall``, shared by the entry points that run the user's
own calls (``agentbus tool``, the daemon's connections, ACP, the chat).

When the user chooses to share a call's result with the model, it becomes a user turn
of its own in the conversation, the way Gemini CLI adds shell-mode output
(``useExecutionLifecycle.ts``: ``addShellCommandToGeminiHistory``): the command and its
output in fenced blocks, backslashes and backticks escaped, the output cut at 10 000
characters. Gemini CLI has no such text for other tools; ours follows the same shape
with the tool's name and arguments (see docs/differences.md).
"""

from __future__ import annotations

import json
import re
from typing import Any

from bus.json_values import MAX_DEPTH, JsonValueError, freeze, thaw
from bus.messages import CompletedCall

SHELL_TOOL = "run_shell_command"
MAX_CONTEXT_OUTPUT = 10_000
"""Gemini CLI's ``MAX_OUTPUT_LENGTH`` for shell-mode output added to the history."""
TRUNCATED = "\n... (truncated)"
BAD_INPUT_ERRORS = frozenset({"tool_not_registered", "invalid_tool_params"})
"""Error types of a call the scheduler refused before running it because of what was
asked (no such tool, arguments failing the schema or the tool's own checks, a path
outside the workspace)."""
RAN_DECISIONS = frozenset({"accept", "modify", "auto_accept"})

_SHELL_TRAILER = re.compile(
    r"^(?:Error: .*|Exit Code: -?\d+|Signal: \S+|Background PIDs: .*|Process Group PGID: \S+|</untrusted_context>)$"
)
_SHELL_PLACEHOLDER = re.compile(r"^(?:Command exited with code: -?\d+|Command terminated by signal: \S+|Command failed: .*)$")


def parse_tool_call(text: str) -> tuple[str, dict[str, Any]]:
    """``NAME {json args}`` (the arguments optional) as typed after ``/tool``; raises
    ``ValueError`` with a one-line message."""
    words = text.strip().split(maxsplit=1)
    if not words:
        raise ValueError('name the tool: NAME {"arg": "value"}')
    raw = words[1] if len(words) > 1 else ""
    return words[0], (json_args(raw, what="the arguments", plural=True) if raw.strip() else {})


def json_args(raw: str, *, what: str, plural: bool = False) -> dict[str, Any]:
    """A tool call's arguments typed by the user as JSON text (``/tool``, ``agentbus tool
    --args``), as a message will carry them (no NaN, bounded nesting); ``ValueError``
    with one line naming ``what`` for anything else."""
    is_ = "are" if plural else "is"
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} {is_} not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise ValueError(f"{what} cannot be used: JSON nested deeper than {MAX_DEPTH} levels") from None
    except ValueError:  # json.loads' one other refusal: Python's limit on integer digits
        raise ValueError(f"{what} cannot be used: an integer of more than 4300 digits is not a JSON number") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object, not {type(value).__name__}")
    try:
        return dict(thaw(freeze(value)))
    except JsonValueError as exc:
        raise ValueError(f"{what} cannot be used: {exc}") from None


def is_bad_input(call: CompletedCall) -> bool:
    return call.status == "error" and call.error_type in BAD_INPUT_ERRORS


def ran(call: CompletedCall) -> bool:
    """The call was cleared to run (policy or approval) and reached its executor's turn."""
    return call.decision in RAN_DECISIONS


def model_text(call: CompletedCall) -> str:
    """The text the model would have been given (the function response's ``output``,
    else its ``error``)."""
    for part in thaw(call.response_parts):
        response = part.get("functionResponse", {}).get("response", {}) if isinstance(part, dict) else {}
        if not isinstance(response, dict):
            continue
        for key in ("output", "error"):
            value = response.get(key)
            if isinstance(value, str) and value:
                return value
    return ""


def shown_text(call: CompletedCall) -> str:
    """What the user sees of a result (see ``result_text``), or its error."""
    if call.status != "success" and call.error_message:
        return call.error_message
    return result_text(call.name, thaw(call.result_display), model_text(call))


def result_text(name: str, display: Any, llm_text: str) -> str:
    """What a user who ran a tool wants to see of its result: a shell command's output
    and an edit's diff (the tool's display), else what the model would be given (the
    listing, the file, the answer), since other displays only sum it up ("Found 3
    matching file(s)") or are empty (``read_file``)."""
    if name == SHELL_TOOL and isinstance(display, str):
        return display  # the command's output, also when there is none (not the model's wrapper)
    if isinstance(display, dict) and isinstance(display.get("fileDiff"), str):
        return str(display["fileDiff"])
    if llm_text:
        return llm_text
    if isinstance(display, str):
        return display
    return json.dumps(display, ensure_ascii=False) if display else ""


def context_parts(call: CompletedCall) -> list[dict[str, Any]]:
    """The parts of the user turn that shares ``call``'s result with the model."""
    args = thaw(call.args)
    if call.name == SHELL_TOOL and isinstance(args, dict):
        command = str(args.get("command", ""))
        text = (
            f"I ran the following shell command:\n```sh\n{_escape(command)}\n```\n\n"
            f"This produced the following result:\n```\n"
            f"{_escape(_cut(shell_output(call).strip() or '(Command produced no output)'))}\n```"
        )
        return [{"text": text}]
    shown_args = json.dumps(args, ensure_ascii=False, sort_keys=True)
    text = (
        f"I ran the tool {call.name} with these arguments:\n```json\n{_escape(shown_args)}\n```\n\n"
        f"This produced the following result:\n```\n{_escape(_cut(model_text(call) or shown_text(call)))}\n```"
    )
    return [{"text": text}, *_media_parts(call)]


def shell_output(call: CompletedCall) -> str:
    """A shell call's output as Gemini CLI's shell mode records it: the output, after a
    line saying how the command ended when it did not exit 0."""
    display = thaw(call.result_display)
    output = display if isinstance(display, str) else ""
    if call.status == "cancelled":
        _, found, before = output.partition("Output before cancellation:\n")
        return f"Command was cancelled.\n{before if found else ''}"
    if call.status == "error":
        message = call.error_message or "The command failed."
        return message if output in ("", message) else f"{message}\n{output}"
    if _SHELL_PLACEHOLDER.match(output):
        output = ""
    trailer: dict[str, str] = {}
    for line in reversed(model_text(call).splitlines()):
        if not _SHELL_TRAILER.match(line):
            break
        key, _, value = line.partition(": ")
        trailer.setdefault(key, value)
    # Gemini CLI's order: a spawn error, else a signal, else a non-zero exit code.
    if "Error" in trailer:
        prefix = trailer["Error"]
    elif "Signal" in trailer:
        prefix = f"Command terminated by signal: {trailer['Signal']}."
    elif "Exit Code" in trailer:
        prefix = f"Command exited with code {trailer['Exit Code']}."
    else:
        return output
    return f"{prefix}\n{output}"


def _cut(text: str) -> str:
    return text[:MAX_CONTEXT_OUTPUT] + TRUNCATED if len(text) > MAX_CONTEXT_OUTPUT else text


def _escape(text: str) -> str:
    """Gemini CLI's guard against breaking out of the fences."""
    return text.replace("\\", "\\\\").replace("`", "\\`")


def _media_parts(call: CompletedCall) -> list[dict[str, Any]]:
    """Images and files a call returned (``read_file`` of a picture) go along as they are."""
    out: list[dict[str, Any]] = []
    for part in thaw(call.response_parts):
        if not isinstance(part, dict):
            continue
        inner = part.get("functionResponse", {}).get("parts") if isinstance(part.get("functionResponse"), dict) else None
        for media in [*(inner or []), part]:
            if isinstance(media, dict) and ("inlineData" in media or "fileData" in media):
                out.append(media)
    return out
