"""Shared test configuration: hypothesis profiles (ci: default; deep: make proptest)."""

from __future__ import annotations

import os
from pathlib import Path

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
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

SHARED = Path(__file__).resolve().parents[1].parent / "shared"

# Messages carry JSON numbers: NaN and infinities are not JSON.
from hypothesis import strategies as _st  # noqa: E402

_st.register_type_strategy(float, _st.floats(allow_nan=False, allow_infinity=False))
