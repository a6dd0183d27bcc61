"""``make conformance`` passes when exactly the expected differences differ."""

from __future__ import annotations

from pathlib import Path

import pytest

from .expected import EXPECTED_DIFFERENCES
from .run import judge, main
from .test_corpus import SCENARIOS

ASK, REPLACE, DNS = sorted(EXPECTED_DIFFERENCES)


def result(name: str, status: str) -> dict[str, object]:
    return {"name": name, "status": status}


def test_exactly_the_expected_differences_pass() -> None:
    results = [result("simple-headless", "PASS"), *(result(n, "FAIL") for n in EXPECTED_DIFFERENCES)]
    assert judge(results) == (sorted(EXPECTED_DIFFERENCES), [], [])


def test_another_difference_fails() -> None:
    results = [result("simple-headless", "FAIL"), *(result(n, "FAIL") for n in EXPECTED_DIFFERENCES)]
    assert judge(results)[1] == ["simple-headless"]


def test_an_expected_difference_that_passes_fails_the_list() -> None:
    results = [result(ASK, "PASS"), result(REPLACE, "FAIL"), result(DNS, "FAIL")]
    assert judge(results) == (sorted([REPLACE, DNS]), [], [ASK])


def test_only_the_selected_scenarios_are_expected_to_differ() -> None:
    """``make conformance ARGS="--only simple-headless"`` passes on its own."""
    assert judge([result("simple-headless", "PASS")]) == ([], [], [])


@pytest.mark.skipif(not SCENARIOS.is_dir(), reason="../shared/conformance is not present beside the project")
def test_every_expected_difference_names_a_corpus_scenario() -> None:
    assert {n for n in EXPECTED_DIFFERENCES if not (SCENARIOS / n / "scenario.json").exists()} == set()


def fake_compare(tmp_path: Path, failing: list[str]) -> Path:
    """A compare.py that 'runs' simple-headless and the expected ones, failing ``failing``."""
    names = ["simple-headless", *EXPECTED_DIFFERENCES]
    results = [{"name": n, "status": "FAIL" if n in failing else "PASS"} for n in names]
    script = tmp_path / "compare.py"
    script.write_text(
        "import json, sys\n"
        "args = sys.argv[1:]\n"
        "json.dump({'results': " + repr(results) + "}, open(args[args.index('--json') + 1], 'w'))\n"
        f"sys.exit({1 if failing else 0})\n"
    )
    return script


def test_make_conformance_exits_0_when_exactly_the_expected_ones_differ(tmp_path: Path) -> None:
    assert main([str(fake_compare(tmp_path, list(EXPECTED_DIFFERENCES))), "--impl", "x"]) == 0


def test_make_conformance_exits_1_when_another_differs(tmp_path: Path) -> None:
    assert main([str(fake_compare(tmp_path, ["simple-headless", *EXPECTED_DIFFERENCES])), "--impl", "x"]) == 1
