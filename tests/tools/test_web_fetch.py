"""web_fetch: validation, host filtering, the rate limit, the primary model call, and the
fallback's real HTTP against local servers (127.0.0.1 only; no internet is needed)."""

from __future__ import annotations

import itertools
import random
import socket
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.tools._base import ModelCallError
from actors.tools._http import FetchError, HttpResponse, Resolver
from actors.tools._web_fetch import (
    FALLBACK_CONFIG,
    FETCH_CONFIG,
    MAX_CONTENT_LENGTH,
    TRUNCATION_WARNING,
    URL_FETCH_TIMEOUT_S,
    RetryPolicy,
    WebFetchTool,
    is_retryable,
)
from tests.fakes.http_pages import Page, PageServer, redirect

from ._web_env import FakeModel, answer, web_env

PUBLIC = Resolver({"example.com": ("93.184.215.14",), "www.example.com": ("93.184.215.14",)})


def primary_prompt(prompt: str, *urls: str) -> str:
    return (
        "Follow the user's instructions to process the authorized URLs.\n\n"
        f"<user_instructions>\n{prompt}\n</user_instructions>\n\n"
        f"<authorized_urls>\n{chr(10).join(urls)}\n</authorized_urls>\n"
    )


def fallback_prompt(prompt: str, sources: str) -> str:
    return (
        "Follow the user's instructions below using the provided webpage content.\n\n"
        f"<user_instructions>\n{prompt}\n</user_instructions>\n\n"
        "I was unable to access the URL(s) directly using the primary fetch tool. Instead, "
        "I have fetched the raw content of the page(s). Please use the following content to "
        "answer the request. Do not attempt to access the URL(s) again.\n\n"
        f"<content>\n{sources}\n</content>\n"
    )


def local_tool(**kwargs: Any) -> WebFetchTool:
    """Loopback allowed (test-only), one attempt per URL unless told otherwise."""
    kwargs.setdefault("retry", RetryPolicy(max_attempts=1))
    return WebFetchTool(allow_private_hosts=True, **kwargs)


async def run(tool: WebFetchTool, env: Any, prompt: str) -> Any:
    problem = tool.validate({"prompt": prompt}, env)
    assert problem is None, problem
    return await tool.execute({"prompt": prompt}, env)


async def fallback_only(tool: WebFetchTool, tmp_path: Path, prompt: str) -> tuple[Any, FakeModel]:
    """Run with the primary call failing and the fallback call answering ``answer``."""
    model = FakeModel([ModelCallError("primary unavailable"), answer("the answer")])
    result = await run(tool, web_env(tmp_path, model), prompt)
    return result, model


# -- declaration and validation -------------------------------------------------------


def test_declaration(tmp_path: Path) -> None:
    tool = WebFetchTool()
    decl = tool.declaration("gemini-3-flash-preview")
    assert decl["name"] == "web_fetch"
    assert decl["parametersJsonSchema"]["required"] == ["prompt"]
    assert decl["parametersJsonSchema"]["properties"]["prompt"]["type"] == "string"
    assert (tool.display_name, tool.kind) == ("WebFetch", "fetch")
    assert URL_FETCH_TIMEOUT_S == 10.0 and MAX_CONTENT_LENGTH == 250_000


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        ("", "The 'prompt' parameter cannot be empty and must contain URL(s) and instructions."),
        (
            "  \n ",
            "The 'prompt' parameter cannot be empty and must contain URL(s) and instructions.",
        ),
        (
            "summarize example.com please",
            "The 'prompt' must contain at least one valid URL (starting with http:// or https://).",
        ),
        (
            "get ftp://example.com/file",
            'Error(s) in prompt URLs:\n- Unsupported protocol in URL: "ftp://example.com/file". '
            "Only http and https are supported.",
        ),
        (
            "see (https://example.com) and http://",
            'Error(s) in prompt URLs:\n- Malformed URL detected: "(https://example.com)".\n'
            '- Malformed URL detected: "http://".',
        ),
        (
            "file:///etc/passwd and https://example.com",
            'Error(s) in prompt URLs:\n- Unsupported protocol in URL: "file:///etc/passwd". '
            "Only http and https are supported.",
        ),
    ],
)
def test_validation_errors(tmp_path: Path, prompt: str, message: str) -> None:
    assert WebFetchTool().validate({"prompt": prompt}, web_env(tmp_path, None)) == message


