"""The committed completions, man page and generated docs match the live CLI, and each one is valid for its tool.

When a test here fails after a CLI change, run `python3 scripts/gen_docs.py` and commit the result.
"""

from __future__ import annotations

import enum
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Annotated

import pytest
import typer

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())  # tests/ or a folder of it
GENERATOR = REPO / "scripts" / "gen_docs.py"
REGENERATE = "run `python3 scripts/gen_docs.py` and commit the result"
BASH_FILE = REPO / "completions" / "memctl.bash"
ZSH_FILE = REPO / "completions" / "_memctl"
FISH_FILE = REPO / "completions" / "memctl.fish"
MAN_FILE = REPO / "man" / "memctl.1"


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("memctl_gen_docs", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


gen_docs = _load_generator()


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return gen_docs.render_all()


def _command_paths() -> list[tuple[str, ...]]:
    """Every (sub)command of the live app as a path below `memctl`, read from the click tree."""
    from memctl.cli.app import app, register

    register()

    def walk(command: object, path: tuple[str, ...], parent: object) -> list[tuple[str, ...]]:
        found = [path] if path else []
        if hasattr(command, "list_commands"):
            ctx = command.context_class(command, info_name=path[-1] if path else "memctl", parent=parent)  # type: ignore[attr-defined]
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)  # type: ignore[attr-defined]
                if sub is not None and not getattr(sub, "hidden", False):
                    found += walk(sub, (*path, name), ctx)
        return found

    return walk(typer.main.get_command(app), (), None)


COMMANDS = _command_paths()


def _read(path: Path) -> str:
    if not path.is_file():
        pytest.fail(f"{path.relative_to(REPO)} is missing: {REGENERATE}")
    return path.read_text(encoding="utf-8")


def _run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=REPO, **kwargs)  # type: ignore[call-overload]


# --- the committed files are what the generator makes now ---------------------------------------


def test_generated_files_are_up_to_date(rendered: dict[str, str]) -> None:
    stale = [
        rel
        for rel, content in rendered.items()
        if not (REPO / rel).is_file() or (REPO / rel).read_text(encoding="utf-8") != content
    ]
    assert not stale, f"out of date: {', '.join(stale)}; {REGENERATE}"


def test_generator_knows_every_file() -> None:
    assert set(gen_docs.render_all()) == {
        "completions/memctl.bash",
        "completions/_memctl",
        "completions/memctl.fish",
        "man/memctl.1",
    }


def test_output_is_deterministic(rendered: dict[str, str]) -> None:
    assert gen_docs.render_all() == rendered
    env = {**os.environ, "COLUMNS": "23", "LINES": "5", "NO_COLOR": "1", "TERM": "dumb", "LC_ALL": "C"}
    result = _run([sys.executable, str(GENERATOR), "--check"], env=env)
    assert result.returncode == 0, f"--check under another terminal width/env:\n{result.stdout}{result.stderr}"


def test_check_reports_a_stale_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rendered: dict[str, str]) -> None:
    monkeypatch.setattr(gen_docs, "REPO", tmp_path)
    for rel, content in rendered.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(content, encoding="utf-8")
    assert gen_docs.main(["--check"]) == 0
    (tmp_path / "man" / "memctl.1").write_text("stale\n", encoding="utf-8")
    assert gen_docs.stale_files(rendered) == ["man/memctl.1"]
    assert gen_docs.main(["--check"]) == 1
    assert (tmp_path / "man" / "memctl.1").read_text(encoding="utf-8") == "stale\n"  # --check writes nothing


# --- the generated parts of docs/ (cog blocks) are what the generator makes now -----------------


def test_docs_cog_blocks_are_up_to_date(capsys: pytest.CaptureFixture[str]) -> None:
    """What `cog --check -I scripts docs/cli.md docs/config.md docs/operations.md` does."""
    assert gen_docs.run_cog(check=True) == 0, f"{capsys.readouterr().err}\n{REGENERATE}"


