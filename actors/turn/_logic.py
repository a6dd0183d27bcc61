"""Pure parts of the turn: reading response chunks, call ids, request contents.

No I/O and no trio here; the actor shell in ``_actor.py`` drives these.
"""

from __future__ import annotations

import itertools
import json
import operator
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
from frozendict import frozendict

from bus.json_values import FrozenTuple, freeze, thaw

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


def request_contents(
    history: Sequence[Any], message: Any, builder: RequestBuilder | None = None
) -> tuple[Any, ...]:
    """The contents sent to the model for ``message`` after ``history``.

    Gemini CLI's rules: a placeholder model turn when a tool answer was never followed by
    the model and a new prompt arrives; consecutive same-role turns coalesced; the first
    function call of each model turn in the active loop (from the last user turn with
    text and no function response) gets a synthetic thought signature when it has none;
    ``<name>__`` id prefixes stripped.

    With a ``builder`` (the turn actor keeps one for the session) the work is what is new
    since its last request (``RequestBuilder``); without, a fresh one does it all.
    """
    return (builder if builder is not None else RequestBuilder()).contents(history, message)


INTERRUPTED_TURN = freeze({"role": "model", "parts": [{"text": INTERRUPTED_RESPONSE_PLACEHOLDER}]})

_NEVER = sys.maxsize
"""The active loop's start when there is none: no content is at or after it."""


def _is_prompt(content: Any) -> bool:
    """A user turn with text and no function response: where an active loop starts."""
    parts = content.get("parts") or ()
    return (
        content.get("role") == "user"
        and any(p.get("text") for p in parts)
        and not any(p.get("functionResponse") for p in parts)
    )


def _answers_tools(content: Any) -> bool:
    return content.get("role") == "user" and any("functionResponse" in p for p in content.get("parts") or ())


class RequestBuilder:
    """``request_contents`` for a conversation that grows at its end, in time
    proportional to what is new: a long session's request costs what its last turn
    added, not a pass over its history.

    It keeps, for the history it saw last, the contents of its closed role groups (all
    but the last, which the next content may still join), each one's request form
    (``RequestForms``) and where the last prompt among them is; the request's contents
    are those forms (a ``FrozenTuple``, so the message takes them as they are) and the
    forms of the last group, the placeholder and the message. Given the same list again,
    longer, it takes in the new contents only: the caller (``TurnHistory``) only ever
    appends to a list it gives, and makes a new list for any other change. Another
    list is compared with the last one by identity (at C speed) and taken in from
    where they differ. The active loop's start moves forward with new prompts; the
    forms it passes are made again (unsigned), and only those.
    """

    def __init__(self) -> None:
        self.forms = RequestForms()
        self._source: list[Any] | None = None
        """The list the state describes (its first ``_seen`` items)."""
        self._seen = 0
        self._open: list[Any] = []
        """The last role group of the history: items the next one may still join."""
        self._closed: list[Any] = []
        """The content of each closed group (its item, or the group merged)."""
        self._forms = FrozenTuple()
        """The request form of each closed group's content, signed from ``_signed_from``."""
        self._signed_from = _NEVER
        self._last_prompt = -1
        """The index of the last closed content that is a prompt (-1: none)."""
        self._keep_at = 64

    def contents(self, history: Sequence[Any], message: Any) -> FrozenTuple:
        self._take_in(history)
        tail = list(self._open)
        if self._open and not is_function_response(message.get("parts") or ()) and _answers_tools(self._open[-1]):
            tail.append(INTERRUPTED_TURN)
        tail.append(message)
        groups: list[list[Any]] = []
        for c in tail:
            if groups and groups[-1][0].get("role") == c.get("role"):
                groups[-1].append(c)
            else:
                groups.append([c])
        first = len(self._closed)
        last = [g[0] if len(g) == 1 else self.forms.merged(g) for g in groups]
        start = self._last_prompt
        for i, c in enumerate(last):
            if _is_prompt(c):
                start = first + i
        self._sign_from(_NEVER if start == -1 else start)
        signed_from = self._signed_from
        return self._forms.join(
            self.forms.form(c, signed=first + i >= signed_from and c.get("role") == "model")
            for i, c in enumerate(last)
        )

    def _take_in(self, history: Sequence[Any]) -> None:
        """Bring the state up to ``history``: its new items, or all of it from where it
        differs from the last one."""
        seen = self._seen
        if history is not self._source or len(history) < seen:
            last = self._source[:seen] if self._source is not None else ()
            shared = next(itertools.compress(itertools.count(), map(operator.is_not, history, last)), None)
            if shared is None:
                shared = min(len(history), len(last))
            if shared < seen:
                self._restart()
                seen = 0
        self._source = history if isinstance(history, list) else list(history)
        for item in itertools.islice(history, seen, None):
            if self._open and self._open[0].get("role") != item.get("role"):
                self._close()
            self._open.append(item)
        self._seen = len(history)
        if self.forms.size() > self._keep_at:
            # Forms of contents that left the history (a compression, a rollback):
            # forgotten now and then, so the memory stays what the history takes.
            self.forms.keep([*self._closed, *self._open])
            self._keep_at = 2 * self.forms.size() + 64

    def _close(self) -> None:
        group, self._open = self._open, []
        content = group[0] if len(group) == 1 else self.forms.merged(group)
        index = len(self._closed)
        self._closed.append(content)
        if _is_prompt(content):
            self._last_prompt = index
        signed = index >= self._signed_from and content.get("role") == "model"
        self._forms = self._forms.join((self.forms.form(content, signed=signed),))

    def _sign_from(self, start: int) -> None:
        """Move the active loop's start: the closed forms between the old and the new
        one are made again."""
        old, self._signed_from = self._signed_from, start
        low, high = min(old, start), min(max(old, start), len(self._closed))
        if low >= high:
            return
        redone = [
            self.forms.form(c, signed=i >= start and c.get("role") == "model")
            for i, c in enumerate(self._closed[low:high], start=low)
        ]
        if start > old:
            # The loop ended before these: their signed forms are not sent again.
            for c in self._closed[low:high]:
                self.forms.drop(c, signed=True)
        self._forms = FrozenTuple(self._forms[:low] + tuple(redone) + self._forms[high:])

    def _restart(self) -> None:
        self._open, self._closed = [], []
        self._forms, self._signed_from, self._last_prompt = FrozenTuple(), _NEVER, -1


