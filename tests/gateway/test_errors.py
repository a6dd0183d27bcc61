"""How API failures are read: Gemini CLI's messages, classes and retryability (pure)."""

from __future__ import annotations

import json

import pytest

from actors.gateway import BackendError
from actors.gateway._errors import (
    classify,
    http_error,
    is_capacity,
    is_retryable,
    malformed_chunk,
    network_error,
    parse_google_error,
    parse_retry_after,
    sdk_message,
    stream_error_chunk,
)
from tests.fakes.gemini_server import error_info, google_error_body, retry_info

KEY_INVALID = google_error_body(
    400,
    "API key not valid. Please pass a valid API key.",
    details=[error_info("API_KEY_INVALID", metadata="x")],
)


def body(value: object) -> str:
    return json.dumps(value, indent=2)


def test_json_error_body_is_shown_as_the_js_sdk_stringifies_it() -> None:
    err = http_error(400, body(KEY_INVALID), content_type="application/json; charset=UTF-8")
    assert err.message == json.dumps(KEY_INVALID, separators=(",", ":"))
    assert (err.status, err.http_status, err.type) == (400, 400, "ApiError")
    assert (err.api_status, err.api_message, err.reason) == (
        "INVALID_ARGUMENT",
        "API key not valid. Please pass a valid API key.",
        "API_KEY_INVALID",
    )
    assert not err.retryable and not is_retryable(err)


def test_text_error_body_is_wrapped_with_the_reason_phrase() -> None:
    text = body(KEY_INVALID)
    assert json.loads(sdk_message(400, text, content_type="text/plain", reason_phrase="Bad Request")) == {
        "error": {"message": text, "code": 400, "status": "Bad Request"}
    }
    # ...and the Google error inside is still found (parseGoogleApiError follows nested JSON).
    err = http_error(400, text, content_type="text/plain", reason_phrase="Bad Request")
    assert err.api_message == "API key not valid. Please pass a valid API key."


def test_404_is_model_not_found_without_a_status() -> None:
    msg = "models/nope is not found for API version v1beta, or is not supported for generateContent."
    err = http_error(404, body(google_error_body(404, msg)), content_type="application/json")
    assert (err.type, err.message, err.status, err.http_status) == ("ModelNotFoundError", msg, None, 404)
    assert not err.retryable


@pytest.mark.parametrize(
    ("status", "details", "message", "kind", "delay", "text"),
    [
        (429, [], "Resource exhausted.", "retryable", None, "Resource exhausted."),
        (503, [], "The model is overloaded.", "retryable", None, "The model is overloaded."),
        (429, [retry_info("7s")], "Quota exceeded.", "retryable", 7.0, "Quota exceeded.\nSuggested retry after 7s."),
        (429, [retry_info("900s")], "Quota exceeded.", "terminal", 900.0, "Quota exceeded.\nSuggested retry after 900s."),
        (429, [], "Quota exceeded. Please retry in 1.5s.", "retryable", 1.5, "Quota exceeded. Please retry in 1.5s."),
        (429, [], "quota limit: 0 for this model", "terminal", None, "quota limit: 0 for this model"),
        (
            429,
            [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": "GenerateRequestsPerDayPerProject"}]}],
            "Quota exceeded.",
            "terminal",
            None,
            "You have exhausted your daily quota on this model.",
        ),
        (
            429,
            [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": "GenerateRequestsPerMinute"}]}],
            "Quota exceeded.",
            "retryable",
            60.0,
            "Quota exceeded.\nSuggested retry after 60s.",
        ),
        (429, [error_info("MODEL_CAPACITY_EXHAUSTED")], "No capacity.", "terminal", None, "No capacity."),
    ],
)
def test_quota_errors_are_classified_as_gemini_cli_does(
    status: int, details: list[object], message: str, kind: str, delay: float | None, text: str
) -> None:
    err = http_error(status, body(google_error_body(status, message, details=details)), content_type="application/json")
    assert err.quota == kind
    assert err.type == ("TerminalQuotaError" if kind == "terminal" else "RetryableQuotaError")
    assert err.retry_delay_s == delay
    assert err.message == text
    assert err.status == status


def test_capacity_errors_are_recognised() -> None:
    err = http_error(429, body(google_error_body(429, "x", details=[error_info("MODEL_CAPACITY_EXHAUSTED")])))
    assert is_capacity(err)
    assert not is_capacity(http_error(429, body(google_error_body(429, "x", details=[retry_info("900s")]))))


def test_400_is_never_retried_even_with_a_delay_in_its_message() -> None:
    plain = http_error(400, body(google_error_body(400, "Invalid JSON payload")), content_type="application/json")
    assert plain.type == "ApiError" and not plain.retryable
    # classifyGoogleError looks for "Please retry in" whatever the status: it becomes a quota error.
    odd = http_error(400, body(google_error_body(400, "Please retry in 2s")), content_type="application/json")
    assert odd.quota == "retryable"


@pytest.mark.parametrize("status", [429, 499, 500, 502, 503, 504])
def test_statuses_that_are_retryable(status: int) -> None:
    assert http_error(status, body(google_error_body(status, "x")), content_type="application/json").retryable


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_statuses_that_are_not(status: int) -> None:
    assert not http_error(status, body(google_error_body(status, "x")), content_type="application/json").retryable


def test_5xx_keeps_the_raw_message_and_status() -> None:
    err = http_error(500, body(google_error_body(500, "Internal error")), content_type="application/json")
    assert err.type == "ApiError" and err.message.startswith('{"error":{"code":500') and err.status == 500


def test_retry_after_header() -> None:
    assert http_error(429, "{}", retry_after="12").retry_after_s == 12.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0
    assert parse_retry_after("soon") is None


def test_network_errors() -> None:
    before = network_error("ECONNREFUSED", phase="connect")
    during = network_error("ECONNRESET", phase="stream")
    assert before.message.startswith("fetch failed") and during.message.startswith("terminated")
    assert before.retryable and during.retryable and is_retryable(during)
    assert not network_error("EWHATEVER").retryable


def test_in_stream_error_chunk() -> None:
    chunk = google_error_body(503, "overloaded")
    err = stream_error_chunk(chunk)
    assert err.message == "got status: UNAVAILABLE. " + json.dumps(chunk, separators=(",", ":"))
    assert (err.status, err.phase, err.retryable) == (503, "stream", True)


def test_malformed_chunk_is_a_syntax_error_never_retried() -> None:
    err = malformed_chunk("this is not json", json.JSONDecodeError("x", "this is not json", 0))
    assert err.message.startswith("exception parsing stream chunk this is not json. SyntaxError: Unexpected token 't'")
    assert (err.type, err.status, err.retryable, is_retryable(err)) == ("SyntaxError", None, False, False)


def test_nested_google_errors_are_unwrapped() -> None:
    inner = google_error_body(429, "deep", details=[retry_info("3s")])
    outer = {"error": {"code": 429, "message": json.dumps(inner), "status": "Too Many Requests"}}
    parsed = parse_google_error(outer)
    assert parsed is not None and parsed.message == "deep" and parsed.status == "RESOURCE_EXHAUSTED"
    assert classify(BackendError("x", status=429, http_status=429), parsed).retry_delay_s == 3.0
