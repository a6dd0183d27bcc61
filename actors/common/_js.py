"""JavaScript semantics that Gemini CLI's behaviour depends on, computed in Python."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def utf16_len(text: str) -> int:
    """``text.length`` in JavaScript: UTF-16 code units, so astral characters count two."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def js_trim(text: str) -> str:
    """``String.prototype.trim``: JavaScript's whitespace, which includes U+FEFF and not
    the separators U+001C–U+001F that Python's ``str.strip`` removes."""
    return text.strip(JS_WHITESPACE)


def js_trim_start(text: str) -> str:
    """``String.prototype.trimStart``."""
    return text.lstrip(JS_WHITESPACE)


def js_trim_end(text: str) -> str:
    """``String.prototype.trimEnd``."""
    return text.rstrip(JS_WHITESPACE)


def js_round(x: float) -> int:
    """``Math.round``: the nearest integer, halves toward +∞.

    ``floor(x + 0.5)`` is wrong just below a half: ``0.49999999999999994 + 0.5`` rounds
    up to ``1.0`` in floating point, where ``Math.round`` gives 0.
    """
    whole = math.floor(x)
    return whole + 1 if x - whole >= 0.5 else whole


def _js_value(value: Any) -> Any:
    if isinstance(value, float):
        if not math.isfinite(value):
            return None  # JSON.stringify(NaN) and JSON.stringify(Infinity) are 'null'
        # JavaScript prints integral numbers below 1e21 in full, without '.0'.
        return int(value) if value.is_integer() and abs(value) < 1e21 else value
    if isinstance(value, Mapping):
        return {str(k): _js_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_js_value(v) for v in value]
    return value


def js_json(value: Any, *, indent: int | None = None) -> str:
    """``JSON.stringify(value)`` (or ``JSON.stringify(value, null, indent)``): compact,
    non-ASCII kept, integral numbers without ``.0``, NaN and infinities as ``null``."""
    if indent is None:
        return json.dumps(_js_value(value), ensure_ascii=False, separators=(",", ":"))
    return json.dumps(_js_value(value), ensure_ascii=False, indent=indent)
