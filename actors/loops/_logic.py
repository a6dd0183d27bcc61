"""The loop detector's pure core: Gemini CLI's three rules, no I/O, no trio.

Per prompt (``reset`` at each new prompt id) it keeps:

- **tool calls**: the last 25 keys ``sha256(name + ":" + JSON(args))``; a call is a loop
  when, for some cycle length ``k`` in 1..5, the last ``5k`` keys are the last ``k``
  repeated five times (``AAAAA``, ``ABABABABAB``, ...). Every call first resets the
  content tracking.
- **content**: up to 5 000 characters of streamed text; every 50-character window is
  indexed; a window seen for the tenth time is a loop when its last ten occurrences are
  on average at most 250 characters apart and the texts between them take at most 5
  distinct values. A chunk holding a code fence, a table row, a list item, a heading, a
  blockquote or a divider resets the tracking; nothing is checked inside a code block.
- **LLM check**: counted per model request of the prompt (``turn_started``); from the
  30th, every ``interval`` requests (10 at first, then 5..15 from the last confidence)
  a model judges the recent history; a confidence of at least 0.9 must be confirmed by a
  second model (``llm_first_pass`` then ``llm_double_check``).

A detection is sticky until ``clear_detection`` (the recovery turn), which keeps the
count: the next detection of the prompt is the second. ``disable`` turns it all off.

Lengths and windows are in Python characters (code points); JavaScript counts UTF-16
units, so text with characters outside the BMP is windowed slightly differently.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from actors.common import js_json, js_round, json_answer
from bus.messages import LoopType

TOOL_CALL_LOOP_THRESHOLD = 5
CONTENT_LOOP_THRESHOLD = 10
CONTENT_CHUNK_SIZE = 50
MAX_HISTORY_LENGTH = 5_000
MAX_CYCLE_LENGTH = 5
TOOL_CALL_WINDOW = MAX_CYCLE_LENGTH * TOOL_CALL_LOOP_THRESHOLD
MAX_AVERAGE_GAP = CONTENT_CHUNK_SIZE * 5
MAX_DISTINCT_PERIODS = CONTENT_LOOP_THRESHOLD // 2
SWEEP_EVERY = 4 * MAX_HISTORY_LENGTH
"""Characters cut from the front between two sweeps of the window index."""
LLM_LOOP_CHECK_HISTORY_COUNT = 20
LLM_CHECK_AFTER_TURNS = 30
DEFAULT_LLM_CHECK_INTERVAL = 10
MIN_LLM_CHECK_INTERVAL = 5
MAX_LLM_CHECK_INTERVAL = 15
LLM_CONFIDENCE_THRESHOLD = 0.9

TOOL_CALL_LOOP: Final = "consecutive_identical_tool_calls"
CONTENT_LOOP: Final = "chanting_identical_sentences"
LLM_LOOP: Final = "llm_detected_loop"

# JavaScript's \s, and its "." (which stops at any line terminator), spelled out: the
# rules are Gemini CLI's regular expressions and must match the same chunks.
_WS = "[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"
_ANY = "[^\n\r\u2028\u2029]"
# Gemini CLI's five patterns, each anchored at the start or after a newline: a table row
# ``\s*(\|.*\||[|+-]{3,})``, a list item ``\s*[*-+]\s`` ("*-+" is a range: "*" and
# "+" only), a numbered item ``\s*[0-9]+\.\s``, a heading ``#+\s``, a blockquote
# ``>\s``; the first three share their leading spaces here, which compiles in 0.7
# instead of 1.0 ms (a one-shot run compiles it) and finds the same chunks
# (``tests/loops/test_logic.py``).
_ELEMENT = re.compile(
    rf"(?:^|\n)(?:{_WS}*(?:\|{_ANY}*\||[|+-]{{3,}}|[*-+]{_WS}|[0-9]+\.{_WS})|#+{_WS}|>{_WS})"
)
"""A table row, list item, heading or blockquote starts in the chunk (one search)."""
_DIVIDER = re.compile("[+-_=*\u2500-\u257f]+")  # "+-_" is a range (0x2B-0x5F), as in JS
_JS_TRIM = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


@attrs.frozen
class Verdict:
    """``count`` detections in this prompt when the event completes a loop, else 0."""

    count: int = 0
    loop_type: LoopType | None = None
    detail: str | None = None
    confirmed_by: str | None = None


NO_LOOP = Verdict()


@attrs.frozen
class LlmAnswer:
    """What a loop-check model said (``None`` from the parser: no usable answer)."""

    confidence: float
    analysis: str


LLM_DUE = "llm_due"
ASK_DOUBLE_CHECK = "ask_double_check"


def tool_call_key(name: str, args: Any) -> str:
    return hashlib.sha256(f"{name}:{js_json(args)}".encode("utf-8", "surrogatepass")).hexdigest()


def is_structural(chunk: str) -> tuple[int, bool, bool]:
    """(number of code fences, whether the chunk resets the content tracking, whether it
    is a divider)."""
    fences = chunk.count("```")
    divider = _DIVIDER.fullmatch(chunk) is not None
    resets = bool(
        fences
        or divider
        or _ELEMENT.search(chunk)
    )
    return fences, resets, divider


@attrs.define
class LoopDetector:
    """One session's detector (see the module docstring)."""

    prompt_id: str = ""
    user_prompt: str = ""
    disabled: bool = False
    detected: bool = False
    count: int = 0
    last: Verdict = NO_LOOP
    # tool calls
    keys: list[str] = attrs.field(factory=list)
    # content: ``text`` is the kept history; indices are absolute (``dropped`` characters
    # were cut from the front), so cutting never rewrites the index lists.
    text: str = ""
    dropped: int = 0
    swept_at: int = 0
    position: int = 0
    """Absolute start of the next window to index (Gemini's ``lastContentIndex``)."""
    seen: dict[str, int | list[int]] = attrs.field(factory=dict)
    in_code_block: bool = False
    # LLM check
    turns: int = 0
    interval: int = DEFAULT_LLM_CHECK_INTERVAL
    last_check_turn: int = 0

    # -- prompts -----------------------------------------------------------------------
    def reset(self, prompt_id: str, user_prompt: str = "") -> None:
        """A new prompt: everything but ``disabled`` starts over."""
        self.prompt_id, self.user_prompt = prompt_id, user_prompt
        self.keys = []
        self._reset_content()
        self.turns, self.interval, self.last_check_turn = 0, DEFAULT_LLM_CHECK_INTERVAL, 0
        self.detected, self.count, self.last = False, 0, NO_LOOP

    def clear_detection(self) -> None:
        """The recovery turn may proceed; the count stays."""
        self.detected = False

    def disable(self) -> None:
        self.disabled = True

    def _sticky(self) -> Verdict:
        return attrs.evolve(self.last, count=self.count)

    def _found(self, loop_type: LoopType, detail: str, confirmed_by: str | None = None) -> Verdict:
        self.detected = True
        self.count += 1
        self.last = Verdict(self.count, loop_type, detail, confirmed_by)
        return self.last

    # -- tool calls --------------------------------------------------------------------
    def check_tool_call(self, name: str, args: Any) -> Verdict:
        if self.disabled:
            return NO_LOOP
        if self.detected:
            return self._sticky()
        self._reset_content()
        self.keys.append(tool_call_key(name, args))
        if len(self.keys) > TOOL_CALL_WINDOW:
            del self.keys[: len(self.keys) - TOOL_CALL_WINDOW]
        if self._repeats_a_cycle():
            return self._found(TOOL_CALL_LOOP, f"Repeated tool call: {name} with arguments {js_json(args)}")
        return NO_LOOP

    def _repeats_a_cycle(self) -> bool:
        keys, n = self.keys, len(self.keys)
        for k in range(1, MAX_CYCLE_LENGTH + 1):
            need = k * TOOL_CALL_LOOP_THRESHOLD
            if n < need:
                break
            cycle = keys[n - k :]
            if all(keys[n - need + i] == cycle[i % k] for i in range(need)):
                return True
        return False

    # -- content -----------------------------------------------------------------------
    def _reset_content(self) -> None:
        self.text, self.dropped, self.swept_at, self.position = "", 0, 0, 0
        self.seen = {}

    def check_content(self, chunk: str) -> Verdict:
        if self.disabled:
            return NO_LOOP
        if self.detected:
            return self._sticky()
        fences, resets, divider = is_structural(chunk)
        if resets:
            self._reset_content()
        was_in_code = self.in_code_block
        if fences % 2:
            self.in_code_block = not self.in_code_block
        if was_in_code or self.in_code_block or divider:
            return NO_LOOP
        self.text += chunk
        self._trim()
        if self._analyse():
            return self._found(CONTENT_LOOP, self._content_detail())
        return NO_LOOP

    def _trim(self) -> None:
        excess = len(self.text) - MAX_HISTORY_LENGTH
        if excess <= 0:
            return
        self.text = self.text[excess:]
        self.dropped += excess
        self.position = max(self.position, self.dropped)
        if self.dropped - self.swept_at > SWEEP_EVERY:
            # Forget windows whose every occurrence fell off the front (amortised O(1)
            # per character); stale leading indices of the others are cut when read.
            self.swept_at = dropped = self.dropped
            self.seen = {
                w: v for w, v in self.seen.items() if (v if isinstance(v, int) else v[-1]) >= dropped
            }

    def _analyse(self) -> bool:
        """Index each new 50-character window; True at the first one that completes a
        chant (``position`` then stays on it, as Gemini CLI's index does).

        A window seen once is stored as its position, a repeated one as the list of its
        positions. The first occurrences are indexed in one pass in C
        (``dict.setdefault``); only repeats take the Python path, in order.
        """
        text, dropped, first = self.text, self.dropped, self.position
        stop = len(text) - CONTENT_CHUNK_SIZE + 1
        rel = first - dropped
        if rel >= stop:
            return False
        seen = self.seen
        setdefault = seen.setdefault
        size = CONTENT_CHUNK_SIZE
        found = [setdefault(text[i : i + size], i + dropped) for i in range(rel, stop)]
        positions = list(range(first, first + len(found)))
        if found != positions:
            for position, got in zip(positions, found, strict=True):
                if got == position:
                    continue
                window = text[position - dropped : position - dropped + size]
                current = seen[window]  # ``got`` may be stale: repeats within this pass
                indices: list[int]
                if isinstance(current, int):
                    if current < dropped:  # its only occurrence fell off: a first one again
                        seen[window] = position
                        continue
                    indices = seen[window] = [current, position]
                else:
                    indices = current
                    if indices[0] < dropped:
                        indices = [i for i in indices if i >= dropped]
                        if not indices:
                            seen[window] = position
                            continue
                        seen[window] = indices
                    indices.append(position)
                if len(indices) >= CONTENT_LOOP_THRESHOLD and self._is_chant(indices[-CONTENT_LOOP_THRESHOLD:]):
                    self.position = position
                    return True
        self.position = first + len(found)
        return False

    def _is_chant(self, recent: Sequence[int]) -> bool:
        if (recent[-1] - recent[0]) / (CONTENT_LOOP_THRESHOLD - 1) > MAX_AVERAGE_GAP:
            return False
        base = self.dropped
        periods = {self.text[a - base : b - base] for a, b in zip(recent, recent[1:], strict=False)}
        return len(periods) <= MAX_DISTINCT_PERIODS

    def _content_detail(self) -> str:
        at = self.position - self.dropped
        snippet = self.text[max(0, at - 20) : at + CONTENT_CHUNK_SIZE].strip(_JS_TRIM)
        return f'Repeating content detected: "{snippet}..."'

    # -- LLM check ---------------------------------------------------------------------
    def turn_started(self) -> Verdict | str:
        """Before a model request: a sticky detection, ``LLM_DUE``, or no loop."""
        if self.disabled:
            return NO_LOOP
        if self.detected:
            return self._sticky()
        self.turns += 1
        if self.turns >= LLM_CHECK_AFTER_TURNS and self.turns - self.last_check_turn >= self.interval:
            self.last_check_turn = self.turns
            return LLM_DUE
        return NO_LOOP

    def _update_interval(self, confidence: float) -> None:
        span = MAX_LLM_CHECK_INTERVAL - MIN_LLM_CHECK_INTERVAL
        self.interval = js_round(MIN_LLM_CHECK_INTERVAL + span * (1 - confidence))

    def llm_first_pass(self, answer: LlmAnswer | None) -> Verdict | str:
        """After the first model: no loop, or ``ASK_DOUBLE_CHECK``."""
        if answer is None:
            return NO_LOOP
        if answer.confidence < LLM_CONFIDENCE_THRESHOLD:
            self._update_interval(answer.confidence)
            return NO_LOOP
        return ASK_DOUBLE_CHECK

    def llm_double_check(self, answer: LlmAnswer | None, model: str) -> Verdict:
        """After the confirming model: a loop only when it is confident too."""
        if answer is None:
            return NO_LOOP
        if answer.confidence >= LLM_CONFIDENCE_THRESHOLD:
            return self._found(LLM_LOOP, answer.analysis, confirmed_by=model)
        self._update_interval(answer.confidence)
        return NO_LOOP


