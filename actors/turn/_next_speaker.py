"""The next-speaker check, the pure part (off by default: ``model.skipNextSpeakerCheck``).

After a model answer with no tool call, Gemini CLI may ask a model whether the agent
meant to go on; if so the turn continues with the user message ``Please continue.``.
Its rules, with our own prompt:

- no history: no answer; the last turn a function-response turn, or a model turn with
  no parts: the model speaks next (no call);
- the last curated turn not a model turn: no answer;
- otherwise ask (JSON ``{reasoning, next_speaker: "user" | "model"}``); anything else,
  or a failed call, is no answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from actors.common import json_answer

from ._compression import curated_history
from ._logic import is_function_response, request_contents, user_content

CONTINUE_PROMPT = "Please continue."
NEXT_SPEAKER_MODEL = "gemini-3-flash-preview"
"""The ``next-speaker-checker`` alias's model in Gemini CLI."""

NEXT_SPEAKER_PROMPT = """\
Look only at your own last reply above and decide who should speak next.
- "model": that reply says you are about to do something right now (for example "Next I \
will run the tests") without having done it, or it stops in the middle of a sentence, \
list or step.
- "user": that reply ends with a question for the user.
- "user": in every other case; the reply is complete and waits for the user.
Answer with JSON only: {"reasoning": "<one short sentence>", "next_speaker": "user" or "model"}.
"""

NEXT_SPEAKER_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string", "description": "Why, from the rule that applies."},
        "next_speaker": {"type": "string", "enum": ["user", "model"]},
    },
    "required": ["reasoning", "next_speaker"],
}

ASK = "ask"


def without_model_call(history: Sequence[Any]) -> str | None:
    """``model``/``None`` when the answer needs no model; ``ASK`` when it does."""
    curated = curated_history(history)
    if not curated:
        return None
    last = history[-1]
    parts = last.get("parts")
    if last.get("role") == "user" and is_function_response(parts or ()):
        return "model"
    if last.get("role") == "model" and parts is not None and len(parts) == 0:
        return "model"
    if curated[-1].get("role") != "model":
        return None
    return ASK


def request(history: Sequence[Any]) -> tuple[tuple[Any, ...], Mapping[str, Any]]:
    """The check's (contents, config)."""
    contents = request_contents(tuple(curated_history(history)), user_content([{"text": NEXT_SPEAKER_PROMPT}]))
    config = {"responseMimeType": "application/json", "responseJsonSchema": NEXT_SPEAKER_SCHEMA, "temperature": 0}
    return contents, config


def parse_answer(text: str) -> str | None:
    """``user``/``model`` from the check's JSON answer (a fenced block is accepted)."""
    data = json_answer(text)
    if isinstance(data, dict) and data.get("next_speaker") in ("user", "model"):
        return str(data["next_speaker"])
    return None
