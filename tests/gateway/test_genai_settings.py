"""How the live backend is configured from the environment (as Gemini CLI), and how a
request's config becomes the SDK's."""

from __future__ import annotations

import pytest

from actors.gateway import BackendError
from actors.gateway._genai import sdk_config, settings_from_env


def test_gemini_api_key() -> None:
    s = settings_from_env({"GEMINI_API_KEY": "k"})
    assert (s.api_key, s.vertexai, s.base_url, s.api_version) == ("k", False, None, "v1beta")


def test_google_api_key_is_accepted_for_the_gemini_api() -> None:
    assert settings_from_env({"GOOGLE_API_KEY": "g"}).api_key == "g"


def test_missing_key() -> None:
    with pytest.raises(BackendError, match="GEMINI_API_KEY"):
        settings_from_env({})


def test_base_url_override_and_api_version() -> None:
    s = settings_from_env({"GEMINI_API_KEY": "k", "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9", "GOOGLE_GENAI_API_VERSION": "v1"})
    assert (s.base_url, s.api_version) == ("http://127.0.0.1:9", "v1")
    with pytest.raises(BackendError, match="Invalid custom base URL"):
        settings_from_env({"GEMINI_API_KEY": "k", "GOOGLE_GEMINI_BASE_URL": "not a url"})


def test_vertex_with_project_and_location() -> None:
    s = settings_from_env({"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_PROJECT": "p", "GOOGLE_CLOUD_LOCATION": "us-central1"})
    assert (s.vertexai, s.project, s.location, s.api_key, s.api_version) == (True, "p", "us-central1", None, "v1beta1")


def test_vertex_express_mode_and_multi_region_endpoints() -> None:
    s = settings_from_env({"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_API_KEY": "g"})
    assert (s.vertexai, s.api_key, s.project) == (True, "g", None)
    eu = settings_from_env({"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_PROJECT": "p", "GOOGLE_CLOUD_LOCATION": "eu"})
    assert eu.base_url == "https://aiplatform.eu.rep.googleapis.com"


def test_vertex_without_credentials() -> None:
    with pytest.raises(BackendError, match="GOOGLE_CLOUD_PROJECT"):
        settings_from_env({"GOOGLE_GENAI_USE_VERTEXAI": "true"})


def test_gateway_auth_without_a_key_sends_an_empty_key() -> None:
    s = settings_from_env({"GOOGLE_GEMINI_BASE_URL": "https://proxy.example"})
    assert s.headers["x-goog-api-key"] == "" and s.base_url == "https://proxy.example"


def test_unsupported_auth_type() -> None:
    with pytest.raises(BackendError, match="oauth-personal"):
        settings_from_env({"GEMINI_API_KEY": "k"}, auth_type="oauth-personal")


def test_request_config_to_sdk_config() -> None:
    config = {
        "systemInstruction": "sys",
        "tools": [{"functionDeclarations": [{"name": "f", "parametersJsonSchema": {"type": "object"}}]}],
        "temperature": 1,
        "generationConfig": {"topP": 0.95},
    }
    out = sdk_config(config)
    assert out["topP"] == 0.95 and "generationConfig" not in out
    assert out["automaticFunctionCalling"] == {"disable": True} and out["automaticContinuation"] is False
    from google.genai import types

    parsed = types.GenerateContentConfig.model_validate(out)
    assert parsed.tools is not None and parsed.tools[0].function_declarations is not None
    assert parsed.tools[0].function_declarations[0].parameters_json_schema == {"type": "object"}
