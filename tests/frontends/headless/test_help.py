"""``--help`` of every command documents every flag it accepts, with its choices, and
the README's flag list of each command names exactly those flags."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.frontends import SUBCOMMANDS
from actors.frontends.acp import build_parser as acp_parser
from actors.frontends.agents import build_parser as agents_parser
from actors.frontends.chat import _parser as chat_parser
from actors.frontends.cluster import build_parser as cluster_parser
from actors.frontends.daemon import _parser as daemon_parser
from actors.frontends.explore import build_parser as explore_parser
from actors.frontends.mcp import build_parser as mcp_parser
from actors.frontends.replay import build_parser as replay_parser
from actors.frontends.tool import build_parser as tool_parser
from actors.frontends.web import build_parser as web_parser
from actors.host.args import build_parser as headless_parser

README = Path(__file__).resolve().parents[3] / "README.md"

PARSERS: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "agentbus": headless_parser,
    "agentbus daemon": daemon_parser,
    "agentbus chat": chat_parser,
    "agentbus acp": acp_parser,
    "agentbus replay": replay_parser,
    "agentbus explore": explore_parser,
    "agentbus tool": tool_parser,
    "agentbus agents": agents_parser,
    "agentbus mcp": mcp_parser,
    "agentbus web": web_parser,
    "agentbus cluster": cluster_parser,
}

# Flags whose values come from a fixed set: argparse must refuse anything else.
CHOICE_FLAGS = {"--approval-mode", "--output-format", "--tools"}


def flags(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]


def test_every_command_has_a_parser_here_and_the_top_help_names_it() -> None:
    assert set(PARSERS) == {"agentbus", *(f"agentbus {c}" for c in SUBCOMMANDS)}
    description = headless_parser().description or ""
    for command in SUBCOMMANDS:
        assert re.search(rf"\b{command}\b", description), f"agentbus --help does not mention {command}"


@pytest.mark.parametrize("command", PARSERS)
def test_every_flag_has_help_text_shown_in_help(command: str) -> None:
    parser = PARSERS[command]()
    text = parser.format_help()
    for action in parser._actions:
        assert action.help and action.help != argparse.SUPPRESS, f"{command}: {action.option_strings or action.dest} has no help"
        for option in action.option_strings:
            assert option in text, f"{command} --help does not show {option}"


@pytest.mark.parametrize("command", PARSERS)
def test_flags_with_a_fixed_set_of_values_validate_them(command: str) -> None:
    for action in flags(PARSERS[command]()):
        if CHOICE_FLAGS & set(action.option_strings):
            assert action.choices, f"{command} {action.option_strings} accepts any value"


def test_replay_refuses_an_unknown_approval_mode(capsys: pytest.CaptureFixture[str]) -> None:
    from actors.frontends.replay import main as replay_main

    assert replay_main(["--approval-mode", "bogus", "x.jsonl"]) == 2
    assert "invalid choice: 'bogus'" in capsys.readouterr().err


def readme_flag_lists() -> dict[str, list[tuple[str, str]]]:
    """``<!-- flags: COMMAND -->`` then a paragraph: the `-x VALUES` spans in it."""
    text = README.read_text(encoding="utf-8")
    lists: dict[str, list[tuple[str, str]]] = {}
    for m in re.finditer(r"<!-- flags: (.+?) -->\n(.+?)(?:\n\n|\Z)", text, re.S):
        spans = re.findall(r"`(-[^`]*)`", m.group(2))
        lists[m.group(1)] = [(s.split()[0], s.split()[1] if len(s.split()) > 1 else "") for s in spans]
    return lists


@pytest.mark.parametrize("command", PARSERS)
def test_the_readme_lists_exactly_the_flags_of_each_command(command: str) -> None:
    listed = readme_flag_lists().get(command)
    assert listed is not None, f"README.md has no <!-- flags: {command} --> list"
    actions = flags(PARSERS[command]())
    by_option = {o: a for a in actions for o in a.option_strings}
    unknown = [f for f, _ in listed if f not in by_option]
    assert unknown == [], f"README lists flags {command} does not accept"
    named = {id(by_option[f]) for f, _ in listed}
    missing = [a.option_strings[-1] for a in actions if id(a) not in named]
    assert missing == [], f"README's list for {command} leaves out flags"
    for flag, values in listed:
        choices = by_option[flag].choices
        if values and choices:
            assert values.split("|") == list(choices), f"README: {flag} {values}; {command} accepts {list(choices)}"
