"""A tool call's arguments checked against its schema, without importing jsonschema.

Why it exists: importing jsonschema (with referencing, jsonschema_specifications,
importlib.resources, zipfile, its format checkers) and building its first validator cost
a headless run about 20 ms on its first tool call. The schemas built-in tools and
ordinary MCP tools declare use a small set of keywords, checked here directly: ``type``
(a name or a list of names), ``properties``, ``required``, ``enum``, ``items`` (one
schema), ``minimum``, ``maximum``, ``minItems``, ``maxItems``, ``minLength`` and
``additionalProperties`` (a boolean or a schema); keywords that validate nothing
(``description``, ``title``, ``default``, ``$schema``, ``format`` — the validator is
built without a format checker —, any unknown word) are skipped, as jsonschema skips them.

A schema with any other validation keyword (``$ref``, ``$defs``'s users, ``anyOf``,
``oneOf``, ``pattern``, ``const``, ...) or an ill-formed value of a known one gets
``None`` from ``compile_checker``, and the caller uses jsonschema for it.

Parity: the answer is the one the jsonschema path gives — every error collected in
jsonschema's order (schema keys in order, depth first), the first by path length then
path, worded by ``ajv_text`` as Gemini CLI's validator (ajv) words it. The integer rule
is JSON Schema's and ajv's: ``True`` is not an integer, ``1.0`` is. Held equal by a
property test (tests/scheduler/test_schema_check.py). One difference that JSON cannot
reach: jsonschema gives up (no error) when an instance's ``repr`` fails, as for an
integer of more than 4,300 digits, which ``json.loads`` refuses anyway.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Path = tuple[str | int, ...]
Error = tuple[Path, str, Any, str]
"""Where, the keyword, its value in the schema, jsonschema's message (``required`` only)."""
Checker = Callable[[Any], str | None]

JSONSCHEMA_KEYWORDS = frozenset(
    {
        "$dynamicRef", "$ref", "additionalProperties", "allOf", "anyOf", "const", "contains",
        "dependentRequired", "dependentSchemas", "enum", "exclusiveMaximum",
        "exclusiveMinimum", "format", "if", "items", "maxItems", "maxLength", "maxProperties",
        "maximum", "minItems", "minLength", "minProperties", "minimum", "multipleOf", "not",
        "oneOf", "pattern", "patternProperties", "prefixItems", "properties", "propertyNames",
        "required", "type", "unevaluatedItems", "unevaluatedProperties", "uniqueItems",
    }
)  # fmt: skip
"""The keywords jsonschema's Draft 2020-12 validator acts on (a test holds this equal to
its ``VALIDATORS``); any other key of a schema is skipped by it."""

SUPPORTED = frozenset(
    {
        "type", "properties", "required", "enum", "items", "minimum", "maximum", "minItems",
        "maxItems", "minLength", "additionalProperties", "format",
    }
)  # fmt: skip
"""The keywords checked here (``format`` is checked by nothing: no format checker)."""

REFERENCE_KEYWORDS = frozenset({"$id", "$anchor", "$dynamicAnchor", "$defs", "$vocabulary"})
"""Not validation keywords, but jsonschema reads them when it builds a validator (an
ill-formed ``$id`` makes it raise): left to it."""

_TYPE_NAMES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})


_AJV_WORDING = {
    "enum": "must be equal to one of the allowed values",
    "minimum": "must be >= {}",
    "maximum": "must be <= {}",
    "minItems": "must NOT have fewer than {} items",
    "maxItems": "must NOT have more than {} items",
    "additionalProperties": "must NOT have additional properties",
    "minLength": "must NOT have fewer than {} characters",
}
"""ajv's words for a keyword's error, with the keyword's value in ``{}``."""


def ajv_text(path: Sequence[str | int], keyword: str | None, value: Any, message: str) -> str:
    """An error worded as ajv words it: ``params/<path> must ...``. ``message`` is
    jsonschema's, for the keywords ajv's wording is not made here."""
    where = "params" + "".join(f"/{p}" for p in path)
    if keyword == "required":
        missing = message.split("'")[1] if "'" in message else message
        return f"{where} must have required property '{missing}'"
    if keyword == "type":
        expected = ",".join(value) if isinstance(value, list) else value
        return f"{where} must be {expected}"
    wording = _AJV_WORDING.get(keyword or "")
    if wording is None:
        return f"{where} {message}"
    return f"{where} {wording.format(value)}"


def error_order(path: Sequence[str | int]) -> tuple[int, str]:
    """Which error is reported first: the shortest path, then the least by the text of
    jsonschema's path (a ``deque``), as the jsonschema path sorts them."""
    return len(path), str(deque(path))


