"""Model gateway actor and its backends: fake responses, google-genai (live), recording.

``live_backend()`` and ``GenaiBackend`` import google-genai (and trio-asyncio) only when
called, so runs with ``--fake-responses`` never load them.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._actor import GATEWAY_ADDRESS, GatewayActor
from ._backend import Backend, BackendError, ChunkSink, open_backend
from ._errors import http_error, parse_google_error
from ._fake import (
    FakeEntry,
    FakeResponsesBackend,
    FakeResponsesError,
    load_fake_responses,
    request_dump,
)
from ._recording import RecordingBackend, record_line
from ._retry import ConnectBackoff, RetryPolicy, retry_notice

if TYPE_CHECKING:
    from ._genai import GenaiBackend, GenaiSettings

OVER_HTTP_ENV = "AGENTBUS_FAKE_RESPONSES_OVER_HTTP"
"""Set to ``1``: a fake-responses file is served by the fake Gemini server (in this
process, on loopback) and reached through ``GenaiBackend`` — the real SDK over HTTP."""


def live_backend(
    environ: Mapping[str, str] | None = None,
    *,
    auth_type: str | None = None,
    retry_policy: RetryPolicy | None = None,
) -> Backend:
    """The backend for real Gemini calls (google-genai); raises ``BackendError`` when it
    cannot be used (missing key, bad base URL, google-genai not installed)."""
    try:
        from ._genai import GenaiBackend
    except ImportError as exc:
        raise BackendError(
            f"the live model backend needs google-genai and trio-asyncio ({exc}): "
            "pip install 'agentbus[genai]'",
            type="config",
        ) from None

    return GenaiBackend.from_env(environ, auth_type=auth_type, retry_policy=retry_policy)


def preload_live_backend() -> None:
    """Import what ``live_backend`` needs (google-genai: about a second), e.g. in a worker
    thread so that an event loop serving others does not stall on it; an import error
    is left for ``live_backend`` to report."""
    try:
        importlib.import_module("actors.gateway._genai")
    except ImportError:
        pass


def fake_responses_over_http(path: str | Path, *, strict: bool = True, retry_policy: RetryPolicy | None = None) -> Backend:
    """Test harness for ``AGENTBUS_FAKE_RESPONSES_OVER_HTTP``: the fake server lives in
    ``tests/fakes`` of the source checkout, which must be present."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "tests" / "fakes" / "over_http.py").is_file():
        raise BackendError(f"{OVER_HTTP_ENV} needs the agentbus source checkout (tests/fakes)", type="config")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    module: Any = importlib.import_module("tests.fakes.over_http")
    backend: Backend = module.OverHttpBackend(path, strict=strict, retry_policy=retry_policy)
    return backend


AUTH_ENV = (
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY_AUTH_MECHANISM",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_USE_GCA",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_PROJECT_ID",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_VERTEX_BASE_URL",
    "GOOGLE_GENAI_API_VERSION",
    "CLOUD_SHELL",
    "GEMINI_CLI_USE_COMPUTE_ADC",
)
"""The environment variables that choose the auth type and credentials of the live
backend (``live_backend``, and Gemini CLI's auth check)."""


def auth_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The auth variables of ``environ`` (default: this process's) that are set."""
    env = os.environ if environ is None else environ
    return {name: env[name] for name in AUTH_ENV if env.get(name)}


def over_http_requested(environ: Mapping[str, str] | None = None) -> bool:
    return (os.environ if environ is None else environ).get(OVER_HTTP_ENV) == "1"


def __getattr__(name: str) -> Any:
    """The live backend's classes, loaded (with google-genai) on first use."""
    if name in ("GenaiBackend", "GenaiSettings"):
        from . import _genai

        return getattr(_genai, name)
    raise AttributeError(name)


__all__ = [
    "retry_notice",
    "http_error",
    "parse_google_error",
    "FakeEntry",
    "GenaiSettings",
    "AUTH_ENV",
    "auth_environment",
    "live_backend",
    "preload_live_backend",
    "fake_responses_over_http",
    "over_http_requested",
    "OVER_HTTP_ENV",
    "GATEWAY_ADDRESS",
    "Backend",
    "BackendError",
    "ChunkSink",
    "ConnectBackoff",
    "FakeResponsesBackend",
    "FakeResponsesError",
    "GatewayActor",
    "GenaiBackend",
    "RecordingBackend",
    "RetryPolicy",
    "load_fake_responses",
    "open_backend",
    "record_line",
    "request_dump",
]
