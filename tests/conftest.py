"""Shared test configuration: hypothesis profiles (ci: default; proptest: make proptest;
deep: 10,000 examples)."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "deep",
    max_examples=10_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "proptest",  # make proptest: every property in a few minutes (EXAMPLES=10000: as deep)
    max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES") or 250),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

SHARED = Path(__file__).resolve().parents[1].parent / "shared"

# Messages carry JSON numbers: NaN and infinities are not JSON.
from hypothesis import strategies as _st  # noqa: E402

_st.register_type_strategy(float, _st.floats(allow_nan=False, allow_infinity=False))


@pytest.fixture
def subreaper() -> Iterator[None]:
    """Orphans of the test's process groups become our children, so we can reap them.

    (PID 1 here reaps orphans only about once a second, and a zombie still counts as a
    member of its process group.)
    """
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_child_subreaper = 36
    assert libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0) == 0
    try:
        yield
    finally:
        libc.prctl(pr_set_child_subreaper, 0, 0, 0, 0)


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test hypothesis drives is a property test (``make proptest``: ``-m property``),
    beside those marked ``property`` by hand (the explorer's, whose ``@given`` is inside)."""
    for item in items:
        given = getattr(getattr(item, "obj", None), "is_hypothesis_test", False)
        if given or item.get_closest_marker("hypothesis") is not None:
            item.add_marker(pytest.mark.property)
