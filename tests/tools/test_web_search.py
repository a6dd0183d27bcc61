"""google_web_search: the grounded call, citations (UTF-8 offsets), sources, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.tools._base import ModelCallError
from actors.tools._web_search import SEARCH_CONFIG, WebSearchTool
from tests.conftest import SHARED

from ._web_env import FakeModel, answer, web_env

TOOL = WebSearchTool()
SCENARIO = SHARED / "conformance" / "scenarios" / "google-web-search-fixture-exhausted"


def test_declaration_and_validation(tmp_path: Path) -> None:
    decl = TOOL.declaration("gemini-3-flash-preview")
    assert decl["name"] == "google_web_search"
    assert decl["parametersJsonSchema"]["required"] == ["query"]
    assert (TOOL.display_name, TOOL.kind) == ("GoogleSearch", "search")
    env = web_env(tmp_path, None)
    assert TOOL.validate({"query": " \u00a0"}, env) == "The 'query' parameter cannot be empty."
    assert TOOL.validate({"query": "x"}, env) is None
    assert TOOL.describe({"query": "fun fact"}, env) == 'Searching the web for: "fun fact"'


async def test_request_shape(tmp_path: Path) -> None:
    model = FakeModel([answer("An answer.")])
    result = await TOOL.execute({"query": "fun fact"}, web_env(tmp_path, model))
    [call] = model.calls
    assert call["model"] == "gemini-3-flash-preview" and call["role"] == "utility_tool"
    assert (
        call["config"]
        == SEARCH_CONFIG
        == {"temperature": 0, "topP": 1, "tools": [{"googleSearch": {}}]}
    )
    assert call["contents"] == [{"role": "user", "parts": [{"text": "fun fact"}]}]
    assert result.llm_content == 'Web search results for "fun fact":\n\nAn answer.'
    assert result.return_display == 'Search results for "fun fact" returned.'


@pytest.mark.skipif(not SCENARIO.exists(), reason="conformance corpus not available")
async def test_corpus_answer_formats_as_gemini_sent_it(tmp_path: Path) -> None:
    lines = (SCENARIO / "fixture.responses").read_text().splitlines()
    response = json.loads(lines[2])["response"]
    result = await TOOL.execute({"query": "fun fact"}, web_env(tmp_path, FakeModel([response])))
    uri = response["candidates"][0]["groundingMetadata"]["groundingChunks"][0]["web"]["uri"]
    # The functionResponse output recorded in the corpus' request dump.
    assert result.llm_content == (
        'Web search results for "fun fact":\n\n'
        "Here's a fun fact: A day on Venus is longer than a year on Venus. It takes approximately "
        "243 Earth days for Venus to rotate once on its axis, while its orbit around the Sun is "
        f"about 225 Earth days.[1]\n\nSources:\n[1] hellosubs.co ({uri})"
    )
    assert result.return_display == 'Search results for "fun fact" returned.'
    assert result.data is not None and result.data["sources"][0]["web"]["title"] == "hellosubs.co"


async def test_citation_offsets_count_utf8_bytes(tmp_path: Path) -> None:
    text = "Café au lait. Crème brûlée."  # é, è, û are two bytes each in UTF-8
    response = answer(
        text,
        groundingChunks=[
            {"web": {"title": "A", "uri": "https://a"}},
            {"web": {"uri": "https://b"}},
            {},
        ],
        groundingSupports=[
            {"segment": {"endIndex": len("Café au lait.".encode())}, "groundingChunkIndices": [0]},
            {"segment": {"endIndex": len(text.encode())}, "groundingChunkIndices": [1, 2]},
            {"groundingChunkIndices": [0]},  # no segment: ignored
        ],
    )
    result = await TOOL.execute({"query": "q"}, web_env(tmp_path, FakeModel([response])))
    assert result.llm_content == (
        'Web search results for "q":\n\nCafé au lait.[1] Crème brûlée.[2][3]\n\n'
        "Sources:\n[1] A (https://a)\n[2] Untitled (https://b)\n[3] Untitled (No URI)"
    )


async def test_supports_without_sources_are_ignored(tmp_path: Path) -> None:
    response = answer(
        "plain", groundingSupports=[{"segment": {"endIndex": 2}, "groundingChunkIndices": [0]}]
    )
    result = await TOOL.execute({"query": "q"}, web_env(tmp_path, FakeModel([response])))
    assert result.llm_content == 'Web search results for "q":\n\nplain'


@pytest.mark.parametrize("response", [answer(None), answer("   \n"), {"candidates": []}, {}])
async def test_empty_result(tmp_path: Path, response: dict[str, object]) -> None:
    result = await TOOL.execute({"query": "nothing here"}, web_env(tmp_path, FakeModel([response])))
    assert result.error_type is None
    assert result.llm_content == 'No search results or information found for query: "nothing here"'
    assert result.return_display == "No information found."


async def test_model_failure_is_web_search_failed(tmp_path: Path) -> None:
    model = FakeModel([ModelCallError("No more mock responses for generateContent")])
    result = await TOOL.execute({"query": "q"}, web_env(tmp_path, model))
    message = (
        'Error during web search for query "q": Failed to generate content with model '
        "gemini-3-flash-preview: No more mock responses for generateContent"
    )
    assert (result.error_type, result.error_message) == ("web_search_failed", message)
    assert result.llm_content == f"Error: {message}"
    assert result.return_display == "Error performing web search."


async def test_thoughts_are_not_part_of_the_answer(tmp_path: Path) -> None:
    response = {
        "candidates": [
            {"content": {"parts": [{"text": "thinking", "thought": True}, {"text": "Answer"}]}}
        ]
    }
    result = await TOOL.execute({"query": "q"}, web_env(tmp_path, FakeModel([response])))
    assert result.llm_content == 'Web search results for "q":\n\nAnswer'
