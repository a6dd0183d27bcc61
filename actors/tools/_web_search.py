"""``google_web_search`` (Gemini CLI's ``WebSearchTool``, display name GoogleSearch).

One grounded ``generateContent`` call through the executor's ``ModelAccess``: Gemini's
``web-search`` model alias, i.e. ``gemini-3-flash-preview`` with ``temperature 0,
topP 1`` and the ``googleSearch`` tool, the query as the only user text. The answer
gets ``[n]`` citation markers at each grounding support's end (UTF-8 byte offsets) and
a ``Sources:`` list, and is returned as ``Web search results for "<query>":\\n\\n...``.

An answer without text is not an error in Gemini CLI: the model gets
``No search results or information found for query: "<query>"`` (display
``No information found.``). A failed model call is ``web_search_failed``. The grounding
chunks travel in ``ToolResult.data["sources"]`` (Gemini's ``ToolResult.sources``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.common import js_trim
from bus.messages import ToolResult

from ._base import ModelCallError, OutputSink, ToolEnv
from ._grounding import (
    BASE_CONFIG,
    call_web_model,
    grounding_metadata,
    insert_citations_utf8,
    response_text,
    source_lines,
)

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What to search the web for."},
    },
    "required": ["query"],
}

_DESCRIPTION = (
    "Searches the web with Google Search and answers from the results, citing its "
    "sources. Use it for current events, facts you are unsure of, or documentation "
    "that is not in the workspace."
)

SEARCH_CONFIG: dict[str, Any] = {**BASE_CONFIG, "tools": [{"googleSearch": {}}]}


class WebSearchTool:
    """Gemini CLI's ``google_web_search`` tool."""

    name = "google_web_search"
    display_name = "GoogleSearch"
    kind = "search"

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": self.name, "description": _DESCRIPTION, "parametersJsonSchema": _SCHEMA}

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        query = args.get("query")
        if not isinstance(query, str) or js_trim(query) == "":
            return "The 'query' parameter cannot be empty."
        return None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        return f'Searching the web for: "{args.get("query", "")}"'

    async def execute(
        self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None
    ) -> ToolResult:
        query = str(args.get("query", ""))
        try:
            response = await call_web_model(
                env, [{"role": "user", "parts": [{"text": query}]}], SEARCH_CONFIG
            )
        except ModelCallError as exc:
            message = f'Error during web search for query "{query}": {exc.message}'
            return ToolResult(
                llm_content=f"Error: {message}",
                return_display="Error performing web search.",
                error_type="web_search_failed",
                error_message=message,
            )
        return format_search_result(query, response)


def format_search_result(query: str, response: Mapping[str, Any]) -> ToolResult:
    """Gemini's formatting of a ``web-search`` answer."""
    text = response_text(response)
    meta = grounding_metadata(response)
    chunks = meta.get("groundingChunks")
    supports = meta.get("groundingSupports")
    if not text or not js_trim(text):
        return ToolResult(
            llm_content=f'No search results or information found for query: "{query}"',
            return_display="No information found.",
        )
    if isinstance(chunks, list | tuple) and chunks:
        if isinstance(supports, list | tuple) and supports:
            text = insert_citations_utf8(text, supports)
        lines = source_lines(chunks, missing_uri="No URI")
        if lines:
            text += "\n\nSources:\n" + "\n".join(lines)
    return ToolResult(
        llm_content=f'Web search results for "{query}":\n\n{text}',
        return_display=f'Search results for "{query}" returned.',
        data={"sources": chunks} if chunks is not None else None,
    )


__all__ = ["SEARCH_CONFIG", "WebSearchTool", "format_search_result"]
