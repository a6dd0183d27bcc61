"""The scheduler's own argument checker gives the jsonschema path's answer.

``_schema_check`` checks the schemas built-in and ordinary MCP tools declare without
importing jsonschema; for every schema of its keywords and any JSON arguments, its first
error's text must be the one jsonschema and the ajv wording give, and a schema with any
other keyword must still be checked (by jsonschema).
"""

from __future__ import annotations

import math
import sys
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.scheduler._logic import jsonschema_schema_error, schema_error
from actors.scheduler._schema_check import JSONSCHEMA_KEYWORDS, SUPPORTED, compile_checker
from actors.tools import builtin_tools

NAMES = st.sampled_from(["a", "b", "c", "it's", "0", "wait_for_previous"])
TYPE_NAMES = st.sampled_from(["array", "boolean", "integer", "null", "number", "object", "string"])
HUGE = st.integers(
    min_value=-(10**300), max_value=10**300
)  # past floats; json.loads' digit limit is 4300
NUMBERS = st.one_of(
    st.integers(-3, 3),
    HUGE,
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 1.0, -1.0, 2.5, 1e300, 2.0**60, float(2**53 + 1)]),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=4), NAMES)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(NAMES | st.text(max_size=2), inner, max_size=4)
    ),
    max_leaves=12,
)
FINITE = st.one_of(
    st.integers(-3, 3),
    HUGE,
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 1.0, 2.5]),
)
COUNTS = st.integers(-1, 4)
SKIPPED = {
    "description": st.text(max_size=3),
    "title": st.text(max_size=3),
    "default": SCALARS,
    "$schema": st.sampled_from(
        ["http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2020-12/schema"]
    ),
    "$comment": st.text(max_size=3),
    "nullable": st.booleans(),
    "x-vendor": SCALARS,
    "format": st.sampled_from(["uri", "date-time", "email", "nonsense"]),
}


