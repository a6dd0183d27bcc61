"""A request's contents are made from what each request adds (``RequestBuilder``): the
same result as Gemini CLI's rules applied afresh to the whole history (the reference
below), and the same objects again for what did not change (the recorder then writes
each content once and a long session's request costs no copy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from hypothesis import given
from hypothesis import strategies as st

from actors.turn._logic import (
    INTERRUPTED_TURN,
    RequestBuilder,
    _changed_form,
    _sign,
    _strip_ids,
    is_function_response,
    request_contents,
    user_content,
)
from bus.json_values import FrozenTuple, dumps, freeze, thaw
from tests.turn._session import run_session, stream, text_chunk


def reference_contents(history: list[Any], message: Any) -> list[Any]:
    """Gemini CLI's rules, applied to the whole history at once (plain JSON out)."""
    items = [thaw(c) for c in history]
    if (
        not is_function_response(message["parts"])
        and items
        and items[-1]["role"] == "user"
        and any("functionResponse" in p for p in items[-1]["parts"])
    ):
        items.append(thaw(INTERRUPTED_TURN))
    items.append(thaw(message))
    contents: list[Any] = []
    for c in items:
        if contents and contents[-1]["role"] == c["role"]:
            contents[-1] = {**contents[-1], "parts": [*contents[-1]["parts"], *c["parts"]]}
        else:
            contents.append(c)
    start = -1
    for i, c in enumerate(contents):
        texts = any(p.get("text") for p in c["parts"])
        if c["role"] == "user" and texts and not any(p.get("functionResponse") for p in c["parts"]):
            start = i
    for i, c in enumerate(contents):
        _strip_ids(c)
        if start != -1 and i >= start and c["role"] == "model":
            _sign(c)
    return contents

names = st.sampled_from(["read_file", "glob", ""])
ids = st.one_of(st.none(), st.text(max_size=4), names.map(lambda n: f"{n}__x1"))


@st.composite
def contents(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["prompt", "call", "response", "text"]))
    name = draw(names)
    call: dict[str, Any] = {"name": name, "args": {}}
    call_id = draw(ids)
    if call_id is not None:
        call["id"] = call_id
    if kind == "prompt":
        return freeze({"role": "user", "parts": [{"text": draw(st.text(min_size=1, max_size=5))}]})
    if kind == "call":
        part: dict[str, Any] = {"functionCall": call}
        if draw(st.booleans()):
            part["thoughtSignature"] = "sig"
        return freeze({"role": "model", "parts": [part]})
    if kind == "response":
        return freeze({"role": "user", "parts": [{"functionResponse": {**call, "response": {"output": "ok"}}}]})
    return freeze({"role": "model", "parts": [{"text": draw(st.text(max_size=5))}]})


@given(st.lists(contents(), max_size=12), st.lists(contents(), min_size=1, max_size=4))
def test_a_shared_builder_gives_what_a_fresh_one_gives(history: list[Any], messages: list[Any]) -> None:
    builder = RequestBuilder()
    grown: list[Any] = list(history)
    for message in messages:
        shared = request_contents(tuple(grown), message, builder)
        fresh = request_contents(tuple(grown), message)
        assert thaw(shared) == thaw(fresh) == reference_contents(grown, message)
        grown.append(message)


@given(
    st.lists(
        st.tuples(st.sampled_from(["append", "request", "truncate", "copy", "other"]), contents(), st.integers(0, 12)),
        max_size=30,
    )
)
def test_a_list_that_grows_or_is_replaced_gives_what_the_rules_give(steps: list[tuple[str, Any, int]]) -> None:
    """As the turn's history is used: one list appended to, and a new list for any other
    change (a rollback, a compression, the next turn's)."""
    builder = RequestBuilder()
    log: list[Any] = []
    for op, content, n in steps:
        if op == "append":
            log.append(content)
        elif op == "truncate":
            log = log[: min(n, len(log))]
        elif op == "copy":
            log = [*log, content]
        elif op == "other":
            log = [content, *log[n:]]
        else:
            made = builder.contents(log, content)
            assert isinstance(made, FrozenTuple)
            assert thaw(made) == reference_contents(log, content)


def _call(i: int) -> tuple[Any, Any]:
    call = {"name": "read_file", "args": {"file_path": f"f{i}"}, "id": f"read_file__{i}"}
    model = freeze({"role": "model", "parts": [{"functionCall": call}]})
    return model, freeze({"role": "user", "parts": [{"functionResponse": {**call, "response": {}}}]})


