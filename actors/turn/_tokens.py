"""Token accounting of the turn: Gemini CLI's estimate, per-model limits, overflow.

Pure; no I/O. Lengths are JavaScript's (UTF-16 code units), because the heuristic was
tuned on them and a character outside the BMP counts twice there.

- ``estimate_tokens(parts)`` is ``estimateTokenCountSync``: text up to 100 000 code
  units costs 0.25 per ASCII unit and 1.5 per other unit, longer text ``length / 4``;
  a function response ``(len(name) + len(JSON(response))) / 4`` plus its nested parts
  (depth at most 3); an image 3 000, a PDF 25 800; any other part ``len(JSON(part)) / 4``;
  the sum is floored (at each nesting level).
- ``token_limit(model)``: 1 048 576, or 256 000 for the Gemma 4 models.
- The overflow rule: a request overflows when its estimate is larger than
  ``token_limit(model) - last_prompt_token_count`` (no safety factor).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from actors.common import js_json, utf16_len

DEFAULT_TOKEN_LIMIT = 1_048_576
GEMMA_4_TOKEN_LIMIT = 256_000
GEMMA_4_MODELS = frozenset({"gemma-4-31b-it", "gemma-4-26b-a4b-it"})

CHARS_PER_TOKEN = 4
NON_ASCII_TOKENS_PER_CHAR = 1.5
MAX_CHARS_FOR_FULL_HEURISTIC = 100_000
MAX_RECURSION_DEPTH = 3
IMAGE_TOKEN_ESTIMATE = 3_000
PDF_TOKEN_ESTIMATE = 25_800


def token_limit(model: str) -> int:
    """Gemini CLI's context window of ``model`` (``tokenLimits.ts``)."""
    return GEMMA_4_TOKEN_LIMIT if model in GEMMA_4_MODELS else DEFAULT_TOKEN_LIMIT


def _text_tokens(text: str) -> float:
    units = utf16_len(text)
    if units > MAX_CHARS_FOR_FULL_HEURISTIC:
        return units / CHARS_PER_TOKEN
    if text.isascii():
        return units / CHARS_PER_TOKEN
    ascii_units = len(text.encode("ascii", "ignore"))
    return ascii_units / CHARS_PER_TOKEN + (units - ascii_units) * NON_ASCII_TOKENS_PER_CHAR


def _media_tokens(part: Mapping[str, Any]) -> int | None:
    data = part.get("inlineData") if "inlineData" in part else None
    file = part.get("fileData") if "fileData" in part else None
    mime = ""
    for holder in (data, file):
        if isinstance(holder, Mapping) and holder.get("mimeType"):
            mime = str(holder["mimeType"])
            break
    if mime.startswith("image/"):
        return IMAGE_TOKEN_ESTIMATE
    if mime.startswith("application/pdf"):
        return PDF_TOKEN_ESTIMATE
    return None


def _function_response_tokens(response_part: Mapping[str, Any], depth: int) -> float:
    name = response_part.get("name")
    total = utf16_len(name) / CHARS_PER_TOKEN if isinstance(name, str) else 0.0
    response = response_part.get("response")
    if isinstance(response, str):
        total += utf16_len(response) / CHARS_PER_TOKEN
    elif response is not None:
        total += utf16_len(js_json(response)) / CHARS_PER_TOKEN
    nested = response_part.get("parts")
    if isinstance(nested, list | tuple) and nested:
        total += estimate_tokens(nested, depth + 1)
    return total


def estimate_tokens(parts: Iterable[Any], depth: int = 0) -> int:
    """Gemini CLI's ``estimateTokenCountSync`` of ``parts``."""
    if depth > MAX_RECURSION_DEPTH:
        return 0
    total = 0.0
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        text = part.get("text")
        if isinstance(text, str):
            total += _text_tokens(text)
            continue
        response = part.get("functionResponse")
        if isinstance(response, Mapping):  # an object is truthy in JavaScript, even {}
            total += _function_response_tokens(response, depth)
            continue
        if response not in (None, False, 0, ""):
            continue  # a truthy non-object: a function response with nothing to count
        media = _media_tokens(part)
        total += media if media is not None else utf16_len(js_json(part)) / CHARS_PER_TOKEN
    return math.floor(total)


def history_parts(history: Iterable[Any]) -> list[Any]:
    """Every part of every content, in order (``flatMap(c => c.parts || [])``)."""
    return [p for content in history for p in (content.get("parts") or ())]


def has_media(parts: Iterable[Any]) -> bool:
    """Whether Gemini CLI would ask the ``countTokens`` API instead of estimating."""
    return any(isinstance(p, Mapping) and ("inlineData" in p or "fileData" in p) for p in parts)


def overflow_message(estimated: int, remaining: int, limit: int) -> str:
    """What the interactive CLI shows for ``context_window_will_overflow``."""
    text = (
        f"Sending this message ({estimated} tokens) might exceed the context window limit "
        f"({remaining:,} tokens left)."
    )
    if limit > 0 and remaining < limit * 0.75:
        text += (
            " Please try reducing the size of your message or use the `/compress` command to "
            "compress the chat history."
        )
    return text
