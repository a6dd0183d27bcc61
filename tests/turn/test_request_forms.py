"""A request's contents are made from each history content once (``RequestForms``):
the same result as made afresh, and the same objects again for what did not change (the
recorder then writes each content once and a long session's request costs no copy)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from actors.turn._logic import RequestForms, request_contents, user_content
from bus.json_values import freeze, thaw

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
def test_a_shared_cache_gives_what_a_fresh_one_gives(history: list[Any], messages: list[Any]) -> None:
    forms = RequestForms()
    grown: list[Any] = list(history)
    for message in messages:
        shared = request_contents(tuple(grown), message, forms)
        fresh = request_contents(tuple(grown), message)
        assert thaw(shared) == thaw(fresh)
        grown.append(message)


def _call(i: int) -> tuple[Any, Any]:
    call = {"name": "read_file", "args": {"file_path": f"f{i}"}, "id": f"read_file__{i}"}
    model = freeze({"role": "model", "parts": [{"functionCall": call}]})
    return model, freeze({"role": "user", "parts": [{"functionResponse": {**call, "response": {}}}]})


def test_the_same_contents_come_back_as_the_same_objects() -> None:
    """A tool loop: each request is the last one's contents plus a call and its answer."""
    forms = RequestForms()
    history: list[Any] = [user_content([{"text": "read them"}])]
    previous: tuple[Any, ...] = ()
    for i in range(20):
        call, answer = _call(i)
        history.append(call)
        contents = request_contents(tuple(history), answer, forms)
        assert all(a is b for a, b in zip(previous, contents, strict=False))
        previous = contents
        history.append(answer)
    # The request form strips the id prefix and signs the active loop's calls.
    assert thaw(previous[1])["parts"][0]["functionCall"]["id"] == "0"
    assert thaw(previous[1])["parts"][0]["thoughtSignature"] == "skip_thought_signature_validator"
    # A new prompt ends the loop: the old calls go out unsigned again, as Gemini CLI sends them.
    after = request_contents(tuple(history), user_content([{"text": "next"}]), forms)
    assert "thoughtSignature" not in thaw(after[1])["parts"][0]