def llm_check_contents(history: Sequence[Any], user_prompt: str, task: str) -> list[Any]:
    """The loop check's contents: the original request, the recent history trimmed so it
    neither ends with a call nor starts with a response, then ``task``."""
    recent = [c for c in history][-LLM_LOOP_CHECK_HISTORY_COUNT:]
    while recent and _is_function_call(recent[-1]):
        recent.pop()
    while recent and _is_function_response(recent[0]):
        recent.pop(0)
    contents: list[Any] = []
    if user_prompt:
        contents.append(
            {"role": "user", "parts": [{"text": f"<original_user_request>\n{user_prompt}\n</original_user_request>"}]}
        )
    contents.extend(recent)
    contents.append({"role": "user", "parts": [{"text": task}]})
    if _is_function_call(contents[0]):
        contents.insert(0, {"role": "user", "parts": [{"text": "Recent conversation history:"}]})
    return contents


# Gemini CLI's ``isFunctionCall`` / ``isFunctionResponse``: ``parts.every(...)``, so
# a turn with no parts counts as both.
def _is_function_call(content: Mapping[str, Any]) -> bool:
    parts = content.get("parts")
    return content.get("role") == "model" and parts is not None and all(
        isinstance(p, Mapping) and p.get("functionCall") for p in parts
    )


def _is_function_response(content: Mapping[str, Any]) -> bool:
    parts = content.get("parts")
    return content.get("role") == "user" and parts is not None and all(
        isinstance(p, Mapping) and p.get("functionResponse") for p in parts
    )


def parse_llm_answer(text: str) -> LlmAnswer | None:
    """The loop-check JSON (a fenced block accepted); ``None`` without a numeric
    confidence."""
    data = json_answer(text)
    if not isinstance(data, dict):
        return None
    confidence = data.get("unproductive_state_confidence")
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        return None
    analysis = data.get("unproductive_state_analysis")
    return LlmAnswer(float(confidence), analysis if isinstance(analysis, str) else "")
