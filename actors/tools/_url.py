"""URLs and network addresses as Gemini CLI's ``web_fetch`` sees them (pure, no I/O).

``parse_url`` follows the WHATWG URL standard (Node's ``new URL``) closely enough for
what ``web_fetch`` does with a URL: accept or reject a token, serialize ``href``, read
``hostname``/``protocol``/``pathname``. It handles special schemes fully (scheme and
host lower-casing, IDNA, IPv4 forms such as ``0x7f.1``, IPv6 compression, default
ports, dot segments, percent-encoding sets) and non-special schemes loosely (enough to
tell "unsupported protocol" from "malformed").

``is_address_private`` is ipaddr.js 1.9's ``range() !== 'unicast'`` plus the benchmark
range and IPv4-mapped unwrapping, as Gemini's ``isAddressPrivate``.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse

import attrs

from actors.common import JS_WHITESPACE

SPECIAL_PORTS: dict[str, int | None] = {
    "http": 80,
    "https": 443,
    "ws": 80,
    "wss": 443,
    "ftp": 21,
    "file": None,
}

_JS_WS_RE = re.compile(f"[{re.escape(JS_WHITESPACE)}]+")

_FORBIDDEN_HOST = set("\x00\t\n\r #/:<>?@[\\]^|")
_FORBIDDEN_DOMAIN = _FORBIDDEN_HOST | {chr(c) for c in range(0x20)} | {"%", "\x7f"}

_C0 = {chr(c) for c in range(0x20)}
_FRAGMENT_SET = _C0 | set(' "<>`')
_QUERY_SET = _C0 | set(' "#<>')
_SPECIAL_QUERY_SET = _QUERY_SET | {"'"}
_PATH_SET = _QUERY_SET | set("?`{}")
_USERINFO_SET = _PATH_SET | set("/:;=@[\\]^|")


class InvalidUrlError(ValueError):
    """``new URL(text)`` would throw."""


@attrs.frozen(kw_only=True)
class Url:
    """A parsed URL, serialized as the WHATWG standard does."""

    scheme: str
    """Lower-case, without the colon."""
    username: str = ""
    password: str = ""
    host: str | None = None
    """Serialized host (IPv6 in brackets); None for URLs without an authority."""
    port: int | None = None
    """None when absent or the scheme's default."""
    path: str = ""
    query: str | None = None
    fragment: str | None = None
    opaque: str | None = None
    """Everything after ``scheme:`` for non-special URLs we do not decompose."""

    @property
    def protocol(self) -> str:
        return f"{self.scheme}:"

    @property
    def hostname(self) -> str:
        return self.host or ""

    @property
    def is_special(self) -> bool:
        return self.scheme in SPECIAL_PORTS

    @property
    def href(self) -> str:
        if self.opaque is not None:
            return f"{self.scheme}:{self.opaque}"
        out = f"{self.scheme}:"
        if self.host is not None:
            out += "//"
            if self.username or self.password:
                out += self.username
                if self.password:
                    out += f":{self.password}"
                out += "@"
            out += self.host
            if self.port is not None:
                out += f":{self.port}"
        out += self.path
        if self.query is not None:
            out += f"?{self.query}"
        if self.fragment is not None:
            out += f"#{self.fragment}"
        return out

    def with_(self, **changes: object) -> Url:
        return attrs.evolve(self, **changes)  # type: ignore[arg-type]


def _percent_encode(text: str, encode_set: set[str]) -> str:
    out: list[str] = []
    for ch in text:
        if ch in encode_set or ord(ch) > 0x7E:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
        else:
            out.append(ch)
    return "".join(out)


def _parse_ipv4_number(part: str) -> int | None:
    if part == "":
        return None
    radix = 10
    if len(part) >= 2 and part[:2] in ("0x", "0X"):
        part, radix = part[2:], 16
    elif len(part) >= 2 and part[0] == "0":
        part, radix = part[1:], 8
    if part == "":
        return 0
    digits = {10: "0123456789", 8: "01234567", 16: "0123456789abcdefABCDEF"}[radix]
    if any(c not in digits for c in part):
        return None
    return int(part, radix)


def _ends_in_number(host: str) -> bool:
    parts = host.split(".")
    if parts[-1] == "":
        if len(parts) == 1:
            return False
        parts.pop()
    last = parts[-1]
    if last and all(c in "0123456789" for c in last):
        return True
    return _parse_ipv4_number(last) is not None and last[:2] in ("0x", "0X")


def _parse_ipv4(host: str) -> str:
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if len(parts) > 4:
        raise InvalidUrlError(host)
    numbers: list[int] = []
    for part in parts:
        n = _parse_ipv4_number(part)
        if n is None:
            raise InvalidUrlError(host)
        numbers.append(n)
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        raise InvalidUrlError(host)
    value = numbers[-1]
    for i, n in enumerate(numbers[:-1]):
        value += n * 256 ** (3 - i)
    return str(ipaddress.IPv4Address(value))


