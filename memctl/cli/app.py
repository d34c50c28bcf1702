"""The Typer app: global options, and the group that lets them appear anywhere on the line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from memctl.cli.state import State

# Global options accepted before or after the command name (`memctl load q --json`).
FLAGS = {"--json", "--quiet", "-q"}
VALUED = {"--root", "--subdir", "-s", "--store"}


class GlobalOptionsGroup(TyperGroup):
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_options(args))

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # keep declaration order in --help


def empty_root(args: list[str]) -> bool:
    """`--root ''` (or `--root=`): typer would read it as the current folder."""
    rest = args[: args.index("--")] if "--" in args else args
    return any(
        a == "--root=" or a == "--root" and i + 1 < len(rest) and not rest[i + 1].strip() for i, a in enumerate(rest)
    )


def hoist_global_options(args: list[str]) -> list[str]:
    """Move global options that follow the command name to the front (stops at `--`)."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest += args[i:]
            break
        name = arg.split("=", 1)[0]
        if arg in FLAGS:
            front.append(arg)
        elif name in VALUED and "=" in arg:
            front.append(arg)
        elif arg in VALUED and i + 1 < len(args):
            front += [arg, args[i + 1]]
            i += 1
        else:
            rest.append(arg)
        i += 1
    return front + rest


app = typer.Typer(
    name="memctl",
    cls=GlobalOptionsGroup,
    help="Curate the long-term memory of AI agents: save, search, forget, import and export memories.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


# Set by main() before parsing: --version is eager, so it runs before --json is parsed.
JSON_REQUESTED = False


def _version(value: bool) -> None:
    if value:
        from memctl import __version__

        typer.echo(f'{{"version": "{__version__}"}}' if JSON_REQUESTED else f"memctl {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    ctx: typer.Context,
    root: Annotated[
        Path | None,
        typer.Option(
            "--root",
            help="Folder holding the stores [env MEMCTL_HOME; default: the platform data dir].",
            show_default=False,
        ),
    ] = None,
    subdir: Annotated[
        str, typer.Option("--subdir", "-s", envvar="MEMCTL_SUBDIR", help="Sub-store: an agent or 'projects/<name>'.")
    ] = "default",
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="postgresql://USER:PASSWORD@HOST:PORT/DB: the stores "
            "live in that database (--subdir selects one); 'embedded': folders "
            "under the root [env MEMCTL_STORE; config store_url].",
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON document (see README).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only essential output; no diagnostics.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """Global options may also follow the command name."""
    from memctl.config.paths import validate_subdir

    ctx.obj = State(
        root=str(root) if root else None, subdir=validate_subdir(subdir), json=json_output, quiet=quiet, store=store
    )


def state(ctx: typer.Context) -> State:
    obj: Any = ctx.find_root().obj
    return obj if isinstance(obj, State) else State()


# The module defining each command, in --help order (tests/unit/test_cli.py checks this against the modules).
COMMAND_MODULES = {
    "demo": "demo",  # first in --help: what a newcomer runs first
    "save": "memories",
    "load": "memories",
    "forget": "memories",
    "delete": "memories",
    "show": "memories",
    "list": "memories",
    "update": "memories",
    "history": "memories",
    "subdirs": "stores",
    "export": "stores",
    "import": "stores",
    "reindex": "stores",
    "import-agent-zero": "agent_zero",
    "export-agent-zero": "agent_zero",
    "import-knowledge": "knowledge",
    "prune": "lifecycle",
    "restore": "lifecycle",
    "purge": "lifecycle",
    "backup": "lifecycle",
    "restore-backup": "lifecycle",
    "stats": "lifecycle",
    "memorize": "memorize",
    "consolidate": "memorize",
    "behaviour": "memorize",
    "migrate": "migrate",
    "recall": "recall",
    "mcp": "mcp",
    "doctor": "doctor",
    "config": "config",
    "review": "review",
}
MODULE_ORDER = list(dict.fromkeys(COMMAND_MODULES.values()))


def register(command: str | None = None) -> None:
    """Import the command modules (each adds its commands to `app`).

    With the name of a known command, only the module that defines it: building typer's commands
    for every module costs ~40 ms, a tenth of a cold `memctl load`. Otherwise all of them, in
    --help order.
    """
    import importlib

    if command in COMMAND_MODULES:
        importlib.import_module(f"memctl.cli.commands.{COMMAND_MODULES[command]}")
        return
    for module in MODULE_ORDER:
        importlib.import_module(f"memctl.cli.commands.{module}")
    place = {module: i for i, module in enumerate(MODULE_ORDER)}
    app.registered_commands.sort(key=lambda info: place[info.callback.__module__.rsplit(".", 1)[1]])
    # Groups too: a module imported early (a test importing one directly) registers its group first.
    app.registered_groups.sort(key=lambda group: MODULE_ORDER.index(COMMAND_MODULES[str(group.name)]))


def command_name(args: list[str]) -> str | None:
    """The command an argument list invokes (global options may come first), or None (e.g. --help)."""
    rest = hoist_global_options(args)
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        if rest[i] in ("--", "--help", "-h", "--version"):
            return None
        i += 2 if rest[i] in VALUED else 1
    return rest[i] if i < len(rest) else None
