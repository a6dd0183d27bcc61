"""The model backend a session's gateway calls: fake responses, recorded or live."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from actors.gateway import Backend, BackendError, FakeResponsesBackend, FakeResponsesError
from actors.host import settings as _settings
from actors.host.args import HeadlessArgs
from actors.host.auth import auth_type_from_env
from actors.host.errors import FatalError


def make_backend(args: HeadlessArgs, settings: Mapping[str, Any] | None = None) -> Backend:
    """The model backend: a fake-responses file (served over HTTP through the real SDK
    when ``AGENTBUS_FAKE_RESPONSES_OVER_HTTP=1``), else google-genai; recorded with
    ``--record-responses``. Retries follow ``general.maxAttempts``."""
    from actors.gateway import (
        RecordingBackend,
        RetryPolicy,
        fake_responses_over_http,
        live_backend,
        load_fake_responses,
        over_http_requested,
    )

    settings = settings or {}
    retry = RetryPolicy.from_settings(_settings.get(settings, "general.maxAttempts"))
    path = args.fake_responses_non_strict or args.fake_responses
    strict = args.fake_responses_non_strict is None
    backend: Backend
    try:
        if path is not None and over_http_requested():
            load_fake_responses(path)  # the same checks, the same messages
            backend = fake_responses_over_http(path, strict=strict, retry_policy=retry)
        elif path is not None:
            fake = FakeResponsesBackend.from_file(path, strict=strict)
            fake.retry_policy = retry
            backend = fake
        else:
            auth = _settings.get(settings, "security.auth.selectedType") or auth_type_from_env(os.environ)
            backend = live_backend(auth_type=auth, retry_policy=retry)
    except FakeResponsesError as exc:
        raise FatalError(f"agentbus: {exc}", exit_code=1) from None
    except BackendError as exc:
        raise FatalError(exc.message, exit_code=1) from None
    if args.record_responses:
        backend = RecordingBackend(backend, args.record_responses)
    return backend
