"""Streamed chunks as Gemini REST JSON without building SDK models for each one.

google-genai turns every streamed chunk into a ``GenerateContentResponse`` (its response
converter, then pydantic) and ``wire_json`` turns that back into REST JSON: about 85 µs a
chunk, most of what a stream costs in this process. For almost every chunk the API sends
that round trip is the identity: each key is a field the SDK keeps, each value already has
the field's type in the spelling pydantic writes back. ``wire_chunk`` checks exactly that,
in a few µs, against a schema compiled once from the SDK's own models and converter, and
returns the chunk as it came. Any other chunk (an unknown or dropped field, a null, a value
pydantic would coerce or reject, a model with a validator of its own, a URL-safe base64
signature...) takes the SDK's round trip (``sdk_wire_json``), so the result is the same
either way, up to key order. ``tests/gateway/test_genai_wire.py`` holds the two paths to
that on generated chunks.

Pure functions, no I/O.
"""

from __future__ import annotations

import base64
import binascii
import enum
import functools
import math
import types as pytypes
import typing
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import pydantic
from google.genai import models as genai_models
from google.genai import types

EXCLUDED_FIELDS = frozenset({"sdk_http_response", "automatic_function_calling_history", "parsed"})
"""``GenerateContentResponse`` fields that are the SDK's, not the API's."""
_URLSAFE_TO_STANDARD = str.maketrans("-_", "+/")
_OWN_VALIDATOR = "_check_field_type_mismatches"
"""The validator every SDK model has; it only warns about model instances, never dicts."""


def wire_json(response: Any) -> Any:
    """An SDK response object as Gemini REST JSON."""
    data = response.model_dump(mode="json", by_alias=True, exclude_none=True, exclude=set(EXCLUDED_FIELDS))
    _standard_base64(data)
    return data


def _standard_base64(value: Any) -> None:
    """pydantic writes bytes as URL-safe base64; the API and Gemini CLI's files use the
    standard alphabet (``thoughtSignature``, ``inlineData.data``)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "thoughtSignature" and isinstance(item, str):
                value[key] = item.translate(_URLSAFE_TO_STANDARD)
            elif key == "inlineData" and isinstance(item, dict) and isinstance(item.get("data"), str):
                item["data"] = item["data"].translate(_URLSAFE_TO_STANDARD)
            else:
                _standard_base64(item)
    elif isinstance(value, list):
        for item in value:
            _standard_base64(item)


def sdk_wire_json(data: Any, *, vertexai: bool, config: Any = None) -> Any:
    """What ``generate_content_stream`` makes of one streamed chunk ``data`` (the JSON
    the server sent) with ``config`` (a ``GenerateContentConfig``), as REST JSON."""
    convert = genai_models._GenerateContentResponse_from_vertex if vertexai else genai_models._GenerateContentResponse_from_mldev
    kwargs: dict[str, Any] = {}
    if config is not None:
        kwargs["config"] = {
            "response_schema": getattr(config, "response_schema", None),
            "response_json_schema": getattr(config, "response_json_schema", None),
            "include_all_fields": getattr(config, "include_all_fields", None),
        }
    return wire_json(types.GenerateContentResponse._from_response(response=convert(data, None, None), kwargs=kwargs))


def wire_chunk(data: Any, *, vertexai: bool, config: Any = None) -> Any:
    """``sdk_wire_json(data, ...)``, in a few µs when ``data`` is already that."""
    if type(data) is dict and not getattr(config, "include_all_fields", None) and _fits(data, response_schema(vertexai)):
        return data
    return sdk_wire_json(data, vertexai=vertexai, config=config)


# -- the schema --------------------------------------------------------------------------------
class Kind(enum.Enum):
    STR = "str"
    BOOL = "bool"
    INT = "int"
    FLOAT = "float"
    ENUM = "enum"
    BYTES = "bytes"
    """base64 that reads the same in both alphabets (no ``+`` or ``/``): pydantic writes
    bytes URL-safe, and only a signature is turned back to the standard alphabet."""
    SIGNATURE = "signature"
    """``thoughtSignature``: canonical standard base64."""
    MODEL = "model"
    JSON = "json"
    """Free-form JSON (an ``Any`` field)."""
    OBJECT = "object"
    """A free-form JSON object (``dict[str, Any]``: function-call arguments and the
    like): pydantic refuses anything but an object there."""


@attrs.frozen
class Field:
    kind: Kind
    many: bool = False
    """A list of such values."""
    values: frozenset[str] = frozenset()
    """The enum's values (``ENUM``)."""
    model: Model | None = None
    """The nested model (``MODEL``)."""


@attrs.define(eq=False)
class Model:
    """The canonical keys of one SDK model: alias -> ``Field``. Keys not here (unknown,
    dropped by the converter, or of a type not checked here) send a chunk the SDK way."""

    fields: dict[str, Field] = attrs.field(factory=dict)


@functools.cache
def response_schema(vertexai: bool) -> Model:
    """``GenerateContentResponse`` as the stream converter of this API leaves it."""
    convert = genai_models._GenerateContentResponse_from_vertex if vertexai else genai_models._GenerateContentResponse_from_mldev
    memo: dict[type[pydantic.BaseModel], Model | None] = {}
    full = _compile(types.GenerateContentResponse, memo)
    candidate = _compile(types.Candidate, memo)
    assert full is not None and candidate is not None, "the SDK's response models changed"
    response_cls = types.GenerateContentResponse
    top = _kept(response_cls, full, lambda alias, marker: convert({alias: marker}, None, None))
    top = {alias: f for alias, f in top.items() if _field_name(response_cls, alias) not in EXCLUDED_FIELDS}
    kept_candidate = _kept(
        types.Candidate, candidate, lambda alias, marker: _first_candidate(convert({"candidates": [{alias: marker}]}, None, None))
    )
    if _first_candidate(convert({"candidates": [{}]}, None, None)) == {} and "candidates" in full.fields:
        top["candidates"] = Field(Kind.MODEL, many=True, model=Model(kept_candidate))
    return Model(top)


