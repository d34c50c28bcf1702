"""Agent Zero interop: import-agent-zero, export-agent-zero (the core is memctl/agent_zero.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer

from memctl.cli.app import app, state
from memctl.cli.render import emit, progress


@app.command("import-agent-zero")
def import_agent_zero(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="Agent Zero memory folder: usr/memory/<subdir> "
                                         "(index.faiss, index.pkl, embedding.json).")],
) -> None:
    """Import an Agent Zero memory folder (its pickle read safely) into --subdir; existing ids are skipped."""
    from memctl.agent_zero import import_agent_zero as run_import
    from memctl.agent_zero import read_agent_zero

    st = state(ctx)
    source = read_agent_zero(path)  # refuses a bad pickle before the store is opened
    with st.open_store(actor="import-agent-zero", create=True) as store:
        bar = progress(st, len(source.documents), "import")
        try:
            report = run_import(store, source, batch_size=int(store.config["import_batch_size"]), progress=bar.update)
        finally:
            bar.close()
    emit(st, {"subdir": st.subdir, **report.to_dict()}, lambda c: _human_import(c, report))


def _human_import(console: Any, report: Any) -> None:
    console.print(f"imported {report.imported} of {report.documents} documents (reused {report.reused_vectors} "
                  f"vectors, re-embedded {report.reembedded}); skipped {len(report.skipped)}", markup=False)
    for reason, count in Counter(s["reason"] for s in report.skipped).items():
        console.print(f"  skipped {count}: {reason}", markup=False)
    for note in report.notes:
        console.print(f"  note: {note}", markup=False)


@app.command("export-agent-zero")
def export_agent_zero(
    ctx: typer.Context,
    dest: Annotated[Path, typer.Argument(help="Folder to write (Agent Zero's usr/memory/<subdir>).")],
    force: Annotated[bool, typer.Option("--force", help="Replace a non-empty DEST (its knowledge_import.json "
                                        "is kept). Stop Agent Zero first.")] = False,
) -> None:
    """Write the store as an Agent Zero memory folder (index.faiss, index.pkl, embedding.json, sha256)."""
    from memctl.agent_zero import export_agent_zero as run_export

    st = state(ctx)
    with st.open_store(actor="export-agent-zero") as store:
        bar = progress(st, len(store), "export")
        try:
            report = run_export(store, dest, force=force, progress=bar.update)
        finally:
            bar.close()

    def human(console: Any) -> None:
        verb = "replaced" if report.replaced else "wrote"
        console.print(f"{verb} {report.path}: {report.count} documents, dimension {report.dimension}, "
                      f"model {report.embedding['model_provider']}/{report.embedding['model_name']}", markup=False)
        for note in report.notes:
            console.print(f"  note: {note}", markup=False)

    emit(st, {"subdir": st.subdir, **report.to_dict()}, human)
