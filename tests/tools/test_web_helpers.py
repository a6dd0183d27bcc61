"""The pure parts under web_fetch: URLs, private addresses, HTML to text, truncation,
citations; and the HTTP client's destination checks."""

from __future__ import annotations

import subprocess
import sys

import pytest
import trio

from actors.tools._grounding import insert_citations_utf8, insert_citations_utf16
from actors.tools._html_text import html_to_text
from actors.tools._http import (
    DNS_OVERRIDES_ENV,
    BlockedAddressError,
    FetchError,
    Resolver,
    check_destination,
    http_get,
)
from actors.tools._url import (
    InvalidUrlError,
    convert_github_url_to_raw,
    is_address_private,
    normalize_url,
    parse_prompt,
    parse_url,
)
from actors.tools._web_fetch import TRUNCATION_WARNING, sanitize_xml, share_budget, truncate_string
from tests.fakes.http_pages import Page, PageServer


@pytest.mark.parametrize(
    ("text", "href"),
    [
        ("https://example.com/1", "https://example.com/1"),
        ("https://example.com", "https://example.com/"),
        ("HTTP://EXAMPLE.COM:80/a/../b/./c?q=a b#x y", "http://example.com/b/c?q=a%20b#x%20y"),
        ("http://example.com:8080", "http://example.com:8080/"),
        ("https://bücher.de/ä", "https://xn--bcher-kva.de/%C3%A4"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
        ("http://2130706433/", "http://127.0.0.1/"),
        ("http://[0:0::1]/", "http://[::1]/"),
        ("http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/"),
        ("http://user:pw@host/", "http://user:pw@host/"),
        ("http:\\\\host\\a\\b", "http://host/a/b"),
        ("https://example.com.", "https://example.com./"),
        ("foo://bar/baz", "foo://bar/baz"),
    ],
)
def test_parse_url(text: str, href: str) -> None:
    assert parse_url(text).href == href


@pytest.mark.parametrize(
    "text",
    [
        "http://",
        "://x",
        "(https://x)",
        "http://a:b:c/",
        "http://1.2.3.256/",
        "http://[::1/",
        "http://h:99999/",
        "http://a b/",
    ],
)
def test_invalid_urls(text: str) -> None:
    with pytest.raises(InvalidUrlError):
        parse_url(text)


def test_prompt_parsing_and_normalizing() -> None:
    assert parse_prompt("a https://x.org/p,\u00a0and\u3000ftp://y (https://z)") == (
        ["https://x.org/p,"],
        [
            'Unsupported protocol in URL: "ftp://y". Only http and https are supported.',
            'Malformed URL detected: "(https://z)".',
        ],
    )
    assert normalize_url("https://Example.com:443/a/b/?q") == "https://example.com/a/b?q"
    assert normalize_url("https://example.com/") == "https://example.com/"
    assert convert_github_url_to_raw("https://github.com/o/r/blob/main/src/x.py") == (
        "https://raw.githubusercontent.com/o/r/main/src/x.py"
    )
    assert convert_github_url_to_raw("https://github.com/o/r") == "https://github.com/o/r"


@pytest.mark.parametrize(
    ("address", "private"),
    [
        ("127.0.0.1", True),
        ("10.0.0.1", True),
        ("172.16.5.4", True),
        ("192.168.0.1", True),
        ("169.254.169.254", True),
        ("100.64.0.1", True),
        ("0.0.0.0", True),
        ("224.0.0.1", True),
        ("198.18.0.1", True),
        ("203.0.113.9", True),
        ("93.184.215.14", False),
        ("8.8.8.8", False),
        ("::1", True),
        ("fe80::1", True),
        ("fd00::1", True),
        ("::ffff:10.0.0.1", True),
        ("::ffff:8.8.8.8", False),
        ("2002::1", True),
        ("2001:db8::1", True),
        ("2606:4700::1111", False),
        ("localhost", True),
        ("a.localhost", True),
        ("example.com", False),
    ],
)
def test_private_addresses(address: str, private: bool) -> None:
    assert is_address_private(address) is private


def test_web_fetch_imports_its_http_client_and_html_parser_when_it_fetches() -> None:
    """Every session registers web_fetch; a start-up imports neither h11 nor html.parser
    (issue #20), the fetch itself does."""
    code = (
        "import sys\n"
        "from actors.tools import builtin_tools\n"
        "assert any(t.name == 'web_fetch' for t in builtin_tools('gemini-2.5-flash'))\n"
        "assert 'h11' not in sys.modules and 'html.parser' not in sys.modules\n"
        "from actors.tools._web_fetch import page_text\n"
        "assert page_text(b'<p>hi</p>', 'text/html') == 'hi'\n"
        "from actors.tools._http import _Connection\n"
        "_Connection(None)\n"
        "assert 'h11' in sys.modules and 'html.parser' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_html_to_text() -> None:
    html = (
        "<html><head><title>Ignored</title><style>p{}</style></head><body>"
        "<h2>A  heading</h2><p>First <b>bold</b>\n word<br>next line</p>"
        "<ul><li>one<li>two <i>2</i></ul><ol><li>a</li><li>b</li></ol>"
        "<div>d1</div><div>d2</div><script>var x = 1;</script>"
        "<table><tr><th>name</th><th>n</th></tr><tr><td>alpha</td><td>1</td></tr></table>"
        "<pre>  keep\n   this</pre><hr><blockquote><p>q1</p><p>q2</p></blockquote>"
        '<a href="https://x">link text</a> <img src="i.png" alt="pic"> &lt;done&gt;</body></html>'
    )
    assert html_to_text(html) == (
        "A HEADING\n\nFirst bold word\nnext line\n\n * one\n * two 2\n\n1. a\n2. b\n\n"
        "d1\nd2\n\nNAME    N\nalpha   1\n\n  keep\n   this\n\n" + "-" * 40 + "\n\n"
        "> q1\n> \n> q2\n\nlink text <done>"
    )
    assert html_to_text("no body <b>here</b>") == "no body here"


def test_truncate_string_and_budget() -> None:
    assert truncate_string("short", 10, "!") == "short"
    # Gemini's grapheme regex skips line terminators once a text is cut.
    assert truncate_string("ab\ncd\r\nef", 4, "…") == "abcd…"
    # Astral characters count two units; combining marks stay with their base.
    assert truncate_string("😀😀x", 3, "|") == "😀|"
    assert truncate_string("e\u0301e\u0301e", 3, "|") == "e\u0301|"
    shared = share_budget([("a", "x" * 10), ("b", "y" * 100), ("c", "z" * 100)], budget=100)
    assert shared["a"] == "x" * 10
    assert shared["b"] == "y" * 45 + TRUNCATION_WARNING
    remaining = 100 - 10 - len(shared["b"])
    assert shared["c"] == "z" * remaining + TRUNCATION_WARNING
    assert (
        sanitize_xml("<a href=\"x\">'&'</a>")
        == "&lt;a href=&quot;x&quot;&gt;&apos;&amp;&apos;&lt;/a&gt;"
    )


def test_citation_offsets() -> None:
    supports = [{"segment": {"endIndex": 2}, "groundingChunkIndices": [0]}]
    assert insert_citations_utf16("😀ab", supports) == "😀[1]ab"
    assert insert_citations_utf8("éab", supports) == "é[1]ab"
    assert (
        insert_citations_utf8("ab", [{"segment": {"endIndex": 99}, "groundingChunkIndices": [1]}])
        == "ab[2]"
    )


def test_dns_overrides_from_environment() -> None:
    resolver = Resolver.from_environ(
        {DNS_OVERRIDES_ENV: "Example.com=93.184.215.14, a.test=10.0.0.1"}
    )
    assert resolver.overrides == {"example.com": ("93.184.215.14",), "a.test": ("10.0.0.1",)}
    assert Resolver.from_environ({}).overrides == {}


async def test_destination_checks() -> None:
    resolver = Resolver(
        {"public.test": ("93.184.215.14",), "sneaky.test": ("93.184.215.14", "127.0.0.1")}
    )
    assert await check_destination(parse_url("http://public.test/"), resolver) == ["93.184.215.14"]
    with pytest.raises(
        BlockedAddressError,
        match=r"^Access to private IP 127\.0\.0\.1 \(resolved from sneaky\.test\) is blocked$",
    ):
        await check_destination(parse_url("http://sneaky.test/"), resolver)
    with pytest.raises(
        BlockedAddressError, match=r"^Access to internal host localhost is blocked$"
    ):
        await check_destination(parse_url("http://localhost:1/"), resolver)
    with pytest.raises(BlockedAddressError, match=r"^Access to private IP ::1 is blocked$"):
        await check_destination(parse_url("http://[::1]/"), resolver)


async def test_client_refuses_private_destinations_unless_allowed(nursery: trio.Nursery) -> None:
    server = PageServer({"/": Page(content_type="text/plain", body=b"hello")})
    base = await nursery.start(server.run)
    port = base.rsplit(":", 1)[1]
    resolver = Resolver({"looks-public.test": ("127.0.0.1",)})
    url = f"http://looks-public.test:{port}/"
    with pytest.raises(BlockedAddressError):
        await http_get(url, headers={}, resolver=resolver, max_body_bytes=100)
    response = await http_get(
        url, headers={}, resolver=resolver, allow_private=True, max_body_bytes=100
    )
    assert (response.status, response.body, response.header("content-type")) == (
        200,
        b"hello",
        "text/plain",
    )
    assert server.requests[0][1]["host"] == f"looks-public.test:{port}"
    with pytest.raises(FetchError, match="Content exceeds size limit of 3 bytes"):
        await http_get(url, headers={}, resolver=resolver, allow_private=True, max_body_bytes=3)
