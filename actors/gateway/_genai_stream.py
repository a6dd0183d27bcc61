"""One streamed generation through google-genai's request layer, chunks as REST JSON.

``client.aio.models.generate_content_stream`` builds a ``GenerateContentResponse`` for
every chunk, which the gateway then dumps back to JSON: the larger part of a stream's cost
here. ``open_stream`` makes the same call one layer down, with the SDK's own pieces: its
request converter (``_GenerateContentParameters_to_mldev`` / ``_to_vertex``) builds the
body and path, its API client (``_build_request``, ``_async_request``) sends it — auth,
base URL, API version, headers, the httpx client, ``APIError`` for an error status — and
its SSE reader (``HttpResponse._aiter_response_stream``) splits the body into events,
each parsed by its ``_load_json_from_response`` (``UnknownApiResponseError`` for one that
is not JSON) and checked as ``async_request_streamed`` checks it (an event whose JSON
starts with ``{"error":`` raises the SDK's ``APIError``). Each chunk comes back as the
JSON the server sent, put in the SDK's shape by ``wire_chunk``. This is what
``generate_content_stream`` does when automatic function calling and automatic
continuation are off, as the gateway always asks (``sdk_config``), without a pydantic
model, a JSON dump and a parse per chunk in between; the tests compare the requests and
chunks of the two paths. The chunks are read where the caller iterates (the backend does
it in trio): nothing in these generators waits on anything but the body.

Most of the SDK's work in building a request goes into the config: validating it and
converting it field by field (0.5 ms for an empty config, 2 ms for Gemini CLI's system
instruction and tools). A session sends the same config with every request, so the
backend keeps each distinct config ``PreparedConfig``: the validated model and, on first
use, the body fields the SDK's converter makes of it; only the contents are converted per
request.

These are private functions of the SDK: without them (another SDK version)
``open_stream`` uses the public method.
"""

from __future__ import annotations

import itertools
import operator
import warnings
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlencode

import attrs
from google import genai
from google.genai import _api_client, _common, errors, types
from google.genai import models as genai_models

from bus.json_values import thaw

from ._genai_wire import wire_chunk, wire_json

STREAM_PATH = "{model}:streamGenerateContent?alt=sse"

LOWER_LEVEL = (
    hasattr(genai_models, "_GenerateContentParameters_to_mldev")
    and hasattr(genai_models, "_GenerateContentParameters_to_vertex")
    and hasattr(genai_models, "_GenerateContentResponse_from_mldev")
    and hasattr(genai_models, "_GenerateContentResponse_from_vertex")
    and hasattr(genai_models, "_GenerateContentConfig_to_mldev")
    and hasattr(genai_models, "_GenerateContentConfig_to_vertex")
    and hasattr(_common, "set_value_by_path")
    and hasattr(types, "_GenerateContentParameters")
    and hasattr(_common, "convert_to_dict")
    and hasattr(_common, "encode_unserializable_types")
    and hasattr(_api_client.BaseApiClient, "_build_request")
    and hasattr(_api_client.BaseApiClient, "_async_request")
    and hasattr(_api_client.HttpResponse, "_aiter_response_stream")
    and hasattr(_api_client.HttpResponse, "_load_json_from_response")
    and hasattr(errors.APIError, "raise_error_async")
)
"""This SDK has the pieces ``open_stream`` uses."""

# The SDK's reader nests generators it does not close (its line splitter, httpx's byte
# iterators): when a stream ends early (a cancel, an error event) trio finalises them
# in a system task and warns, addressing the code that iterated them. The connection is
# closed by then (the reader's own ``finally``); the advice is for the SDK, not for us.
ABANDONED_SDK_GENERATORS = r"Async generator '(google\.genai|httpx2)\."
warnings.filterwarnings("ignore", message=ABANDONED_SDK_GENERATORS, category=ResourceWarning)


