"""`memctl config`: where each setting comes from, setting one, and where the files are."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from memctl.cli.app import app, state
from memctl.cli.render import emit, info

config_app = typer.Typer(
    help="Show, get and set configuration (layers: defaults < user file < store file < env MEMCTL_<KEY>).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(config_app, name="config")


def _folder(ctx: typer.Context) -> Path:
    from memctl.config.paths import resolve_root, store_dir

    return store_dir(resolve_root(state(ctx).root), state(ctx).subdir)


@config_app.command("show")
def show(
    ctx: typer.Context,
    effective: Annotated[bool, typer.Option("--effective", help="Every key, defaults included.")] = False,
) -> None:
    """The keys set above the defaults (or, with --effective, every key) and where each value comes from."""
    from memctl.config import load_config
    from memctl.config.file import config_paths, settings

    st = state(ctx)
    folder = _folder(ctx)
    rows = settings(load_config(folder, st.overrides), effective=effective)
    doc = {
        "subdir": st.subdir,
        "effective": effective,
        "files": config_paths(folder),
        "values": {s.key: s.to_dict() for s in rows},
    }
    if not rows:
        info(st, "every key has its default (`memctl config show --effective` lists them)")
    emit(st, doc, (lambda c: c.print(_table(rows))) if rows else None)


def _table(rows: list[Any]) -> Any:
    import json

    from memctl.cli.render import table

    return table(("key", "value", "source"), [(s.key, json.dumps(s.value, ensure_ascii=False), s.source) for s in rows])


@config_app.command("get")
def get(ctx: typer.Context, key: Annotated[str, typer.Argument(help="A key of default_config.yaml.")]) -> None:
    """Print one key's effective value (JSON) and, on stderr, where it comes from."""
    import json

    from memctl.config import load_config
    from memctl.config.file import check_key, settings

    st = state(ctx)
    check_key(key)
    setting = next(s for s in settings(load_config(_folder(ctx), st.overrides)) if s.key == key)
    if not st.json:  # --json has it as "source"; stdout stays the bare value for `$(memctl config get KEY)`
        info(st, f"{key} from {setting.source}")
    emit(
        st,
        {"subdir": st.subdir, "key": key, **setting.to_dict()},
        lambda c: c.print(json.dumps(setting.value, ensure_ascii=False), soft_wrap=True),
    )


@config_app.command("set")
def set_(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(help="A key of default_config.yaml.")],
    value: Annotated[str, typer.Argument(help="Read as YAML: 5, 0.8, true, null, '[a, b]'.")],
    scope: Annotated[
        str, typer.Option("--scope", help="user (your config file) or store (this subdir's config.yaml).")
    ] = "user",
) -> None:
    """Set KEY to VALUE in the user or store config file (validated; other keys and comment lines kept)."""
    from memctl.config.file import parse_value, scope_path, set_value

    st = state(ctx)
    path = scope_path(scope, _folder(ctx))
    parsed = parse_value(key, value)
    previous = set_value(path, key, parsed)
    emit(
        st,
        {"subdir": st.subdir, "scope": scope, "path": str(path), "key": key, "value": parsed, "previous": previous},
        lambda c: c.print(f"{key} = {parsed!r} in {path}"),
    )


@config_app.command("path")
def path(ctx: typer.Context) -> None:
    """Where the configuration files are (defaults, user file, this store's file)."""
    from memctl.config.file import config_paths

    st = state(ctx)
    files = config_paths(_folder(ctx))
    exists = {k: Path(v).is_file() for k, v in files.items()}
    doc = {"subdir": st.subdir, **files, "exists": exists}
    emit(
        st,
        doc,
        lambda c: [
            c.print(f"{k}: {v}{'' if exists[k] else ' (not present)'}", soft_wrap=True) for k, v in files.items()
        ],
    )
