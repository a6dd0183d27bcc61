"""The benchmark table's notes quote no figure of another tool that this run did not measure.

A figure of Gemini CLI (or any other tool) belongs in the row's ``gemini=`` column, or
in a note built from a value measured in the same run (an f-string's replacement field).
A figure typed into the source is allowed only as ``reference, not measured (source: …)``.
The check reads the benchmark modules' source: every string literal (and every literal
part of an f-string) that reaches ``record(...)``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent
OTHER_TOOL = re.compile(r"(gemini cli|gemini -p|codex|claude|openhands|goose)\b[^;]*?\d", re.IGNORECASE)
REFERENCE = re.compile(r"reference, not measured \(source: [^)]+\)")


def _literal_parts(node: ast.AST) -> Iterator[str]:
    """The text of every string in ``node``; an f-string's replacement fields (values
    computed in the run) become ``\x00``, so only its literal digits count."""
    if isinstance(node, ast.JoinedStr):
        yield "".join(v.value if isinstance(v, ast.Constant) else "\x00" for v in node.values)
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    else:
        for child in ast.iter_child_nodes(node):
            yield from _literal_parts(child)


def typed_figures(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of each literal passed to ``record`` that quotes another tool's figure."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "record"):
            continue
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            for text in _literal_parts(arg):
                if OTHER_TOOL.search(text) and not REFERENCE.search(text):
                    found.append((arg.lineno, text))
    return found


@pytest.mark.parametrize("module", sorted(p.name for p in BENCH.glob("*.py")))
def test_no_typed_figure_of_another_tool_in_a_benchmark_note(module: str) -> None:
    assert typed_figures((BENCH / module).read_text()) == []


def test_the_check_finds_a_typed_figure_and_lets_measured_ones_and_references_pass() -> None:
    source = """
record("a", 1.0, "s", target="target <= 0.3 s (Gemini CLI: 2.8 s)")
record("b", 1.0, "s", target=f"baseline: the idle daemon; Gemini CLI: {4} GB for 10 sessions")
record("c", 1.0, "s", target=f"-p hi (Gemini CLI {measured:.0f} MB)")
record("d", 1.0, "s", gemini=1.58, target="Gemini CLI measured in this run")
record("e", 1.0, "s", target="Gemini CLI: 24 s; reference, not measured (source: issue 7)")
"""
    assert [line for line, _ in typed_figures(source)] == [2, 3]
