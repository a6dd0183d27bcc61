from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ._helpers import PidPipe


@pytest.fixture
def pid_pipe() -> Iterator[Callable[[Path], PidPipe]]:
    """Opens ``PidPipe``s, closed after the test."""
    pipes: list[PidPipe] = []

    def open_pipe(path: Path) -> PidPipe:
        pipe = PidPipe(path)
        pipes.append(pipe)
        return pipe

    yield open_pipe
    for pipe in pipes:
        pipe.close()
