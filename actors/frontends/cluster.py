"""``agentbus cluster``: sessions in a cluster on NATS JetStream (issue 22; docs/cluster.md).

    agentbus cluster export SESSION_ID --cluster URL [-o FILE]
                               the session's recording from the cluster's stream, in the
                               local recording format (``agentbus replay`` reads it);
                               stdout unless ``-o``

The connection options (``--cluster`` and its credentials) are those of ``agentbus daemon
--cluster`` (``add_cluster_arguments``): NATS's user and password, a token, an nkey seed
file, TLS files. Secrets are better passed in the environment than on a command line
that ``ps`` shows: ``AGENTBUS_CLUSTER_PASSWORD``, ``AGENTBUS_CLUSTER_TOKEN``.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trio

PASSWORD_ENV = "AGENTBUS_CLUSTER_PASSWORD"
TOKEN_ENV = "AGENTBUS_CLUSTER_TOKEN"


class ClusterArgsError(Exception):
    """Cluster options that do not go together, or a file that cannot be read."""


def add_cluster_arguments(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    p.add_argument(
        "--cluster",
        metavar="URL",
        required=required,
        help="a NATS server with JetStream (nats://HOST:PORT; several, comma-separated: a cluster's servers)",
    )
    p.add_argument("--cluster-user", metavar="NAME", help="the NATS user")
    p.add_argument(
        "--cluster-password", metavar="PASSWORD", help=f"the NATS user's password (better: ${PASSWORD_ENV})"
    )
    p.add_argument(
        "--cluster-token-file", metavar="FILE", help=f"a file holding the NATS token (or ${TOKEN_ENV})"
    )
    p.add_argument("--cluster-nkey", metavar="SEED_FILE", help="a file holding the NATS user's nkey seed (SU...)")
    p.add_argument("--cluster-tls-ca", metavar="FILE", help="the CA certificate the servers' TLS certificates are checked with")
    p.add_argument("--cluster-tls-cert", metavar="FILE", help="this client's TLS certificate (mutual TLS)")
    p.add_argument("--cluster-tls-key", metavar="FILE", help="this client's TLS key (with --cluster-tls-cert)")


_CREDENTIAL_FLAGS = (
    "cluster_user",
    "cluster_password",
    "cluster_token_file",
    "cluster_nkey",
    "cluster_tls_ca",
    "cluster_tls_cert",
    "cluster_tls_key",
)


def credentials_from(args: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, str] | None:
    """The credentials the options and environment give, as ``actors.cluster.Credentials``'
    fields; None without ``--cluster``. Raises ``ClusterArgsError``."""
    if not args.cluster:
        given = [f"--{name.replace('_', '-')}" for name in _CREDENTIAL_FLAGS if getattr(args, name, None)]
        if given:
            raise ClusterArgsError(f"{', '.join(given)} go(es) with --cluster")
        return None
    token = environ.get(TOKEN_ENV, "")
    if args.cluster_token_file:
        try:
            token = Path(args.cluster_token_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ClusterArgsError(f"cannot read the token file {args.cluster_token_file}: {exc.strerror or exc}") from None
    for flag in ("cluster_nkey", "cluster_tls_ca", "cluster_tls_cert", "cluster_tls_key"):
        name = getattr(args, flag)
        if name and not Path(name).is_file():
            raise ClusterArgsError(f"--{flag.replace('_', '-')} {name}: no such file")
    if args.cluster_tls_key and not args.cluster_tls_cert:
        raise ClusterArgsError("--cluster-tls-key goes with --cluster-tls-cert")
    return {
        "user": args.cluster_user or "",
        "password": args.cluster_password or environ.get(PASSWORD_ENV, ""),
        "token": token,
        "nkey_seed_file": args.cluster_nkey or "",
        "tls_ca_file": args.cluster_tls_ca or "",
        "tls_cert_file": args.cluster_tls_cert or "",
        "tls_key_file": args.cluster_tls_key or "",
    }


_SETTINGS = {
    "url": ("cluster", str),
    "user": ("cluster_user", str),
    "tokenFile": ("cluster_token_file", str),
    "nkeyFile": ("cluster_nkey", str),
    "tlsCa": ("cluster_tls_ca", str),
    "tlsCert": ("cluster_tls_cert", str),
    "tlsKey": ("cluster_tls_key", str),
    "replicas": ("cluster_replicas", int),
    "leaseTtl": ("cluster_lease_ttl", float),
    "serve": ("cluster_serve", list),
}
"""``agentbus.cluster`` in the user's settings.json: key -> (the daemon's option, type).
Passwords are not settings (``$AGENTBUS_CLUSTER_PASSWORD``)."""


def apply_settings(args: argparse.Namespace, settings: Mapping[str, Any], where: str) -> None:
    """Fill the daemon's cluster options the command line left out from the user's
    settings (``agentbus.cluster`` and ``agentbus.workers`` of ``where``; Gemini CLI
    passes keys it does not know through). The command line wins: ``--workers`` or
    ``--cluster`` given, the settings' cluster is not used. Raises ``ClusterArgsError``
    naming the setting that is wrong."""
    section = settings.get("agentbus")
    if section is None:
        return
    if not isinstance(section, Mapping):
        raise ClusterArgsError(f"{where}: agentbus must be an object")
    cluster = section.get("cluster", {})
    workers = section.get("workers")
    if not isinstance(cluster, Mapping):
        raise ClusterArgsError(f"{where}: agentbus.cluster must be an object")
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool)):
        raise ClusterArgsError(f"{where}: agentbus.workers must be a number")
    if workers is not None and cluster.get("url"):
        raise ClusterArgsError(f"{where}: agentbus.workers and agentbus.cluster.url do not go together")
    if args.cluster or args.workers is not None:
        return  # the command line chose
    unknown = sorted(set(cluster) - set(_SETTINGS))
    if unknown:
        raise ClusterArgsError(f"{where}: agentbus.cluster.{unknown[0]} is not a setting (known: {', '.join(_SETTINGS)})")
    if workers is not None:
        args.workers = workers
        return
    for key, (option, kind) in _SETTINGS.items():
        if key not in cluster:
            continue
        value: Any = cluster[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)  # JSON's 10 for 10.0
        if not isinstance(value, kind) or isinstance(value, bool) or (isinstance(value, list) and not all(isinstance(v, str) for v in value)):
            raise ClusterArgsError(f"{where}: agentbus.cluster.{key} must be {'a list of paths' if kind is list else kind.__name__}")
        if key in ("tokenFile", "nkeyFile", "tlsCa", "tlsCert", "tlsKey"):
            value = str(Path(str(value)).expanduser())
        default = {"cluster_replicas": 1, "cluster_serve": None}.get(option)
        if getattr(args, option, None) in (None, default):
            setattr(args, option, value)


def credentials(fields: Mapping[str, str]) -> Any:
    """``actors.cluster.Credentials`` of ``credentials_from``'s fields (imports nats-py)."""
    from actors.cluster import Credentials

    return Credentials(**fields)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentbus cluster",
        description="Sessions in a cluster on NATS JetStream (agentbus daemon --cluster URL; docs/cluster.md).",
    )
    p.add_argument(
        "command",
        choices=("export",),
        help="export: a session's recording from the cluster's stream, in the local format (agentbus replay reads it)",
    )
    p.add_argument("session_id", metavar="SESSION_ID", help="the session")
    p.add_argument("-o", "--output", metavar="FILE", help="write it here (default: stdout)")
    p.add_argument("--user", help="whose session (default: this user, as the daemon names it)")
    add_cluster_arguments(p, required=True)
    return p


