"""A model's JSON answer, as Gemini CLI reads the answers of its side requests (the
next-speaker check, the loop check): the text itself, or a fenced ```` ```json ````
block around it; and a count of a response's ``usageMetadata``."""

from __future__ import annotations

import json
from typing import Any


def json_answer(text: str) -> Any | None:
    """The JSON value of ``text`` (a fenced block accepted); None when it is not JSON,
    or nested past the parser."""
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`")
        body = body[4:] if body.startswith("json") else body
    try:
        return json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser
        return None


def token_count(value: Any) -> int:
    """A count of a response's ``usageMetadata`` (``promptTokenCount``...): an integer,
    anything else (a string, null, a boolean) 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
