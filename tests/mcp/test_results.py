"""Gemini CLI's rules for MCP tools, as pure functions: schema cleaning, include/exclude,
and the conversion of an answer into the model's parts and the user's display."""

from __future__ import annotations

from actors.mcp import (
    ServerParams,
    clean_schema,
    display_text,
    is_enabled,
    model_parts,
    tool_result,
)


def answer(*content: dict[str, object], tool: str = "t") -> list[dict[str, object]]:
    return [{"functionResponse": {"name": tool, "response": {"content": list(content)}}}]


def test_a_nullable_type_pair_becomes_the_type_and_nullable_at_every_level() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": ["string", "null"]},
            "b": {"type": ["null", "integer"], "items": [{"type": ["number", "null"]}]},
            "c": {"type": ["string", "integer"]},
            "d": {"type": ["string", "integer", "null"]},
        },
    }
    assert clean_schema(schema) == {
        "type": "object",
        "properties": {
            "a": {"type": "string", "nullable": True},
            "b": {"type": "integer", "items": [{"type": "number", "nullable": True}], "nullable": True},
            "c": {"type": ["string", "integer"]},
            "d": {"type": ["string", "integer", "null"]},
        },
    }


def test_exclude_tools_wins_over_include_tools_which_also_matches_name_with_parenthesis() -> None:
    server = ServerParams(name="s", include_tools=("a", "b(x)", "c"), exclude_tools=("c",))
    assert [t for t in ("a", "b", "c", "d", "") if is_enabled(t, server)] == ["a", "b"]
    assert is_enabled("anything", ServerParams(name="s"))


def test_an_embedded_blob_is_inline_data_and_unknown_blocks_are_dropped_for_the_model() -> None:
    parts = answer(
        {"type": "resource", "resource": {"uri": "x:", "blob": "AAAA"}},
        {"type": "resource", "resource": {"uri": "y:"}},
        {"type": "video", "data": "?"},
        tool="blobby",
    )
    assert model_parts(parts) == [
        {"text": "[Tool 'blobby' provided the following embedded resource with mime-type: application/octet-stream]"},
        {"inlineData": {"mimeType": "application/octet-stream", "data": "AAAA"}},
    ]
    assert display_text(parts) == (
        "[Embedded Resource: unknown type]\n[Embedded Resource: unknown type]\n[Unknown content type: video]"
    )


def test_an_answer_without_content_is_geminis_parse_error_and_a_json_display() -> None:
    parts = [{"functionResponse": {"name": "t", "response": {"structuredContent": {"a": 1}}}}]
    assert model_parts(parts) == [{"text": "[Error: Could not parse tool response]"}]
    assert display_text(parts).startswith("```json\n[\n  {\n    \"functionResponse\"")


def test_is_error_as_the_string_true_and_a_failed_request_are_tool_errors() -> None:
    text_true = [{"functionResponse": {"name": "t", "response": {"content": [], "isError": "true"}}}]
    assert tool_result("t", {}, text_true).error_type == "mcp_tool_error"
    failed = [{"functionResponse": {"name": "t", "response": {"error": {"message": "gone", "isError": True}}}}]
    result = tool_result("t", {"a": 1}, failed)
    assert result.error_message == (
        'MCP tool \'t\' reported tool error for function call: {"name":"t","args":{"a":1}} with response: '
        '[{"functionResponse":{"name":"t","response":{"error":{"message":"gone","isError":true}}}}]'
    )
