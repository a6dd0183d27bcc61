"""Pure parts of the turn: reading response chunks, call ids, request contents.

No I/O and no trio here; the actor shell in ``_actor.py`` drives these.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from bus.json_values import freeze, thaw

SYNTHETIC_THOUGHT_SIGNATURE = "skip_thought_signature_validator"
INTERRUPTED_RESPONSE_PLACEHOLDER = "[The previous response was interrupted before it completed.]"


def parse_thought(raw: str) -> tuple[str, str]:
    """Split a thought into (subject, description): subject is the first ``**...**``."""
    start = raw.find("**")
    if start == -1:
        return "", raw.strip()
    end = raw.find("**", start + 2)
    if end == -1:
        return "", raw.strip()
    subject = raw[start + 2 : end].strip()
    description = (raw[:start] + raw[end + 2 :]).strip()
    return subject, description


def candidate_parts(chunk: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    candidates = chunk.get("candidates") or ()
    if not candidates:
        return []
    content = candidates[0].get("content") or {}
    parts = content.get("parts") or ()
    return [p for p in parts if isinstance(p, Mapping)]


def finish_reason(chunk: Mapping[str, Any]) -> str | None:
    candidates = chunk.get("candidates") or ()
    if not candidates:
        return None
    reason = candidates[0].get("finishReason")
    return str(reason) if reason else None


def response_text(chunk: Mapping[str, Any]) -> str:
    """Non-thought text of a chunk, joined with no separator."""
    return "".join(
        str(p["text"]) for p in candidate_parts(chunk) if p.get("text") and not p.get("thought")
    )


def make_call_id(name: str, given_id: str | None, now_ms: int, counter: int) -> str:
    """Gemini CLI's call id: ``<name>__<raw id>``; a missing raw id is ``<name>_<ms>_<n>``."""
    raw = given_id if given_id else f"{name}_{now_ms}_{counter}"
    return raw if raw.startswith(f"{name}__") else f"{name}__{raw}"


@attrs.define
class ChunkReading:
    """What one chunk means for the turn, in Gemini CLI's event order."""

    thoughts: list[tuple[str, str]]
    text: str
    calls: list[tuple[str, str, Any]]
    """(call_id, name, args) with ids assigned."""
    finish_reason: str | None
    usage: Mapping[str, Any] | None


@attrs.define
class ModelTurnBuilder:
    """Accumulates one model response into the history's model turn.

    Thought parts never reach history; adjacent plain text parts are merged; function
    calls get their (prefixed) ids written back so responses can match them.
    """

    now_ms: int
    parts: list[dict[str, Any]] = attrs.field(factory=list)
    calls: list[tuple[str, str, Any]] = attrs.field(factory=list)
    counter: int = 0
    chunk_texts: list[str] = attrs.field(factory=list)

    def read(self, chunk: Mapping[str, Any]) -> ChunkReading:
        parts = candidate_parts(chunk)
        if parts:
            self.chunk_texts.append(response_text(chunk))
        thoughts = [parse_thought(str(p.get("text") or "")) for p in parts if p.get("thought")]
        text = response_text(chunk)
        calls: list[tuple[str, str, Any]] = []
        valid = is_valid_response(chunk)
        for part in parts:
            fc = part.get("functionCall")
            if isinstance(fc, Mapping):
                name = str(fc.get("name") or "").strip() or "generic_tool"
                call_id = make_call_id(name, fc.get("id"), self.now_ms, self.counter)
                self.counter += 1
                args = fc.get("args") or {}
                calls.append((call_id, name, args))
                # The call runs even when its chunk is invalid (an empty text part beside
                # it), so it stays in the history: its response must answer a call.
                stored = dict(thaw(part))
                stored["functionCall"] = {**thaw(fc), "id": call_id}
                self._append(stored)
            elif valid and not part.get("thought"):
                self._append(dict(thaw(part)))
        self.calls.extend(calls)
        usage = chunk.get("usageMetadata")
        return ChunkReading(
            thoughts=thoughts,
            text=text,
            calls=calls,
            finish_reason=finish_reason(chunk),
            usage=usage if isinstance(usage, Mapping) else None,
        )

    def _append(self, part: dict[str, Any]) -> None:
        if (
            self.parts
            and _is_plain_text(part)
            and _is_plain_text(self.parts[-1])
        ):
            self.parts[-1] = {"text": self.parts[-1]["text"] + part["text"]}
        else:
            self.parts.append(part)

    def content(self) -> Any:
        return freeze({"role": "model", "parts": self.parts})

    def text(self) -> str:
        """Gemini CLI's ``Turn.getResponseText``: each chunk's text, joined with spaces."""
        return " ".join(self.chunk_texts)

    def reset(self) -> None:
        """Forget a failed attempt (mid-stream retry)."""
        self.parts.clear()
        self.calls.clear()
        self.chunk_texts.clear()


