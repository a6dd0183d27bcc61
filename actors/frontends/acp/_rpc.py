"""JSON-RPC 2.0 framing for ACP: one JSON object per line, parsed and built as data.

No I/O here (h11's split): ``parse_frame`` turns one line into a ``Request``,
``Notification``, ``Response`` or ``Invalid`` (what to answer a frame that is none of
them); the ``*_frame`` functions build the objects to send and ``encode`` the bytes.
Kept free of attrs and trio so that ``initialize`` can be answered before they load.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, NamedTuple, TypeGuard

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800
AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002

RequestId = int | str


class RpcError(Exception):
    """An error answer: raised by handlers, turned into an error response."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out

    @classmethod
    def from_json(cls, error: Any) -> RpcError:
        if not isinstance(error, dict):
            return cls(INTERNAL_ERROR, f"malformed error: {error!r}")
        code = error.get("code")
        return cls(
            code if isinstance(code, int) else INTERNAL_ERROR,
            str(error.get("message", "")),
            error.get("data"),
        )


def method_not_found(method: str) -> RpcError:
    return RpcError(METHOD_NOT_FOUND, "Method not found", {"method": method})


def invalid_params(message: str, **data: Any) -> RpcError:
    return RpcError(INVALID_PARAMS, f"Invalid params: {message}", data or None)


class Request(NamedTuple):
    id: RequestId
    method: str
    params: Any


class Notification(NamedTuple):
    method: str
    params: Any


class Response(NamedTuple):
    """An answer to one of our requests: ``error`` is None on success."""

    id: RequestId
    result: Any
    error: RpcError | None


class Invalid(NamedTuple):
    """A frame that must be answered with an error (``id`` None when unknown)."""

    id: RequestId | None
    error: RpcError


Frame = Request | Notification | Response | Invalid


MAX_INT_DIGITS = sys.get_int_max_str_digits()
"""Python's limit on converting a decimal string to an integer (0: none)."""


class _HugeInt:
    """Stands for an integer of more digits than :data:`MAX_INT_DIGITS` while a line is
    parsed; the line is then answered as invalid."""


def _valid_id(value: Any) -> TypeGuard[RequestId]:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def parse_frame(line: bytes | str) -> Frame:
    """One line of the stream as a frame; never raises."""
    huge: list[int] = []

    def parse_int(digits: str) -> int | _HugeInt:
        # Python converts at most 4,300 digits; the line is still JSON, so its id can
        # be read and the request answered as such.
        if MAX_INT_DIGITS and len(digits.lstrip("-")) > MAX_INT_DIGITS:
            huge.append(len(digits.lstrip("-")))
            return _HugeInt()
        return int(digits)

    try:
        # Strict UTF-8 first: ``json.loads`` of bytes lets encoded surrogates through.
        text = line.decode("utf-8") if isinstance(line, bytes) else line
        data = json.loads(text, parse_int=parse_int)
    except (ValueError, RecursionError) as exc:
        # ValueError: not JSON, not UTF-8.
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        return Invalid(None, RpcError(PARSE_ERROR, "Parse error", {"details": why}))
    if huge:
        rid = data.get("id") if isinstance(data, dict) else None
        why = f"an integer of {huge[0]:,} digits (at most {MAX_INT_DIGITS:,} are read)"
        return Invalid(rid if _valid_id(rid) else None, RpcError(INVALID_PARAMS, "Invalid params", {"details": why}))
    if _SURROGATE_ESCAPE.search(text) is not None and not _encodable(data):
        rid = data.get("id") if isinstance(data, dict) else None
        return Invalid(
            rid if _valid_id(rid) and _encodable(rid) else None,
            RpcError(INVALID_REQUEST, "Invalid Request", {"details": "a string holds a lone surrogate: not Unicode"}),
        )
    if not isinstance(data, dict) or data.get("jsonrpc") != "2.0":
        return Invalid(
            data.get("id") if isinstance(data, dict) and _valid_id(data.get("id")) else None,
            RpcError(INVALID_REQUEST, "Invalid Request", {"details": "not a JSON-RPC 2.0 object"}),
        )
    rid = data.get("id")
    if "method" in data:
        method = data["method"]
        params = data.get("params")
        if not isinstance(method, str):
            return Invalid(rid if _valid_id(rid) else None, RpcError(INVALID_REQUEST, "Invalid Request"))
        if params is not None and not isinstance(params, dict | list):
            return Invalid(
                rid if _valid_id(rid) else None,
                RpcError(INVALID_PARAMS, "Invalid params", {"details": "params must be an object"}),
            )
        if "id" not in data:
            return Notification(method, params)
        if not _valid_id(rid):
            return Invalid(None, RpcError(INVALID_REQUEST, "Invalid Request", {"details": "bad id"}))
        return Request(rid, method, params)
    if _valid_id(rid) and ("result" in data or "error" in data):
        if "error" in data and data["error"] is not None:
            return Response(rid, None, RpcError.from_json(data["error"]))
        return Response(rid, data.get("result"), None)
    return Invalid(rid if _valid_id(rid) else None, RpcError(INVALID_REQUEST, "Invalid Request"))


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""How a lone surrogate gets into strict UTF-8 JSON: an escape. Pairs (emoji written by
``ensure_ascii`` encoders) decode to one character; the full check runs only when one
of these escapes appears. (``bus.json_values`` has the same check; this module keeps its
own because ACP's framing is loaded before the bus and trio, to answer ``initialize``
at once.)"""


def _encodable(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, ValueError, RecursionError):
        return False
    return True


def result_frame(rid: RequestId, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def error_frame(rid: RequestId | None, error: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": error.to_json()}


def request_frame(rid: RequestId, method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def notification_frame(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def encode(frame: dict[str, Any]) -> bytes:
    """One frame as a line: compact JSON (non-ASCII kept), ``\\n``-terminated."""
    return json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace") + b"\n"
