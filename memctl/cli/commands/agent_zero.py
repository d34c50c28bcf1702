"""Agent Zero interop: import-agent-zero, export-agent-zero (core: the memctl/integrations/agent_zero/ package)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer

from memctl.cli.app import app, state
from memctl.cli.render import emit, progress

TimezoneOpt = Annotated[
    str,
    typer.Option(
        "--timezone",
        help="The time zone of Agent Zero's naive timestamps: an "
        "IANA name, or 'local' (this machine's). Its Docker image runs in UTC.",
    ),
]


@app.command("import-agent-zero")
def import_agent_zero(
    ctx: typer.Context,
    path: Annotated[
        Path,
        typer.Argument(
            help="Agent Zero memory folder: usr/memory/<subdir>, or a project's "
            "usr/projects/<name>/.a0proj/memory (index.faiss, index.pkl)."
        ),
    ],
    timezone: TimezoneOpt = "UTC",
    sync: Annotated[
        bool,
        typer.Option(
            "--sync",
            help="Apply what Agent Zero added, edited and deleted since this "
            "store last imported or exported the folder.",
        ),
    ] = False,
) -> None:
    """Import an Agent Zero memory folder (its pickle read safely) into --subdir; existing ids are skipped.

    With --sync, Agent Zero's additions, edits and deletions since the last import or export are applied.
    """
    from memctl.integrations.agent_zero.folder import folder_state, read_agent_zero, write_sync_base
    from memctl.integrations.agent_zero.importer import import_agent_zero as run_import
    from memctl.integrations.agent_zero.importer import sync_agent_zero

    st = state(ctx)
    source = read_agent_zero(path, timezone=timezone)  # refuses a bad pickle before the store is opened
    with st.open_store(actor="import-agent-zero", create=True) as store:
        if sync:
            synced = sync_agent_zero(store, source, batch_size=int(store.config["import_batch_size"]))
            emit(
                st,
                {"subdir": st.subdir, **synced.to_dict()},
                lambda c: c.print(
                    f"synced {synced.source}: {synced.added} added, {synced.updated} updated, "
                    f"{synced.deleted} deleted, "
                    f"{synced.unchanged} unchanged",
                    markup=False,
                ),
            )
            return
        bar = progress(st, len(source.documents), "import")
        try:
            report = run_import(store, source, batch_size=int(store.config["import_batch_size"]), progress=bar.update)
        finally:
            bar.close()
        try:
            write_sync_base(source.path, store, folder_state(source))
        except OSError as exc:  # a read-only Agent Zero folder: the import stands, --sync will not work
            report.notes.append(f"could not record the folder's state for --sync: {exc}")
    emit(st, {"subdir": st.subdir, **report.to_dict()}, lambda c: _human_import(c, report))


def _human_import(console: Any, report: Any) -> None:
    console.print(
        f"imported {report.imported} of {report.documents} documents (reused {report.reused_vectors} "
        f"vectors, re-embedded {report.reembedded}); skipped {len(report.skipped)}",
        markup=False,
    )
    for reason, count in Counter(s["reason"] for s in report.skipped).items():
        console.print(f"  skipped {count}: {reason}", markup=False)
    for note in report.notes:
        console.print(f"  note: {note}", markup=False)


@app.command("export-agent-zero")
def export_agent_zero(
    ctx: typer.Context,
    dest: Annotated[
        Path,
        typer.Argument(
            help="Folder to write (Agent Zero's usr/memory/<subdir>, or a project's "
            "usr/projects/<name>/.a0proj/memory)."
        ),
    ],
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Replace a non-empty DEST (its knowledge_import.json is kept). Stop Agent Zero first."
        ),
    ] = False,
    timezone: TimezoneOpt = "UTC",
) -> None:
    """Write the store as an Agent Zero memory folder (index.faiss, index.pkl, embedding.json)."""
    from memctl.integrations.agent_zero.exporter import export_agent_zero as run_export

    st = state(ctx)
    with st.open_store(actor="export-agent-zero", read_only=True) as store:
        bar = progress(st, len(store), "export")
        try:
            report = run_export(store, dest, force=force, progress=bar.update, timezone=timezone)
        finally:
            bar.close()

    def human(console: Any) -> None:
        verb = "replaced" if report.replaced else "wrote"
        console.print(
            f"{verb} {report.path}: {report.count} documents, dimension {report.dimension}, "
            f"model {report.embedding['model_provider']}/{report.embedding['model_name']}",
            markup=False,
        )
        for note in report.notes:
            console.print(f"  note: {note}", markup=False)

    emit(st, {"subdir": st.subdir, **report.to_dict()}, human)
