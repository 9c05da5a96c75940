"""Every command's --help: a one-line description, the defaults, and examples (issue: day-two operators)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ("inspect", "explain", "admit")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_help_has_description_defaults_and_examples(command: str) -> None:
    result = run(command, "--help")
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"usage: hami-scheduler {command}")
    description = lines[lines.index("") + 1]
    assert description and lines[lines.index("") + 2] == "", "the description is one line"
    assert "(default: text)" in result.stdout  # text output is the default everywhere
    assert "examples:" in result.stdout
    examples = result.stdout.split("examples:", 1)[1]
    assert f"hami-scheduler {command} " in examples


def test_top_level_help_lists_every_command() -> None:
    result = run("--help")
    assert result.returncode == 0
    for command in COMMANDS:
        assert any(line.split()[:1] == [command] for line in result.stdout.splitlines()), command


def test_no_command_is_one_line_exit_2() -> None:
    result = run()
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.count("\n") == 1 and "the following arguments are required: COMMAND" in result.stderr
