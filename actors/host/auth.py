"""Which credentials a session uses: Gemini CLI's auth type and its headless check."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.host import settings as _settings
from actors.host.errors import FatalAuthenticationError


def auth_type_from_env(environ: Mapping[str, str]) -> str | None:
    if environ.get("GOOGLE_GENAI_USE_GCA") == "true":
        return "oauth-personal"
    if environ.get("GOOGLE_GENAI_USE_VERTEXAI") == "true":
        return "vertex-ai"
    if environ.get("GOOGLE_GEMINI_BASE_URL"):
        return "gateway"
    if environ.get("GEMINI_API_KEY"):
        return "gemini-api-key"
    if environ.get("CLOUD_SHELL") == "true" or environ.get("GEMINI_CLI_USE_COMPUTE_ADC") == "true":
        return "compute-default-credentials"
    return None


def check_auth(settings: Mapping[str, Any], environ: Mapping[str, str], *, fake_model: bool) -> None:
    """Gemini CLI's headless auth validation (exit 41).

    Deliberate difference: with ``--fake-responses`` and no auth configured at all, the
    run proceeds (no model is contacted); Gemini CLI refuses. An enforced type that
    does not match is refused either way.
    """
    effective = _settings.get(settings, "security.auth.selectedType") or auth_type_from_env(environ)
    enforced = _settings.get(settings, "security.auth.enforcedType")
    if enforced and effective != enforced:
        if effective:
            raise FatalAuthenticationError(
                f"The enforced authentication type is '{enforced}', but the current type is "
                f"'{effective}'. Please re-authenticate with the correct type."
            )
        raise FatalAuthenticationError(
            f"The auth type '{enforced}' is enforced, but no authentication is configured."
        )
    if fake_model:
        return
    if not effective:
        home = _settings.gemini_home()
        raise FatalAuthenticationError(
            f"Please set an Auth method in your {home}/.gemini/settings.json or specify one of "
            "the following environment variables before running: GEMINI_API_KEY, "
            "GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA"
        )
    if effective == "gemini-api-key" and not (environ.get("GEMINI_API_KEY") or environ.get("GOOGLE_API_KEY")):
        raise FatalAuthenticationError(
            "When using Gemini API, you must specify the GEMINI_API_KEY environment variable.\n"
            "Update your environment and try again (no reload needed if using .env)!"
        )
