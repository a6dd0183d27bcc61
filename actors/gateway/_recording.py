"""``--record-responses FILE``: Gemini CLI's fake-responses format, written from live calls.

``RecordingBackend`` wraps any backend (so recording a fake-responses run works too, as
in Gemini CLI). After each call that completes it appends one line::

    {"method": "generateContentStream", "response": [<chunk>, ...]}
    {"method": "generateContent", "response": <response>}
    {"method": "countTokens", "response": {"totalTokens": N, "cachedContentTokenCount"?: N}}

keeping only ``candidates`` and ``usageMetadata`` of each response. A call that fails or
is cancelled writes nothing (an interrupted stream is not recorded). Each attempt of a
retried request is a call of its own, so replaying the file with ``--fake-responses``
answers the same calls in the same order.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from bus.json_values import thaw
from bus.messages import GenerateRequest

from ._backend import Backend, BackendError, ChunkSink, open_backend

KEPT = {
    "generateContent": ("candidates", "usageMetadata"),
    "generateContentStream": ("candidates", "usageMetadata"),
    "countTokens": ("totalTokens", "cachedContentTokenCount"),
    "embedContent": ("embeddings", "metadata"),
}


def record_line(method: str, responses: list[Any]) -> str:
    """One fake-responses line for a completed call (no trailing newline)."""
    keys = KEPT.get(method, ("candidates", "usageMetadata"))

    def kept(response: Any) -> dict[str, Any]:
        data = thaw(response)
        if not isinstance(data, Mapping):
            return {}
        return {k: data[k] for k in keys if data.get(k) is not None}

    if method == "generateContentStream":
        body: Any = [kept(r) for r in responses]
    else:
        body = kept(responses[-1]) if responses else {}
    return json.dumps({"method": method, "response": body}, ensure_ascii=False, separators=(",", ":"))


class RecordingBackend:
    """Pass calls to ``inner``; append each completed one to ``path``."""

    def __init__(self, inner: Backend, path: str | Path) -> None:
        self.inner = inner
        self.path = Path(path)
        self.retry_policy = getattr(inner, "retry_policy", None)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with open_backend(self.inner):
            yield

    async def generate(self, request: GenerateRequest, emit: ChunkSink) -> str:
        seen: list[Any] = []

        async def tee(chunk: Any) -> None:
            seen.append(chunk)
            await emit(chunk)

        model = await self.inner.generate(request, tee)
        _append(self.path, record_line(request.method, seen))
        return model


def _append(path: Path, line: str) -> None:
    """A small synchronous append, so lines land in call order (Gemini CLI uses
    ``appendFileSync`` too)."""
    try:
        with path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
    except OSError as exc:
        raise BackendError(f"cannot write the responses recording {path}: {exc}", type="config") from None
