"""Gemini CLI's large-output truncation: the pure rules and the streaming writer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.common import format_truncated_output, utf16_len
from actors.tools._truncate import (
    DEFAULT_TRUNCATE_TOOL_OUTPUT_THRESHOLD,
    TruncatedOutput,
    TruncatingWriter,
    sanitize_filename_part,
    tool_output_path,
    truncate_tool_output,
    truncation_threshold,
)
from tests.conftest import SHARED

EMOJI = "\U0001f600"


def test_output_path_follows_gemini_naming(tmp_path: Path) -> None:
    assert tool_output_path(
        tmp_path, "run_shell_command", "run_shell_command__run_shell_command_17_0", "s-1"
    ) == (
        tmp_path / "tool-outputs" / "session-s-1" / "run_shell_command__run_shell_command_17_0.txt"
    )
    assert tool_output_path(tmp_path, "run_shell_command", "Call/../1", "a.b") == (
        tmp_path / "tool-outputs" / "session-a_b" / "run_shell_command_call____1.txt"
    )
    assert tool_output_path(tmp_path, "mcp_srv_tool", "x", "") == (
        tmp_path / "tool-outputs" / "mcp_srv_tool_x.txt"
    )
    assert sanitize_filename_part("a-b_c.d/é") == "a-b_c_d__"


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, DEFAULT_TRUNCATE_TOOL_OUTPUT_THRESHOLD),
        ({"tools": {}}, 40_000),
        ({"tools": {"truncateToolOutputThreshold": 500}}, 500),
        ({"tools": {"truncateToolOutputThreshold": 0}}, 0),
        ({"tools": {"truncateToolOutputThreshold": -1}}, -1),
        ({"tools": {"truncateToolOutputThreshold": 99.9}}, 99),
        ({"tools": {"truncateToolOutputThreshold": True}}, 40_000),
        ({"tools": {"truncateToolOutputThreshold": "10"}}, 40_000),
        ({"tools": 3}, 40_000),
    ],
)
def test_threshold_setting(settings: dict[str, object], expected: int) -> None:
    assert truncation_threshold(settings) == expected


def test_truncate_writes_the_full_text_only_when_truncating(tmp_path: Path) -> None:
    def truncate(content: str) -> TruncatedOutput:
        return truncate_tool_output(
            content,
            tool_name="run_shell_command",
            call_id="c1",
            project_temp_dir=tmp_path,
            session_id="s",
            threshold=50,
        )

    small = truncate("short")
    assert small.content == "short" and small.output_file is None
    assert not (tmp_path / "tool-outputs").exists()
    big = truncate("y" * 100)
    path = tmp_path / "tool-outputs" / "session-s" / "run_shell_command_c1.txt"
    assert big.output_file == str(path)
    assert path.read_text() == "y" * 100
    assert big.content.startswith("Output too large. Showing first 10 and last 40 characters.")
    assert big.original_length == 100


@pytest.mark.parametrize("threshold", [0, -5])
def test_threshold_zero_or_less_disables(tmp_path: Path, threshold: int) -> None:
    with TruncatingWriter(tmp_path / "o.txt", threshold) as writer:
        for _ in range(100):
            writer.write("z" * 1000)
        result = writer.finish()
    assert result.content == "z" * 100_000 and result.output_file is None
    assert not (tmp_path / "o.txt").exists()


def test_writer_streams_to_the_file_once_past_the_threshold(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "o.txt"
    writer = TruncatingWriter(path, 1000)
    writer.write("a" * 600)
    assert not path.exists() and not writer.spilled
    writer.write("b" * 600)  # crosses the threshold: everything so far goes to the file
    assert writer.spilled and path.exists()
    for _ in range(50):
        writer.write("c" * 10_000)
    assert writer.length == 501_200
    result = writer.finish()
    assert path.read_text() == "a" * 600 + "b" * 600 + "c" * 500_000
    assert result.content == format_truncated_output(path.read_text(), str(path), 1000)
    assert result.output_file == str(path)


def test_discard_removes_the_partial_file(tmp_path: Path) -> None:
    path = tmp_path / "o.txt"
    with pytest.raises(RuntimeError), TruncatingWriter(path, 10) as writer:
        writer.write("x" * 100)
        assert path.exists()
        raise RuntimeError("cancelled")
    assert not path.exists()


_TEXT = st.text(alphabet=st.sampled_from(["a", "b", "\n", "é", EMOJI, "\u2028", " "]))


@given(
    pieces=st.lists(_TEXT, max_size=12),
    threshold=st.integers(min_value=-2, max_value=60),
)
def test_streaming_equals_the_pure_rule(
    tmp_path_factory: pytest.TempPathFactory, pieces: list[str], threshold: int
) -> None:
    path = tmp_path_factory.mktemp("w") / "out.txt"
    content = "".join(pieces)
    with TruncatingWriter(path, threshold) as writer:
        for piece in pieces:
            writer.write(piece)
        result = writer.finish()
    if threshold > 0 and utf16_len(content) > threshold:
        assert result.content == format_truncated_output(content, str(path), threshold)
        assert path.read_text(encoding="utf-8") == content
        assert result.output_file == str(path)
    else:
        assert result.content == content and result.output_file is None
        assert not path.exists()


def test_perf_high_volume_shell_golden(tmp_path: Path) -> None:
    """The recorded model input of ``yes | head -n 1000000`` (2 MB of output)."""
    session = SHARED / "conformance/scenarios/perf-high-volume-shell/expected/session.json"
    if not session.exists():
        pytest.skip("conformance corpus not available")
    calls = [c for m in json.loads(session.read_text())["messages"] for c in m.get("toolCalls", [])]
    expected = calls[0]["result"][0]["functionResponse"]["response"]["output"]
    session_id = "61b39fcf-41bf-413e-9977-0a21e553b759"
    call_id = "run_shell_command__run_shell_command_1795216970173_0"
    content = (
        "<untrusted_context>\nOutput: "
        + "y\n" * 999_999
        + "y\nProcess Group PGID: 18155\n</untrusted_context>"
    )
    result = truncate_tool_output(
        content,
        tool_name="run_shell_command",
        call_id=call_id,
        project_temp_dir=tmp_path,
        session_id=session_id,
        threshold=40_000,
    )
    assert result.content.replace(str(tmp_path), "{project_tmp}") == expected
    assert Path(str(result.output_file)).read_text() == content
