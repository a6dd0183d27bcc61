"""What ``--check`` compares, and what it deliberately does not (pure; no trio).

Two messages are the same when their envelopes agree on sender, recipient, sequence
number (recorded-tools replays) and the message, after these normalisations:

1. **Fresh ids are compared up to renaming.** ``turn_id``, ``request_id``, ``batch_id``
   and ``correlation_id`` are minted by ``bus.messages.new_id()`` (UUID4) at run time,
   so no two runs share them. Each side's values are replaced, per field name, by
   labels in order of first appearance (``request_id#3``). This is a consistent
   renaming, not a wildcard: a replay that answers the wrong request, or reuses a turn
   id, still differs. Every other id (session ids, prompt ids, call ids) must be equal:
   they come from the client or the model, or (calls without an id) from the injected
   wall clock.
2. **Measured durations are ignored**: ``latency_ms`` (``ModelFinished``) and
   ``duration_ms`` (``ToolFinished``, ``CompletedCall``). They measure the recording
   machine's real time; a replay runs on trio's virtual clock.
3. **Secrets**: the replayed message is scrubbed exactly as the recorder scrubs, so a
   live tool that prints a key matches its ``[REDACTED]`` recording.

4. **The workspace root, in live-tools replays**: tools then run in a fresh copy of the
   workspace, so the copy's absolute path in their output is replaced by the recorded
   workspace's path before comparing.

5. **Fields added after a recording was made**: ``LATER_FIELDS`` (the model a batch
   runs for, the approval mode and model a tool call runs in) are compared only when the
   recording has them; an older recording has their empty default there.

Wall timestamps are outside the messages (the recording's ``wall`` key), so they never
take part.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from actors.recording import Scrubber
from bus import Envelope
from bus.codec import to_plain

ID_FIELDS = frozenset({"turn_id", "request_id", "batch_id", "correlation_id"})
"""Fields holding ids minted by ``new_id()`` during the run."""

TIMING_FIELDS = frozenset({"duration_ms", "latency_ms"})
"""Fields holding measured elapsed time."""

LATER_FIELDS: dict[str, tuple[str, ...]] = {
    "ScheduleBatch": ("model",),
    "RunTool": ("approval_mode", "model", "client_initiated"),
}
"""Message type -> fields added after the first recordings (empty when absent)."""


class IdLabels:
    """One side's renaming of fresh ids to labels, in order of first appearance."""

    def __init__(self) -> None:
        self._label: dict[tuple[str, str], str] = {}
        self._value: dict[str, str] = {}
        self._count: dict[str, int] = {}

    def label(self, kind: str, value: str) -> str:
        key = (kind, value)
        found = self._label.get(key)
        if found is None:
            n = self._count.get(kind, 0) + 1
            self._count[kind] = n
            found = self._label[key] = f"{kind}#{n}"
            self._value[found] = value
        return found

    def peek(self, kind: str, value: str) -> str | None:
        return self._label.get((kind, value))

    def value_of(self, label: str) -> str | None:
        return self._value.get(label)


def normalise(data: Any, labels: IdLabels) -> Any:
    """``data`` (plain JSON of a message) with fresh ids labelled and durations removed."""
    if isinstance(data, Mapping):
        out: dict[str, Any] = {}
        for k, v in data.items():
            if k in TIMING_FIELDS:
                continue
            if k in ID_FIELDS and isinstance(v, str):
                out[k] = labels.label(k, v)
            else:
                out[k] = normalise(v, labels)
        return out
    if isinstance(data, list | tuple):
        return [normalise(v, labels) for v in data]
    return data


def translate(data: Any, source: IdLabels, target: IdLabels) -> Any:
    """Recorded plain data with its fresh ids replaced by the ids the replay minted for
    the same labels (ids the replay has not minted yet stay as recorded)."""
    if isinstance(data, Mapping):
        out: dict[str, Any] = {}
        for k, v in data.items():
            if k in ID_FIELDS and isinstance(v, str):
                label = source.label(k, v)
                out[k] = target.value_of(label) or v
            else:
                out[k] = translate(v, source, target)
        return out
    if isinstance(data, list | tuple):
        return [translate(v, source, target) for v in data]
    return data


@attrs.frozen
class Normalised:
    """An envelope as ``--check`` compares it."""

    seq: int | None
    sender: str
    recipient: str | None
    message: Any

    def render(self) -> str:
        head = f"seq {self.seq} " if self.seq is not None else ""
        body = json.dumps(self.message, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
        return f"{head}{self.sender} -> {self.recipient or '(observers)'}: {body}"


def normalised(
    env: Envelope,
    labels: IdLabels,
    *,
    scrubber: Scrubber | None = None,
    with_seq: bool = True,
    moved: tuple[str, str] | None = None,
) -> Normalised:
    plain = to_plain(env.message)
    if scrubber is not None and scrubber.needs(json.dumps(plain, ensure_ascii=False)):
        plain = scrubber.scrub(plain)
    if moved is not None and moved[0] != moved[1]:
        plain = _replace_text(plain, moved[0], moved[1])
    return Normalised(
        seq=env.seq if with_seq else None,
        sender=env.sender,
        recipient=env.recipient,
        message=normalise(plain, labels),
    )


def forgive_later_fields(want: Normalised, got: Normalised) -> Normalised:
    """``got`` with the ``LATER_FIELDS`` the recording (``want``) predates set to their
    recorded empty value."""
    recorded, replayed = want.message, got.message
    if not isinstance(recorded, Mapping) or not isinstance(replayed, Mapping):
        return got
    fields = LATER_FIELDS.get(str(recorded.get("type")), ())
    missing = [f for f in fields if recorded.get(f) in ("", False) and replayed.get(f) not in ("", None, False)]
    if not missing:
        return got
    return attrs.evolve(got, message={**replayed, **{f: recorded[f] for f in missing}})


def _replace_text(data: Any, old: str, new: str) -> Any:
    if isinstance(data, str):
        return data.replace(old, new)
    if isinstance(data, Mapping):
        return {k: _replace_text(v, old, new) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_replace_text(v, old, new) for v in data]
    return data


def schedule_key(message: Any, sender: str, recipient: str | None) -> tuple[str, str | None, str, str | None]:
    """What orders the replay: who sends what kind of message to whom (about which call).

    The gate admits the replay's messages in the recorded order of these keys; their
    contents are compared separately (``--check``), so a live replay whose tool output
    differs still runs to the end.
    """
    call_id = getattr(message, "call_id", None)
    return (sender, recipient, type(message).__name__, call_id if isinstance(call_id, str) else None)