class RequestForms:
    """The request form of each content (ids stripped; signed in the active loop),
    made once per content object; merged same-role runs likewise. A content the form
    would not change (no prefixed call id, no call to sign: every text turn) is its own
    form, neither copied nor kept here: a long session's contents are held once."""

    def __init__(self) -> None:
        self._forms: dict[tuple[int, bool], tuple[Any, Any]] = {}
        self._merged: dict[tuple[int, ...], tuple[tuple[Any, ...], Any]] = {}

    def form(self, content: Any, *, signed: bool) -> Any:
        if not _form_changes(content, signed):
            return content
        key = (id(content), signed)
        hit = self._forms.get(key)
        if hit is not None and hit[0] is content:
            return hit[1]
        if isinstance(content, frozendict):
            made = _changed_form(content, signed)
        else:
            plain = thaw(content)
            _strip_ids(plain)
            if signed:
                _sign(plain)
            made = freeze(plain)
        self._forms[key] = (content, made)
        return made

    def drop(self, content: Any, *, signed: bool) -> None:
        """Forget one form of ``content`` (a signed one the active loop left behind)."""
        key = (id(content), signed)
        hit = self._forms.get(key)
        if hit is not None and hit[0] is content:
            del self._forms[key]

    def merged(self, group: Sequence[Any]) -> Any:
        key = tuple(id(c) for c in group)
        hit = self._merged.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], group, strict=True)):
            return hit[1]
        parts: list[Any] = []
        for c in group:
            parts.extend(c.get("parts") or ())
        made = freeze({**thaw(group[0]), "parts": thaw(tuple(parts))})
        self._merged[key] = (tuple(group), made)
        return made

    def size(self) -> int:
        return len(self._forms) + len(self._merged)

    def keep(self, contents: Sequence[Any]) -> None:
        """Forget the forms of contents other than ``contents`` (what left the history:
        a compression, a new session), so the memory stays proportional to the history."""
        live = {id(c) for c in contents}
        self._forms = {k: v for k, v in self._forms.items() if k[0] in live}
        self._merged = {k: v for k, v in self._merged.items() if all(i in live for i in k)}


def _form_changes(content: Any, signed: bool) -> bool:
    """Whether ``_strip_ids`` (and ``_sign`` when ``signed``) would change ``content``,
    read as it is (frozen), without a copy."""
    parts = content.get("parts") or ()
    for part in parts:
        for key in ("functionCall", "functionResponse"):
            inner = part.get(key)
            if isinstance(inner, Mapping) and isinstance(inner.get("id"), str):
                name = str(inner.get("name") or "").strip() or "generic_tool"
                if inner["id"] != _strip_prefix(inner["id"], name):
                    return True
    if signed:
        for part in parts:
            if "functionCall" in part:
                return not part.get("thoughtSignature")
    return False


def _changed_form(content: Any, signed: bool) -> Any:
    """``_strip_ids`` and ``_sign`` applied to a frozen content, as a frozen content
    that shares with it every value they leave as it is (a tool's output is not copied):
    the same JSON, in the same key order, as thawing, changing and freezing it again."""
    parts = list(content.get("parts") or ())
    for j, part in enumerate(parts):
        for key in ("functionCall", "functionResponse"):
            inner = part.get(key)
            if isinstance(inner, Mapping) and isinstance(inner.get("id"), str):
                name = str(inner.get("name") or "").strip() or "generic_tool"
                stripped = _strip_prefix(inner["id"], name)
                if stripped != inner["id"]:
                    part = frozendict({**part, key: frozendict({**inner, "id": stripped})})
        parts[j] = part
    if signed:
        for j, part in enumerate(parts):
            if "functionCall" in part:
                if not part.get("thoughtSignature"):
                    parts[j] = frozendict({**part, "thoughtSignature": SYNTHETIC_THOUGHT_SIGNATURE})
                break
    return frozendict({**content, "parts": tuple(parts)})


def _strip_ids(content: dict[str, Any]) -> None:
    for part in content.get("parts") or ():
        for key in ("functionCall", "functionResponse"):
            inner = part.get(key)
            if isinstance(inner, dict) and isinstance(inner.get("id"), str):
                # (a call without a name runs, and is answered, as generic_tool)
                name = str(inner.get("name") or "").strip() or "generic_tool"
                inner["id"] = _strip_prefix(inner["id"], name)


def _strip_prefix(call_id: str, name: str) -> str:
    prefix = f"{name}__"
    return call_id[len(prefix) :] if name and call_id.startswith(prefix) else call_id


def _sign(content: dict[str, Any]) -> None:
    """The first function call of a model turn gets a synthetic thought signature when
    it has none."""
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