def test_every_docs_page_with_a_cog_block_is_checked() -> None:
    with_blocks = sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md") if "[[[cog" in p.read_text())
    assert with_blocks == sorted(gen_docs.COG_FILES)


def test_cog_check_reports_a_stale_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for rel in (*gen_docs.COG_FILES, "scripts/gen_docs.py", "default_config.yaml", "docs/examples/memctl-nightly.sh"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((REPO / rel).read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(gen_docs, "REPO", tmp_path)
    assert gen_docs.run_cog(check=True) == 0
    config = tmp_path / "docs" / "config.md"
    config.write_text(
        config.read_text(encoding="utf-8").replace("| `search_limit` | `10` |", "| `search_limit` | `11` |")
    )
    assert gen_docs.run_cog(check=True) != 0
    assert gen_docs.main(["--check"]) == 1  # the generator's own --check fails on it too
    assert "| `search_limit` | `11` |" in config.read_text(encoding="utf-8")  # --check writes nothing


def test_cli_reference_lists_every_option() -> None:
    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    reference = text.split("## Reference (generated from the app)")[1]
    app = gen_docs.load_app()
    for command in app.commands:
        section = reference.split(f"### `{command.key}`")[1].split("\n### ")[0]
        for option in command.options:
            if "--help" not in option.names:
                assert f"`{option.names[-1]}`" in section, f"{command.key} {option.names[-1]}: {REGENERATE}"


# --- every command of the app is in every committed file ----------------------------------------


def test_the_app_has_commands() -> None:
    assert len(COMMANDS) >= 5 and ("load",) in COMMANDS


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_command_is_in_bash_completion(path: tuple[str, ...]) -> None:
    text = _read(BASH_FILE)
    assert re.search(rf"^\s*'?{re.escape(' '.join(('memctl', *path)))}'?\)", text, re.M), (
        f"`memctl {' '.join(path)}` is not in completions/memctl.bash: {REGENERATE}"
    )


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_command_is_in_zsh_completion(path: tuple[str, ...]) -> None:
    text = _read(ZSH_FILE)
    assert re.search(rf"^\s*'{re.escape(path[-1])}:", text, re.M), (
        f"`memctl {' '.join(path)}` is not in completions/_memctl: {REGENERATE}"
    )


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_command_is_in_fish_completion(path: tuple[str, ...]) -> None:
    text = _read(FISH_FILE)
    parent = " ".join(("memctl", *path[:-1]))
    assert re.search(rf"-n '__memctl_at {re.escape(parent)}' -a '?{re.escape(path[-1])}'? ", text), (
        f"`memctl {' '.join(path)}` is not in completions/memctl.fish: {REGENERATE}"
    )


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_command_is_in_man_page(path: tuple[str, ...]) -> None:
    text = _read(MAN_FILE).replace("\\-", "-")
    assert re.search(rf'^\.SS "?{re.escape(" ".join(path))}"?$', text, re.M), (
        f"`memctl {' '.join(path)}` has no section in man/memctl.1: {REGENERATE}"
    )


def test_man_page_sections() -> None:
    text = _read(MAN_FILE)
    assert re.search(r"^\.TH MEMCTL 1 ", text, re.M)
    for section in (
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "GLOBAL OPTIONS",
        "COMMANDS",
        "EXIT STATUS",
        "ENVIRONMENT",
        "FILES",
    ):
        assert re.search(rf'^\.SH "?{section}"?$', text, re.M), section
    for word in (
        "MEMCTL_HOME",
        "MEMCTL_SUBDIR",
        "MEMCTL_CONFIG",
        "NO_COLOR",
        "memories.sqlite",
        "index.faiss",
        "embedding.json",
        "default_config.yaml",
    ):
        assert word in text, word


# --- syntax of each file, checked by its own tool (skipped when the tool is not installed) -----


def _require(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        pytest.skip(f"{tool} is not installed")
    return found


def test_bash_syntax() -> None:
    result = _run([_require("bash"), "-n", str(BASH_FILE)])
    assert result.returncode == 0, result.stderr


def test_zsh_syntax() -> None:
    result = _run([_require("zsh"), "-n", str(ZSH_FILE)])
    assert result.returncode == 0, result.stderr


def test_fish_syntax() -> None:
    result = _run([_require("fish"), "--no-execute", str(FISH_FILE)])
    assert result.returncode == 0, result.stderr


def test_man_page_renders_without_warnings() -> None:
    if shutil.which("groff"):
        command = ["groff", "-man", "-Tutf8", "-ww", "-z", str(MAN_FILE)]
    elif shutil.which("mandoc"):
        command = ["mandoc", "-Tlint", "-Wwarning", str(MAN_FILE)]
    elif shutil.which("man"):
        command = ["man", "--warnings", "-l", str(MAN_FILE)]
    else:
        pytest.skip("neither groff, mandoc nor man is installed")
    result = _run(command, env={**os.environ, "MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "80"})
    assert result.returncode == 0 and not result.stderr.strip(), f"{' '.join(command[:1])}: {result.stderr}"


# --- behaviour: what bash offers on TAB ---------------------------------------------------------

BASH_DRIVER = r"""
source "$1"; shift
func=$(complete -p memctl | sed -n 's/.*-F \([^ ]*\) .*/\1/p')
COMP_WORDS=("$@")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE="$*"
COMP_POINT=${#COMP_LINE}
COMPREPLY=()
"$func" memctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"""


def _bash_complete(*words: str) -> list[str]:
    result = _run([_require("bash"), "-c", BASH_DRIVER, "complete-test", str(BASH_FILE), "memctl", *words])
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line]


def test_bash_completes_command_names() -> None:
    assert "load" in _bash_complete("lo")
    assert set(_bash_complete("")) == {p[0] for p in COMMANDS}


def test_bash_completes_options_of_the_command() -> None:
    assert _bash_complete("load", "--ar") == ["--area"]
    assert "--threshold" in _bash_complete("load", "--")
    assert "--json" in _bash_complete("load", "--")  # global options may follow the command name


def test_bash_completes_global_options() -> None:
    offered = _bash_complete("--")
    assert {"--root", "--subdir", "--json", "--help"} <= set(offered)


def test_bash_completes_area_values() -> None:
    assert _bash_complete("load", "--area", "") == ["main", "fragments", "solutions"]
    assert _bash_complete("list", "-a", "fr") == ["fragments"]


def test_bash_skips_option_values_when_finding_the_command() -> None:
    # "load" is the value of --subdir here, so the command is still to be completed.
    assert set(_bash_complete("--subdir", "load", "l")) == {p[0] for p in COMMANDS if p[0].startswith("l")}


def test_bash_completes_paths_for_path_options() -> None:
    assert "scripts/" in {w.rstrip("/") + "/" for w in _bash_complete("--root", "scr")}


# --- behaviour: what fish offers on TAB (skipped without fish) ----------------------------------


def _fish_complete(tmp_path: Path, line: str) -> list[str]:
    fish = _require("fish")
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    result = _run([fish, "-c", 'source $argv[1]; complete -C"$argv[2]"', str(FISH_FILE), line], env=env)
    assert result.returncode == 0, result.stderr
    return [row.split("\t")[0] for row in result.stdout.splitlines() if row]


def test_fish_completes_commands_and_options(tmp_path: Path) -> None:
    assert "load" in _fish_complete(tmp_path, "memctl lo")
    assert _fish_complete(tmp_path, "memctl load --ar") == ["--area"]
    assert set(_fish_complete(tmp_path, "memctl load --area ")) == {"main", "fragments", "solutions"}
    assert "load" in _fish_complete(tmp_path, "memctl --subdir load lo")


# --- the generator follows the tree it is given (nested groups, choices, paths) -----------------


class Color(enum.StrEnum):
    red = "red"
    blue = "blue"


def test_generator_handles_nested_groups_choices_and_paths(tmp_path: Path) -> None:
    demo = typer.Typer()
    sub = typer.Typer(help="Nested group.")
    demo.add_typer(sub, name="cfg")

    @demo.callback()
    def main(root: Annotated[Path | None, typer.Option("--root", help="Root.")] = None) -> None:
        """Demo."""

    @sub.command("get")
    def get(
        key: str,
        color: Annotated[Color, typer.Option("--color", "-c", help="Colour.")] = Color.red,
        out: Annotated[Path | None, typer.Option("--out", help="File.")] = None,
    ) -> None:
        """Get a key."""

    @demo.command("top")
    def top() -> None:
        """Top."""

    files = {
        "bash": gen_docs.render_bash(gen_docs.load_app(demo)),
        "man": gen_docs.render_man(gen_docs.load_app(demo)),
    }
    (tmp_path / "demo.bash").write_text(files["bash"], encoding="utf-8")
    assert '.SS "cfg get"' in files["man"]

    def complete(*words: str) -> list[str]:
        result = _run([_require("bash"), "-c", BASH_DRIVER, "t", str(tmp_path / "demo.bash"), "memctl", *words])
        assert result.returncode == 0, result.stderr
        return result.stdout.split()

    assert sorted(complete("")) == ["cfg", "top"]
    assert complete("cfg", "") == ["get"]
    assert complete("cfg", "get", "--co") == ["--color"]
    assert complete("cfg", "get", "-c", "") == ["red", "blue"]
    assert "scripts" in [w.rstrip("/") for w in complete("cfg", "get", "--out", "scr")]
