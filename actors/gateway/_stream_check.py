"""Gemini CLI's validation of a finished response stream (pure).

A stream is valid when any valid chunk carries a function call, or when it has a finish
reason other than the malformed ones and non-empty text. Otherwise it is an *invalid
stream* of one of these types, which the gateway retries on the mid-stream layer's
counter (up to 4 attempts, 1 s, 2 s, 4 s apart; see ``_retry``) before reporting it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

_ZERO_WIDTH = re.compile("[\u200b-\u200d\ufeff\u200e\u200f]")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)

NUDGE_THINKING_ONLY = (
    "\n[System: You previously generated thoughts but failed to provide a final "
    "user-facing response. Please ensure you provide your final answer or call a tool now.]"
)
NUDGE_EMPTY = (
    "\n[System: You previously returned an empty response with no text or thoughts. "
    "Please ensure you provide your final answer or call a tool now.]"
)


@attrs.frozen
class InvalidStream:
    type: str
    message: str


def shape_problem(chunk: Any) -> str | None:
    """Why a response chunk cannot be read as one (``None``: it can): it is a JSON
    object whose ``candidates`` is a list of objects, each one's ``content`` an object
    with a list of ``parts`` (a ``functionCall`` among them an object, its ``id`` a
    string), and whose ``usageMetadata`` is an object. Gemini CLI meets
    such a chunk with a TypeError (``chunk?.candidates?.find is not a function``); here
    the response fails with this reason, and every actor after the gateway reads only
    chunks of that shape."""
    if not isinstance(chunk, Mapping):
        return f"a chunk is {_a(chunk)}, not an object"
    usage = chunk.get("usageMetadata")
    if usage is not None and not isinstance(usage, Mapping):
        return f"usageMetadata is {_a(usage)}, not an object"
    cands = chunk.get("candidates")
    if cands is None:
        return None
    if not isinstance(cands, (list, tuple)):
        return f"candidates is {_a(cands)}, not a list"
    for cand in cands:
        if not isinstance(cand, Mapping):
            return f"a candidate is {_a(cand)}, not an object"
        content = cand.get("content")
        if content is None:
            continue
        if not isinstance(content, Mapping):
            return f"a candidate's content is {_a(content)}, not an object"
        parts = content.get("parts")
        if parts is not None and not isinstance(parts, (list, tuple)):
            return f"a candidate's parts is {_a(parts)}, not a list"
        for part in parts or ():
            call = part.get("functionCall") if isinstance(part, Mapping) else None
            if call is None:
                continue
            if not isinstance(call, Mapping):
                return f"a functionCall is {_a(call)}, not an object"
            if call.get("id") is not None and not isinstance(call["id"], str):
                return f"a functionCall's id is {_a(call['id'])}, not a string"
    return None


def _a(value: Any) -> str:
    """A JSON value's kind, for a message: ``a number``, ``a string``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    return "an object"


def _parts(chunk: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    cands = chunk.get("candidates") or ()
    if not cands:
        return []
    content = cands[0].get("content") or {}
    return [p for p in content.get("parts") or () if isinstance(p, Mapping)]


def _valid_chunk(chunk: Mapping[str, Any]) -> bool:
    cands = chunk.get("candidates") or ()
    if not cands or not isinstance(cands[0].get("content"), Mapping):
        return False
    parts = cands[0]["content"].get("parts")
    if not parts:
        return True  # an empty model turn is valid content
    for p in parts:
        if not isinstance(p, Mapping) or not p:
            return False
        if not p.get("thought") and p.get("text") == "" and set(p) <= {"text", "thought", "callIndex"}:
            return False
    return True


@attrs.define
class StreamCheck:
    """Feed every chunk of one attempt, then ask for the ``verdict``."""

    request_is_function_response: bool
    has_tool_call: bool = False
    has_thoughts: bool = False
    finish: str | None = None
    text: list[str] = attrs.field(factory=list)

    def feed(self, chunk: Mapping[str, Any]) -> None:
        cands = chunk.get("candidates") or ()
        if cands and cands[0].get("finishReason"):
            self.finish = str(cands[0]["finishReason"])
        if not _valid_chunk(chunk):
            return
        for p in _parts(chunk):
            if "functionCall" in p:
                self.has_tool_call = True
            if p.get("thought"):
                self.has_thoughts = True
            elif isinstance(p.get("text"), str):
                self.text.append(p["text"])

    def response_text(self) -> str:
        text = _ZERO_WIDTH.sub("", "".join(self.text))
        while True:
            stripped = _HTML_COMMENT.sub("", text)
            if stripped == text:
                break
            text = stripped
        return text.strip()

    def verdict(self) -> InvalidStream | None:
        if self.has_tool_call:
            return None
        fr = self.finish
        if not fr and not self.request_is_function_response:
            return InvalidStream("NO_FINISH_REASON", "Model stream ended without a finish reason.")
        if fr == "MALFORMED_FUNCTION_CALL":
            return InvalidStream(
                "MALFORMED_FUNCTION_CALL", "Model stream ended with malformed function call."
            )
        if fr == "UNEXPECTED_TOOL_CALL":
            return InvalidStream(
                "UNEXPECTED_TOOL_CALL", "Model stream ended with unexpected tool call."
            )
        if self.response_text():
            return None
        blocked = {
            "MAX_TOKENS": (
                "MAX_TOKENS_EXCEEDED",
                "Model stream ended due to token limit exhaustion (MAX_TOKENS) with empty response text.",
            ),
            "SAFETY": (
                "SAFETY_BLOCKED",
                "Model stream ended due to safety settings (SAFETY) with empty response text.",
            ),
            "RECITATION": (
                "RECITATION_BLOCKED",
                "Model stream ended due to recitation settings (RECITATION) with empty response text.",
            ),
            "OTHER": (
                "OTHER_BLOCKED",
                "Model stream ended due to other settings (OTHER) with empty response text.",
            ),
        }
        if fr in blocked:
            return InvalidStream(*blocked[fr])
        if self.has_thoughts:
            return InvalidStream(
                "THINKING_ONLY_RESPONSE",
                "Model stream ended with empty response text but contained reasoning thoughts.",
            )
        if not self.request_is_function_response:
            return InvalidStream("NO_RESPONSE_TEXT", "Model stream ended with empty response text.")
        return None


def request_is_function_response(contents: Any) -> bool:
    if not contents:
        return False
    parts = contents[-1].get("parts") or ()
    return bool(parts) and all("functionResponse" in p for p in parts)