def _first_candidate(converted: Mapping[str, Any]) -> Any:
    candidates = converted.get("candidates")
    return candidates[0] if isinstance(candidates, list) and candidates else None


def _kept(cls: type[pydantic.BaseModel], model: Model, convert: Callable[[str, Any], Any]) -> dict[str, Field]:
    """The fields of ``cls`` that ``convert`` passes through unchanged: a probe value in,
    the same out under the field's name or alias. (The probe is a list, so that a
    converter that copies a list item by item still counts as passing it through.)"""
    kept: dict[str, Field] = {}
    for alias, f in model.fields.items():
        marker = ["\x00agentbus-probe"]
        out = convert(alias, marker)
        if isinstance(out, Mapping) and list(out.items()) in ([(alias, marker)], [(_field_name(cls, alias), marker)]):
            kept[alias] = f
    return kept


def _field_name(cls: type[pydantic.BaseModel], alias: str) -> str:
    return next((name for name, info in cls.model_fields.items() if info.alias == alias), alias)


def _compile(cls: type[pydantic.BaseModel], memo: dict[type[pydantic.BaseModel], Model | None]) -> Model | None:
    """``cls`` as a ``Model``, or ``None`` when its values are not checked here (a
    validator or serializer of its own, extra fields allowed)."""
    if cls in memo:
        return memo[cls]
    decorators = cls.__pydantic_decorators__
    validators = set(decorators.model_validators) | set(decorators.field_validators)
    if (
        validators - {_OWN_VALIDATOR}
        or decorators.model_serializers
        or decorators.field_serializers
        or cls.model_config.get("extra") != "forbid"
    ):
        memo[cls] = None
        return None
    model = memo[cls] = Model()
    # The SDK builds its models on first use: until then a field's annotation may still
    # be a forward reference. Resolving the annotations is enough here, and far cheaper
    # than building every model of the response tree.
    hints = typing.get_type_hints(cls)
    for name, info in cls.model_fields.items():
        alias = info.alias or name
        f = _field(hints.get(name, info.annotation), alias, memo)
        if f is None:
            continue
        if alias == "thoughtSignature" and f.kind is not Kind.SIGNATURE:
            continue  # the SDK rewrites any key of that name
        if alias == "inlineData" and (f.model is None or getattr(f.model.fields.get("data"), "kind", None) is not Kind.BYTES):
            continue
        model.fields[alias] = f
    return model


def _field(annotation: Any, alias: str, memo: dict[type[pydantic.BaseModel], Model | None]) -> Field | None:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is pytypes.UnionType:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            return None
        annotation = args[0]
        origin = typing.get_origin(annotation)
    many = origin is list
    if many:
        (annotation,) = typing.get_args(annotation) or (Any,)
        origin = typing.get_origin(annotation)
    if annotation is Any:
        return Field(Kind.JSON, many)
    if origin is dict and typing.get_args(annotation)[:1] == (str,) and typing.get_args(annotation)[1:] == (Any,):
        return Field(Kind.OBJECT, many)
    simple = {str: Kind.STR, bool: Kind.BOOL, int: Kind.INT, float: Kind.FLOAT}.get(annotation)
    if simple is not None:
        return Field(simple, many)
    if annotation is bytes:
        return Field(Kind.SIGNATURE if alias == "thoughtSignature" else Kind.BYTES, many)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return Field(Kind.ENUM, many, values=frozenset(m.value for m in annotation if isinstance(m.value, str)))
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        model = _compile(annotation, memo)
        return None if model is None else Field(Kind.MODEL, many, model=model)
    return None


# -- the check ---------------------------------------------------------------------------------
def _fits(data: dict[str, Any], model: Model) -> bool:
    fields = model.fields
    for key, value in data.items():
        f = fields.get(key)
        if f is None:
            return False
        if f.many:
            if type(value) is not list or not all(_value_fits(item, f) for item in value):
                return False
        elif not _value_fits(value, f):
            return False
    return True


def _value_fits(value: Any, f: Field) -> bool:
    kind = f.kind
    if kind is Kind.STR:
        return type(value) is str
    if kind is Kind.MODEL:
        return type(value) is dict and f.model is not None and _fits(value, f.model)
    if kind is Kind.INT:
        return type(value) is int
    if kind is Kind.BOOL:
        return type(value) is bool
    if kind is Kind.FLOAT:
        return type(value) is float and math.isfinite(value)
    if kind is Kind.ENUM:
        return type(value) is str and value in f.values
    if kind is Kind.SIGNATURE:
        return _canonical_base64(value)
    if kind is Kind.BYTES:
        return _canonical_base64(value) and "+" not in value and "/" not in value
    if kind is Kind.OBJECT:
        return type(value) is dict and _plain_json(value)
    return value is not None and _plain_json(value)


def _canonical_base64(value: Any) -> bool:
    if type(value) is not str:
        return False
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return base64.b64encode(raw).decode("ascii") == value


def _plain_json(value: Any) -> bool:
    """JSON that pydantic writes back as it is and that ``_standard_base64`` leaves alone."""
    if type(value) is dict:
        return all(
            k != "thoughtSignature" and k != "inlineData" and _plain_json(v) for k, v in value.items()
        )
    if type(value) is list:
        return all(_plain_json(v) for v in value)
    if type(value) is float:
        return math.isfinite(value)
    return value is None or type(value) in (str, int, bool)
