"""An MCP ``tools/call`` answer as Gemini CLI's ``DiscoveredMCPToolInvocation`` turns it
into a tool result: the parts the model reads and the text the user sees; ``isError`` (or
a failed request) is a tool error whose message quotes the call and the raw answer. Pure
code over the answer as JSON data (the SDK's result dumped by its wire names)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.common import js_json, wrap_untrusted
from bus.messages import ToolResult

MCP_TOOL_ERROR = "mcp_tool_error"
"""Gemini's ``ToolErrorType.MCP_TOOL_ERROR``."""


def raw_parts(tool: str, response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What Gemini's ``McpCallableTool.callTool`` hands back: one ``functionResponse``."""
    return [{"functionResponse": {"name": tool, "response": dict(response)}}]


def failed_request(tool: str, message: str) -> list[dict[str, Any]]:
    """A request that failed (connection lost, timeout, server error), as Gemini reports
    it: an ``error`` object with ``isError``."""
    return raw_parts(tool, {"error": {"message": message, "isError": True}})


def is_error(parts: list[dict[str, Any]]) -> bool:
    """Gemini's ``isMCPToolError``: a top-level ``isError``, or a nested ``error.isError``."""
    response = parts[0]["functionResponse"].get("response") if parts else None
    if not isinstance(response, Mapping):
        return False
    if response.get("isError") in (True, "true"):
        return True
    error = response.get("error")
    return isinstance(error, Mapping) and error.get("isError") in (True, "true")


def tool_result(tool: str, args: Mapping[str, Any], parts: list[dict[str, Any]]) -> ToolResult:
    """The call's result: an error for ``isError``, else the converted content."""
    if is_error(parts):
        call = {"name": tool, "args": dict(args)}
        message = (
            f"MCP tool '{tool}' reported tool error for function call: {js_json(call)} "
            f"with response: {js_json(parts)}"
        )
        return ToolResult(
            llm_content=message,
            return_display=f"Error: MCP tool '{tool}' reported an error.",
            error_type=MCP_TOOL_ERROR,
            error_message=message,
        )
    return ToolResult(llm_content=model_parts(parts), return_display=display_text(parts))


def _content(parts: list[dict[str, Any]]) -> Any:
    response = parts[0]["functionResponse"].get("response") if parts else None
    return response.get("content") if isinstance(response, Mapping) else None


def model_parts(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Gemini's ``transformMcpContentToParts``: text (wrapped as untrusted), image and
    audio (a line naming the tool and the MIME type, then the data), an embedded resource
    (its text wrapped, or its blob as image data is), a resource link (one line);
    other blocks are dropped."""
    content = _content(parts)
    name = parts[0]["functionResponse"].get("name") if parts else None
    tool = name or "unknown tool"
    if not isinstance(content, list):
        return [{"text": "[Error: Could not parse tool response]"}]
    out: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            out.append({"text": wrap_untrusted(str(block.get("text", "")))})
        elif kind in ("image", "audio"):
            mime = block.get("mimeType")
            out.append({"text": f"[Tool '{tool}' provided the following {kind} data with mime-type: {mime}]"})
            out.append({"inlineData": {"mimeType": mime, "data": block.get("data")}})
        elif kind == "resource":
            resource = block.get("resource")
            resource = resource if isinstance(resource, Mapping) else {}
            if resource.get("text"):
                out.append({"text": wrap_untrusted(str(resource["text"]))})
            elif resource.get("blob"):
                mime = resource.get("mimeType") or "application/octet-stream"
                out.append(
                    {"text": f"[Tool '{tool}' provided the following embedded resource with mime-type: {mime}]"}
                )
                out.append({"inlineData": {"mimeType": mime, "data": resource["blob"]}})
        elif kind == "resource_link":
            out.append({"text": f"Resource Link: {block.get('title') or block.get('name')} at {block.get('uri')}"})
    return out


def display_text(parts: list[dict[str, Any]]) -> str:
    """Gemini's ``getStringifiedResultForDisplay``: text as it is, a line per other block."""
    content = _content(parts)
    if not isinstance(content, list):
        return "```json\n" + js_json(parts, indent=2) + "\n```"
    lines: list[str] = []
    for block in content:
        block = block if isinstance(block, Mapping) else {}
        kind = block.get("type")
        if kind == "text":
            lines.append(str(block.get("text", "")))
        elif kind == "image":
            lines.append(f"[Image: {block.get('mimeType')}]")
        elif kind == "audio":
            lines.append(f"[Audio: {block.get('mimeType')}]")
        elif kind == "resource_link":
            lines.append(f"[Link to {block.get('title') or block.get('name')}: {block.get('uri')}]")
        elif kind == "resource":
            resource = block.get("resource")
            resource = resource if isinstance(resource, Mapping) else {}
            lines.append(
                str(resource["text"]) if resource.get("text") else f"[Embedded Resource: {resource.get('mimeType') or 'unknown type'}]"
            )
        else:
            lines.append(f"[Unknown content type: {kind}]")
    return "\n".join(lines)