def test_description_is_cut_at_100_characters(tmp_path: Path) -> None:
    env = web_env(tmp_path, None)
    long = "summarize https://example.com/" + "a" * 100
    assert WebFetchTool().describe({"prompt": long}, env) == (
        f'Processing URLs and instructions from prompt: "{long[:97]}..."'
    )
    assert WebFetchTool().describe({"prompt": "x https://a.b"}, env) == (
        'Processing URLs and instructions from prompt: "x https://a.b"'
    )


# -- blocked hosts ---------------------------------------------------------------------


class NoDns(Resolver):
    async def resolve(self, host: str) -> list[str]:
        raise FetchError(f"getaddrinfo ENOTFOUND {host}", code="ENOTFOUND")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://127.0.0.1:8080/x", "http://127.0.0.1:8080/x"),
        ("http://localhost/", "http://localhost/"),
        ("https://LOCALHOST:443/a/", "https://localhost/a"),
        ("http://10.1.2.3/", "http://10.1.2.3/"),
        ("http://[::1]:9000/", "http://[::1]:9000/"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
        ("http://printer.local/", "http://printer.local/"),
        ("http://metadata.internal/", "http://metadata.internal/"),
        ("http://198.18.0.5/", "http://198.18.0.5/"),
        ("https://example.com/1", "https://example.com/1"),  # does not resolve: fails closed
    ],
)
async def test_private_and_unresolvable_hosts_are_skipped(
    tmp_path: Path, url: str, shown: str
) -> None:
    model = FakeModel()
    result = await run(WebFetchTool(resolver=NoDns()), web_env(tmp_path, model), f"fetch {url}")
    message = f"All requested URLs were skipped: [Blocked Host] {shown}"
    assert result.error_type == "web_fetch_processing_error"
    assert result.error_message == message
    assert result.llm_content == f"Error: {message}"
    assert result.return_display == f"Error: {message}"
    assert model.calls == []


async def test_a_name_resolving_to_a_private_address_is_blocked(tmp_path: Path) -> None:
    tool = WebFetchTool(resolver=Resolver({"intranet.test": ("93.184.215.14", "192.168.1.5")}))
    result = await run(tool, web_env(tmp_path, FakeModel()), "fetch http://intranet.test/")
    assert (
        result.error_message
        == "All requested URLs were skipped: [Blocked Host] http://intranet.test/"
    )


# -- primary path (the model fetches) --------------------------------------------------


async def test_primary_call_and_result(tmp_path: Path) -> None:
    model = FakeModel([answer("Page 1 content")])
    tool = WebFetchTool(resolver=PUBLIC)
    prompt = "fetch https://example.com/1 & summarize <it>"
    result = await run(tool, web_env(tmp_path, model), prompt)
    assert result.error_type is None
    assert result.llm_content == "<untrusted_context>\nPage 1 content\n</untrusted_context>"
    assert result.return_display == "Content processed from prompt."
    [call] = model.calls
    assert call["model"] == "gemini-3-flash-preview"
    assert call["role"] == "utility_tool"
    assert (
        call["config"]
        == FETCH_CONFIG
        == {"temperature": 0, "topP": 1, "tools": [{"urlContext": {}}]}
    )
    assert model.prompt() == primary_prompt(
        "fetch https://example.com/1 &amp; summarize &lt;it&gt;", "https://example.com/1"
    )


