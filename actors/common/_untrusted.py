"""Gemini CLI's ``wrapUntrusted``: tool output the model must read as data.

A shell command's output, a fetched page and an MCP server's text go to the model inside
``<untrusted_context>`` tags, a closing tag in the text escaped so that it cannot end the
block early.
"""

from __future__ import annotations

UNTRUSTED_OPEN = "<untrusted_context>\n"
UNTRUSTED_CLOSE = "\n</untrusted_context>"
_CLOSE_TAG = "</untrusted_context>"
_ESCAPED_CLOSE_TAG = "&lt;/untrusted_context&gt;"


def escape_untrusted(text: str) -> str:
    """The text with every closing tag escaped (what goes between the tags)."""
    return text.replace(_CLOSE_TAG, _ESCAPED_CLOSE_TAG)


def wrap_untrusted(text: str) -> str:
    """``wrapUntrusted``: the text inside ``<untrusted_context>`` tags, closing tag escaped."""
    return UNTRUSTED_OPEN + escape_untrusted(text) + UNTRUSTED_CLOSE
