"""Commands on whole stores: subdirs, export, import, reindex."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from memctl.cli.app import app, state
from memctl.cli.render import emit, info, progress
from memctl.cli.state import State
from memctl.errors import StoreError, UsageError


@app.command()
def subdirs(ctx: typer.Context) -> None:
    """List the stores (sub-stores) under the root, with their sizes."""
    import sqlite3

    from memctl.paths import list_subdirs, resolve_root

    st = state(ctx)
    if st.store_url() is not None:
        return _subdirs_postgres(st)
    root = resolve_root(st.root)
    rows = []
    for name in list_subdirs(root):
        try:
            with sqlite3.connect(f"file:{root / name / 'memories.sqlite'}?mode=ro", uri=True) as db:
                count = db.execute("SELECT COUNT(*) FROM memories").fetchone()[0]
        except sqlite3.Error:
            count = None
        rows.append({"name": name, "count": count, "path": str(root / name)})

    def human(console: object) -> None:
        from rich.table import Table

        table = Table(title=str(root))
        for column in ("subdir", "memories", "path"):
            table.add_column(column)
        for row in rows:
            table.add_row(row["name"], "?" if row["count"] is None else str(row["count"]), row["path"])
        console.print(table)  # type: ignore[attr-defined]

    emit(st, {"root": str(root), "subdirs": rows}, human)


def _subdirs_postgres(st: State) -> None:
    """The stores of a PostgreSQL database: `root` and `path` name it (no password) instead of folders."""
    with st.open_store(create=True) as store:  # a database connection; no row is written
        where = store.location.rsplit("#", 1)[0]
        rows = [{"name": name, "count": count, "path": f"{where}#{name}"} for name, count in store.subdirs()]
    emit(st, {"root": where, "subdirs": rows},
         lambda c: c.print("\n".join(f"{r['name']}\t{r['count']}" for r in rows) or f"no stores in {where}"))


@app.command()
def export(
    ctx: typer.Context,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="File to write (default: stdout).")] = None,
    vectors: Annotated[bool, typer.Option("--vectors", help="Include the stored vectors (base64 float32).")] = False,
    area: Annotated[str | None, typer.Option("--area", "-a", help="Only this area.")] = None,
    all_subdirs: Annotated[bool, typer.Option("--all-subdirs", help="Every store under the root: -o names a folder "
                                              "that gets one SUBDIR.jsonl per store.")] = False,
) -> None:
    """Write the store as JSONL: a header line, then one memory per line."""
    from memctl.files import atomic_write_bytes
    from memctl.lifecycle import export_jsonl

    st = state(ctx)
    if all_subdirs:
        return _export_all(ctx, output, vectors, area)
    with st.open_store() as store:
        bar = progress(st, len(store), "export")
        if output is None or str(output) == "-":
            count = export_jsonl(store, sys.stdout, with_vectors=vectors, area=area, progress=bar.update)
            bar.close()
            info(st, f"exported {count} memories")
            return
        import io

        buffer = io.StringIO()
        count = export_jsonl(store, buffer, with_vectors=vectors, area=area, progress=bar.update)
        bar.close()
        atomic_write_bytes(output, buffer.getvalue().encode("utf-8"))
    emit(st, {"subdir": st.subdir, "path": str(output), "count": count, "vectors": vectors},
         lambda c: c.print(f"exported {count} memories to {output}"))


def _export_all(ctx: typer.Context, output: Path | None, vectors: bool, area: str | None) -> None:
    from memctl.lifecycle import export_all

    st = state(ctx)
    if output is None or str(output) == "-":
        raise UsageError("--all-subdirs needs -o DIR", hint="e.g. memctl export --all-subdirs -o exports/")
    where = _where(st)
    written = export_all(None, output, lambda name: State(st.root, name, overrides=st.overrides,
                                                          store=st.store).open_store(),
                         with_vectors=vectors, area=area, subdirs=st.subdir_names())
    emit(st, {"root": where, "path": str(output), "vectors": vectors, "subdirs": written},
         lambda c: c.print(f"exported {len(written)} stores to {output}"))


def _where(st: State) -> str:
    """The root folder, or the PostgreSQL database (no password) that holds the stores."""
    from memctl.paths import resolve_root

    url = st.store_url()
    if url is None:
        return str(resolve_root(st.root))
    from memctl.store.postgres import redact

    return redact(url)


@app.command("import")
def import_(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="JSONL file from `memctl export` (or '-' for stdin).")],
    on_conflict: Annotated[str, typer.Option(
        "--on-conflict", help="When an id exists already: skip, new-id or error.")] = "skip",
    batch_size: Annotated[int | None, typer.Option("--batch-size", min=1,
                                                   help="Records per transaction [config import_batch_size].")] = None,
) -> None:
    """Import memories from JSONL (ids, timestamps, metadata kept; vectors reused when the model matches)."""
    from memctl.lifecycle import import_jsonl

    st = state(ctx)
    if on_conflict not in ("skip", "new-id", "error"):
        raise UsageError(f"--on-conflict must be skip, new-id or error, not {on_conflict!r}")
    path = None if source == "-" else Path(source)
    lines = _read_lines(path)
    with st.open_store(actor="import", create=True) as store:
        bar = progress(st, None, "import")
        try:
            report = import_jsonl(store, path, lines, batch_size=batch_size or int(store.config["import_batch_size"]),
                                  on_conflict=on_conflict, progress=bar.update)
        finally:
            bar.close()
    emit(st, {"subdir": st.subdir, "source": source, **report.to_dict()},
         lambda c: c.print(f"imported {report.imported}, skipped {report.skipped} (existing ids), "
                           f"re-embedded {report.reembedded}"))


def _read_lines(path: Path | None) -> list[str]:
    if path is None:
        return sys.stdin.read().splitlines()
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as exc:
        raise UsageError(f"import file {str(path)!r} does not exist") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {str(path)!r}: {exc}") from exc


@app.command()
def reindex(
    ctx: typer.Context,
    index_only: Annotated[bool, typer.Option("--index-only", help="Rebuild the vector index from stored vectors; "
                                             "no re-embedding.")] = False,
) -> None:
    """Re-embed every memory with the configured model (after a model change) and rebuild the index."""
    st = state(ctx)
    with st.open_store(actor="reindex") as store:
        if index_only:
            count = store.rebuild_index()
            reembedded = 0
        else:
            bar = progress(st, len(store), "reindex")
            try:
                reembedded = store.reindex(progress=bar.update)
            finally:
                bar.close()
            count = len(store)
        model = store.model_info()
        index = store.vector_index()  # verify: one vector per memory, nothing more, nothing less
        indexed, stored = (int(index.index.ntotal) if index else 0), len(store)
    if indexed != stored or count != stored:
        raise StoreError(f"after reindexing, the vector index holds {indexed} vectors for {stored} memories",
                         hint="run `memctl reindex` again; if it persists, export the store and import it afresh")
    doc = {"subdir": st.subdir, "index_only": index_only, "reembedded": reembedded, "count": count, "model": model}
    emit(st, doc, lambda c: c.print(f"index holds {count} vectors; re-embedded {reembedded}"))
