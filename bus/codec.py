"""The only code that knows the wire format: one cattrs converter, JSON text.

A message encodes as a JSON object with a ``type`` tag (the class name) and its fields;
Gemini payloads stay in their REST shape. An envelope adds the routing data around it.
Decoding failures of any kind (malformed JSON, unknown tag, wrong field) raise
``CodecError``, never a bare ``KeyError`` or ``ValueError``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

import attrs
import cattrs

from .errors import CodecError
from .json_values import JsonValue, freeze, thaw

if TYPE_CHECKING:
    # At run time the union is imported by the first decoding: it names the daemon's
    # protocol, which a headless run never uses (``bus.messages``).
    from .messages import Message

FORMAT_VERSION = 1
"""Version of the envelope format written to recordings and sockets."""


@attrs.frozen(kw_only=True)
class Envelope:
    """A message as the bus delivered it."""

    seq: int
    """Per-session sequence number, gap-free from 1."""
    session_id: str
    sender: str
    """Address of the sending actor or client."""
    recipient: str | None
    """Address it was sent to; None for a pure event (observers only)."""
    message: Message


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook_func(lambda t: t is JsonValue, lambda v, _t: freeze(v))
    conv.register_unstructure_hook_func(lambda t: t is JsonValue, thaw)
    conv.register_structure_hook_func(_is_literal, _structure_word)
    # A field takes a value of its own type, not one cattrs would convert (``str(None)``
    # is "None", ``int("5")`` is 5): a client's frame of the wrong type is refused.
    conv.register_structure_hook(str, _structure_exactly)
    conv.register_structure_hook(bool, _structure_exactly)
    conv.register_structure_hook(int, _structure_int)
    conv.register_structure_hook(float, _structure_float)
    return conv


def _structure_exactly(value: Any, kind: type) -> Any:
    if value.__class__ is kind:
        return value
    raise TypeError(f"{value!r} is not a {kind.__name__}")


def _structure_int(value: Any, _kind: type) -> int:
    if value.__class__ is int:
        return value  # type: ignore[no-any-return]
    raise TypeError(f"{value!r} is not an integer")


def _structure_float(value: Any, _kind: type) -> float:
    if value.__class__ in (float, int):
        return float(value)
    raise TypeError(f"{value!r} is not a number")


def _is_literal(kind: Any) -> bool:
    return get_origin(kind) is Literal


def _structure_word(value: Any, kind: Any) -> Any:
    """A field of a ``Literal`` type (a status, a mode, a reason...) takes one of its
    words and nothing else."""
    words = get_args(kind)
    if value.__class__ is str and value in words:
        return value
    raise ValueError(f"{value!r} is not one of {', '.join(repr(w) for w in words)}")


converter = _make_converter()
"""The one converter. The union is tagged by hand (``type`` = class name) rather than
with ``configure_tagged_union`` so that per-class hooks are generated on first use:
a short headless run then pays only for the messages it sends."""

_BY_TAG: dict[str, type] = {}
"""Every message class by its tag, filled by the first decoding."""


def _message_class(tag: str) -> type | None:
    if not _BY_TAG:
        from .messages import ALL_MESSAGES

        _BY_TAG.update((cls.__name__, cls) for cls in ALL_MESSAGES)
    return _BY_TAG.get(tag)


def to_plain(msg: Message) -> dict[str, Any]:
    """Unstructure one message into plain JSON data (with its ``type`` tag)."""
    out: dict[str, Any] = converter.unstructure(msg)
    out["type"] = type(msg).__name__
    return out


def from_plain(data: Any, *, where: str | None = None) -> Message:
    """Structure plain JSON data into a message; raises ``CodecError``."""
    if not isinstance(data, dict):
        raise CodecError(f"a message must be a JSON object, got {type(data).__name__}", where=where)
    tag = data.get("type")
    cls = _message_class(tag) if isinstance(tag, str) else None
    if cls is None:
        raise CodecError(f"unknown message type {tag!r}", where=where)
    fields = {k: v for k, v in data.items() if k != "type"}
    try:
        msg: Message = converter.structure(fields, cls)
    except Exception as exc:  # cattrs raises ClassValidationError/KeyError/TypeError...
        raise CodecError(f"invalid {tag}: {_describe(exc)}", where=where) from None
    return msg


def encode(msg: Message) -> str:
    """One message as compact JSON text."""
    return _dumps(to_plain(msg))


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""``json.dumps`` with these arguments makes an encoder per call; this one is made once."""


