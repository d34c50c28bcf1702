"""The README stays true: set-up commands, commands, config keys."""

from __future__ import annotations

import re

import yaml

from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def setup_commands() -> list[str]:
    block = README.split("<!-- setup-commands -->")[1].split("<!-- /setup-commands -->")[0]
    lines = [line.strip() for line in block.splitlines() if line.strip() and not line.startswith("```")]
    return lines


def test_exactly_two_setup_commands_run_by_ci():
    commands = setup_commands()
    assert len(commands) == 2
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    for command in commands:
        assert command in ci, f".ci/run must run the README command {command!r}"
    assert "torch==2.13.0" in commands[0]  # CPU torch from the machine, never a CUDA download


def test_every_command_is_documented():
    from typer.main import get_command

    from memctl.cli.app import app, register

    register()

    for name in get_command(app).commands:
        assert f"`memctl {name}" in README, f"README CLI reference lacks `memctl {name}`"
        assert re.search(rf"\| `{name}` \| `{{", README), f"README JSON table lacks {name}"


def test_every_config_key_is_documented_and_commented():
    text = (REPO / "default_config.yaml").read_text(encoding="utf-8")
    keys = yaml.safe_load(text)
    lines = text.splitlines()
    for key in keys:
        assert f"| `{key}` |" in README, f"README config table lacks {key}"
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{key}:"))
        assert lines[at - 1].startswith("#"), f"default_config.yaml: {key} has no comment above it"
