"""Reading ``generateContent`` answers for the web tools (pure).

``response_text`` is Gemini's ``getResponseText``. The citation helpers insert Gemini's
``[n]`` markers at each grounding support's ``segment.endIndex``: ``web_fetch`` counts
that index in UTF-16 code units (it splices ``text.split('')``), ``google_web_search``
in UTF-8 bytes (it splices a ``TextEncoder`` buffer). Both list sources as
``[n] title (uri)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._base import ModelCallError, ToolEnv

WEB_MODEL = "gemini-3-flash-preview"
"""The model behind Gemini's ``web-search``, ``web-fetch`` and ``web-fetch-fallback``
aliases (all extend ``gemini-3-flash-base``)."""
BASE_CONFIG: dict[str, Any] = {"temperature": 0, "topP": 1}
"""The ``base`` alias' generation config those aliases inherit."""


async def call_web_model(
    env: ToolEnv, contents: Sequence[Any], config: Mapping[str, Any]
) -> dict[str, Any]:
    """One utility ``generateContent`` on ``WEB_MODEL``; failures are ``ModelCallError``
    worded as Gemini's ``GeminiClient.generateContent`` words them."""
    try:
        if env.model_access is None:
            raise ModelCallError("no model access in this executor")
        return await env.model_access.generate(
            model=WEB_MODEL, contents=contents, config=config, role="utility_tool"
        )
    except ModelCallError as exc:
        raise ModelCallError(
            f"Failed to generate content with model {WEB_MODEL}: {exc.message}",
            status=exc.status,
        ) from None


def response_text(response: Mapping[str, Any]) -> str | None:
    """The text parts (not thoughts) of the first candidate, joined; None if no parts."""
    candidates = response.get("candidates")
    if not isinstance(candidates, Sequence) or not candidates:
        return None
    first = candidates[0] if isinstance(candidates[0], Mapping) else {}
    content = first.get("content")
    parts = content.get("parts") if isinstance(content, Mapping) else None
    if not isinstance(parts, Sequence) or not parts:
        return None
    return "".join(
        str(p["text"])
        for p in parts
        if isinstance(p, Mapping) and p.get("text") and not p.get("thought")
    )


def grounding_metadata(response: Mapping[str, Any]) -> Mapping[str, Any]:
    candidates = response.get("candidates")
    if isinstance(candidates, Sequence) and candidates and isinstance(candidates[0], Mapping):
        meta = candidates[0].get("groundingMetadata")
        if isinstance(meta, Mapping):
            return meta
    return {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else []


def _insertions(supports: Sequence[Any]) -> list[tuple[int, str]]:
    """(index, marker) for each support with a segment and chunk indices, last first."""
    out: list[tuple[int, str]] = []
    for support in supports:
        if not isinstance(support, Mapping):
            continue
        segment = support.get("segment")
        indices = support.get("groundingChunkIndices")
        if not segment or not isinstance(segment, Mapping) or indices is None:
            continue
        marker = "".join(f"[{int(i) + 1}]" for i in _list(indices))
        end = segment.get("endIndex")
        out.append((int(end) if isinstance(end, int | float) else 0, marker))
    # JavaScript's sort is stable: equal indices keep their order.
    return sorted(out, key=lambda ins: -ins[0])


def insert_citations_utf16(text: str, supports: Sequence[Any]) -> str:
    """``web_fetch``'s markers: indices in UTF-16 code units."""
    data = text.encode("utf-16-le", "surrogatepass")
    units = [data[i : i + 2] for i in range(0, len(data), 2)]
    for index, marker in _insertions(supports):
        at = min(max(index, 0), len(units))
        units[at:at] = [marker.encode("utf-16-le")]
    joined = b"".join(units).decode("utf-16-le", "surrogatepass")
    return (
        joined.encode("utf-8", "replace").decode("utf-8") if _has_lone_surrogate(joined) else joined
    )


def _has_lone_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def insert_citations_utf8(text: str, supports: Sequence[Any]) -> str:
    """``google_web_search``'s markers: indices in UTF-8 bytes."""
    data = text.encode("utf-8", "surrogatepass")
    pieces: list[bytes] = []
    last = len(data)
    for index, marker in _insertions(supports):
        pos = min(max(index, 0), last)
        pieces.insert(0, data[pos:last])
        pieces.insert(0, marker.encode("utf-8"))
        last = pos
    pieces.insert(0, data[:last])
    return b"".join(pieces).decode("utf-8", "replace")


def source_lines(chunks: Sequence[Any], *, missing_uri: str) -> list[str]:
    """``[n] title (uri)`` per grounding chunk."""
    lines: list[str] = []
    for n, chunk in enumerate(chunks, start=1):
        web = chunk.get("web") if isinstance(chunk, Mapping) else None
        web = web if isinstance(web, Mapping) else {}
        title = web.get("title") or "Untitled"
        uri = web.get("uri") or missing_uri
        lines.append(f"[{n}] {title} ({uri})")
    return lines


__all__ = [
    "BASE_CONFIG",
    "WEB_MODEL",
    "call_web_model",
    "grounding_metadata",
    "insert_citations_utf8",
    "insert_citations_utf16",
    "response_text",
    "source_lines",
]