def test_the_same_contents_come_back_as_the_same_objects() -> None:
    """A tool loop: each request is the last one's contents plus a call and its answer."""
    builder = RequestBuilder()
    history: list[Any] = [user_content([{"text": "read them"}])]
    previous: tuple[Any, ...] = ()
    for i in range(20):
        call, answer = _call(i)
        history.append(call)
        contents = request_contents(history, answer, builder)
        assert all(a is b for a, b in zip(previous, contents, strict=False))
        previous = contents
        history.append(answer)
    # The request form strips the id prefix and signs the active loop's calls.
    assert thaw(previous[1])["parts"][0]["functionCall"]["id"] == "0"
    assert thaw(previous[1])["parts"][0]["thoughtSignature"] == "skip_thought_signature_validator"
    # A new prompt ends the loop: the old calls go out unsigned again, as Gemini CLI sends them.
    after = request_contents(history, user_content([{"text": "next"}]), builder)
    assert "thoughtSignature" not in thaw(after[1])["parts"][0]


async def test_every_request_carries_the_config_object_it_was_built_with(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """The session's frozen config goes into each request as it is (not a copy): the
    recorder then knows it by identity and writes it once, the live backend converts
    it once."""
    built = freeze({"systemInstruction": {"parts": [{"text": "be brief"}]}, "temperature": 1})
    entries = [stream(text_chunk("one", finish=True)), stream(text_chunk("two", finish=True))]
    run = await run_session(tmp_path, entries, prompts=("a", "b"), request_config=lambda model: built)
    mains = run.requests("main")
    assert len(mains) == 2
    assert all(r.config is built for r in mains)


def test_a_text_conversation_is_held_once_however_long() -> None:
    """A content the request form would not change (a text turn) goes into the request
    as itself: the builder keeps no copy of it, so a long idle session's memory is its
    history, not its history twice (#20)."""
    builder = RequestBuilder()
    history: list[Any] = []
    for i in range(300):
        prompt = user_content([{"text": f"turn {i}"}])
        contents = request_contents(history, prompt, builder)
        assert all(a is b for a, b in zip(contents, [*history, prompt], strict=True))
        history += [prompt, freeze({"role": "model", "parts": [{"text": f"answer {i}"}]})]
    assert builder.forms.size() == 0


def test_only_the_contents_a_form_changes_are_kept() -> None:
    """A tool loop's call (signed) and answer (id prefix stripped) have forms of their own;
    a call already signed, with an id of no prefix, is its own form in the loop too."""
    builder = RequestBuilder()
    prompt = user_content([{"text": "read it"}])
    call = {"name": "read_file", "args": {}, "id": "c1"}
    signed = freeze({"role": "model", "parts": [{"functionCall": call, "thoughtSignature": "s"}]})
    answer = freeze({"role": "user", "parts": [{"functionResponse": {**call, "response": {}}}]})
    contents = request_contents([prompt, signed], answer, builder)
    assert [c is h for c, h in zip(contents, [prompt, signed, answer], strict=True)] == [True, True, True]
    call2, answer2 = _call(2)
    contents = request_contents([prompt, signed, answer, call2], answer2, builder)
    assert contents[3] is not call2 and contents[4] is not answer2
    assert builder.forms.size() == 2


@given(contents(), st.booleans())
def test_a_changed_form_is_the_content_thawed_changed_and_frozen(content: Any, signed: bool) -> None:
    """Made without a copy, and the same JSON in the same key order as the plain way."""
    plain = thaw(content)
    _strip_ids(plain)
    if signed:
        _sign(plain)
    assert dumps(_changed_form(content, signed)) == dumps(plain)


def test_a_form_shares_what_it_does_not_change() -> None:
    """A tool's output is in the history once: the request form of its answer (the call
    id's prefix stripped) holds the same response object (#20)."""
    call = {"name": "read_file", "args": {"file_path": "f"}, "id": "read_file__1"}
    answer = freeze({"role": "user", "parts": [{"functionResponse": {**call, "response": {"output": "text"}}}]})
    form = RequestBuilder().forms.form(answer, signed=False)
    assert thaw(form)["parts"][0]["functionResponse"]["id"] == "1"
    assert form["parts"][0]["functionResponse"]["response"] is answer["parts"][0]["functionResponse"]["response"]


def test_a_loop_that_ended_leaves_no_signed_forms() -> None:
    """The synthetic signature goes only on the active loop's calls: once a new prompt
    moves the loop on, the signed forms of the old calls are not kept (#20)."""
    builder = RequestBuilder()
    history: list[Any] = []
    for loop in range(20):
        prompt = user_content([{"text": f"prompt {loop}"}])
        request_contents(history, prompt, builder)
        history.append(prompt)
        for i in range(3):
            call, answer = _call(loop * 3 + i)
            history.append(call)
            request_contents(history, answer, builder)
            history.append(answer)
        history.append(freeze({"role": "model", "parts": [{"text": "done"}]}))
    signed = [key for key in builder.forms._forms if key[1]]
    assert len(signed) == 3  # the last loop's calls
