"""``web_fetch`` (Gemini CLI's ``WebFetchTool``, display name WebFetch), as in 0.61.

The ``prompt`` parameter carries instructions and up to 20 ``http(s)://`` URLs.

1. **Validation** (Gemini's texts): an empty prompt; any ``://`` token that is not a
   URL (``Malformed URL detected``) or not http(s) (``Unsupported protocol``); no URL.
2. **Filtering.** URLs are normalized (no trailing slash, no default port) and
   de-duplicated. A URL is skipped as ``[Blocked Host]`` when its host is internal
   (``localhost``, ``*.local``...), a private/reserved IP, resolves to one, or does not
   resolve at all (Gemini fails closed); then as ``[Rate limit exceeded]`` when its host
   already had 10 requests in the last 60 s. All skipped: ``web_fetch_processing_error``
   ``All requested URLs were skipped: ...``.
3. **Primary path.** No local fetch: one ``generateContent`` on Gemini's ``web-fetch``
   alias (``gemini-3-flash-preview``, ``temperature 0, topP 1``, the ``urlContext`` tool)
   with the instructions and the authorized URLs. Citations (UTF-16 offsets), a
   ``Sources:`` list and a ``[Warning]`` line for skipped URLs are added; the text is
   wrapped in ``<untrusted_context>``. Display: ``Content processed from prompt.``
4. **Fallback**, when that call fails or returns neither text nor grounding: each URL is
   fetched here (``_http``: 10 s to the response headers, redirects, 10 MB cap, Gemini's
   retry policy — up to 10 attempts, 5 s doubling to 30 s ±30 % — for network errors,
   429/499/5xx), HTML converted to text (``_html_text``), each page cut to 250 000
   characters, the pages shared out of one 250 000-character budget, and one
   ``generateContent`` on ``web-fetch-fallback`` answers from the pages. Every fetch
   failing is ``web_fetch_fallback_failed`` (``All fallback fetch attempts failed: ...``);
   the model call failing is ``web_fetch_fallback_failed`` too
   (``Error during fallback processing: ...``).

Rate-limit state is per session, in the tool instance (``close_session`` drops it).
The calls of one wave run concurrently; each call takes a turn when it starts and makes
its rate-limit decisions only after every earlier call has made its own, so the eleventh
of eleven calls is the one refused, whatever the DNS timing (Gemini gets that order from
Node's FIFO DNS callbacks).

Deliberate differences:

- a response whose content type is binary (images, audio, video, fonts, archives,
  ``application/octet-stream``...) or whose bytes look binary is a failed fetch
  (``Cannot process binary content (<type>) from <url>``), not text for the model;
  invalid UTF-8 in a text response is decoded with U+FFFD as Node's
  ``Buffer.toString('utf8')`` does (not an error);
- network errors name their cause (``fetch failed (connect ECONNREFUSED ...)``,
  ``fetch failed (redirect count exceeded)``) where Node says only ``fetch failed``;
- the tools' model calls carry no system instruction (Gemini sends its main one).

Kept quirk: when a page is cut, Gemini's ``truncateString`` drops the page's line
terminators (its grapheme regex ``.`` does not match them); so do we.

Test-only knobs: ``WebFetchTool(allow_private_hosts=True)`` lets tests fetch from
127.0.0.1 (Gemini blocks it); ``AGENTBUS_TEST_DNS_OVERRIDES`` (see ``_http``) fixes DNS
answers for the corpus' DNS-shim scenario.
"""

from __future__ import annotations

import random as _random
import unicodedata
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from actors.common import is_network_retryable, js_trim, utf16_len
from bus.messages import ToolResult

from ._base import ModelCallError, OutputSink, ToolEnv
from ._grounding import (
    BASE_CONFIG,
    call_web_model,
    grounding_metadata,
    insert_citations_utf16,
    response_text,
    source_lines,
)
from ._paths import js_prefix
from ._read_file import is_binary_data
from ._untrusted import wrap_untrusted

if TYPE_CHECKING:
    from ._http import HttpResponse, Resolver

    HttpGet = Callable[..., Awaitable[HttpResponse]]

# The HTTP client and the URL rules (``_http``, ``_url``) are imported by the first call
# that reads a prompt's URLs: every session registers web_fetch, few call it.