def _dumps(data: Any) -> str:
    try:
        return _ENCODER.encode(data)
    except ValueError as exc:  # NaN/Infinity are not JSON
        raise CodecError(f"cannot encode: {exc}") from None


def decode(text: str | bytes, *, where: str | None = None) -> Message:
    """Parse one message from JSON text; raises ``CodecError``."""
    return from_plain(_loads(text, where), where=where)


def envelope_to_plain(env: Envelope, **extra: Any) -> dict[str, Any]:
    """Unstructure an envelope; ``extra`` keys (e.g. a wall timestamp) are added."""
    out: dict[str, Any] = {
        "v": FORMAT_VERSION,
        "seq": env.seq,
        "session_id": env.session_id,
        "sender": env.sender,
        "to": env.recipient,
    }
    out.update(extra)
    out["msg"] = to_plain(env.message)
    return out


def encode_envelope(env: Envelope, **extra: Any) -> str:
    return _dumps(envelope_to_plain(env, **extra))


def decode_envelope(text: str | bytes, *, where: str | None = None) -> tuple[Envelope, dict[str, Any]]:
    """Parse an envelope line; returns it with the raw dict (for extra keys)."""
    data = _loads(text, where)
    if not isinstance(data, dict):
        raise CodecError("an envelope must be a JSON object", where=where)
    version = data.get("v")
    if version != FORMAT_VERSION:
        if isinstance(version, int) and version > FORMAT_VERSION:
            raise CodecError(
                f"format version {version} is newer than this agentbus reads ({FORMAT_VERSION})",
                where=where,
            )
        raise CodecError(f"unsupported format version {version!r}", where=where)
    return envelope_from_plain(data, where=where), data


def envelope_from_plain(data: dict[str, Any], *, where: str | None = None) -> Envelope:
    """Structure an envelope from parsed JSON data whose version the caller checked
    (the recorder's reader: its lines may be of a later recording format)."""
    try:
        seq = data["seq"]
        session_id = data["session_id"]
        sender = data["sender"]
        recipient = data.get("to")
        raw_msg = data["msg"]
    except KeyError as exc:
        raise CodecError(f"envelope lacks {exc.args[0]!r}", where=where) from None
    if not isinstance(seq, int) or not isinstance(session_id, str) or not isinstance(sender, str):
        raise CodecError("envelope fields have wrong types", where=where)
    return Envelope(
        seq=seq,
        session_id=session_id,
        sender=sender,
        recipient=recipient,
        message=from_plain(raw_msg, where=where),
    )


def _loads(text: str | bytes, where: str | None) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        # ValueError: malformed JSON, bytes that are not UTF-8, an integer longer than
        # Python converts (4,300 digits); RecursionError: nesting deeper than the stack.
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise CodecError(f"malformed JSON: {why}", where=where) from None


def _describe(exc: BaseException, where: str = "") -> str:
    """One line: each failing field with its path (``calls[0].status: ...``)."""
    if isinstance(exc, cattrs.BaseValidationError):
        leaves = []
        for sub in exc.exceptions:
            step = next((_step(n) for n in getattr(sub, "__notes__", ()) if _step(n) is not None), "")
            leaves.append(_describe(sub, f"{where}.{step}".strip(".").replace(".[", "[") if step else where))
        return "; ".join(leaves) or str(exc)
    if isinstance(exc, KeyError):
        return f"missing field {(where or exc.args[0])!r}"  # cattrs' note names the field
    text = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
    return f"{where}: {text}" if where else text


def _step(note: Any) -> str | None:
    """The field name or index a cattrs note names (``None``: not such a note)."""
    if isinstance(note, cattrs.AttributeValidationNote):
        return str(note.name)
    if isinstance(note, cattrs.IterableValidationNote):
        return f"[{note.index}]"
    return None