def serialize_ipv6(address: ipaddress.IPv6Address) -> str:
    """WHATWG's IPv6 serializer: hex pieces, the first longest zero run (≥ 2) as ``::``."""
    value = int(address)
    pieces = [(value >> (16 * (7 - i))) & 0xFFFF for i in range(8)]
    best_start, best_len = -1, 1
    i = 0
    while i < 8:
        if pieces[i] == 0:
            j = i
            while j < 8 and pieces[j] == 0:
                j += 1
            if j - i > best_len:
                best_start, best_len = i, j - i
            i = j
        else:
            i += 1
    out = ""
    i = 0
    while i < 8:
        if i == best_start:
            out += "::" if i == 0 else ":"
            i += best_len
            continue
        out += f"{pieces[i]:x}"
        if i < 7:
            out += ":"
        i += 1
    return out


def _parse_host(raw: str, special: bool) -> str:
    if raw.startswith("["):
        if not raw.endswith("]") or "%" in raw:
            raise InvalidUrlError(raw)
        try:
            return f"[{serialize_ipv6(ipaddress.IPv6Address(raw[1:-1]))}]"
        except ValueError:
            raise InvalidUrlError(raw) from None
    if not special:
        if any(c in _FORBIDDEN_HOST for c in raw):
            raise InvalidUrlError(raw)
        return _percent_encode(raw, _C0)
    domain = urllib.parse.unquote(raw, errors="replace")
    if domain.isascii():
        ascii_domain = domain.lower()
    else:
        try:
            ascii_domain = ".".join(
                label.encode("idna").decode("ascii") if label else ""
                for label in domain.lower().split(".")
            )
        except UnicodeError:
            raise InvalidUrlError(raw) from None
    if ascii_domain == "" or any(c in _FORBIDDEN_DOMAIN for c in ascii_domain):
        raise InvalidUrlError(raw)
    if _ends_in_number(ascii_domain):
        return _parse_ipv4(ascii_domain)
    return ascii_domain


def _is_single_dot(seg: str) -> bool:
    return seg == "." or seg.lower() == "%2e"


def _is_double_dot(seg: str) -> bool:
    return seg.lower() in ("..", ".%2e", "%2e.", "%2e%2e")


def _parse_path(raw: str) -> str:
    raw = raw.replace("\\", "/")
    segments = raw.split("/")[1:] if raw.startswith("/") else raw.split("/")
    out: list[str] = []
    for index, seg in enumerate(segments):
        last = index == len(segments) - 1
        if _is_double_dot(seg):
            if out:
                out.pop()
            if last:
                out.append("")
        elif _is_single_dot(seg):
            if last:
                out.append("")
        else:
            out.append(_percent_encode(seg, _PATH_SET))
    return "/" + "/".join(out)


def _split_tail(tail: str) -> tuple[str, str | None, str | None]:
    fragment = None
    if "#" in tail:
        tail, fragment = tail.split("#", 1)
    query = None
    if "?" in tail:
        tail, query = tail.split("?", 1)
    return tail, query, fragment


def parse_url(text: str) -> Url:
    """``new URL(text)`` without a base; raises ``InvalidUrlError``."""
    s = text.strip("".join(chr(c) for c in range(0x21)))
    s = re.sub(r"[\t\n\r]", "", s)
    m = re.match(r"([A-Za-z][A-Za-z0-9+\-.]*):", s)
    if m is None:
        raise InvalidUrlError(text)
    scheme = m.group(1).lower()
    rest = s[m.end() :]
    special = scheme in SPECIAL_PORTS
    if scheme == "file" or (not special and not rest.startswith("//")):
        return Url(scheme=scheme, opaque=rest)
    if special:
        rest = rest.lstrip("/\\")
        cut = min((i for i in (rest.find(c) for c in "/\\?#") if i >= 0), default=len(rest))
    else:
        rest = rest[2:]
        cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    username = password = ""
    if "@" in authority:
        userinfo, authority = authority.rsplit("@", 1)
        if authority == "":
            raise InvalidUrlError(text)
        user, _, pw = userinfo.partition(":")
        username = _percent_encode(user, _USERINFO_SET)
        password = _percent_encode(pw, _USERINFO_SET)
    if authority.startswith("["):
        close = authority.find("]")
        if close < 0:
            raise InvalidUrlError(text)
        raw_host, after = authority[: close + 1], authority[close + 1 :]
        if after and not after.startswith(":"):
            raise InvalidUrlError(text)
        raw_port = after[1:] if after else ""
    else:
        raw_host, _, raw_port = authority.partition(":")
    if raw_host == "" and (special or raw_port or username or password):
        raise InvalidUrlError(text)
    port: int | None = None
    if raw_port:
        if not raw_port.isascii() or not raw_port.isdigit():
            raise InvalidUrlError(text)
        port = int(raw_port)
        if port > 65535:
            raise InvalidUrlError(text)
        if special and port == SPECIAL_PORTS[scheme]:
            port = None
    host = _parse_host(raw_host, special) if raw_host else ""
    path_part, query, fragment = _split_tail(tail)
    if special:
        path = _parse_path(path_part) if path_part else "/"
        query = None if query is None else _percent_encode(query, _SPECIAL_QUERY_SET)
    else:
        path = _percent_encode(path_part, _PATH_SET)
        query = None if query is None else _percent_encode(query, _QUERY_SET)
    fragment = None if fragment is None else _percent_encode(fragment, _FRAGMENT_SET)
    return Url(
        scheme=scheme,
        username=username,
        password=password,
        host=host,
        port=port,
        path=path,
        query=query,
        fragment=fragment,
    )