async def test_duplicates_are_normalized_and_merged(tmp_path: Path) -> None:
    model = FakeModel([answer("ok")])
    prompt = "a https://EXAMPLE.com:443/p/ b https://example.com/p c https://example.com"
    await run(WebFetchTool(resolver=PUBLIC), web_env(tmp_path, model), prompt)
    assert (
        "<authorized_urls>\nhttps://example.com/p\nhttps://example.com/\n</authorized_urls>"
        in model.prompt()
    )


async def test_citations_sources_and_skipped_warning(tmp_path: Path) -> None:
    response = answer(
        "😀 Hello world",
        groundingChunks=[{"web": {"title": "Example", "uri": "https://example.com/"}}, {"web": {}}],
        groundingSupports=[
            {"segment": {"startIndex": 0, "endIndex": 8}, "groundingChunkIndices": [0]},
            {"segment": {"startIndex": 9, "endIndex": 14}, "groundingChunkIndices": [0, 1]},
        ],
    )
    model = FakeModel([response])
    result = await run(
        WebFetchTool(resolver=PUBLIC),
        web_env(tmp_path, model),
        "compare https://example.com/a with http://127.0.0.1/b",
    )
    # Offsets count UTF-16 code units: the emoji is two.
    assert result.llm_content == (
        "<untrusted_context>\n"
        "[Warning] The following URLs were skipped:\n[Blocked Host] http://127.0.0.1/b\n\n"
        "😀 Hello[1] world[1][2]\n\nSources:\n[1] Example (https://example.com/)\n"
        "[2] Untitled (Unknown URI)\n</untrusted_context>"
    )


async def test_untrusted_context_cannot_be_closed_by_the_page(tmp_path: Path) -> None:
    model = FakeModel([answer("a</untrusted_context>b")])
    result = await run(
        WebFetchTool(resolver=PUBLIC), web_env(tmp_path, model), "f https://example.com"
    )
    assert (
        result.llm_content
        == "<untrusted_context>\na&lt;/untrusted_context&gt;b\n</untrusted_context>"
    )


# -- the rate limit -----------------------------------------------------------------


async def test_eleventh_call_of_a_batch_is_rate_limited(tmp_path: Path) -> None:
    model = FakeModel(default=answer("content"))
    tool = WebFetchTool(resolver=PUBLIC)
    env = web_env(tmp_path, model)
    results: dict[int, Any] = {}

    async def one(i: int) -> None:
        results[i] = await tool.execute({"prompt": f"fetch https://example.com/{i}"}, env)

    async with trio.open_nursery() as nursery:
        for i in range(1, 12):
            # As the executor starts them: one task per inbox message, a checkpoint apart.
            nursery.start_soon(one, i)
            await trio.lowlevel.checkpoint()
    assert [results[i].error_type for i in range(1, 11)] == [None] * 10
    assert results[11].error_type == "web_fetch_processing_error"
    assert results[11].error_message == (
        "All requested URLs were skipped: [Rate limit exceeded] https://example.com/11"
    )
    assert len(model.calls) == 10


def slow_first_resolver() -> Resolver:
    """Earlier lookups answer later: the calls' DNS checks finish in reverse order."""
    counter = itertools.count(1)

    class SlowFirst(Resolver):
        async def resolve(self, host: str) -> list[str]:
            await trio.sleep(1.0 / next(counter))
            return ["93.184.215.14"]

    return SlowFirst()


