"""The README and the docs pages stay true: set-up commands, commands, JSON contracts, config keys, links."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
DOCS = REPO / "docs"
PAGES = (
    "concepts",
    "cli",
    "config",
    "memorize",
    "search",
    "operations",
    "postgres",
    "mcp",
    "agent-zero",
    "python-api",
    "architecture",
    "evaluation",
    "doctor",
)


def page(name: str) -> str:
    return (DOCS / f"{name}.md").read_text(encoding="utf-8")


def setup_commands() -> list[str]:
    block = README.split("<!-- setup-commands -->")[1].split("<!-- /setup-commands -->")[0]
    lines = [line.strip() for line in block.splitlines() if line.strip() and not line.startswith("```")]
    return lines


def test_exactly_two_setup_commands_and_ci_runs_the_test_command():
    commands = setup_commands()
    assert commands == [
        "pip install torch==2.13.0 -e . && memctl demo",
        'pip install torch==2.13.0 -e ".[dev]" && python -m pytest',
    ]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert commands[1] in ci, f".ci/run must run the README test command {commands[1]!r}"
    assert all("torch==2.13.0" in c for c in commands)  # CPU torch from the machine, never a CUDA download


def test_readme_is_short_and_says_what_and_for_whom_first():
    lines = README.splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail to docs/"
    first_screen = "\n".join(lines[:25])
    assert "Curate the long-term memory of AI agents" in first_screen and "Who it is for" in first_screen
    for section in ("## Install", "## Quick start: the CLI", "## Quick start: Python", "## Quick start: MCP"):
        assert section in README
    assert "## Quick start: Agent Zero" in README
    install = README.split("## Install")[1].split("## ")[0]
    assert "pip install torch==2.13.0 ." in install and "[dev]" not in install  # a user install, no dev tools


def test_readme_links_every_docs_page():
    for name in PAGES:
        assert f"(docs/{name}.md)" in README, f"README does not link docs/{name}.md"
    assert sorted(p.stem for p in DOCS.glob("*.md")) == sorted(PAGES)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = "".join(c for c in text if c in " -" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def _anchors(text: str) -> set[str]:
    body = re.sub(r"```.*?```", "", text, flags=re.S)
    return {_slug(m) for m in re.findall(r"^#{1,6} (.+)$", body, re.M)}


@pytest.mark.parametrize("path", [REPO / "README.md", *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_relative_links_and_anchors_resolve(path: Path):
    text = path.read_text(encoding="utf-8")
    body = re.sub(r"```.*?```", "", text, flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", body):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        assert dest.exists(), f"{path.name}: link to missing {target}"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest.read_text(encoding="utf-8")), f"{path.name}: no heading for #{anchor}"


def test_every_command_is_documented():
    from typer.main import get_command

    from memctl.cli.app import app, register

    register()
    cli = page("cli")
    for name in get_command(app).commands:
        assert re.search(rf"^\| `memctl {name}[ `]", cli, re.M), f"docs/cli.md command table lacks `memctl {name}`"
        assert re.search(rf"^\| `{name}` \| `{{", cli, re.M), f"docs/cli.md JSON table lacks {name}"
        assert f"### `memctl {name}`" in cli, f"docs/cli.md generated reference lacks {name}: run scripts/gen_docs.py"


def test_every_config_key_is_documented_and_commented():
    text = (REPO / "default_config.yaml").read_text(encoding="utf-8")
    keys = yaml.safe_load(text)
    lines = text.splitlines()
    config = page("config")
    for key in keys:
        assert f"| `{key}` |" in config, f"docs/config.md lacks {key}: run scripts/gen_docs.py"
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{key}:"))
        assert lines[at - 1].startswith("#"), f"default_config.yaml: {key} has no comment above it"


def test_every_gate_reason_is_documented():
    from memctl.memorize.quality import REASONS

    memorize = page("memorize")
    for reason, meaning in REASONS.items():
        assert f"| `{reason}` | {meaning} |" in memorize, f"docs/memorize.md lacks the reason {reason}"


def test_the_python_quick_start_runs(home: Path, capsys: pytest.CaptureFixture[str]):
    code = re.search(r"## Quick start: Python\n+```python\n(.*?)```", README, re.S)
    assert code is not None
    exec(compile(code.group(1), "README.md", "exec"), {})  # noqa: S102 - the README's own example
    import memctl

    with memctl.open_store(home, "default") as store:
        assert len(store) == 0  # the example deletes what it added
        assert [e.op for e in store.history(None, limit=10)][:3] == ["delete", "delete", "update"]