URL_FETCH_TIMEOUT_S = 10.0
MAX_CONTENT_LENGTH = 250_000
MAX_FETCH_BYTES = 10 * 1024 * 1024
USER_AGENT = (
    "Mozilla/5.0 (compatible; Google-Gemini-CLI/1.0; +https://github.com/google-gemini/gemini-cli)"
)
TRUNCATION_WARNING = "\n\n... [Content truncated due to size limit] ..."
RATE_LIMIT_WINDOW_MS = 60_000
MAX_REQUESTS_PER_WINDOW = 10
RATE_LIMIT_HOSTS = 1000

FETCH_CONFIG: dict[str, Any] = {**BASE_CONFIG, "tools": [{"urlContext": {}}]}
FALLBACK_CONFIG: dict[str, Any] = dict(BASE_CONFIG)

_BINARY_TYPES = frozenset(
    {
        "application/octet-stream",
        "application/pdf",
        "application/zip",
        "application/gzip",
        "application/x-gzip",
        "application/x-tar",
        "application/x-7z-compressed",
        "application/x-rar-compressed",
        "application/vnd.ms-excel",
        "application/msword",
        "application/wasm",
    }
)

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prompt": {
            "type": "string",
            "description": (
                "Instructions together with the complete http:// or https:// URLs they "
                'apply to (at most 20), e.g. "Summarize https://example.com/post and list '
                'the dates in https://example.com/calendar".'
            ),
        },
    },
    "required": ["prompt"],
}

_DESCRIPTION = (
    "Reads web pages and answers instructions about them. Put the instructions and the "
    "full URLs (up to 20) in 'prompt'. Only public http(s) addresses can be read: local "
    "and private-network hosts are refused, and each host allows 10 requests a minute."
)

class _UrlFailure(Exception):
    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@attrs.frozen
class RetryPolicy:
    """Gemini's ``retryWithBackoff`` defaults as ``web_fetch`` uses them."""

    max_attempts: int = 10
    initial_delay_s: float = 5.0
    max_delay_s: float = 30.0


# --------------------------------------------------------------------------------------
# Pure helpers


def sanitize_xml(text: str) -> str:
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&apos;")
    )


_LINE_TERMINATORS = frozenset("\n\r\u2028\u2029")


def truncate_string(text: str, max_length: int, suffix: str) -> str:
    """Gemini's ``truncateString``: whole graphemes up to ``max_length`` UTF-16 units.

    Its ``/(?:[\\uD800-\\uDBFF][\\uDC00-\\uDFFF]|.)\\p{M}*/gu`` never matches a line
    terminator, and ``exec`` skips what does not match: a cut text loses them.
    """
    if utf16_len(text) <= max_length:
        return text
    out: list[str] = []
    length = 0
    i, n = 0, len(text)
    while i < n:
        if text[i] in _LINE_TERMINATORS:
            i += 1
            continue
        end = i + 1
        while end < n and unicodedata.category(text[end]).startswith("M"):
            end += 1
        segment = text[i:end]
        width = utf16_len(segment)
        if length + width > max_length:
            break
        out.append(segment)
        length += width
        if length >= max_length:
            break
        i = end
    return "".join(out) + suffix


def share_budget(
    contents: list[tuple[str, str]], budget: int = MAX_CONTENT_LENGTH
) -> dict[str, str]:
    """Gemini's water-filling: the shortest pages first, each cut to its fair share."""
    ordered = sorted(contents, key=lambda item: utf16_len(item[1]))
    remaining, left = budget, len(ordered)
    out: dict[str, str] = {}
    for url, content in ordered:
        fair = remaining // left
        allocated = min(utf16_len(content), fair)
        cut = truncate_string(content, allocated, TRUNCATION_WARNING)
        out[url] = cut
        remaining -= utf16_len(cut)
        left -= 1
    return out


def is_binary_response(content_type: str, body: bytes) -> bool:
    essence = content_type.split(";", 1)[0].strip().lower()
    if essence.startswith(("image/", "audio/", "video/", "font/")) or essence in _BINARY_TYPES:
        return True
    textual = essence.startswith("text/") or any(
        marker in essence for marker in ("json", "xml", "javascript", "ecmascript", "yaml")
    )
    return not textual and is_binary_data(body[:515])


