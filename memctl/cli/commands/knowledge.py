"""Commands on knowledge folders: import-knowledge."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from memctl.cli.app import app, state
from memctl.cli.commands.memories import DryRunOpt
from memctl.cli.render import emit, info, progress
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
    from memctl.knowledge.sync import import_knowledge as run_import
    from memctl.knowledge.sync import resolve_folders

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
    from memctl.cli.render import piped

    if piped():
        _render_records(console, report)
        return
    _render_tables(console, report)


def _render_records(console: Any, report: Any) -> None:
    """Into a pipe: one tab-separated record per changed or skipped file on stdout; the summary is a
    message (stderr)."""
    from memctl.cli.render import table

    rows = [
        (f.status, f.area, f.file_type, f.chunks, f.path, f.renamed_from or f.error or "")
        for f in report.files
        if f.status != "unchanged"
    ]
    rows += [("skipped", "", "", 0, skip.path, skip.reason) for skip in report.skipped]
    console.print(table(("status", "area", "type", "chunks", "file", "note"), rows))
    for line in _summary_lines(report):
        sys.stderr.write(line + "\n")


def _summary_lines(report: Any) -> list[str]:
    from memctl.knowledge.sync import STATUSES

    counts = ", ".join([*(f"{status} {report.count(status)}" for status in STATUSES), f"skipped {len(report.skipped)}"])
    verb = "would embed" if report.dry_run else "embedded"
    lines = [f"{'dry run: ' if report.dry_run else ''}files: {counts}"]
    lines.append(f"{verb} {report.embedded} chunk texts; reused {report.reused} stored vectors")
    if report.other_folders:
        lines.append(f"other knowledge folders in this store, not touched: {', '.join(report.other_folders)}")
    return lines


def _render_tables(console: Any, report: Any) -> None:
    from memctl.cli.render import table
    from memctl.knowledge.sync import STATUSES

    listed = [f for f in report.files if f.status != "unchanged"]
    if listed:
        rows = []
        for f in listed:
            note = f" (from {f.renamed_from})" if f.renamed_from else f": {f.error}" if f.error else ""
            rows.append((f.status, f.area, f.file_type, f.chunks, f.path + note))
        title = "would change" if report.dry_run else "changes"
        console.print(table(("status", "area", "type", "chunks", "file"), rows, title=title, cut={"file": 140}))
    counts = [(status, report.count(status), report.chunks(status)) for status in STATUSES]
    title = ("dry run: " if report.dry_run else "") + ", ".join(str(f.path) for f in report.folders)
    console.print(table(("files", "count", "chunks"), [*counts, ("skipped", len(report.skipped), "")], title=title))
    verb = "would embed" if report.dry_run else "embedded"
    console.print(f"{verb} {report.embedded} chunk texts; reused {report.reused} stored vectors")
    for skip in report.skipped[:LISTED_SKIPS]:
        console.print(f"skipped {skip.path} ({skip.reason})")
    if len(report.skipped) > LISTED_SKIPS:
        console.print(f"… and {len(report.skipped) - LISTED_SKIPS} more skipped (see --json)")
    if report.other_folders:
        console.print(f"other knowledge folders in this store, not touched: {', '.join(report.other_folders)}")
