"""Commands on whole stores: subdirs, export, import, reindex."""

from __future__ import annotations

import io
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Annotated, Any, cast

import typer

from memctl.cli.app import app, state
from memctl.cli.render import count as plural
from memctl.cli.render import emit, info, progress
from memctl.cli.state import State
from memctl.errors import EXIT_PARTIAL, StoreError, UsageError


@app.command()
def subdirs(ctx: typer.Context) -> None:
    """List the stores (sub-stores) under the root, with their sizes."""
    from memctl.store import list_stores

    st = state(ctx)
    listing = list_stores(st.root, store=st.store, overrides=st.overrides)
    rows = [s.to_dict() for s in listing.stores]

    def human(console: object) -> None:
        from memctl.cli.render import table

        cells = [(r["name"], "?" if r["count"] is None else str(r["count"]), r["path"]) for r in rows]
        console.print(table(("subdir", "memories", "path"), cells, title=listing.where))  # type: ignore[attr-defined]

    emit(st, {"root": listing.where, "subdirs": rows}, human)


@app.command()
def export(
    ctx: typer.Context,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="File to write (default: stdout).")] = None,
    vectors: Annotated[bool, typer.Option("--vectors", help="Include the stored vectors (base64 float32).")] = False,
    area: Annotated[str | None, typer.Option("--area", "-a", help="Only this area.")] = None,
    all_subdirs: Annotated[
        bool,
        typer.Option(
            "--all-subdirs", help="Every store under the root: -o names a folder that gets one SUBDIR.jsonl per store."
        ),
    ] = False,
) -> None:
    """Write the store as JSONL: a header line, then one memory per line."""
    from memctl.lifecycle.jsonl import export_to_file, export_to_stdout

    st = state(ctx)
    if all_subdirs:
        return _export_all(ctx, output, vectors, area)
    to_stdout = output is None or str(output) == "-"
    with st.open_store(read_only=True) as store:
        total = store.list(area=area, limit=1)[1] if area else len(store)  # what will be written, not the store
        # Records on a terminal's stdout and a bar on the same terminal's stderr would interleave.
        bar = progress(st, total, "export", show=not (to_stdout and sys.stdout.isatty()))
        try:
            if output is None or to_stdout:
                sys.stdout.flush()
                count = export_to_stdout(store, sys.stdout.buffer, with_vectors=vectors, area=area, progress=bar.update)
            else:
                count = export_to_file(store, output, with_vectors=vectors, area=area, progress=bar.update)
        finally:
            bar.close()
    if to_stdout:
        info(st, f"exported {plural(count, 'memory')}")
        return
    emit(
        st,
        {"subdir": st.subdir, "path": str(output), "count": count, "vectors": vectors},
        lambda c: c.print(f"exported {plural(count, 'memory')} to {output}"),
    )


def _export_all(ctx: typer.Context, output: Path | None, vectors: bool, area: str | None) -> None:
    from memctl.lifecycle.jsonl import export_all
    from memctl.store import list_stores

    st = state(ctx)
    if output is None or str(output) == "-":
        raise UsageError("--all-subdirs needs -o DIR", hint="e.g. memctl export --all-subdirs -o exports/")
    listing = list_stores(st.root, store=st.store, overrides=st.overrides, counts=False)
    where = listing.where
    written, failed = export_all(
        None,
        output,
        lambda name: State(st.root, name, overrides=st.overrides, store=st.store).open_store(read_only=True),
        with_vectors=vectors,
        area=area,
        subdirs=[s.name for s in listing.stores],
    )
    for bad in failed:
        info(st, f"memctl: store {bad['subdir']!r} was not exported: {bad['error']}")
    emit(
        st,
        {"root": where, "path": str(output), "vectors": vectors, "subdirs": written, "failed": failed},
        lambda c: c.print(f"exported {plural(len(written), 'store')} to {output}"),
    )
    if failed:
        raise typer.Exit(EXIT_PARTIAL)


