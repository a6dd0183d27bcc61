"""The tool call's transition table (``actors/scheduler/_call_state.py``), alone."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.scheduler._call_state import (
    TRANSITIONS,
    CallState,
    CallStateError,
    advance,
    is_terminal,
)
from bus.messages import TERMINAL_STATES, ToolCallStatus, literal_values

STATUSES: tuple[ToolCallStatus, ...] = literal_values(ToolCallStatus)  # type: ignore[assignment]


def test_the_table_names_every_state_and_only_terminal_states_are_dead_ends() -> None:
    assert set(TRANSITIONS) == {"new", *STATUSES}
    for state, targets in TRANSITIONS.items():
        assert (not targets) == (state in TERMINAL_STATES), state
        assert "new" not in targets  # nothing goes back to unannounced


@given(st.lists(st.sampled_from(STATUSES), max_size=12))
def test_a_move_is_taken_exactly_when_the_table_allows_it(moves: list[ToolCallStatus]) -> None:
    state: CallState = "new"
    for move in moves:
        if move in TRANSITIONS[state]:
            state = advance("c", state, move)
            assert state == move
        else:
            with pytest.raises(CallStateError, match=f"'c' cannot move from {state} to {move}"):
                advance("c", state, move)


@given(st.data())
def test_every_legal_sequence_reaches_a_terminal_state_within_five_moves(data: st.DataObject) -> None:
    """Walk the table choosing any allowed move: no cycle, so every walk ends, and it
    ends only in success, error or cancelled."""
    state: CallState = "new"
    moves = 0
    while TRANSITIONS[state]:
        state = advance("c", state, data.draw(st.sampled_from(sorted(TRANSITIONS[state]))))
        moves += 1
        assert moves <= 5
    assert is_terminal(state)


def test_a_settled_call_never_moves_again() -> None:
    for end in TERMINAL_STATES:
        for move in STATUSES:
            with pytest.raises(CallStateError):
                advance("c", end, move)
