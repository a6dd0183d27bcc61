"""update_topic: Gemini's texts, per-session topic state, the notice display."""

from __future__ import annotations

from pathlib import Path

from actors.tools._update_topic import UpdateTopicTool

from ._web_env import web_env


def test_declaration(tmp_path: Path) -> None:
    tool = UpdateTopicTool()
    decl = tool.declaration("")
    assert decl["name"] == "update_topic"
    assert decl["parametersJsonSchema"]["required"] == ["strategic_intent"]
    assert set(decl["parametersJsonSchema"]["properties"]) == {
        "title",
        "summary",
        "strategic_intent",
    }
    assert (tool.display_name, tool.kind) == ("Update Topic Context", "think")
    env = web_env(tmp_path, None)
    assert tool.describe({"title": "T", "strategic_intent": "i"}, env) == 'Update topic to: "T"'
    assert tool.describe({"strategic_intent": "i"}, env) == 'Update tactical intent: "i"'
    assert tool.describe({}, env) == 'Update tactical intent: "..."'


async def test_new_topic_then_intent_updates(tmp_path: Path) -> None:
    tool = UpdateTopicTool()
    env = web_env(tmp_path, None)
    first = await tool.execute(
        {
            "title": " Research\nphase ",
            "summary": "Looking around.",
            "strategic_intent": " Read the code. ",
        },
        env,
    )
    assert first.llm_content == (
        'Current topic: "Research phase"\nTopic summary: Looking around.\n\n'
        "Strategic Intent: Read the code."
    )
    assert first.return_display == (
        "## \U0001f4c2 Topic: **Research phase**\n\n**Summary:**\nLooking around.\n\n"
        "> [!STRATEGY]\n> **Intent:** Read the code."
    )
    assert first.data == {
        "display": {
            "format": "notice",
            "name": " Research\nphase ",
            "description": 'Update topic to: " Research\nphase "',
        }
    }
    # Same title again: not a new topic.
    again = await tool.execute({"title": "Research phase", "strategic_intent": "Grep for it"}, env)
    assert again.llm_content == "Strategic Intent: Grep for it"
    assert again.return_display == "> [!STRATEGY]\n> **Intent:** Grep for it"
    # An empty intent keeps the current one.
    empty = await tool.execute({"strategic_intent": ""}, env)
    assert empty.llm_content == "Strategic Intent: Grep for it"
    # A new title without a summary or intent.
    fresh = await tool.execute({"title": "Fix", "strategic_intent": ""}, env)
    assert fresh.llm_content == 'Current topic: "Fix"\nTopic summary: ...'


async def test_state_is_per_session(tmp_path: Path) -> None:
    tool = UpdateTopicTool()
    s1, s2 = web_env(tmp_path, None, "s1"), web_env(tmp_path, None, "s2")
    await tool.execute({"title": "A", "strategic_intent": "x"}, s1)
    other = await tool.execute({"strategic_intent": ""}, s2)
    assert other.llm_content == "Strategic Intent: ..."
    same = await tool.execute({"title": "A", "strategic_intent": ""}, s1)
    assert same.llm_content == "Strategic Intent: x"
    await tool.close_session(s1)
    after = await tool.execute({"title": "A", "strategic_intent": ""}, s1)
    assert after.llm_content.startswith('Current topic: "A"')
