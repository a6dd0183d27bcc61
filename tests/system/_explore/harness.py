"""Moved to ``actors.frontends.explore`` (its public names): kept for old imports."""

from actors.frontends.explore import *  # noqa: F403