@attrs.define(eq=False)
class PreparedConfig:
    """A request config as the SDK validates it, and the request-body fields its
    converter makes of it (on first use)."""

    model: types.GenerateContentConfig
    _body: dict[str, Any] | None = None

    def body(self, api: Any) -> dict[str, Any]:
        """What ``_GenerateContentParameters_to_*`` adds to a request body for this
        config, as ``convert_to_dict`` and ``encode_unserializable_types`` leave it.
        Shared by the requests: not to be changed."""
        if self._body is None:
            convert = genai_models._GenerateContentConfig_to_vertex if api.vertexai else genai_models._GenerateContentConfig_to_mldev
            fields: dict[str, Any] = {}
            # The SDK passes the whole parameters as the last argument (root_object);
            # of its converters only the embedding ones read it.
            _common.set_value_by_path(fields, ["generationConfig"], convert(api, self.model, fields, None))
            self._body = _common.encode_unserializable_types(_common.convert_to_dict(fields))
        return self._body


CONTENT_CACHE = 4096
"""Distinct contents kept converted (a few long sessions' histories)."""
LAST_REQUESTS = 128
"""Conversations whose last request is kept to compare the next one with (the most
recent ones; a request of another, or an evicted one, is looked up item by item)."""
CONTENT_KEYS = frozenset({"role", "parts"})
TEXT_PART_KEYS = ("text", "thought")
"""A text part's fields, in the order the SDK's converters write them."""
_TEXT_PART_KEYS = frozenset(TEXT_PART_KEYS)


class ContentCache:
    """Each distinct content of the requests' histories as the SDK's converter makes it
    (``_Content_to_mldev`` / ``_to_vertex``, then ``convert_to_dict`` and
    ``encode_unserializable_types``), kept from its first request on.

    The SDK validates and converts every content of a request, field by field through
    pydantic: 27 ms for a history of 150 contents, on every model request of a session
    that long. Each content converts on its own (a list of contents, each with its role
    and parts, converts item by item), so a session's history — the same contents,
    request after request, and one or two new ones — is converted once. A content of
    text parts alone (the SDK copies their fields as they are) is written as the SDK
    writes it without asking it; the tests check both against the SDK's conversion of
    the whole list. Contents of another shape (not role and parts) go to the SDK whole.
    """

    def __init__(self, size: int = CONTENT_CACHE) -> None:
        self._size = size
        # Keyed by the content's value, kept with the content it was made from: values
        # that are equal in Python can still convert differently (``0 == False``,
        # ``1 == 1.0``, and mappings equal in another key order), so a hit counts only
        # for the same object or an exactly identical one.
        self._items: dict[tuple[bool, Any], tuple[Any, Any]] = {}
        # The last request of each conversation (known by its first content's object)
        # and what it converted to: the next one's contents are mostly the same objects
        # and a few new ones, so what they share is found by identity at C speed and
        # only the rest is looked up, item by item.
        self._last: dict[tuple[bool, int], tuple[Any, list[Any]]] = {}

    def converted(self, api: Any, contents: Any) -> list[Any] | None:
        """The request body's ``contents`` for these (frozen) contents, or ``None``
        when they are not all contents of role and parts (or none at all: the SDK
        refuses that)."""
        if not contents:
            return None
        vertexai = bool(api.vertexai)
        key = (vertexai, id(contents[0]))
        last = self._last.pop(key, None)
        out: list[Any] = []
        if last is not None and last[0][0] is contents[0]:  # (the entry keeps that object alive)
            prev, prev_out = last
            shared = next(
                itertools.compress(itertools.count(), map(operator.is_not, contents, prev)), min(len(contents), len(prev))
            )
            out = prev_out[:shared]
            contents_left = contents[shared:]
        else:
            contents_left = contents
        rest = self._each(vertexai, api, contents_left)
        if rest is None:
            return None
        out.extend(rest)
        self._last[key] = (tuple(contents), out)
        if len(self._last) > LAST_REQUESTS:
            del self._last[next(iter(self._last))]
        return list(out)

    def _each(self, vertexai: bool, api: Any, contents: Any) -> list[Any] | None:
        out = []
        for item in contents:
            if not (isinstance(item, Mapping) and "parts" in item and item.keys() <= CONTENT_KEYS):
                return None
            key = (vertexai, item)
            try:
                source, body = self._items.pop(key)
            except KeyError:
                source, body = None, None
            except TypeError:  # not hashable: not frozen after all
                return None
            if body is None or not (source is item or _identical(source, item)):
                body = _text_content(item)
                if body is None:
                    body = _sdk_content(api, item)
            self._items[key] = (item, body)
            if len(self._items) > self._size:
                del self._items[next(iter(self._items))]
            out.append(body)
        return out


