"""The pure rules of MCP prompts as commands and resources as ``@`` references
(``actors/host/mcp_session.py``), against Gemini CLI 0.61.0's (``McpPromptLoader``,
``SlashCommandResolver``, ``PromptRegistry``, ``convertResourceContentsToParts``), and
``@server:uri`` in the expansion of a prompt's references."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.host.at_command import expand_at_references
from actors.host.mcp_session import (
    McpInputError,
    parse_prompt_args,
    prompt_commands,
    prompt_help,
    prompt_text,
    read_references,
    resource_parts,
)


def required(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "required": True} for n in names]


@pytest.mark.parametrize(
    ("user_args", "names", "expected"),
    [
        # Gemini's McpPromptLoader.parseArgs cases
        ("hello world", ("arg1", "arg2"), {"arg1": "hello", "arg2": "world"}),
        ('"hello world" foo', ("arg1", "arg2"), {"arg1": "hello world", "arg2": "foo"}),
        ("hello world", ("arg1",), {"arg1": "hello world"}),
        ('"hello \\"world\\""', ("arg1",), {"arg1": 'hello "world"'}),
        ('"hello\\\\world"', ("arg1",), {"arg1": "hello\\world"}),
        ('--named="value" positional', ("named", "pos"), {"named": "value", "pos": "positional"}),
        ('positional --named="value"', ("pos", "named"), {"pos": "positional", "named": "value"}),
        ('p1 --named="value" p2', ("pos1", "named", "pos2"), {"pos1": "p1", "named": "value", "pos2": "p2"}),
        ('\\"hello world', ("arg1", "arg2"), {"arg1": '"hello', "arg2": "world"}),
        ("--named=unquoted", ("named",), {"named": "unquoted"}),
        ("", ("only",), {"only": ""}),
    ],
)
def test_arguments_are_parsed_as_gemini_parses_them(user_args: str, names: tuple[str, ...], expected: dict[str, str]) -> None:
    assert parse_prompt_args(user_args, required(*names)) == expected


def test_missing_and_unknown_arguments_are_one_clear_error() -> None:
    with pytest.raises(McpInputError, match=r"^Missing required argument\(s\): --b, --c$"):
        parse_prompt_args("x", required("a", "b", "c"))
    with pytest.raises(McpInputError, match=r"^Unknown argument\(s\): --z \(the prompt takes --a\)$"):
        parse_prompt_args("--z=1 x", required("a"))
    with pytest.raises(McpInputError, match=r"takes no arguments"):
        parse_prompt_args("--z=1", [])
    assert parse_prompt_args("extra words", []) == {}
    with pytest.raises(McpInputError, match=r"^Unknown argument\(s\): --a\\nb \(the prompt takes --x\)$"):
        parse_prompt_args("--a\nb=1", [{"name": "x"}])
    optional = [{"name": "a", "required": True}, {"name": "b"}]
    assert parse_prompt_args("one two", optional) == {"a": "one two"}


def test_command_names_collide_as_in_gemini() -> None:
    prompts = [
        ("alpha", {"name": "help"}),  # a built-in's name
        ("alpha", {"name": "Write Doc"}),  # whitespace becomes a dash
        ("alpha", {"name": "shared"}),
        ("beta", {"name": "shared"}),  # the registry renames it beta_shared
        ("beta", {"name": "Write  Doc"}),  # the same command as alpha's "Write Doc"
        ("beta", {"name": "write-doc"}),
    ]
    commands = {c: (s, p["name"]) for c, s, p in prompt_commands(prompts, reserved={"help"})}
    assert commands == {
        "alpha.help": ("alpha", "help"),
        "alpha.Write-Doc": ("alpha", "Write Doc"),
        "shared": ("alpha", "shared"),
        "beta_shared": ("beta", "shared"),
        "beta.Write-Doc": ("beta", "Write  Doc"),
        "write-doc": ("beta", "write-doc"),  # names are case-sensitive, as Gemini's map
    }


def test_two_servers_prompts_of_one_command_are_both_prefixed() -> None:
    commands = [c for c, _, _ in prompt_commands([("a", {"name": "x y"}), ("b", {"name": "x-y"})], reserved=())]
    assert sorted(commands) == ["a.x-y", "b.x-y"]


def test_help_is_geminis() -> None:
    assert prompt_help("p", []) == 'Prompt "p" has no arguments.'
    text = prompt_help("p", [{"name": "a", "description": "the a", "required": True}, {"name": "b"}])
    assert text == (
        'Arguments for "p":\n\n'
        'You can provide arguments by name (e.g., --argName="value") or by position.\n\n'
        'e.g., p "foo","foo" is equivalent to p --a="foo",--b="foo"\n\n'
        "  --a\n    the a\n    (required: yes)\n\n"
        "  --b\n    (required: no)\n\n"
    )


def test_the_prompts_first_text_message_is_sent_json_quoted() -> None:
    text = {"role": "user", "content": {"type": "text", "text": 'say "hi"\nthen ✓'}}
    image = {"role": "user", "content": {"type": "image", "data": "AA==", "mimeType": "image/png"}}
    assert prompt_text({"messages": [text, image]}) == '"say \\"hi\\"\\nthen ✓"'
    with pytest.raises(McpInputError, match="empty or invalid prompt response"):
        prompt_text({"messages": [image, text]})
    with pytest.raises(McpInputError, match="no messages"):
        prompt_text({"messages": []})


def test_resource_contents_become_text_parts_and_binary_a_line() -> None:
    result = {
        "contents": [
            {"uri": "a://1", "text": "one"},
            {"uri": "a://2", "blob": "AAECAw==", "mimeType": "image/png"},
            {"uri": "a://3", "blob": "AAE="},
            {"uri": "a://4", "text": ""},
        ]
    }
    assert resource_parts(result) == [
        {"text": "one"},
        {"text": "[Binary resource content image/png, 4 bytes]"},
        {"text": "[Binary resource content application/octet-stream, 2 bytes]"},
    ]
    with pytest.raises(McpInputError, match="over the 1 MB"):
        resource_parts({"contents": [{"uri": "a://big", "text": "x" * (1024 * 1024 + 1)}]}, limit=1024 * 1024)


def test_resources_come_before_files_and_close_the_block_when_no_file_was_read(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("file a\n")
    read = {"srv:notes://n": [{"text": "the notes"}]}
    only = expand_at_references("see @srv:notes://n", tmp_path, resources=read, glob_available=False)
    assert only == [
        {"text": "see @srv:notes://n"},
        {"text": "\n--- Content from referenced files ---"},
        {"text": "\nContent from @notes://n:\n"},
        {"text": "the notes"},
        {"text": "\n--- End of content ---"},
    ]
    both = expand_at_references("@a.txt and @srv:notes://n", tmp_path, resources=read, glob_available=False)
    assert both == [
        {"text": "@a.txt and @srv:notes://n"},
        {"text": "\n--- Content from referenced files ---"},
        {"text": "\nContent from @notes://n:\n"},
        {"text": "the notes"},
        {"text": "\nContent from @a.txt:\n"},
        {"text": "file a"},
        {"text": "\n--- End of content ---"},
    ]


async def test_a_session_without_mcp_servers_reads_every_reference_as_a_path() -> None:
    assert await read_references(None, ["docs:https://example.com/x", "srv:notes://n"]) == {}


ARG_NAMES = st.text(alphabet="abcdefgh-_", min_size=1, max_size=6)


@given(
    user_args=st.lists(st.sampled_from(["--", "a", "b", "=", '"', " ", "\n", "x", "\\", "--a=", "--b="]), max_size=12).map("".join)
    | st.text(max_size=40),
    spec=st.lists(st.tuples(ARG_NAMES, st.booleans()), max_size=4, unique_by=lambda a: a[0]),
)
def test_any_typed_arguments_give_strings_of_the_prompts_arguments_or_one_clear_error(
    user_args: str, spec: list[tuple[str, bool]]
) -> None:
    args = [{"name": name, "required": req} for name, req in spec]
    try:
        parsed = parse_prompt_args(user_args, args)
    except McpInputError as exc:
        assert exc.message.startswith(("Missing required argument(s): --", "Unknown argument(s): --"))
        assert "\n" not in exc.message
        return
    assert set(parsed) <= {name for name, _ in spec}
    assert all(isinstance(v, str) for v in parsed.values())
    assert {name for name, req in spec if req} <= set(parsed)
