from pathlib import Path

from bus.catalogue import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "messages.md"


def test_committed_catalogue_matches_the_code() -> None:
    assert DOC.read_text(encoding="utf-8") == render(), (
        "docs/messages.md is stale: run `python -m bus.catalogue > docs/messages.md`"
    )


def test_the_catalogue_reads_the_same_once_the_types_are_resolved() -> None:
    """cattrs resolves the messages' annotations when it first structures one; the page
    must not change with what ran before it (it did: CI rendered ``Literal[...]``)."""
    import subprocess
    import sys

    code = (
        "import attrs, sys\n"
        "from bus import messages\n"
        "from bus.catalogue import render\n"
        "before = render()\n"
        "for cls in messages.ALL_MESSAGES: attrs.resolve_types(cls)\n"
        "sys.exit(0 if render() == before else 1)\n"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