def page_text(body: bytes, content_type: str) -> str:
    """The fetched page as text for the model (blocking: runs in a worker thread)."""
    raw = body.decode("utf-8", "replace")
    if "text/html" in content_type.lower() or content_type == "":
        from ._html_text import html_to_text  # html.parser: imported by a fetch, not a start-up

        raw = html_to_text(raw)
    return truncate_string(raw, MAX_CONTENT_LENGTH, TRUNCATION_WARNING)


def is_retryable(exc: BaseException) -> bool:
    """Gemini's ``isRetryableError`` for fetch failures (``retryFetchErrors`` on)."""
    from ._http import BlockedAddressError, FetchError

    if isinstance(exc, BlockedAddressError):
        return False
    if isinstance(exc, FetchError):
        if exc.phase == "body":
            return False
        return is_network_retryable(exc.code or "") or "fetch failed" in exc.message.lower()
    if isinstance(exc, _UrlFailure) and exc.status is not None:
        return exc.status in (429, 499) or 500 <= exc.status < 600
    return False


# --------------------------------------------------------------------------------------
# Per-session state


@attrs.define
class FetchSession:
    """One session's rate-limit history and the order of its calls' decisions."""

    hosts: OrderedDict[str, list[float]] = attrs.field(factory=OrderedDict)
    last_turn: trio.Event | None = None

    def allow(self, hostname: str, now_ms: float) -> bool:
        """Gemini's ``checkRateLimit``: at most 10 requests per host per 60 s window."""
        start = now_ms - RATE_LIMIT_WINDOW_MS
        history = [t for t in self.hosts.get(hostname, []) if t > start]
        allowed = len(history) < MAX_REQUESTS_PER_WINDOW
        if allowed:
            history.append(now_ms)
        self.hosts[hostname] = history
        self.hosts.move_to_end(hostname)
        while len(self.hosts) > RATE_LIMIT_HOSTS:
            self.hosts.popitem(last=False)
        return allowed

    def allow_url(self, url: str, now_ms: float) -> bool:
        """A URL that does not parse is allowed (Gemini's ``checkRateLimit`` catch)."""
        from ._url import InvalidUrlError, parse_url

        try:
            hostname = parse_url(url).hostname
        except InvalidUrlError:
            return True
        return self.allow(hostname, now_ms)

    def take_turn(self) -> tuple[trio.Event | None, trio.Event]:
        previous, mine = self.last_turn, trio.Event()
        self.last_turn = mine
        return previous, mine


def _error(message: str, error_type: str) -> ToolResult:
    return ToolResult(
        llm_content=f"Error: {message}",
        return_display=f"Error: {message}",
        error_type=error_type,
        error_message=message,
    )