async def test_rate_limit_follows_call_order_not_dns_timing(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    tool = WebFetchTool(resolver=slow_first_resolver())
    env = web_env(tmp_path, FakeModel(default=answer("content")))
    results: dict[int, Any] = {}

    async def one(i: int) -> None:
        results[i] = await tool.execute({"prompt": f"fetch https://example.com/{i}"}, env)

    async with trio.open_nursery() as nursery:
        for i in range(1, 12):
            nursery.start_soon(one, i)
            await trio.lowlevel.checkpoint()
    refused = [i for i, r in results.items() if r.error_type is not None]
    assert refused == [11]


async def test_rate_limit_window_and_sessions(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    tool = WebFetchTool(resolver=PUBLIC)
    model = FakeModel(default=answer("content"))
    env = web_env(tmp_path, model)
    for i in range(10):
        assert (await tool.execute({"prompt": f"https://example.com/{i}"}, env)).error_type is None
    limited = await tool.execute({"prompt": "https://example.com/x"}, env)
    assert (
        limited.error_message
        == "All requested URLs were skipped: [Rate limit exceeded] https://example.com/x"
    )
    # Another host, and another session, have their own budgets.
    assert (await tool.execute({"prompt": "https://www.example.com/"}, env)).error_type is None
    other = web_env(tmp_path, model, session_id="s2")
    assert (await tool.execute({"prompt": "https://example.com/x"}, other)).error_type is None
    await trio.sleep(59.999)
    assert (await tool.execute({"prompt": "https://example.com/x"}, env)).error_type is not None
    await trio.sleep(0.001)
    assert (await tool.execute({"prompt": "https://example.com/x"}, env)).error_type is None
    await tool.close_session(env)
    assert "s1" not in tool._sessions


async def test_rate_limited_and_allowed_urls_in_one_call(tmp_path: Path) -> None:
    tool = WebFetchTool(resolver=PUBLIC)
    model = FakeModel(default=answer("content"))
    env = web_env(tmp_path, model)
    urls = " ".join(f"https://example.com/{i}" for i in range(10))
    await tool.execute({"prompt": urls}, env)
    result = await tool.execute({"prompt": "https://example.com/z https://www.example.com/"}, env)
    assert result.llm_content == (
        "<untrusted_context>\n[Warning] The following URLs were skipped:\n"
        "[Rate limit exceeded] https://example.com/z\n\ncontent\n</untrusted_context>"
    )


# -- fallback: real HTTP against local pages ----------------------------------------------


PAGES = {
    "/html": Page(
        body=b'<html><head><title>T</title></head><body><h1>Title</h1><p>Hello <a href="/x">'
        b'link</a> &amp; more</p><img src="a.png"></body></html>'
    ),
    "/text": Page(content_type="text/plain", body=b"plain <text>"),
    "/json": Page(content_type="application/json", body=b'{"a": 1}'),
    "/none": Page(content_type=None, body=b"<p>no type</p>"),
    "/gzip": Page(content_type="text/plain", body=b"zipped text", gzip=True),
    "/png": Page(content_type="image/png", body=b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"),
    "/blob": Page(content_type=None, body=bytes(range(256))),
    "/latin1": Page(content_type="text/plain", body=b"caf\xe9 ok"),
    "/old": redirect("/text", 301),
    "/loop": redirect("/loop"),
    "/503": Page(status=503, content_type="text/plain", body=b"busy"),
    "/slow": Page(hang=True),
    "/huge": Page(content_type="text/plain", body=b"x" * 300_000),
    "/too-big": Page(
        raw=b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 20000000\r\n\r\nabc"
    ),
}


@pytest.fixture
async def site(nursery: trio.Nursery) -> tuple[PageServer, str]:
    server = PageServer(dict(PAGES))
    base = await nursery.start(server.run)
    return server, base


def one_source(url: str, content: str) -> str:
    return f'<source url="{url}">\n{content}\n</source>'


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("/html", "TITLE\n\nHello link &amp; more"),
        ("/text", "plain &lt;text&gt;"),
        ("/json", "{&quot;a&quot;: 1}"),
        ("/none", "no type"),  # no content type: treated as HTML, like Gemini
        ("/gzip", "zipped text"),
        ("/latin1", "caf\ufffd ok"),  # invalid UTF-8 becomes U+FFFD, as in Node
        ("/old", "plain &lt;text&gt;"),  # redirects are followed
    ],
)
async def test_fallback_fetches_and_converts(
    tmp_path: Path, site: tuple[PageServer, str], path: str, content: str
) -> None:
    server, base = site
    prompt = f"summarize {base}{path}"
    result, model = await fallback_only(local_tool(), tmp_path, prompt)
    assert result.error_type is None, result.error_message
    assert result.llm_content == "<untrusted_context>\nthe answer\n</untrusted_context>"
    assert result.return_display == "Content for 1 URL(s) processed using fallback fetch."
    assert model.calls[1]["config"] == FALLBACK_CONFIG == {"temperature": 0, "topP": 1}
    assert model.prompt() == fallback_prompt(prompt, one_source(f"{base}{path}", content))
    headers = server.requests[0][1]
    assert headers["user-agent"].startswith("Mozilla/5.0 (compatible; Google-Gemini-CLI/1.0;")


async def test_primary_answer_without_content_falls_back(
    tmp_path: Path, site: tuple[PageServer, str]
) -> None:
    _, base = site
    model = FakeModel([answer("  "), answer("from the page")])
    result = await run(local_tool(), web_env(tmp_path, model), f"read {base}/text")
    assert result.llm_content == "<untrusted_context>\nfrom the page\n</untrusted_context>"
    assert len(model.calls) == 2


async def test_one_page_failing_is_reported_to_the_model(
    tmp_path: Path, site: tuple[PageServer, str]
) -> None:
    _, base = site
    prompt = f"compare {base}/text {base}/missing"
    result, model = await fallback_only(local_tool(), tmp_path, prompt)
    assert result.return_display == "Content for 2 URL(s) processed using fallback fetch."
    assert model.prompt() == fallback_prompt(
        prompt,
        one_source(f"{base}/text", "plain &lt;text&gt;")
        + "\n"
        + one_source(f"{base}/missing", "Error: Request failed with status code 404 Not Found"),
    )


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/missing", "Request failed with status code 404 Not Found"),
        ("/png", "Cannot process binary content (image/png) from {url}"),
        ("/blob", "Cannot process binary content (no content type) from {url}"),
        ("/too-big", "Content exceeds size limit of 10485760 bytes"),
        ("/loop", "fetch failed (redirect count exceeded)"),
        ("/503", "Request failed with status code 503 Service Unavailable"),
    ],
)
async def test_fallback_failures(
    tmp_path: Path, site: tuple[PageServer, str], path: str, message: str
) -> None:
    _, base = site
    url = f"{base}{path}"
    result, model = await fallback_only(local_tool(), tmp_path, f"get {url}")
    expected = f"All fallback fetch attempts failed: {url}: {message.format(url=url)}"
    assert result.error_type == "web_fetch_fallback_failed"
    assert result.error_message == expected
    assert result.llm_content == f"Error: {expected}"
    assert len(model.calls) == 1  # no fallback model call without content


