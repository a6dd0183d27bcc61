"""Every scenario folder in ``scenarios/`` replays end to end and meets its expectations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.frontends import demo

SCENARIOS = sorted(p.parent for p in (Path(__file__).resolve().parents[2] / "scenarios").glob("*/scenario.json"))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.name)
def test_scenario_replays_with_expected_outcome(scenario: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main([str(scenario), "--no-delay"]) == 0
    out = capsys.readouterr().out
    assert "demo OK" in out
    expected = json.loads((scenario / "scenario.json").read_text())["expect"]
    assert expected["response_endswith"] in out
