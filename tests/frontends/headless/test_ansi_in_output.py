"""Headless text output strips terminal escapes as Gemini CLI's ``stripAnsi`` does,
8-bit CSI and OSC ended by ST included (``--raw-output`` keeps them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TEXT = "\x9b31mred\x9b0m \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ plain"


def run(tmp_path: Path, *flags: str) -> str:
    fake = tmp_path / "f.responses"
    chunk = {"candidates": [{"content": {"role": "model", "parts": [{"text": TEXT}]}, "finishReason": "STOP"}],
             "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 3, "totalTokenCount": 6}}
    fake.write_text(json.dumps({"method": "generateContentStream", "response": [chunk]}) + "\n")
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), "GEMINI_CLI_HOME": str(home), "AGENTBUS_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run(
        [sys.executable, "-m", "actors.frontends", "-p", "hi", "-m", "gemini-2.5-flash",
         "--fake-responses", str(fake), "-o", "text", *flags],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(("flags", "expected"), [((), "red link plain\n"), (("--raw-output",), TEXT + "\n")])
def test_escapes_in_the_model_text(tmp_path: Path, flags: tuple[str, ...], expected: str) -> None:
    assert run(tmp_path, *flags) == expected
