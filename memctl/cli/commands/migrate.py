"""`memctl migrate`: copy the store between the embedded backend and PostgreSQL."""

from __future__ import annotations

from typing import Annotated

import typer

from memctl.cli.app import app, state
from memctl.cli.render import count, emit, progress


@app.command()
def migrate(
    ctx: typer.Context,
    to: Annotated[
        str,
        typer.Option(
            "--to",
            help="postgresql://… (a database), 'embedded' (a folder under --root) or DIR (a folder under root DIR).",
            show_default=False,
        ),
    ],
    to_subdir: Annotated[
        str | None,
        typer.Option("--to-subdir", help="Subdir at the destination [the same as --subdir].", show_default=False),
    ] = None,
) -> None:
    """Copy the store (--subdir, from --store) to another backend: memories with their vectors, history, links.

    The destination subdir must be empty; the copy is one transaction there. The source is not changed.
    """
    from memctl.config.paths import validate_subdir
    from memctl.errors import UsageError
    from memctl.lifecycle.migrate import describe, destination, migrate_store
    from memctl.store import open_store

    st = state(ctx)
    dest_subdir = validate_subdir(to_subdir or st.subdir)
    dest_store, dest_root = destination(to, st.root)
    source_where = describe(st.store, st.root, st.subdir, st.overrides, must_exist=True)
    dest_where = describe(dest_store, dest_root, dest_subdir, st.overrides)
    if source_where == dest_where:
        raise UsageError(
            f"source and destination are the same store ({source_where})",
            hint="--to names another backend, folder or --to-subdir",
        )
    with (
        open_store(dest_root, dest_subdir, overrides=st.overrides, actor="migrate", store=dest_store) as dest,
        st.open_store(actor="migrate") as source,
    ):
        bar = progress(st, len(source), "migrate")
        try:
            report = migrate_store(source, dest, progress=bar.update)
        finally:
            bar.close()
    doc = {"subdir": st.subdir, "from": source_where, "to": dest_where, "to_subdir": dest_subdir, **report.to_dict()}
    emit(
        st,
        doc,
        lambda c: c.print(
            f"copied {count(report.count, 'memory')}, "
            f"{count(report.history, 'history entry')} and "
            f"{count(report.links, 'link')} from {source_where} to {dest_where}"
        ),
    )
