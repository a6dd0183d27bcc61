"""JavaScript semantics that Gemini CLI's behaviour depends on, computed in Python."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, cast

from ._lazy import LazyPattern

JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
"""JavaScript's whitespace: what ``\\s`` matches and ``String.prototype.trim`` strips."""


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


_PARSE_INT = LazyPattern(f"[{JS_WHITESPACE}]*([+-]?[0-9]+)")


def js_parse_int(text: str) -> int | None:
    """``parseInt(text, 10)``; None where JavaScript answers ``NaN``. Leading JavaScript
    whitespace, a sign, then ASCII digits only (Python's ``\\s`` and ``\\d`` are wider)."""
    match = _PARSE_INT.match(text)
    return int(match.group(1)) if match else None


def js_round(x: float) -> int:
    """``Math.round``: the nearest integer, halves toward +∞.

    ``floor(x + 0.5)`` is wrong just below a half: ``0.49999999999999994 + 0.5`` rounds
    up to ``1.0`` in floating point, where ``Math.round`` gives 0.
    """
    whole = math.floor(x)
    return whole + 1 if x - whole >= 0.5 else whole


def js_to_fixed(value: float, digits: int) -> str:
    """``value.toFixed(digits)``: the exact binary value rounded, ties away from zero
    (``(1.005).toFixed(2)`` is ``1.00``: 1.005 is stored as 1.00499…)."""
    if not math.isfinite(value) or abs(value) >= 1e21:
        return js_number(value)
    if value == 0:
        value = 0.0  # (-0).toFixed(1) is '0.0'
    return str(Decimal(value).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def js_number(value: float) -> str:
    """``String(value)``: a number as JavaScript writes it in text and in JSON (shortest
    round-trip digits; plain notation from 1e-7 up to below 1e21, else ``1e-7``, ``1e+21``)."""
    if isinstance(value, int) and -(2**53) < value < 2**53:
        return str(value)
    try:
        number = float(value)
    except OverflowError:  # an integer beyond the doubles
        number = math.inf if value > 0 else -math.inf
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    digits_tuple = Decimal(repr(abs(number))).normalize().as_tuple()
    digits = "".join(str(d) for d in digits_tuple.digits)
    exponent = cast(int, digits_tuple.exponent)
    k = len(digits)
    n = k + exponent  # value = 0.digits * 10**n
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
        text = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + text


class _NumberText(Exception):
    """A float Python's ``json`` would write unlike JavaScript (``1e-07``, ``1e+18``)."""


def _js_value(value: Any) -> Any:
    if isinstance(value, float):
        if not math.isfinite(value):
            return None  # JSON.stringify(NaN) and JSON.stringify(Infinity) are 'null'
        if value.is_integer() and abs(value) < 2**53:
            return int(value)  # 1.0 is 1
        if repr(value) != js_number(value):
            raise _NumberText
        return value
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**53) < value < 2**53:
        raise _NumberText  # a double in JavaScript: 2 ** 60 is written 1152921504606847000
    if isinstance(value, Mapping):
        return {str(k): _js_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_js_value(v) for v in value]
    return value


def _write(value: Any, indent: int | None, depth: int) -> str:
    """The slow path of ``js_json``: every number through ``js_number``."""
    if value is None or value is True or value is False or isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int | float):
        text = js_number(value)
        return "null" if text in ("NaN", "Infinity", "-Infinity") else text
    if isinstance(value, Mapping):
        items = [
            json.dumps(str(k), ensure_ascii=False)
            + (": " if indent else ":")
            + _write(v, indent, depth + 1)
            for k, v in value.items()
        ]
        return _join("{", items, "}", indent, depth)
    if isinstance(value, list | tuple):
        return _join("[", [_write(v, indent, depth + 1) for v in value], "]", indent, depth)
    return json.dumps(value)  # raises TypeError as json.dumps does


def _join(open_: str, items: list[str], close: str, indent: int | None, depth: int) -> str:
    if not items:
        return open_ + close
    if not indent:
        return open_ + ",".join(items) + close
    inner = "\n" + " " * (indent * (depth + 1))
    return open_ + inner + ("," + inner).join(items) + "\n" + " " * (indent * depth) + close


def js_json(value: Any, *, indent: int | None = None) -> str:
    """``JSON.stringify(value)`` (or ``JSON.stringify(value, null, indent)``): compact,
    non-ASCII kept, numbers as ``String(number)`` writes them (``1`` for ``1.0``,
    ``1e-7``), NaN and infinities as ``null``."""
    try:
        plain = _js_value(value)
    except _NumberText:
        return _write(value, indent, 0)
    if indent is None:
        return json.dumps(plain, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(plain, ensure_ascii=False, indent=indent)
