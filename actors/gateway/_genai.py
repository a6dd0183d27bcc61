"""The live backend: google-genai's async client, bridged into trio with trio-asyncio.

The bridge. google-genai's ``client.aio`` needs a running asyncio loop. ``running()``
opens one trio-asyncio loop for the gateway's lifetime: asyncio runs inside the trio
scheduler, in the same thread, so a thousand concurrent streams are a thousand sockets,
not threads. A non-streaming call is one ``aio_as_trio`` call. A stream crosses the
bridge once: the SDK builds and sends the request from asyncio and hands back its chunk
reader, which the request's trio task then iterates itself — the SDK's reader awaits
nothing but the response body, and the body reads in trio (``_genai_http``: httpx's
client on an HTTP/1.1 transport of our own, h11 on trio sockets). A trio cancel stops
the read where it is and unwinds the reader. A request may come from any trio task, not
only from tasks started inside ``running()``: for the request, the backend's loop is made
the calling task's current loop (trio-asyncio finds it there when the body is read from
asyncio).

Closing is made certain rather than left to the SDK: the httpx client handed to the SDK
(``_genai_http``) records every response an attempt opens, and the attempt's ``finally``
closes any that is still open — a cancel that arrives while the chunk is being delivered
on the bus, a malformed chunk, an early return. Closing an unfinished response closes its
connection, so the server sees the client go away at once.

Chunks are emitted as Gemini's REST wire JSON (camelCase, no nulls, standard base64),
the shape of fake-responses files and recordings. A stream is read one layer below
``generate_content_stream`` (``_genai_stream``), so that a chunk the SDK would leave as
it is does not become a pydantic model and back (``_genai_wire``). Errors become
``BackendError`` as Gemini CLI would report them (``_errors``); an error before the
response headers is in the ``connect`` phase, after them in the ``stream`` phase.

Auth, as Gemini CLI: ``GEMINI_API_KEY`` (or ``GOOGLE_API_KEY``); Vertex AI with
``GOOGLE_GENAI_USE_VERTEXAI=true`` and ``GOOGLE_API_KEY`` or ``GOOGLE_CLOUD_PROJECT`` +
``GOOGLE_CLOUD_LOCATION``; ``GOOGLE_GEMINI_BASE_URL`` (``GOOGLE_VERTEX_BASE_URL`` for
Vertex) overrides the endpoint; ``GOOGLE_GENAI_API_VERSION`` the API version.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any
from urllib.parse import urlparse

import attrs
import httpx2
import trio
import trio_asyncio
from google import genai
from google.genai import errors as genai_errors
from google.genai import types
from pydantic import ValidationError

from bus import DeliveryError
from bus.json_values import thaw
from bus.messages import GenerateRequest

from ._backend import BackendError, ChunkSink
from ._errors import http_error, malformed_chunk, network_error, stream_error_chunk
from ._genai_http import ATTEMPT, Attempt, TrackingClient, close_attempt
from ._genai_stream import ContentCache, PreparedConfig, open_stream
from ._genai_wire import wire_json
from ._retry import RetryPolicy

CLOSE_GRACE_S = 2.0
"""Bound on closing a response or the client (shielded clean-up)."""
READ_TIMEOUT_S = 300.0
"""Silence allowed while waiting for headers or the next chunk (undici's 300 s)."""
CONNECT_TIMEOUT_S = 30.0
CONFIG_CACHE = 32
"""Distinct request configs kept validated and converted (about one per session)."""
USER_AGENT = "agentbus/0.1.0"
VERTEX_REP_ENDPOINTS = {
    "us": "https://aiplatform.us.rep.googleapis.com",
    "eu": "https://aiplatform.eu.rep.googleapis.com",
}

logging.getLogger("google_genai").addHandler(logging.NullHandler())

# trio-asyncio makes asyncio.get_running_loop() see its loop by patching the function;
# anyio's asyncio backend (under httpx) binds the function when it is imported. If
# anyio was imported before trio-asyncio (anyio's pytest plugin does that), its binding
# is the unpatched one and every request fails with "no running event loop": rebind it.
_anyio_asyncio = sys.modules.get("anyio._backends._asyncio")
if _anyio_asyncio is not None and getattr(_anyio_asyncio, "get_running_loop", None) is not asyncio.get_running_loop:
    vars(_anyio_asyncio)["get_running_loop"] = asyncio.get_running_loop


@attrs.frozen(kw_only=True)
class GenaiSettings:
    """How to reach the API: what ``genai.Client`` is built from."""

    api_key: str | None = None
    vertexai: bool = False
    project: str | None = None
    location: str | None = None
    base_url: str | None = None
    api_version: str = "v1beta"
    headers: Mapping[str, str] = attrs.field(factory=dict)


def settings_from_env(environ: Mapping[str, str], *, auth_type: str | None = None) -> GenaiSettings:
    """Gemini CLI's ``createContentGeneratorConfig`` for the API-key, Vertex and
    gateway auth types; raises ``BackendError`` (type ``config``) when they are not met."""

    def env(key: str) -> str | None:
        return environ.get(key) or None

    if auth_type is None:
        if environ.get("GOOGLE_GENAI_USE_VERTEXAI") == "true":
            auth_type = "vertex-ai"
        elif env("GOOGLE_GEMINI_BASE_URL"):
            auth_type = "gateway"
        else:
            auth_type = "gemini-api-key"
    headers = {"User-Agent": USER_AGENT}
    version_env = env("GOOGLE_GENAI_API_VERSION")
    if auth_type == "vertex-ai":
        api_key = env("GOOGLE_API_KEY")
        project = env("GOOGLE_CLOUD_PROJECT") or env("GOOGLE_CLOUD_PROJECT_ID")
        location = env("GOOGLE_CLOUD_LOCATION")
        if not api_key and not (project and location):
            raise BackendError(
                "When using Vertex AI, you must specify either:\n"
                "• GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION environment variables.\n"
                "• GOOGLE_API_KEY environment variable (if using express mode).\n"
                "Update your environment and try again (no reload needed if using .env)!",
                type="config",
            )
        base_url = env("GOOGLE_VERTEX_BASE_URL") or VERTEX_REP_ENDPOINTS.get(location or "")
        _bearer(environ, api_key, headers)
        return GenaiSettings(
            api_key=api_key,
            vertexai=True,
            project=None if api_key else project,
            location=None if api_key else location,
            base_url=_checked_url(base_url),
            api_version=version_env or "v1beta1",
            headers=headers,
        )
    if auth_type == "gateway":
        api_key = env("GEMINI_API_KEY") or ""
        if not api_key:
            headers["x-goog-api-key"] = ""
        return GenaiSettings(
            api_key=api_key or "gateway",
            base_url=_checked_url(env("GOOGLE_GEMINI_BASE_URL")),
            api_version=version_env or "v1beta",
            headers=headers,
        )
    if auth_type != "gemini-api-key":
        raise BackendError(
            f"agentbus cannot use the auth type '{auth_type}' with the live backend: set "
            "GEMINI_API_KEY (or GOOGLE_GENAI_USE_VERTEXAI=true with Vertex AI credentials)",
            type="config",
        )
    api_key = env("GEMINI_API_KEY") or env("GOOGLE_API_KEY")
    if not api_key:
        raise BackendError(
            "When using Gemini API, you must specify the GEMINI_API_KEY environment variable.\n"
            "Update your environment and try again (no reload needed if using .env)!",
            type="config",
        )
    _bearer(environ, api_key, headers)
    return GenaiSettings(
        api_key=api_key,
        base_url=_checked_url(env("GOOGLE_GEMINI_BASE_URL")),
        api_version=version_env or "v1beta",
        headers=headers,
    )


def _bearer(environ: Mapping[str, str], api_key: str | None, headers: dict[str, str]) -> None:
    if environ.get("GEMINI_API_KEY_AUTH_MECHANISM") == "bearer" and api_key:
        headers["Authorization"] = f"Bearer {api_key}"


def _checked_url(url: str | None) -> str | None:
    if url is None:
        return None
    parsed = urlparse(url)
    if not parsed.scheme or not parsed.netloc:
        raise BackendError(f"Invalid custom base URL: {url}", type="config")
    return url


def sdk_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A request's config (wire shape: ``systemInstruction``, ``tools``, ``temperature``,
    ``topP``, ``topK``, ``thinkingConfig``, ``responseMimeType``..., or a nested
    ``generationConfig``) as ``GenerateContentConfig`` fields, with the SDK's own
    conveniences (automatic function calling, continuation) off."""
    out = {k: v for k, v in config.items() if k not in ("generationConfig", "abortSignal")}
    nested = config.get("generationConfig")
    if isinstance(nested, Mapping):
        out.update(nested)
    out["automaticFunctionCalling"] = {"disable": True}
    out["automaticContinuation"] = False
    return out


class GenaiBackend:
    """Generation requests through google-genai over real HTTP (see the module doc)."""

    def __init__(
        self,
        settings: GenaiSettings,
        *,
        retry_policy: RetryPolicy | None = None,
        read_timeout_s: float = READ_TIMEOUT_S,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
    ) -> None:
        self.settings = settings
        self.retry_policy = retry_policy
        """The gateway's retry constants for this backend (``general.maxAttempts``)."""
        self.read_timeout_s = read_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._loop: Any = None
        self._init_error: BackendError | None = None
        self._client: genai.Client | None = None
        self._http: TrackingClient | None = None
        self._configs: dict[Any, PreparedConfig] = {}
        """Request configs seen, oldest first (``_prepared``)."""
        self._contents = ContentCache()

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, auth_type: str | None = None, **kwargs: Any
    ) -> GenaiBackend:
        return cls(settings_from_env(os.environ if environ is None else environ, auth_type=auth_type), **kwargs)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The asyncio loop and the HTTP client, for as long as the gateway runs."""
        async with trio_asyncio.open_loop() as loop:
            self._loop = loop
            self._http = TrackingClient(read_timeout_s=self.read_timeout_s, connect_timeout_s=self.connect_timeout_s)
            s = self.settings
            try:
                self._client = genai.Client(
                    api_key=s.api_key,
                    vertexai=s.vertexai,
                    project=s.project,
                    location=s.location,
                    http_options=types.HttpOptions(
                        base_url=s.base_url,
                        api_version=s.api_version,
                        headers=dict(s.headers),
                        httpx_async_client=self._http,
                    ),
                )
            except Exception as exc:  # e.g. Vertex AI without credentials (google.auth)
                # Not fatal to the gateway: each request fails with this message.
                self._init_error = BackendError(f"cannot create the google-genai client: {exc}", type="config")
            _freeze_once()
            try:
                yield
            finally:
                with trio.move_on_after(CLOSE_GRACE_S, shield=True):
                    await trio_asyncio.aio_as_trio(self._http.aclose, loop=loop)()
                if self._client is not None:
                    self._client.close()
                self._client = self._http = self._loop = None

    def _aio(self, fn: Callable[..., Any]) -> Any:
        return trio_asyncio.aio_as_trio(fn, loop=self._loop)

    async def generate(self, request: GenerateRequest, emit: ChunkSink) -> str:
        client = self._client
        if client is None:
            if self._init_error is not None:
                raise self._init_error.replace()  # a fresh exception per request
            raise BackendError("the live backend is not running", type="config")
        attempt = Attempt()
        token = ATTEMPT.set(attempt)
        # The caller may be any trio task (the daemon's gateway serves requests from
        # tasks that did not start inside ``running()``): the bridge's way back into
        # trio looks the loop up in the calling task's context, so put it there.
        loop_token = trio_asyncio.current_loop.set(self._loop)
        try:
            # A stream's contents go through the cache of converted contents; the other
            # methods (single requests of the turn's own) take a plain copy.
            if request.method == "countTokens":
                contents = thaw(request.contents)
                result = await self._aio(client.aio.models.count_tokens)(model=request.model, contents=contents)
                await emit(wire_json(result))
                return request.model
            config = self._prepared(request.config)
            if request.method == "generateContent":
                result = await self._aio(client.aio.models.generate_content)(
                    model=request.model, contents=thaw(request.contents), config=config.model
                )
                await emit(wire_json(result))
                return request.model
            if request.method != "generateContentStream":
                raise BackendError(f"unsupported method: {request.method}", type="config")
            await self._stream(client, request.model, request.contents, config, emit)
            return request.model
        except (BackendError, DeliveryError):
            raise  # ours, or the requester went away while a chunk was delivered
        except genai_errors.APIError as exc:
            raise _api_error(exc, attempt, streaming=request.method == "generateContentStream") from None
        except genai_errors.UnknownApiResponseError as exc:
            raise _malformed(exc) from None
        except httpx2.TransportError as exc:
            phase = "stream" if attempt.started and request.method == "generateContentStream" else "connect"
            raise _transport_error(exc, phase, headers_seen=attempt.started) from None
        except (ValueError, TypeError) as exc:
            raise BackendError(f"{type(exc).__name__}: {exc}", type="config") from None
        except Exception as exc:
            # Not the API's doing: fail this request, keep serving the others.
            raise BackendError(f"{type(exc).__name__}: {exc}", type=type(exc).__name__) from exc
        finally:
            ATTEMPT.reset(token)
            try:
                with trio.move_on_after(CLOSE_GRACE_S, shield=True):
                    await close_attempt(attempt)
            finally:  # the caller's task gets its own loop back whatever the close did
                trio_asyncio.current_loop.reset(loop_token)

    def _prepared(self, config: Any) -> PreparedConfig:
        """The request config validated, from the cache when an earlier request had it."""
        try:
            prepared = self._configs.get(config)
        except TypeError:  # not hashable: not frozen JSON after all
            config, prepared = None, None
        if prepared is None:
            try:
                prepared = PreparedConfig(types.GenerateContentConfig.model_validate(sdk_config(thaw(config) or {})))
            except ValidationError as exc:
                raise BackendError(f"invalid request config: {exc}", type="config") from None
            if config is not None:
                if len(self._configs) >= CONFIG_CACHE:
                    del self._configs[next(iter(self._configs))]
                self._configs[config] = prepared
        return prepared

    async def _stream(self, client: genai.Client, model: str, contents: Any, config: Any, emit: ChunkSink) -> None:
        """Send the request from asyncio (the SDK's request layer: one bridge crossing),
        then read the chunks here in trio: the SDK's generators await nothing but the
        body, which reads in trio (``_genai_http``). A cancel here unwinds them, and the
        attempt's end closes the response."""
        stream, from_asyncio = await self._aio(open_stream)(client, model, contents, config, self._contents)
        step = self._aio(stream.__anext__) if from_asyncio else stream.__anext__
        try:
            while True:
                try:
                    item = await step()
                except StopAsyncIteration:
                    break
                await emit(item)
        finally:
            with trio.move_on_after(CLOSE_GRACE_S, shield=True):
                await (self._aio(stream.aclose) if from_asyncio else stream.aclose)()


_frozen = False


def _freeze_once() -> None:
    """The SDK's import and first client leave about 100,000 objects that live as long
    as the process (pydantic's schemas among them); every full pass of the cyclic
    collector would walk them again while streams run (5% of the gateway's CPU at 200
    streams). Frozen, it leaves them alone. Once a process: later, the objects alive
    would be the sessions' own, which must stay collectable."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.freeze()


def _api_error(exc: genai_errors.APIError, attempt: Attempt, *, streaming: bool) -> BackendError:
    response = getattr(exc, "response", None)
    if isinstance(response, httpx2.Response):
        try:
            text = response.text
        except httpx2.ResponseNotRead:
            text = ""
        return http_error(
            response.status_code,
            text,
            content_type=response.headers.get("content-type", ""),
            reason_phrase=response.reason_phrase,
            retry_after=response.headers.get("retry-after"),
            phase="stream" if streaming and attempt.started else "connect",
        )
    details = exc.details if isinstance(exc.details, Mapping) else {"error": {"code": exc.code, "message": exc.message}}
    err = stream_error_chunk(details)
    if not streaming:
        err.phase = "connect"
    return err


def _malformed(exc: genai_errors.UnknownApiResponseError) -> BackendError:
    text = str(exc)
    marker = "Raw response: "
    raw = text[text.index(marker) + len(marker) :] if marker in text else text
    cause = exc.__cause__
    return malformed_chunk(raw, cause if isinstance(cause, ValueError) else None)


def _transport_error(exc: httpx2.TransportError, phase: str, *, headers_seen: bool) -> BackendError:
    if isinstance(exc, httpx2.ConnectTimeout):
        code = "UND_ERR_CONNECT_TIMEOUT"
    elif isinstance(exc, httpx2.ReadTimeout):
        code = "UND_ERR_BODY_TIMEOUT" if headers_seen else "UND_ERR_HEADERS_TIMEOUT"
    elif isinstance(exc, httpx2.TimeoutException):
        code = "ETIMEDOUT"
    elif isinstance(exc, httpx2.ConnectError):
        text = str(exc).lower()
        code = "ENOTFOUND" if "name" in text or "not known" in text else "ECONNREFUSED"
    elif isinstance(exc, httpx2.WriteError):
        code = "EPIPE"
    elif headers_seen:
        # The peer went away while the body was read: undici's ``terminated``, caused by
        # a SocketError ``other side closed`` (UND_ERR_SOCKET), which Gemini CLI does not
        # retry (its run fails, what was streamed stays shown).
        code = "UND_ERR_SOCKET"
    else:
        code = "ECONNRESET"  # ReadError, RemoteProtocolError, CloseError: the peer went away
    return network_error(code, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, phase=phase)