@app.command("import")
def import_(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="JSONL file from `memctl export` (or '-' for stdin).")],
    on_conflict: Annotated[
        str, typer.Option("--on-conflict", help="When an id exists already: skip, new-id or error.")
    ] = "skip",
    batch_size: Annotated[
        int | None, typer.Option("--batch-size", min=1, help="Records per transaction [default: 500].")
    ] = None,
    allow_duplicates: Annotated[
        bool,
        typer.Option(
            "--allow-duplicates",
            help="Also import records identical (text, area, metadata) to a stored memory or an earlier record.",
        ),
    ] = False,
) -> None:
    """Import memories from JSONL (ids, timestamps, metadata kept; vectors reused when the model matches).

    Re-running an import adds nothing twice. Exit 4 when the file is truncated (what it holds is imported).
    """
    from memctl.lifecycle.jsonl import import_jsonl

    st = state(ctx)
    if on_conflict not in ("skip", "new-id", "error"):
        raise UsageError(f"--on-conflict must be skip, new-id or error, not {on_conflict!r}")
    path = None if source == "-" else Path(source)
    with _open_source(path) as handle, st.open_store(actor="import", create=True) as store:
        bar = progress(st, None, "import")
        try:
            report = import_jsonl(
                store,
                path,
                handle,
                batch_size=batch_size or int(store.config["import_batch_size"]),
                on_conflict=on_conflict,
                allow_duplicates=allow_duplicates,
                progress=bar.update,
            )
        finally:
            bar.close()
    if report.truncated:
        info(
            st,
            f"memctl: {source} is truncated: the header announced {report.expected} records, "
            f"{report.records} were complete; those were imported",
        )
    emit(
        st,
        {"subdir": st.subdir, "source": source, **report.to_dict()},
        lambda c: c.print(
            f"imported {report.imported}, skipped {report.skipped} (existing ids) and "
            f"{report.duplicates} identical, re-embedded {report.reembedded}"
        ),
    )
    if report.truncated:
        raise typer.Exit(EXIT_PARTIAL)


@contextmanager
def _open_source(path: Path | None) -> Iterator[IO[bytes]]:
    """The import file, binary (lines end at \\n only). Stdin is read twice (validated, then imported):
    its lines are copied to a temporary file as the validation reads them, so a bad or endless input
    (`yes | memctl import -`) is refused at its first bad line, not after it was all copied."""
    if path is None:
        with tempfile.TemporaryFile() as spool:
            stream = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else _TextAsBytes(sys.stdin)
            yield cast(IO[bytes], _Spooled(stream, spool))
        return
    try:
        handle = path.open("rb")
    except FileNotFoundError as exc:
        raise UsageError(f"import file {str(path)!r} does not exist") from exc
    except OSError as exc:
        raise UsageError(f"cannot read {str(path)!r}: {exc}") from exc
    with handle:
        yield handle


class _Spooled(io.RawIOBase):
    """Stdin read line by line and kept in `spool`; after seek(0) the lines are read from the spool."""

    def __init__(self, stream: Any, spool: IO[bytes]) -> None:
        super().__init__()
        self._stream, self._spool, self._replay = stream, spool, False

    def readable(self) -> bool:
        return True

    def readline(self, size: int | None = -1) -> bytes:
        if self._replay:
            return self._spool.readline(-1 if size is None else size)
        line = bytes(self._stream.readline(-1 if size is None else size))
        self._spool.write(line)
        return line

    def seek(self, offset: int, whence: int = 0) -> int:
        if (offset, whence) != (0, 0):
            raise io.UnsupportedOperation("only seek(0)")
        if not self._replay:
            shutil.copyfileobj(self._stream, self._spool, 1 << 20)  # what the validation did not read
        self._spool.flush()
        self._replay = True
        return self._spool.seek(0)


class _TextAsBytes:
    """A text stream without bytes underneath (an embedding application's), read as UTF-8 lines."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def readline(self, size: int = -1) -> bytes:
        return str(self._stream.readline(size)).encode("utf-8", "surrogatepass")

    def read(self, size: int = -1) -> bytes:
        return str(self._stream.read(size)).encode("utf-8", "surrogatepass")


@app.command()
def reindex(
    ctx: typer.Context,
    index_only: Annotated[
        bool, typer.Option("--index-only", help="Rebuild the vector index from stored vectors; no re-embedding.")
    ] = False,
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
        indexed, stored = store.vector_count(), len(store)  # verify: one vector per memory, no more, no less
    if indexed != stored or count != stored:
        raise StoreError(
            f"after reindexing, the vector index holds {indexed} vectors for {stored} memories",
            hint="run `memctl reindex` again; if it persists, export the store and import it afresh",
        )
    doc = {"subdir": st.subdir, "index_only": index_only, "reembedded": reembedded, "count": count, "model": model}
    emit(st, doc, lambda c: c.print(f"index holds {count} vectors; re-embedded {reembedded}"))
