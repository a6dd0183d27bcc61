"""Agent definition files: Gemini CLI's Markdown + YAML front matter, validated."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.tools import (
    AgentDefinition,
    AgentLoadError,
    acknowledge,
    agent_tool_names,
    load_registry,
    parse_agent_markdown,
    template,
)

TOOLS = ("update_topic", "list_directory", "read_file", "glob", "invoke_agent", "run_shell_command")


def parse(text: str) -> AgentDefinition:
    return parse_agent_markdown("a.md", text, known_tools=TOOLS)


def test_a_full_definition() -> None:
    d = parse(
        "---\nname: finder\ndescription: Finds things\ndisplay_name: Finder\ntools: [read_file, glob]\n"
        "model: gemini-2.5-flash\ntemperature: 0.2\nmax_turns: 5\ntimeout_mins: 2\n---\n\nYou find ${query}.\n"
    )
    assert (d.name, d.description, d.display_name, d.model) == (
        "finder",
        "Finds things",
        "Finder",
        "gemini-2.5-flash",
    )
    assert (d.temperature, d.max_turns, d.timeout_mins, d.tools) == (
        0.2,
        5,
        2.0,
        ("read_file", "glob"),
    )
    assert d.system_prompt == "You find ${query}."
    assert d.inputs_for("keys") == {"query": "keys"}
    assert template(d.system_prompt, d.inputs_for("keys")) == "You find keys."


def test_defaults() -> None:
    d = parse("---\nname: plain\ndescription: d\n---\nbody")
    assert (d.model, d.max_turns, d.timeout_mins, d.tools, d.output_schema) == (
        "inherit",
        30,
        10.0,
        None,
        None,
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("no front matter", "Missing mandatory YAML frontmatter"),
        ("---\nname: [x\n---\n", "YAML frontmatter parsing failed: line 2"),
        ("---\ndescription: d\n---\n", "name: Required"),
        ("---\nname: Bad Name\ndescription: d\n---\n", "name: Name must be a valid slug"),
        ("---\nname: a\n---\n", "description: Required"),
        (
            "---\nname: a\ndescription: d\ncolour: red\n---\n",
            "Unrecognized key(s) in object: 'colour'",
        ),
        (
            "---\nname: a\ndescription: d\ntools: [read_fil]\n---\n",
            "unknown tool 'read_fil' (did you mean 'read_file'?)",
        ),
        (
            "---\nname: a\ndescription: d\nmax_turns: 0\n---\n",
            "max_turns: Expected a positive integer",
        ),
        ("---\nname: a\ndescription: d\ntemperature: hot\n---\n", "temperature: Expected number"),
        (
            "---\nname: a\ndescription: d\nagent_card_url: http://x\n---\n",
            "remote agents (A2A) are not supported",
        ),
        ("---\nname: a\ndescription: d\noutput_schema: {type: nonsense}\n---\n", "output_schema:"),
    ],
)
def test_broken_definitions_say_what_is_wrong(text: str, needle: str) -> None:
    with pytest.raises(AgentLoadError) as err:
        parse(text)
    assert str(err.value).startswith("Failed to load agent from a.md: ")
    assert needle in str(err.value)


def test_template_names_missing_inputs() -> None:
    with pytest.raises(
        ValueError, match="Missing required input parameters: goal. Available inputs: query"
    ):
        template("do ${goal}", {"query": "x"})


def test_tool_selection() -> None:
    everything = parse("---\nname: a\ndescription: d\n---\n")
    assert agent_tool_names(everything, TOOLS, may_nest=True) == (
        "list_directory",
        "read_file",
        "glob",
        "run_shell_command",
    )  # never update_topic, never invoke_agent unless named
    nesting = parse("---\nname: a\ndescription: d\ntools: [read_file, invoke_agent]\n---\n")
    assert agent_tool_names(nesting, TOOLS, may_nest=True) == ("read_file", "invoke_agent")
    assert agent_tool_names(nesting, TOOLS, may_nest=False) == ("read_file", "invoke_agent")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_registry_order_acknowledgement_and_errors(tmp_path: Path) -> None:
    home, ws = tmp_path / "home", tmp_path / "ws"
    write(ws / ".gemini" / "agents" / "mine.md", "---\nname: mine\ndescription: project\n---\nP")
    write(ws / ".gemini" / "agents" / "_draft.md", "not loaded at all")
    write(ws / ".gemini" / "agents" / "bad.md", "---\nname: bad\n---\n")
    write(home / ".gemini" / "agents" / "mine.md", "---\nname: mine\ndescription: user\n---\nU")
    write(
        home / ".gemini" / "agents" / "helper.md",
        "---\nname: helper\ndescription: user helper\n---\nH",
    )
    reg = load_registry(workspace=ws, home=home, known_tools=TOOLS)
    assert list(reg.agents) == ["codebase_investigator", "generalist", "helper", "mine"]
    assert reg.agents["mine"].description == "user"  # the project's is not acknowledged yet
    assert [a.name for a in reg.unacknowledged] == ["mine"]
    assert reg.broken["bad"].endswith("description: Required")
    assert [e.split(":")[0] for e in reg.errors] == ["Agent loading error"]

    acknowledge(home, ws, reg.unacknowledged)
    reg = load_registry(workspace=ws, home=home, known_tools=TOOLS)
    assert reg.agents["mine"].description == "project"  # acknowledged: the project's wins
    assert any("Duplicate agent name 'mine'" in e for e in reg.errors)
    write(ws / ".gemini" / "agents" / "mine.md", "---\nname: mine\ndescription: changed\n---\nP")
    reg = load_registry(workspace=ws, home=home, known_tools=TOOLS)
    assert reg.agents["mine"].description == "user"  # a changed file needs acknowledging again
