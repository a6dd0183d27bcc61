"""TCP for the daemon: only when asked, and then only with a token.

``agentbus daemon --listen-tcp [HOST:]PORT`` opens a TCP listener beside the Unix
socket. Its clients must present the daemon's token in ``Hello`` (their first frame):
a missing or wrong token, or anything else before a valid ``Hello``, is answered with a
fatal ``ProtocolError`` and the connection is closed. The token is generated (32 random
bytes, URL-safe text) or read from ``--token-file``, and written to ``daemon.token`` in
the daemon's private directory (mode 0600), where local clients find it; it is removed
when the daemon stops.

The host defaults to ``127.0.0.1``. A host that is not a loopback address (``0.0.0.0``,
a LAN address, a name resolving to one) is refused unless ``--allow-remote`` is given
as well: the protocol has no TLS, so the token and everything else would cross the
network in clear text (an SSH tunnel to a loopback listener is the better way).

Clients name a TCP daemon ``tcp://HOST:PORT`` (``[V6]:PORT`` for IPv6 literals).
Standard library only: the client library imports this module.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import attrs

DEFAULT_HOST = "127.0.0.1"
TOKEN_BYTES = 32
MAX_TOKEN_FILE = 4096


class TcpConfigError(ValueError):
    """A TCP address, listener or token that cannot be used (the message says why)."""


@attrs.frozen(kw_only=True)
class TcpListen:
    """What the daemon's TCP listener binds and requires."""

    host: str = DEFAULT_HOST
    port: int = 0
    """0: a free port (the daemon reports the one it got)."""
    token: str = ""
    """The token clients must present; empty: a new random one."""
    allow_remote: bool = False
    """Allow a host that is not a loopback address."""


@attrs.frozen(kw_only=True)
class TcpAddress:
    """Where a client finds a daemon over TCP, and the token it presents."""

    host: str
    port: int
    token: str = ""

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp://{host}:{self.port}"


def parse_host_port(text: str, *, default_host: str | None = None) -> tuple[str, int]:
    """``HOST:PORT``, ``[V6]:PORT``, or ``PORT`` alone when ``default_host`` is given."""
    text = text.strip()
    if default_host is not None and text.isdigit():
        return default_host, _port(text, text)
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise TcpConfigError(f"{text!r}: expected [ADDRESS]:PORT")
        return host, _port(rest[1:], text)
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise TcpConfigError(f"{text!r}: expected HOST:PORT")
    if ":" in host:
        raise TcpConfigError(f"{text!r}: write an IPv6 address in brackets, [ADDRESS]:PORT")
    return host, _port(port, text)


def _port(text: str, whole: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise TcpConfigError(f"{whole!r}: the port must be a number from 0 to 65535")
    return int(text)


def parse_daemon_url(url: str) -> tuple[str, int]:
    """``tcp://HOST:PORT`` -> (host, port)."""
    parts = urlsplit(url.strip())
    if parts.scheme != "tcp" or not parts.netloc or parts.path not in ("", "/") or parts.query or parts.fragment:
        raise TcpConfigError(f"{url!r}: expected tcp://HOST:PORT")
    host, port = parse_host_port(parts.netloc)
    if port == 0:
        raise TcpConfigError(f"{url!r}: the port must not be 0")
    return host, port


def all_loopback(addresses: Iterable[str]) -> bool:
    """Every address (an IP literal, maybe with a ``%zone``) is a loopback address; an
    empty list is not."""
    seen = False
    for address in addresses:
        seen = True
        try:
            if not ipaddress.ip_address(address.split("%", 1)[0]).is_loopback:
                return False
        except ValueError:
            return False
    return seen


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def read_token_file(path: Path, *, private: bool = False) -> str:
    """The token in ``path`` (surrounding whitespace removed). With ``private``, the
    file must not be readable by group or others (the daemon's ``--token-file``: it
    grants running commands as this user)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise TcpConfigError(f"cannot read the token file {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TcpConfigError(f"the token file {path} is not a regular file")
        if private and info.st_mode & 0o077:
            raise TcpConfigError(
                f"the token file {path} is readable by others (mode {stat.S_IMODE(info.st_mode):o}); chmod 600 it"
            )
        raw = os.read(fd, MAX_TOKEN_FILE + 1)
    finally:
        os.close(fd)
    if len(raw) > MAX_TOKEN_FILE:
        raise TcpConfigError(f"the token file {path} is longer than {MAX_TOKEN_FILE} bytes")
    try:
        token = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise TcpConfigError(f"the token file {path} is not UTF-8 text") from None
    if not token or any(c.isspace() for c in token):
        raise TcpConfigError(f"the token file {path} must hold one token (no spaces)")
    return token


@contextlib.contextmanager
def token_file(path: Path, token: str | None) -> Iterator[None]:
    """Hold ``token`` in ``path`` (mode 0600) for the ``with`` block; with None, remove
    a stale file a daemon that died left behind. Call it holding the daemon lock."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    if token is None:
        yield
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, f"{token}\n".encode())
    finally:
        os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