def _is_plain_text(part: Mapping[str, Any]) -> bool:
    return set(part) == {"text"} and isinstance(part["text"], str)


def is_valid_part(part: Any) -> bool:
    if not isinstance(part, Mapping) or not part:
        return False
    if not part.get("thought") and part.get("text") == "" and set(part) <= {
        "text",
        "thought",
        "callIndex",
    }:
        return False
    return True


def is_valid_content(content: Mapping[str, Any]) -> bool:
    parts = content.get("parts")
    if content.get("role") == "model" and not parts:
        return True
    if not parts:
        return False
    return all(is_valid_part(p) for p in parts)


def is_valid_response(chunk: Mapping[str, Any]) -> bool:
    candidates = chunk.get("candidates") or ()
    if not candidates:
        return False
    content = candidates[0].get("content")
    if not isinstance(content, Mapping):
        return False
    return is_valid_content({"role": "model", **content})


def is_function_response(parts: Iterable[Mapping[str, Any]]) -> bool:
    parts = list(parts)
    return bool(parts) and all("functionResponse" in p for p in parts)


def user_content(parts: Sequence[Any]) -> Any:
    return freeze({"role": "user", "parts": list(parts)})


def request_contents(history: Sequence[Any], message: Any) -> tuple[Any, ...]:
    """The contents sent to the model for ``message`` after ``history``.

    Gemini CLI's rules: a placeholder model turn when a tool answer was never followed by
    the model and a new prompt arrives; consecutive same-role turns coalesced; the first
    function call of each model turn in the active loop gets a synthetic thought
    signature when it has none; ``<name>__`` id prefixes stripped.
    """
    contents: list[dict[str, Any]] = [thaw(c) for c in history]
    msg = thaw(message)
    if (
        not is_function_response(msg.get("parts") or ())
        and contents
        and contents[-1].get("role") == "user"
        and any("functionResponse" in p for p in contents[-1].get("parts") or ())
    ):
        contents.append({"role": "model", "parts": [{"text": INTERRUPTED_RESPONSE_PLACEHOLDER}]})
    contents.append(msg)
    contents = _coalesce(contents)
    _sign_active_loop(contents)
    for content in contents:
        for part in content.get("parts") or ():
            for key in ("functionCall", "functionResponse"):
                inner = part.get(key)
                if isinstance(inner, dict) and isinstance(inner.get("id"), str):
                    # (a call without a name runs, and is answered, as generic_tool)
                    name = str(inner.get("name") or "").strip() or "generic_tool"
                    inner["id"] = _strip_prefix(inner["id"], name)
    return tuple(freeze(c) for c in contents)


def _strip_prefix(call_id: str, name: str) -> str:
    prefix = f"{name}__"
    return call_id[len(prefix) :] if name and call_id.startswith(prefix) else call_id


def _coalesce(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for c in contents:
        if out and out[-1].get("role") == c.get("role"):
            out[-1] = {**out[-1], "parts": list(out[-1].get("parts") or ()) + list(c.get("parts") or ())}
        else:
            out.append(dict(c))
    return out


def _sign_active_loop(contents: list[dict[str, Any]]) -> None:
    start = -1
    for i in range(len(contents) - 1, -1, -1):
        parts = contents[i].get("parts") or ()
        if (
            contents[i].get("role") == "user"
            and any(p.get("text") for p in parts)
            and not any(p.get("functionResponse") for p in parts)
        ):
            start = i
            break
    if start == -1:
        return
    for content in contents[start:]:
        if content.get("role") != "model":
            continue
        parts = content.get("parts") or []
        for j, part in enumerate(parts):
            if "functionCall" in part:
                if not part.get("thoughtSignature"):
                    parts[j] = {**part, "thoughtSignature": SYNTHETIC_THOUGHT_SIGNATURE}
                break


def parse_classifier_choice(text: str) -> str | None:
    """``flash``/``pro`` from a router classifier answer: JSON with ``model_choice``, or a
    0-100 complexity score (50 and above: ``pro``)."""
    try:
        data = json.loads(text.strip())
    except (ValueError, RecursionError):  # RecursionError: nested past the parser
        return None
    if isinstance(data, dict) and data.get("model_choice") in ("flash", "pro"):
        return str(data["model_choice"])
    if isinstance(data, int | float) and not isinstance(data, bool):
        return "pro" if data >= 50 else "flash"
    return None


def parts_text(parts: Iterable[Any]) -> str:
    """The text of a prompt's parts (Gemini CLI's ``partToString``)."""
    return "".join(str(p.get("text")) for p in parts if isinstance(p, Mapping) and p.get("text") is not None)
