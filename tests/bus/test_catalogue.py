from pathlib import Path

from bus.catalogue import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "messages.md"


def test_committed_catalogue_matches_the_code() -> None:
    assert DOC.read_text(encoding="utf-8") == render(), (
        "docs/messages.md is stale: run `python -m bus.catalogue > docs/messages.md`"
    )
