"""A model's JSON answer, fenced or not (``actors.common.json_answer``)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from actors.common import json_answer

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(values, st.sampled_from(["{}", "```json\n{}\n```", "```\n{}\n```", "  {}  "]))
def test_a_value_reads_back_fenced_or_not(value: object, frame: str) -> None:
    assert json_answer(frame.replace("{}", json.dumps(value))) == value


def test_what_is_not_json_is_none() -> None:
    assert json_answer("the next speaker is the user") is None
    assert json_answer("[" * 100_000) is None  # nested past the parser