def compile_checker(schema: Mapping[str, Any]) -> Checker | None:
    """A checker for ``schema`` (arguments -> the first error's text, or None), or None
    when the schema is outside the keywords checked here."""
    if not isinstance(schema, dict) or not _supported(schema):
        return None

    def check(args: Any) -> str | None:
        errors: list[Error] = []
        try:
            _walk(schema, args, (), errors)
        except Exception:  # noqa: BLE001
            # As the jsonschema path: a schema that cannot be applied to the value (a
            # number that does not compare) validates nothing.
            return None
        if not errors:
            return None
        path, keyword, value, message = min(errors, key=lambda e: error_order(e[0]))
        return ajv_text(path, keyword, value, message)

    return check


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    if isinstance(value, str | list | dict) or value is None:
        return False
    import numbers  # jsonschema's rule, for a value no JSON decoder makes

    return isinstance(value, numbers.Number)


def _is_type(value: Any, name: str) -> bool:
    """jsonschema's Draft 2020-12 type checker (ajv agrees for JSON values)."""
    if name == "string":
        return isinstance(value, str)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if name == "integer":
        return _is_int(value) or (isinstance(value, float) and value.is_integer())
    return _is_number(value)  # "number"; names are checked by _supported


def _supported(schema: Any) -> bool:
    """Every (sub)schema a dict of checked or skipped keywords with well-formed values."""
    if not isinstance(schema, dict):
        return False
    for key, value in schema.items():
        if key in REFERENCE_KEYWORDS:
            return False
        if key not in JSONSCHEMA_KEYWORDS:
            continue
        if key not in SUPPORTED:
            return False
        if key == "type":
            names = value if isinstance(value, list) else [value]
            if not all(isinstance(n, str) and n in _TYPE_NAMES for n in names):
                return False
        elif key == "properties":
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and _supported(v) for k, v in value.items()
            ):
                return False
        elif key == "required":
            if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
                return False
        elif key == "enum":
            if not isinstance(value, list):
                return False
        elif key == "items":
            if not _supported(value):
                return False
        elif key in ("minimum", "maximum"):
            if not _is_number(value) or not isinstance(value, int | float):
                return False
        elif key in ("minItems", "maxItems", "minLength"):
            if not _is_int(value):
                return False
        elif key == "additionalProperties":
            if not isinstance(value, bool) and not _supported(value):
                return False
        elif key == "format":
            pass  # no format checker: nothing to check
    return True


def _equal(one: Any, two: Any) -> bool:
    """jsonschema's ``enum`` equality: ``True`` is not ``1``, containers compared so."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(k in two and _equal(v, two[k]) for k, v in one.items())
    if isinstance(one, bool) or isinstance(two, bool):
        return one is two
    return bool(one == two)


def _walk(schema: dict[str, Any], value: Any, path: Path, errors: list[Error]) -> None:
    """Append ``value``'s errors against ``schema`` in jsonschema's order."""
    for key, rule in schema.items():
        if key == "type":
            names = rule if isinstance(rule, list) else [rule]
            if not any(_is_type(value, n) for n in names):
                errors.append((path, key, rule, ""))
        elif key == "properties":
            if isinstance(value, dict):
                for name, sub in rule.items():
                    if name in value:
                        _walk(sub, value[name], (*path, name), errors)
        elif key == "required":
            if isinstance(value, dict):
                for name in rule:
                    if name not in value:
                        errors.append((path, key, rule, f"{name!r} is a required property"))
        elif key == "enum":
            if all(not _equal(each, value) for each in rule):
                errors.append((path, key, rule, ""))
        elif key == "items":
            if isinstance(value, list):
                for index, item in enumerate(value):
                    _walk(rule, item, (*path, index), errors)
        elif key == "minimum":
            if _is_number(value) and value < rule:
                errors.append((path, key, rule, ""))
        elif key == "maximum":
            if _is_number(value) and value > rule:
                errors.append((path, key, rule, ""))
        elif key == "minItems":
            if isinstance(value, list) and len(value) < rule:
                errors.append((path, key, rule, ""))
        elif key == "maxItems":
            if isinstance(value, list) and len(value) > rule:
                errors.append((path, key, rule, ""))
        elif key == "minLength":
            if isinstance(value, str) and len(value) < rule:
                errors.append((path, key, rule, ""))
        elif key == "additionalProperties":
            if isinstance(value, dict):
                known = schema.get("properties", {})
                extras = [name for name in value if name not in known]
                if isinstance(rule, dict):
                    for name in extras:
                        _walk(rule, value[name], (*path, name), errors)
                elif rule is False and extras:
                    errors.append((path, key, rule, ""))