def main(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> int:
    import os

    args = build_parser().parse_args(list(argv))
    try:
        fields = credentials_from(args, os.environ if environ is None else environ)
    except ClusterArgsError as exc:
        sys.stderr.write(f"agentbus cluster: {exc}\n")
        return 2
    assert fields is not None
    try:
        from actors.cluster import ClusterError
    except ImportError as exc:
        sys.stderr.write(f"agentbus cluster: needs nats-py: pip install 'agentbus[cluster]' ({exc})\n")
        return 1
    try:
        count = trio.run(_export, args.cluster, credentials(fields), args.user or getpass.getuser(), args.session_id, args.output)
    except ClusterError as exc:
        sys.stderr.write(f"agentbus cluster: {exc}\n")
        return 1
    except OSError as exc:
        sys.stderr.write(f"agentbus cluster: cannot write {args.output}: {exc.strerror or exc}\n")
        return 1
    if count == 0:
        sys.stderr.write(f"agentbus cluster: no session {args.session_id!r} in the cluster at {args.cluster}\n")
        return 1
    if args.output:
        sys.stderr.write(f"agentbus cluster: {count} line(s) of session {args.session_id} written to {args.output}\n")
    return 0


async def _export(url: str, creds: Any, user: str, session_id: str, output: str | None) -> int:
    from actors.cluster import Journal, open_link

    async with open_link(url, creds, name="agentbus cluster export") as link:
        lines = await Journal(link, user, session_id).lines()
    data = b"".join(line + b"\n" for _, line in lines)
    if not lines:
        return 0
    if output:
        await trio.Path(output).write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    return len(lines)


__all__ = ["ClusterArgsError", "add_cluster_arguments", "build_parser", "credentials", "credentials_from", "main"]