def join_url(base: Url, reference: str) -> Url:
    """``new URL(reference, base)`` for http(s) bases (redirect targets)."""
    return parse_url(urllib.parse.urljoin(base.href, reference.strip()))


# --------------------------------------------------------------------------------------
# web_fetch's URL handling


def parse_prompt(text: str) -> tuple[list[str], list[str]]:
    """Gemini's ``parsePrompt``: (valid http(s) hrefs, error lines) of the tokens with ``://``."""
    valid: list[str] = []
    errors: list[str] = []
    for token in _JS_WS_RE.split(text):
        if not token or "://" not in token:
            continue
        try:
            url = parse_url(token)
        except InvalidUrlError:
            errors.append(f'Malformed URL detected: "{token}".')
            continue
        if url.scheme in ("http", "https"):
            valid.append(url.href)
        else:
            errors.append(
                f'Unsupported protocol in URL: "{token}". Only http and https are supported.'
            )
    return valid, errors


def normalize_url(text: str) -> str:
    """Gemini's ``normalizeUrl``: no trailing slash (except the root), no default port."""
    try:
        url = parse_url(text)
    except InvalidUrlError:
        return text
    if url.opaque is not None:
        return url.href
    if url.path.endswith("/") and len(url.path) > 1:
        url = url.with_(path=url.path[:-1])
    return url.href


def convert_github_url_to_raw(text: str) -> str:
    """A ``github.com/<owner>/<repo>/blob/...`` URL as its raw.githubusercontent.com twin."""
    try:
        url = parse_url(text)
    except InvalidUrlError:
        return text
    if url.hostname == "github.com" and "/blob/" in url.path:
        path = re.sub(r"^/([^/]+/[^/]+)/blob/", r"/\1/", url.path, count=1)
        return url.with_(host="raw.githubusercontent.com", path=path).href
    return text


# --------------------------------------------------------------------------------------
# Private and internal addresses

_IPV4_NOT_UNICAST = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",
        "255.255.255.255/32",
        "224.0.0.0/4",
        "169.254.0.0/16",
        "127.0.0.0/8",
        "100.64.0.0/10",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "240.0.0.0/4",
        "198.18.0.0/15",  # Gemini's explicit benchmark-range block
    )
)
_IPV6_NOT_UNICAST = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "::/128",
        "fe80::/10",
        "ff00::/8",
        "::1/128",
        "fc00::/7",
        "::ffff:0:0/96",
        "::ffff:0:0:0/96",
        "64:ff9b::/96",
        "2002::/16",
        "2001::/32",
        "2001:db8::/32",
    )
)


def sanitize_hostname(hostname: str) -> str:
    return hostname[1:-1] if hostname.startswith("[") and hostname.endswith("]") else hostname


def is_internal_hostname(hostname: str) -> bool:
    """``localhost`` and the ``.localhost``/``.local``/``.internal`` names."""
    name = sanitize_hostname(hostname)
    return name == "localhost" or name.endswith((".localhost", ".local", ".internal"))


def ip_literal(hostname: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(sanitize_hostname(hostname))
    except ValueError:
        return None


def is_address_private(address: str) -> bool:
    """Gemini's ``isAddressPrivate`` (names that are not IP literals are not private)."""
    if is_internal_hostname(address):
        return True
    ip = ip_literal(address)
    if ip is None:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        mapped = ip.ipv4_mapped
        if mapped is not None:
            return is_address_private(str(mapped))
        return any(ip in net for net in _IPV6_NOT_UNICAST)
    return any(ip in net for net in _IPV4_NOT_UNICAST)


__all__ = [
    "InvalidUrlError",
    "Url",
    "convert_github_url_to_raw",
    "is_address_private",
    "is_internal_hostname",
    "join_url",
    "normalize_url",
    "parse_prompt",
    "parse_url",
]
