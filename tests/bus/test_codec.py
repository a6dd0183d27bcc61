from __future__ import annotations

import functools
import json
import subprocess
import sys

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bus import CodecError, messages
from bus.codec import Envelope, decode, decode_envelope, encode, encode_envelope
from bus.json_values import JsonValue, freeze
from bus.messages import (
    ALL_MESSAGES,
    ApprovalAnswered,
    BatchSettled,
    CompletedCall,
    ConfigureSession,
    Message,
    TextStreamed,
    ToolCallStatus,
    ToolCallUpdated,
    TurnEnded,
    literal_values,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4).map(tuple)
    | st.dictionaries(st.text(max_size=8), children, max_size=4).map(freeze),
    max_leaves=12,
)
st.register_type_strategy(JsonValue, json_values)


@pytest.mark.parametrize("cls", ALL_MESSAGES, ids=lambda c: c.__name__)
@given(data=st.data())
def test_every_message_round_trips(cls: type, data: st.DataObject) -> None:
    msg = data.draw(st.from_type(cls))
    assert decode(encode(msg)) == msg


# Every attrs class of bus/messages: the messages and the values inside them.
MESSAGE_CLASSES = [
    value
    for module in (messages.session, messages.turn, messages.model, messages.tools, messages.hooks,
                   messages.control, messages.client)
    for value in vars(module).values()
    if attrs.has(value) and value.__module__ == module.__name__
]


@functools.cache
def _attrs_twin(cls: type) -> type:
    """The class as attrs would make it with its own generated methods."""
    return attrs.make_class(cls.__name__, [f.name for f in attrs.fields(cls)], frozen=True)


def test_message_classes_share_their_repr_eq_and_hash() -> None:
    """attrs compiles no ``__repr__``, ``__eq__`` or ``__hash__`` per message class
    (the start-up's cost, issue #20)."""
    assert set(ALL_MESSAGES) <= set(MESSAGE_CLASSES)
    for method in ("__repr__", "__eq__", "__hash__"):
        assert len({getattr(cls, method) for cls in MESSAGE_CLASSES}) == 1, method


@pytest.mark.parametrize("cls", MESSAGE_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=15)  # the same three functions for every class: a few values each
@given(data=st.data())
def test_every_message_shows_and_compares_as_attrs_would(cls: type, data: st.DataObject) -> None:
    twin = _attrs_twin(cls)
    one, other = data.draw(st.from_type(cls)), data.draw(st.from_type(cls))
    same = attrs.evolve(one)
    as_twins = [twin(*(getattr(m, f.name) for f in attrs.fields(cls))) for m in (one, other, same)]
    assert repr(one) == repr(as_twins[0])
    assert (one == other) == (as_twins[0] == as_twins[1])
    assert (one != other) == (as_twins[0] != as_twins[1])
    assert one == same and not one != same and one is not same
    assert hash(one) == hash(same)
    assert one != as_twins[0] and as_twins[0] != one  # another class with the same fields


def test_a_message_inside_itself_shows_as_dots() -> None:
    msg = TextStreamed(session_id="s", turn_id="t", text="x")
    twin = _attrs_twin(TextStreamed)("s", "t", "x")
    object.__setattr__(msg, "text", (msg, "x"))
    object.__setattr__(twin, "text", (twin, "x"))
    assert repr(msg) == repr(twin) == "TextStreamed(session_id='s', turn_id='t', text=(..., 'x'))"


def test_the_daemon_protocol_is_imported_by_its_first_use() -> None:
    """``bus.messages.client`` (a third of the message classes) and the union naming it
    are not imported with the bus (a headless start-up never uses them, issue #20); the
    codec still decodes each of its messages, and its names import as before."""
    code = (
        "import sys\n"
        "import bus, bus.codec, bus.messages\n"
        "assert 'bus.messages.client' not in sys.modules, 'imported with the bus'\n"
        "hello = bus.codec.decode('{\"type\": \"Hello\", \"request_id\": \"r\", \"protocol\": 1}')\n"
        "from bus.messages import ALL_MESSAGES, Hello, Message, PROTOCOL_VERSION\n"
        "assert hello == Hello(request_id='r', protocol=PROTOCOL_VERSION) and Hello in ALL_MESSAGES\n"
        "assert Message.__args__ == ALL_MESSAGES\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_an_unknown_name_of_the_messages_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchMessage"):
        messages.NoSuchMessage  # noqa: B018


