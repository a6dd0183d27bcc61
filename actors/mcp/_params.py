"""What a connection needs to know about one MCP server, and Gemini CLI's rules on what
it lists: which tools are enabled (``includeTools``/``excludeTools``) and how their input
schemas are cleaned before they are declared to the model. Pure code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

DEFAULT_TIMEOUT_S = 600.0
"""Gemini CLI's ``MCP_DEFAULT_TIMEOUT_MSEC`` (10 minutes): connecting, listing tools and
each call, when the server's ``timeout`` is unset."""

Transport = Literal["stdio", "http", "sse"]


@attrs.frozen(kw_only=True)
class ServerParams:
    """One configured server, resolved by the host: the environment of a stdio server is
    the final one (sanitised process environment, ``GEMINI_CLI=1``, the configured
    ``env``), headers are expanded."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict)
    cwd: str | None = None
    url: str | None = None
    """``httpUrl`` or ``url``: see ``transport``."""
    transport: Transport = "stdio"
    sse_fallback: bool = False
    """Streamable HTTP failed to connect: try SSE (Gemini's ``url`` without ``type``)."""
    headers: Mapping[str, str] = attrs.field(factory=dict)
    timeout_s: float = DEFAULT_TIMEOUT_S
    trust: bool = False
    include_tools: tuple[str, ...] | None = None
    exclude_tools: tuple[str, ...] = ()

    def where(self) -> str:
        """The server's command line or URL, for messages."""
        if self.transport == "stdio":
            return " ".join((self.command or "", *self.args)).strip()
        return self.url or ""


def is_enabled(tool_name: str, params: ServerParams) -> bool:
    """Gemini's ``isEnabled``: ``excludeTools`` wins; with ``includeTools`` a tool must be
    named there (also as ``name(...)``)."""
    if not tool_name or tool_name in params.exclude_tools:
        return False
    include = params.include_tools
    return include is None or any(t == tool_name or t.startswith(f"{tool_name}(") for t in include)


def clean_schema(schema: Any) -> Any:
    """Gemini's input-schema transform before declaring a tool: at every level, a ``type``
    of two names one of which is ``null`` becomes the other name plus ``nullable: true``."""
    if isinstance(schema, Sequence) and not isinstance(schema, str):
        return [clean_schema(v) for v in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = dict(schema)
    kind = out.get("type")
    if isinstance(kind, Sequence) and not isinstance(kind, str) and len(kind) == 2 and "null" in kind:
        other = kind[1 - list(kind).index("null")]
        if isinstance(other, str):
            out["type"] = other
            out["nullable"] = True
    return {k: clean_schema(v) for k, v in out.items()}


def schema_problem(schema: Any) -> str | None:
    """Why a tool's input schema is not JSON Schema (one line), or None. Checked against
    the meta-schema of its ``$schema``, draft-07 without one (as Gemini's validator
    reads it). Declared to the model, such a schema would fail every request of the
    session; Gemini CLI declares it all the same (see docs/differences.md)."""
    import jsonschema  # the scheduler's validator; imported when a server lists tools

    if not isinstance(schema, Mapping):
        return f"it is {type(schema).__name__}, not an object"
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    error = jsonschema.exceptions.best_match(cls(cls.META_SCHEMA).iter_errors(schema))
    if error is None:
        return None
    where = "".join(f"/{p}" for p in error.absolute_path) or "/"
    message = error.message.splitlines()[0] if error.message else error.validator
    return f"{message[:200]} at {where}"