async def test_redirect_loop_stops_after_20_redirects(
    tmp_path: Path, site: tuple[PageServer, str]
) -> None:
    server, base = site
    await fallback_only(local_tool(), tmp_path, f"get {base}/loop")
    assert server.hits("/loop") == 21


async def test_http_errors_retry_only_when_gemini_does(
    tmp_path: Path, site: tuple[PageServer, str]
) -> None:
    server, base = site
    tool = local_tool(retry=RetryPolicy(max_attempts=3, initial_delay_s=0.01, max_delay_s=0.02))
    await fallback_only(tool, tmp_path, f"get {base}/503 {base}/missing")
    assert server.hits("/503") == 3
    assert server.hits("/missing") == 1


async def test_slow_server_times_out(tmp_path: Path, site: tuple[PageServer, str]) -> None:
    server, base = site
    tool = local_tool(fetch_timeout_s=0.3, retry=RetryPolicy(max_attempts=2, initial_delay_s=0.01))
    with trio.fail_after(5):
        result, _ = await fallback_only(tool, tmp_path, f"get {base}/slow")
    assert result.error_message == (
        f"All fallback fetch attempts failed: {base}/slow: Request timed out after 300ms"
    )
    assert server.hits("/slow") == 2  # a timeout is retried


async def test_huge_page_is_cut_to_the_cap(tmp_path: Path, site: tuple[PageServer, str]) -> None:
    _, base = site
    result, model = await fallback_only(local_tool(), tmp_path, f"get {base}/huge")
    assert result.error_type is None
    assert model.prompt() == fallback_prompt(
        f"get {base}/huge",
        one_source(f"{base}/huge", "x" * MAX_CONTENT_LENGTH + TRUNCATION_WARNING),
    )