def schemas() -> st.SearchStrategy[dict[str, Any]]:
    """Schemas of the supported keywords (and skipped ones), keys in any order."""

    def keyword(sub: st.SearchStrategy[dict[str, Any]]) -> dict[str, st.SearchStrategy[Any]]:
        return {
            "type": TYPE_NAMES | st.lists(TYPE_NAMES, max_size=3),
            "properties": st.dictionaries(NAMES, sub, max_size=3),
            "required": st.lists(NAMES, max_size=3),
            "enum": st.lists(JSON, max_size=4),
            "items": sub,
            "minimum": FINITE,
            "maximum": FINITE,
            "minItems": COUNTS,
            "maxItems": COUNTS,
            "minLength": COUNTS,
            "additionalProperties": st.booleans() | sub,
            **SKIPPED,
        }

    def build(sub: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        choices = keyword(sub)
        return st.lists(st.sampled_from(sorted(choices)), unique=True, max_size=6).flatmap(
            lambda keys: st.fixed_dictionaries({k: choices[k] for k in keys})
        )

    return st.recursive(st.just({}) | build(st.just({})), build, max_leaves=6)


@given(
    schema=schemas(),
    many=st.lists(JSON | st.dictionaries(NAMES, JSON, max_size=5), min_size=1, max_size=8),
)
def test_the_first_error_is_the_jsonschema_paths(schema: dict[str, Any], many: list[Any]) -> None:
    checker = compile_checker(_full(schema))
    # The schema again as one property's, so its keywords meet every kind of value (at
    # the top only objects pass the ``type: object`` every tool's schema gets).
    nested = {"properties": {"a": schema}, "required": ["a"]}
    nested_checker = compile_checker(_full(nested))
    assert checker is not None and nested_checker is not None, schema
    for args in many:
        assert checker(args) == jsonschema_schema_error(schema, args), (schema, args)
        assert nested_checker({"a": args}) == jsonschema_schema_error(nested, {"a": args}), (
            schema,
            args,
        )


def _full(schema: dict[str, Any]) -> dict[str, Any]:
    from actors.scheduler._logic import with_wait_for_previous

    return with_wait_for_previous(schema)


@pytest.mark.parametrize(
    ("schema", "args", "expected"),
    [
        ({"properties": {"n": {"type": "integer"}}}, {"n": True}, "params/n must be integer"),
        ({"properties": {"n": {"type": "integer"}}}, {"n": 1.0}, None),
        ({"properties": {"n": {"type": "integer"}}}, {"n": 1.5}, "params/n must be integer"),
        ({"properties": {"n": {"type": "integer"}}}, {"n": math.nan}, "params/n must be integer"),
        (
            {"properties": {"n": {"type": "number", "maximum": 1e300}}},
            {"n": 10**301},
            "params/n must be <= 1e+300",
        ),
        ({"properties": {"n": {"type": "number", "minimum": 0}}}, {"n": math.nan}, None),
        (
            {"properties": {"n": {"enum": [1]}}},
            {"n": True},
            "params/n must be equal to one of the allowed values",
        ),
        ({"properties": {"n": {"enum": [[1, {"a": False}]]}}}, {"n": [1.0, {"a": False}]}, None),
        (
            {"required": ["b", "a"], "properties": {"a": {"type": "string"}}},
            {"a": 1},
            "params must have required property 'b'",
        ),
        ({"additionalProperties": False}, {"x": 1}, "params must NOT have additional properties"),
        ({"items": {"minLength": 2}}, [], "params must be object"),
        ({"type": ["string", "null"]}, 1, "params must be string,null"),
    ],
)
def test_json_schema_number_and_equality_rules(
    schema: dict[str, Any], args: Any, expected: str | None
) -> None:
    checker = compile_checker(_full(schema))
    assert checker is not None
    assert checker(args) == expected == jsonschema_schema_error(schema, args)


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"s": {"type": "string", "pattern": "^z"}}},
        {"properties": {"s": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}},
        {"properties": {"s": {"$ref": "#/$defs/z"}}, "$defs": {"z": {"type": "integer"}}},
        {"properties": {"s": {"oneOf": [{"type": "integer"}]}}},
        {"properties": {"s": {"const": 3}}},
        {"properties": {"s": {"type": "string", "maxLength": 1}}},
        {"properties": {"s": {"type": "nonsense"}}},
        {"properties": {"s": True}},
        {"properties": {"s": {"minimum": "3"}}},
    ],
)
def test_other_keywords_are_left_to_jsonschema(schema: dict[str, Any]) -> None:
    assert compile_checker(_full(schema)) is None
    assert schema_error(schema, {"s": "abc"}) == jsonschema_schema_error(schema, {"s": "abc"})


def test_a_pattern_is_still_checked_by_jsonschema() -> None:
    schema = {"properties": {"s": {"type": "string", "pattern": "^z"}}}
    assert schema_error(schema, {"s": "abc"}) == "params/s 'abc' does not match '^z'"


def test_the_skipped_keywords_are_those_jsonschema_does_not_act_on() -> None:
    assert set(jsonschema.Draft202012Validator.VALIDATORS) == JSONSCHEMA_KEYWORDS
    assert SUPPORTED <= JSONSCHEMA_KEYWORDS


def test_built_in_tools_are_checked_without_jsonschema(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = [{}, {"wait_for_previous": 1}, {"file_path": 3, "command": None, "pattern": []}, []]
    tools = builtin_tools("gemini-2.5-flash", agents=True)
    schemas = [
        dict(d.get("parametersJsonSchema") or d.get("parameters") or {"type": "object"})
        for d in (t.declaration("gemini-2.5-flash") for t in tools)
    ]
    expected = [[jsonschema_schema_error(s, a) for a in calls] for s in schemas]
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # importing it now raises
    for tool, schema, answers in zip(tools, schemas, expected, strict=True):
        assert [schema_error(dict(schema), a) for a in calls] == answers, tool.name


def test_schemas_that_differ_in_key_order_keep_their_own_first_error() -> None:
    # Two errors at one place: the schema's key order decides (a cache keyed by sorted
    # JSON once answered the second with the first's validator).
    first = {"type": "array", "required": ["a"], "pattern": "x"}
    second = {"required": ["a"], "pattern": "x", "type": "array"}
    assert schema_error(first, {}) == "params must be array"
    assert schema_error(second, {}) == "params must have required property 'a'"
