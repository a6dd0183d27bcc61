"""``agentbus agents`` exit codes (issue 17): listing exits 1 when a definition failed
to load; ``--acknowledge`` exits 0 when it acknowledged, whatever else failed to load
(those errors still go to stderr)."""

from __future__ import annotations

from pathlib import Path

from tests.frontends.headless.test_agents import run


def _workspace(tmp_path: Path) -> None:
    agents = tmp_path / ".gemini" / "agents"
    agents.mkdir(parents=True)
    (agents / "reader.md").write_text("---\nname: reader\ndescription: Reads files\ntools: [read_file]\n---\nRead.\n")
    (agents / "broken.md").write_text("no front matter at all\n")


def test_acknowledging_succeeds_although_another_definition_is_broken(tmp_path: Path) -> None:
    _workspace(tmp_path)
    listed = run(["agents"], tmp_path)
    assert listed.returncode == 1
    assert "broken.md" in listed.stderr
    assert "reader" in listed.stdout and "not acknowledged" in listed.stdout

    acked = run(["agents", "--acknowledge"], tmp_path)
    assert acked.returncode == 0, acked.stderr
    assert "acknowledged: reader" in acked.stdout
    assert "broken.md" in acked.stderr  # still said

    again = run(["agents"], tmp_path)
    assert again.returncode == 1 and "not acknowledged" not in again.stdout


def test_agents_help_lists_its_exit_codes(tmp_path: Path) -> None:
    helped = run(["agents", "--help"], tmp_path)
    assert helped.returncode == 0
    assert "Exit codes:" in helped.stdout
    assert "--acknowledge" in helped.stdout.split("Exit codes:")[1]


def test_a_broken_settings_file_exits_52_as_every_command_does(tmp_path: Path) -> None:
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{ "a": ')
    listed = run(["agents"], tmp_path)
    assert listed.returncode == 52, listed.stderr
    assert f"Error in {settings}" in listed.stderr and "Traceback" not in listed.stderr