async def test_connection_refused(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    result, _ = await fallback_only(local_tool(), tmp_path, f"get {url}")
    assert result.error_message == (
        f"All fallback fetch attempts failed: {url}: fetch failed (connect ECONNREFUSED 127.0.0.1:{port})"
    )


async def test_fallback_model_failure(tmp_path: Path, site: tuple[PageServer, str]) -> None:
    _, base = site
    model = FakeModel([ModelCallError("primary"), ModelCallError("quota exhausted", status=429)])
    result = await run(local_tool(), web_env(tmp_path, model), f"get {base}/text")
    message = (
        "Error during fallback processing: Failed to generate content with model "
        "gemini-3-flash-preview: quota exhausted"
    )
    assert (result.error_type, result.error_message) == ("web_fetch_fallback_failed", message)
    assert (
        result.llm_content == f"Error: {message}" and result.return_display == f"Error: {message}"
    )


async def test_gemini_blocks_loopback_in_the_fallback_too(tmp_path: Path) -> None:
    tool = WebFetchTool(resolver=PUBLIC)
    with pytest.raises(
        Exception, match=r"^Access to blocked or private host http://127.0.0.1/ is not allowed\.$"
    ):
        await tool.fetch_page("http://127.0.0.1/")


# -- retry schedule and timeout, in virtual time ------------------------------------------


async def test_retry_schedule_in_virtual_time(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    attempts: list[float] = []
    seen: dict[str, Any] = {}

    async def timing_out(url: str, **kwargs: Any) -> HttpResponse:
        seen.update(kwargs)
        attempts.append(trio.current_time())
        await trio.sleep(kwargs["timeout_s"])
        raise FetchError(
            f"Request timed out after {int(kwargs['timeout_s'] * 1000)}ms", code="ETIMEDOUT"
        )

    tool = WebFetchTool(resolver=PUBLIC, http=timing_out, rng=random.Random(7))
    start = trio.current_time()
    with pytest.raises(FetchError, match="Request timed out after 10000ms"):
        await tool.fetch_page("https://example.com/")
    assert seen["timeout_s"] == 10.0 and seen["max_body_bytes"] == 10 * 1024 * 1024
    rng, delay, waited = random.Random(7), 5.0, 0.0
    for _ in range(9):
        waited += max(0.0, delay + delay * 0.3 * (rng.random() * 2 - 1))
        delay = min(30.0, delay * 2)
    assert len(attempts) == 10
    assert trio.current_time() - start == pytest.approx(10 * 10.0 + waited)


def test_retryable_errors() -> None:
    from actors.tools._http import BlockedAddressError
    from actors.tools._web_fetch import _UrlFailure

    assert is_retryable(FetchError("x", code="ECONNREFUSED"))
    # Gemini's web fetch retries with utils/retry.ts, whose SSL BAD_RECORD_MAC rule the
    # gateway had and web fetch's own copy of the codes lacked.
    assert is_retryable(FetchError("x", code="ERR_SSL_SSLV3_ALERT_BAD_RECORD_MAC"))
    assert not is_retryable(FetchError("x", code="ECONNABORTED"))
    assert is_retryable(FetchError("fetch failed (redirect count exceeded)"))
    assert not is_retryable(FetchError("Content exceeds size limit", phase="body"))
    assert not is_retryable(BlockedAddressError("Access to private IP 10.0.0.1 is blocked"))
    assert is_retryable(_UrlFailure("x", status=429)) and is_retryable(_UrlFailure("x", status=500))
    assert not is_retryable(_UrlFailure("x", status=404))