class WebFetchTool:
    """Gemini CLI's ``web_fetch`` tool."""

    name = "web_fetch"
    display_name = "WebFetch"
    kind = "fetch"

    def __init__(
        self,
        *,
        allow_private_hosts: bool = False,
        resolver: Resolver | None = None,
        fetch_timeout_s: float = URL_FETCH_TIMEOUT_S,
        body_idle_timeout_s: float | None = None,
        retry: RetryPolicy | None = None,
        rng: _random.Random | None = None,
        http: HttpGet | None = None,
    ) -> None:
        self.allow_private_hosts = allow_private_hosts
        """Test-only: fetch private and loopback hosts (Gemini never does)."""
        self._resolver = resolver
        self.fetch_timeout_s = fetch_timeout_s
        self._body_idle_timeout_s = body_idle_timeout_s
        self.retry = retry if retry is not None else RetryPolicy()
        self.rng = rng if rng is not None else _random.Random()
        self._http = http
        self._sessions: dict[str, FetchSession] = {}

    @property
    def resolver(self) -> Resolver:
        """The one given, else the environment's (read at the first fetch)."""
        if self._resolver is None:
            from ._http import Resolver

            self._resolver = Resolver.from_environ()
        return self._resolver

    @property
    def http(self) -> HttpGet:
        if self._http is None:
            from ._http import http_get

            self._http = http_get
        return self._http

    @property
    def body_idle_timeout_s(self) -> float:
        if self._body_idle_timeout_s is None:
            from ._http import BODY_IDLE_TIMEOUT_S

            self._body_idle_timeout_s = BODY_IDLE_TIMEOUT_S
        return self._body_idle_timeout_s

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": self.name, "description": _DESCRIPTION, "parametersJsonSchema": _SCHEMA}

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        prompt = args.get("prompt")
        if not isinstance(prompt, str) or js_trim(prompt) == "":
            return (
                "The 'prompt' parameter cannot be empty and must contain URL(s) and instructions."
            )
        from ._url import parse_prompt

        valid, errors = parse_prompt(prompt)
        if errors:
            return "Error(s) in prompt URLs:\n- " + "\n- ".join(errors)
        if not valid:
            return (
                "The 'prompt' must contain at least one valid URL (starting with http:// "
                "or https://)."
            )
        return None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        prompt = str(args.get("prompt") or "")
        shown = js_prefix(prompt, 97) + "..." if utf16_len(prompt) > 100 else prompt
        return f'Processing URLs and instructions from prompt: "{shown}"'

    def session(self, env: ToolEnv) -> FetchSession:
        return self._sessions.setdefault(env.session_id, FetchSession())

    async def close_session(self, env: ToolEnv) -> None:
        self._sessions.pop(env.session_id, None)

    # -- execution -----------------------------------------------------------------

    async def execute(
        self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None
    ) -> ToolResult:
        from ._url import normalize_url, parse_prompt

        session = self.session(env)
        # Taken before the first checkpoint: turns follow the order calls start in.
        previous, mine = session.take_turn()
        try:
            prompt = str(args.get("prompt") or "")
            valid, _ = parse_prompt(prompt)
            unique = list(dict.fromkeys(normalize_url(u) for u in valid))
            blocked = [await self.is_blocked_host(u) for u in unique]
            if previous is not None:
                await previous.wait()
            to_fetch: list[str] = []
            skipped: list[str] = []
            now_ms = trio.current_time() * 1000
            for url, is_blocked in zip(unique, blocked, strict=True):
                if is_blocked:
                    skipped.append(f"[Blocked Host] {url}")
                elif not session.allow_url(url, now_ms):
                    skipped.append(f"[Rate limit exceeded] {url}")
                else:
                    to_fetch.append(url)
        finally:
            mine.set()
        if not to_fetch and skipped:
            return _error(
                f"All requested URLs were skipped: {', '.join(skipped)}",
                "web_fetch_processing_error",
            )
        try:
            return await self._primary(prompt, to_fetch, skipped, env)
        except (ModelCallError, _UrlFailure):
            return await self._fallback(prompt, to_fetch, env)

    async def is_blocked_host(self, url: str) -> bool:
        """Gemini's ``isBlockedHost``: internal, private, or not resolvable."""
        if self.allow_private_hosts:
            return False
        from ._http import FetchError, check_destination
        from ._url import InvalidUrlError, is_internal_hostname, parse_url

        try:
            parsed = parse_url(url)
        except InvalidUrlError:
            return True
        host = parsed.hostname.lower()
        if host in ("localhost", "127.0.0.1") or is_internal_hostname(host):
            return True
        try:
            await check_destination(parsed, self.resolver)
        except FetchError:
            return True
        return False

    async def _primary(
        self, prompt: str, to_fetch: list[str], skipped: list[str], env: ToolEnv
    ) -> ToolResult:
        urls = "\n".join(to_fetch)
        request = (
            "Follow the user's instructions to process the authorized URLs.\n\n"
            f"<user_instructions>\n{sanitize_xml(prompt)}\n</user_instructions>\n\n"
            f"<authorized_urls>\n{urls}\n</authorized_urls>\n"
        )
        response = await call_web_model(
            env, [{"role": "user", "parts": [{"text": request}]}], FETCH_CONFIG
        )
        text = response_text(response) or ""
        meta = grounding_metadata(response)
        chunks = meta.get("groundingChunks")
        chunk_list = list(chunks) if isinstance(chunks, list | tuple) else []
        if not js_trim(text) and not chunk_list:
            raise _UrlFailure("Primary fetch returned no content")
        supports = meta.get("groundingSupports")
        if isinstance(supports, list | tuple) and supports:
            text = insert_citations_utf16(text, supports)
        sources = [c for c in chunk_list if isinstance(c, Mapping)]
        if sources:
            text += "\n\nSources:\n" + "\n".join(source_lines(sources, missing_uri="Unknown URI"))
        if skipped:
            text = (
                "[Warning] The following URLs were skipped:\n" + "\n".join(skipped) + f"\n\n{text}"
            )
        return ToolResult(
            llm_content=wrap_untrusted(text), return_display="Content processed from prompt."
        )

    async def _fallback(self, prompt: str, urls: list[str], env: ToolEnv) -> ToolResult:
        from ._http import FetchError

        unique = list(dict.fromkeys(urls))
        successes: list[tuple[str, str]] = []
        errors: dict[str, str] = {}
        for url in unique:
            try:
                successes.append((url, await self.fetch_page(url)))
            except (FetchError, _UrlFailure) as exc:
                errors.setdefault(url, exc.message)
        if not successes:
            detail = ", ".join(f"{url}: {message}" for url, message in errors.items())
            return _error(
                f"All fallback fetch attempts failed: {detail}", "web_fetch_fallback_failed"
            )
        shared = share_budget(successes)
        sources = []
        for url in unique:
            body = shared[url] if url in shared else f"Error: {errors.get(url) or 'Unknown error'}"
            sources.append(f'<source url="{sanitize_xml(url)}">\n{sanitize_xml(body)}\n</source>')
        request = (
            "Follow the user's instructions below using the provided webpage content.\n\n"
            f"<user_instructions>\n{sanitize_xml(prompt)}\n</user_instructions>\n\n"
            "I was unable to access the URL(s) directly using the primary fetch tool. "
            "Instead, I have fetched the raw content of the page(s). Please use the "
            "following content to answer the request. Do not attempt to access the URL(s) "
            f"again.\n\n<content>\n{chr(10).join(sources)}\n</content>\n"
        )
        try:
            response = await call_web_model(
                env, [{"role": "user", "parts": [{"text": request}]}], FALLBACK_CONFIG
            )
        except ModelCallError as exc:
            return _error(
                f"Error during fallback processing: {exc.message}", "web_fetch_fallback_failed"
            )
        return ToolResult(
            llm_content=wrap_untrusted(response_text(response) or ""),
            return_display=f"Content for {len(urls)} URL(s) processed using fallback fetch.",
        )

    async def fetch_page(self, url_text: str) -> str:
        """One URL as text (Gemini's ``executeFallbackForUrl``); raises with its message."""
        from ._url import convert_github_url_to_raw

        url = convert_github_url_to_raw(url_text)
        if await self.is_blocked_host(url):
            raise _UrlFailure(f"Access to blocked or private host {url} is not allowed.")
        response = await self._with_retries(url)
        content_type = response.header("content-type") or ""
        if is_binary_response(content_type, response.body):
            shown = content_type.split(";", 1)[0].strip() or "no content type"
            raise _UrlFailure(f"Cannot process binary content ({shown}) from {url}")
        return await trio.to_thread.run_sync(
            page_text, response.body, content_type, abandon_on_cancel=True
        )

    async def _get_ok(self, url: str) -> HttpResponse:
        response = await self.http(
            url,
            headers={"User-Agent": USER_AGENT},
            resolver=self.resolver,
            allow_private=self.allow_private_hosts,
            timeout_s=self.fetch_timeout_s,
            body_idle_timeout_s=self.body_idle_timeout_s,
            max_body_bytes=MAX_FETCH_BYTES,
        )
        if not response.ok:
            raise _UrlFailure(
                f"Request failed with status code {response.status} {response.reason}",
                status=response.status,
            )
        return response

    async def _with_retries(self, url: str) -> HttpResponse:
        from ._http import FetchError

        delay = self.retry.initial_delay_s
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._get_ok(url)
            except (FetchError, _UrlFailure) as exc:
                if attempt >= self.retry.max_attempts or not is_retryable(exc):
                    raise
            jitter = delay * 0.3 * (self.rng.random() * 2 - 1)
            await trio.sleep(max(0.0, delay + jitter))
            delay = min(self.retry.max_delay_s, delay * 2)


__all__ = [
    "FETCH_CONFIG",
    "FALLBACK_CONFIG",
    "MAX_CONTENT_LENGTH",
    "RetryPolicy",
    "URL_FETCH_TIMEOUT_S",
    "WebFetchTool",
    "page_text",
    "share_budget",
    "truncate_string",
]
