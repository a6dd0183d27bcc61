"""One streamed generation through google-genai's request layer, chunks as REST JSON.

``client.aio.models.generate_content_stream`` builds a ``GenerateContentResponse`` for
every chunk, which the gateway then dumps back to JSON: the larger part of a stream's cost
here. ``open_stream`` makes the same call one layer down, with the SDK's own pieces: its
request converter (``_GenerateContentParameters_to_mldev`` / ``_to_vertex``) builds the
body and path, its API client (``async_request_streamed``) sends it — auth, base URL,
API version, headers, the httpx client, ``APIError`` for an error status or an in-stream
error, ``UnknownApiResponseError`` for a chunk that is not JSON — and each chunk comes back
as the JSON the server sent, put in the SDK's shape by ``wire_chunk``. This is what
``generate_content_stream`` does when automatic function calling and automatic
continuation are off, as the gateway always asks (``sdk_config``); the tests compare the
requests of the two paths.

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

import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import attrs
from google import genai
from google.genai import _common, types
from google.genai import models as genai_models

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
)
"""This SDK has the pieces ``open_stream`` uses."""


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


async def open_stream(client: genai.Client, model: str, contents: Any, config: PreparedConfig) -> AsyncIterator[Any]:
    """Send the request; the chunks, as REST JSON. The caller closes the iterator."""
    api: Any = getattr(client.aio, "_api_client", None)
    if not LOWER_LEVEL or not hasattr(api, "async_request_streamed"):
        stream = await client.aio.models.generate_content_stream(model=model, contents=contents, config=config.model)
        return _dumped(stream)
    # As _generate_content_stream, with the config's part of the body from ``config``.
    params = types._GenerateContentParameters(model=model, contents=contents)
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
    request.update(config.body(api))
    responses = await api.async_request_streamed("post", path, request, config.model.http_options)
    return _chunks(responses, vertexai=bool(api.vertexai), config=config.model)


async def _chunks(responses: Any, *, vertexai: bool, config: Any) -> AsyncIterator[Any]:
    try:
        async for response in responses:
            data = json.loads(response.body) if response.body else {}
            yield wire_chunk(data, vertexai=vertexai, config=config)
    finally:
        await responses.aclose()


async def _dumped(stream: Any) -> AsyncIterator[Any]:
    try:
        async for chunk in stream:
            yield wire_json(chunk)
    finally:
        await stream.aclose()
