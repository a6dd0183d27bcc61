"""Model names: aliases, the router's classifier call, and what ``auto`` becomes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bus.json_values import thaw

DEFAULT_FLASH_MODEL = "gemini-3-flash-preview"
DEFAULT_PRO_MODEL = "gemini-3.1-pro-preview"
DEFAULT_CLASSIFIER_MODEL = "gemini-2.5-flash-lite"

# Gemini CLI 0.61 as shipped: concrete names pass through; these aliases resolve.
ALIASES = {
    "auto": DEFAULT_PRO_MODEL,
    "pro": DEFAULT_PRO_MODEL,
    "flash": DEFAULT_FLASH_MODEL,
    "flash-lite": "gemini-2.5-flash-lite",
    "gemini-3-pro-preview": DEFAULT_PRO_MODEL,
}

CLASSIFIER_INSTRUCTION = """\
You route a coding agent's requests to a model. Judge the user's latest request by the
work it needs: simple, bounded requests (a fact, a small edit, one command) go to
"flash"; requests that need planning, investigation across many files, or debugging go
to "pro". Answer with JSON only: {"reasoning": "<one sentence>", "model_choice": "flash" | "pro"}.
"""


def resolve_model(name: str) -> str:
    """The concrete model for a configured name (``auto`` without a router's answer: the
    default, pro, as Gemini CLI's default strategy)."""
    return ALIASES.get(name, name)


def classifier_choice(choice: str) -> str:
    """``flash``/``pro`` from the classifier to a model; ``classifier``: the router's own."""
    if choice == "classifier":
        return DEFAULT_CLASSIFIER_MODEL
    if choice == "pro":
        return DEFAULT_PRO_MODEL
    return DEFAULT_FLASH_MODEL


def classifier_request(contents: Sequence[Any]) -> tuple[Any, Mapping[str, Any]]:
    """The classifier's request: the conversation's last turns and our instruction."""
    recent = [thaw(c) for c in contents][-4:]
    config = {
        "systemInstruction": CLASSIFIER_INSTRUCTION,
        "temperature": 0,
        "responseMimeType": "application/json",
    }
    return recent, config