def _identical(a: Any, b: Any) -> bool:
    """``a == b`` with the same types and the same key order throughout, as JSON sees it."""
    if type(a) is not type(b):
        return False
    if isinstance(a, Mapping):
        return list(a) == list(b) and all(_identical(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _text_content(item: Mapping[str, Any]) -> dict[str, Any] | None:
    """A content of text parts as the SDK's converters write it, else ``None``."""
    role, parts = item.get("role"), item["parts"]
    if type(role) is not str or not isinstance(parts, tuple | list) or not parts:
        return None
    out = []
    for part in parts:
        if not isinstance(part, Mapping) or type(part.get("text")) is not str or not part.keys() <= _TEXT_PART_KEYS:
            return None
        if "thought" in part and type(part["thought"]) is not bool:
            return None
        out.append({k: part[k] for k in TEXT_PART_KEYS if k in part})
    return {"parts": out, "role": role}


def _sdk_content(api: Any, item: Any) -> Any:
    params = types._GenerateContentParameters(contents=[thaw(item)])
    convert = genai_models._GenerateContentParameters_to_vertex if api.vertexai else genai_models._GenerateContentParameters_to_mldev
    request = convert(api, params, None, params)
    return _common.encode_unserializable_types(_common.convert_to_dict(request["contents"][0]))


async def open_stream(
    client: genai.Client, model: str, contents: Any, config: PreparedConfig, cache: ContentCache | None = None
) -> tuple[AsyncIterator[Any], bool]:
    """Send the request; the chunks, as REST JSON, and whether they must be read from
    asyncio. The caller closes the iterator. Without the SDK's lower-level pieces the
    chunks come from the public method, whose generators are asyncio's to finalise."""
    api: Any = getattr(client.aio, "_api_client", None)
    if not LOWER_LEVEL or not isinstance(api, _api_client.BaseApiClient):
        stream = await client.aio.models.generate_content_stream(model=model, contents=thaw(contents), config=config.model)
        return _dumped(stream), True
    # As _generate_content_stream, with the config's part of the body from ``config``
    # and the contents from ``cache``.
    converted = cache.converted(api, contents) if cache is not None else None
    params = types._GenerateContentParameters(model=model, contents=thaw(contents) if converted is None else None)
    if api.vertexai:
        request = genai_models._GenerateContentParameters_to_vertex(api, params, None, params)
    else:
        request = genai_models._GenerateContentParameters_to_mldev(api, params, None, params)
    url = request.get("_url")
    path = STREAM_PATH.format_map(url) if url else STREAM_PATH
    query = request.get("_query")
    if query:
        path = f"{path}?{urlencode(query)}"
    request.pop("config", None)
    request = _common.encode_unserializable_types(_common.convert_to_dict(request))
    if converted is not None:
        request["contents"] = converted
    request.update(config.body(api))
    # As async_request_streamed, up to its chunks.
    http_options = config.model.http_options
    http_request = api._build_request("post", path, request, http_options)
    response = await api._async_request(http_request=http_request, http_options=http_options, stream=True)
    return _chunks(response, vertexai=bool(api.vertexai), config=config.model), False


async def _chunks(response: Any, *, vertexai: bool, config: Any) -> AsyncIterator[Any]:
    events = response._aiter_response_stream()
    try:
        async for event in events:
            data = response._load_json_from_response(event)
            if isinstance(data, dict) and next(iter(data), None) == "error":
                await errors.APIError.raise_error_async(data.get("error", {}).get("code"), data, response)
            yield wire_chunk(data, vertexai=vertexai, config=config)
    finally:
        await events.aclose()  # the SDK's reader closes the HTTP response


async def _dumped(stream: Any) -> AsyncIterator[Any]:
    try:
        async for chunk in stream:
            yield wire_json(chunk)
    finally:
        await stream.aclose()