@given(st.from_type(TextStreamed), st.integers(1, 10**9))
def test_envelope_round_trips_with_extra_fields(msg: Message, seq: int) -> None:
    env = Envelope(seq=seq, session_id=msg.session_id, sender="a", recipient=None, message=msg)
    line = encode_envelope(env, wall="2026-01-01T00:00:00.000Z")
    back, raw = decode_envelope(line)
    assert back == env
    assert raw["wall"] == "2026-01-01T00:00:00.000Z"


def test_tag_is_written_for_union_members() -> None:
    data = json.loads(encode(TextStreamed(session_id="s", turn_id="t", text="hi")))
    assert data["type"] == "TextStreamed"


def test_nested_payloads_keep_gemini_wire_shape() -> None:
    call = CompletedCall(
        call_id="c",
        name="read_file",
        response_parts=[{"functionResponse": {"id": "c", "name": "read_file", "response": {"output": "x"}}}],
    )
    data = json.loads(encode(BatchSettled(session_id="s", batch_id="b", calls=(call,))))
    assert data["calls"][0]["response_parts"][0]["functionResponse"]["response"] == {"output": "x"}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{not json", "malformed JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"type": "NoSuchMessage"}', "unknown message type 'NoSuchMessage'"),
        ('{"type": "TextStreamed", "session_id": "s"}', "missing field 'turn_id'"),
        ('{"type": "TextStreamed", "session_id": "s", "turn_id": "t", "text": "x", "extra": 1}', "Extra fields"),
    ],
)
def test_bad_input_raises_one_project_error(text: str, needle: str) -> None:
    with pytest.raises(CodecError) as info:
        decode(text, where="rec.jsonl:3")
    assert needle in str(info.value)
    assert str(info.value).startswith("rec.jsonl:3: ")


def test_newer_format_version_is_refused_clearly() -> None:
    env = Envelope(seq=1, session_id="s", sender="a", recipient=None, message=TextStreamed(session_id="s", turn_id="t", text="x"))
    data = json.loads(encode_envelope(env))
    data["v"] = 99
    with pytest.raises(CodecError, match="newer than this agentbus reads"):
        decode_envelope(json.dumps(data))


def test_frozen_payloads_are_immutable() -> None:
    call = CompletedCall(call_id="c", name="n", args={"a": [1, 2]})
    with pytest.raises(TypeError):
        call.args["a"] = 3  # type: ignore[index]
    assert call.args["a"] == (1, 2)


@pytest.mark.parametrize(
    ("msg", "field", "path"),
    [
        (TurnEnded(session_id="s", turn_id="t", stop_reason="goal"), "stop_reason", "stop_reason"),
        (ConfigureSession(session_id="s", request_id="r", approval_mode="plan"), "approval_mode", "approval_mode"),
        (ApprovalAnswered(session_id="s", correlation_id="c", outcome="cancel", answered_by="x"), "outcome", "outcome"),
        (
            BatchSettled(session_id="s", batch_id="b", calls=(CompletedCall(call_id="c", name="n", status="error"),)),
            "status",
            "calls[0].status",
        ),
    ],
)
def test_a_word_outside_its_set_is_refused_naming_the_field_and_the_words(msg: Message, field: str, path: str) -> None:
    """Statuses, modes, reasons and outcomes are closed sets: the codec refuses any
    other word (or a non-string) in one line that names the field and the valid words."""
    data = json.loads(encode(msg))
    holder = data["calls"][0] if path.startswith("calls") else data
    for bad in ("no_such_word", 7, ""):
        holder[field] = bad
        with pytest.raises(CodecError) as info:
            decode(json.dumps(data), where="rec.jsonl:9")
        text = str(info.value)
        assert text.startswith(f"rec.jsonl:9: invalid {type(msg).__name__}: {path}: {bad!r} is not one of ")
        assert "\n" not in text


def test_literal_words_are_written_and_read_as_plain_strings() -> None:
    updated = ToolCallUpdated(session_id="s", batch_id="b", call_id="c", name="n", status="awaiting_approval")
    assert json.loads(encode(updated))["status"] == "awaiting_approval"
    assert decode(encode(updated)) == updated
    assert literal_values(ToolCallStatus) == (
        "validating", "scheduled", "awaiting_approval", "executing", "success", "error", "cancelled"
    )
