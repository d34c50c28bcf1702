"""Commands on knowledge folders: import-knowledge."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from memctl.cli.app import app, state
from memctl.cli.commands.memories import DryRunOpt
from memctl.cli.render import emit, info, progress, short
from memctl.errors import EXIT_PARTIAL

LISTED_SKIPS = 20  # skipped paths shown to people; --json has them all


@app.command("import-knowledge")
def import_knowledge(
    ctx: typer.Context,
    dirs: Annotated[
        list[Path] | None,
        typer.Argument(metavar="[DIR]...", help="Knowledge folders [config knowledge_dirs].", file_okay=False),
    ] = None,
    dry_run: DryRunOpt = False,
) -> None:
    """Import knowledge folders as chunks: only new and changed files are read and embedded.

    Files directly in DIR go to area main; DIR/main, DIR/fragments and DIR/solutions go to that
    area (recursively). Exit 4 when some files could not be read (they keep their old chunks).
    """
    from memctl.knowledge import import_knowledge as run_import
    from memctl.knowledge import resolve_folders

    st = state(ctx)
    with st.open_store(actor="knowledge", create=True) as store:
        folders = resolve_folders(store.config, dirs)
        bar = progress(st, None, "import-knowledge")
        try:
            report = run_import(store, folders, dry_run=dry_run, progress=bar.update)
        finally:
            bar.close()
    for failed in report.failed:
        info(st, f"memctl: cannot read {failed.path}: {failed.error}")
    emit(st, {"subdir": st.subdir, **report.to_dict()}, lambda c: _render(c, report))
    if report.failed:
        raise typer.Exit(EXIT_PARTIAL)


def _render(console: Any, report: Any) -> None:
    from rich.table import Table

    from memctl.knowledge import STATUSES

    listed = [f for f in report.files if f.status != "unchanged"]
    if listed:
        files = Table(title="would change" if report.dry_run else "changes")
        for column in ("status", "area", "type", "chunks", "file"):
            files.add_column(column, overflow="fold")
        for f in listed:
            note = f" (from {f.renamed_from})" if f.renamed_from else f": {f.error}" if f.error else ""
            files.add_row(f.status, f.area, f.file_type, str(f.chunks), short(f.path + note, 140))
        console.print(files)
    summary = Table(title=("dry run: " if report.dry_run else "") + ", ".join(str(f.path) for f in report.folders))
    for column in ("files", "count", "chunks"):
        summary.add_column(column, justify="left" if column == "files" else "right")
    for status in STATUSES:
        summary.add_row(status, str(report.count(status)), str(report.chunks(status)))
    summary.add_row("skipped", str(len(report.skipped)), "")
    console.print(summary)
    verb = "would embed" if report.dry_run else "embedded"
    console.print(f"{verb} {report.embedded} chunk texts; reused {report.reused} stored vectors")
    for skip in report.skipped[:LISTED_SKIPS]:
        console.print(f"skipped {skip.path} ({skip.reason})")
    if len(report.skipped) > LISTED_SKIPS:
        console.print(f"… and {len(report.skipped) - LISTED_SKIPS} more skipped (see --json)")
    if report.other_folders:
        console.print(f"other knowledge folders in this store, not touched: {', '.join(report.other_folders)}")
