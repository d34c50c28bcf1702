"""JSONL export and import of a store (one subdir, or every subdir at once).

Core only (no typer/rich): the CLI's lifecycle commands call one function each.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from memctl.embeddings import ModelInfo
from memctl.errors import InputFormatError, MemctlError, UsageError
from memctl.store.base import StoreBase
from memctl.store.interface import iter_chunks
from memctl.store.records import now_iso
from memctl.store.validate import check_area, check_record

EXPORT_FORMAT = 1
# An export holding superseded versions (records marked "superseded": true) says format 2, so that a memctl
# that would import them as current facts refuses the file instead; this one reads both.
EXPORT_FORMAT_SUPERSEDED = 2
HEADER_KEY = "memctl_export"
# Characters str.splitlines() and many JSON-lines readers treat as line ends; JSON allows them raw
# inside strings, so the export escapes them (every line stays one line for any reader).
_LINE_BREAKERS = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"}
_LINE_BREAKERS_RE = re.compile("[\u2028\u2029\x85]")


def _json_line(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return _LINE_BREAKERS_RE.sub(lambda m: _LINE_BREAKERS[m.group()], text)


def export_lines(store: StoreBase, *, with_vectors: bool = False, area: str | None = None) -> Iterator[str]:
    """The header line, then one JSON object per memory (oldest first), all from one read snapshot:
    the header's count is the number of lines that follow (of `area` alone when given)."""
    if area is not None:
        check_area(area)  # before the header: a bad area writes nothing
    from memctl.store.validity import superseded_archive

    with store.snapshot():
        info = store.model_info()
        count = int(store.stats()["areas"].get(area, {}).get("count", 0)) if area else len(store)
        older = superseded_archive(store, area)
        header = {
            HEADER_KEY: EXPORT_FORMAT_SUPERSEDED if older else EXPORT_FORMAT,
            "subdir": store.name,
            "exported_at": now_iso(),
            "area": area,
            "count": count + len(older),
            "superseded": len(older),
            "vectors": with_vectors,
            "embedding": info if with_vectors else None,
        }
        yield _json_line(header)
        for memory, blob in store.iter_all(area=area, with_vectors=with_vectors):
            record = memory.to_dict()
            if with_vectors and blob is not None:
                record["vector"] = base64.b64encode(blob).decode("ascii")
            yield _json_line(record)
        model = f"{info['provider']}:{info['model']}" if info else None
        for version in older:  # after the current facts: an import puts them back in the archive
            record = {**version.memory.to_dict(), "superseded": True}
            if with_vectors and version.vector is not None and version.model == model:
                record["vector"] = base64.b64encode(version.vector).decode("ascii")
            yield _json_line(record)


def export_jsonl(
    store: StoreBase,
    out: IO[str] | IO[bytes],
    *,
    with_vectors: bool = False,
    area: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Write the export to `out` (text or binary: UTF-8) line by line; returns the memories written."""
    count = -1
    binary = not isinstance(out, io.TextIOBase) and "b" in getattr(out, "mode", "b")
    for count, line in enumerate(export_lines(store, with_vectors=with_vectors, area=area)):
        if binary:
            out.write((line + "\n").encode("utf-8"))  # type: ignore[arg-type]
        else:
            out.write(line + "\n")  # type: ignore[arg-type,call-overload]  # a text stream here
        if progress and count % 1000 == 0:
            progress(count)
    return max(count, 0)


def export_to_stdout(
    store: StoreBase,
    stdout: IO[bytes],
    *,
    with_vectors: bool = False,
    area: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """The export, spooled to a temporary file first: a failure half-way writes nothing to stdout."""
    with tempfile.TemporaryFile() as spool:
        count = export_jsonl(store, spool, with_vectors=with_vectors, area=area, progress=progress)
        spool.seek(0)
        shutil.copyfileobj(spool, stdout, 1 << 20)
    stdout.flush()
    return count


def export_to_file(
    store: StoreBase,
    path: Path,
    *,
    with_vectors: bool = False,
    area: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """The export written atomically to `path` (through a symbolic link: to its target), streamed."""
    from memctl.files import atomic_writer

    with atomic_writer(path) as handle:
        return export_jsonl(store, handle, with_vectors=with_vectors, area=area, progress=progress)


@dataclass
class ImportReport:
    imported: int = 0
    skipped: int = 0  # ids already in the store (--on-conflict skip)
    duplicates: int = 0  # identical memories (text, area, metadata) already stored or earlier in the file
    reembedded: int = 0
    batches: int = 0
    records: int = 0  # records in the file
    expected: int | None = None  # the header's count
    truncated: bool = False  # fewer records than the header announced, or a cut-off last line
    superseded: int = 0  # superseded versions put back in the archive (for --as-of)
    ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("ids")
        return data


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


class ImportInterrupted(MemctlError):
    """Ctrl-C during an import: the batches committed so far are kept (the message says how many)."""

    exit_code = 130


@dataclass
class _Scan:
    header: dict[str, Any] | None = None
    records: int = 0
    truncated_line: int | None = None  # a last line cut off mid-record (no newline, not JSON)


# A line of an export holds one text (JSON escapes make a byte at most 6: \\u0000), its metadata and
# its vector: room for all three, so a file without line breaks (/dev/zero) stops at the first line.
LINE_ALLOWANCE = 8 << 20


def max_line_bytes(max_text: int | None) -> int | None:
    """The longest JSONL line an import reads (None: max_text_bytes is 0, no limit)."""
    return 6 * max_text + LINE_ALLOWANCE if max_text else None


def iter_jsonl_lines(
    handle: IO[bytes], max_line: int | None = None, source: str = "<input>"
) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, line, ends with a newline): lines end at \\n only, never at U+2028, U+0085 or \\r.

    Read one line at a time and never more than `max_line` bytes of one: a longer line is an error."""
    number = 0
    while raw := _read_line(handle, max_line, source, number + 1):
        number += 1
        complete = raw.endswith(b"\n")
        if max_line and len(raw) > max_line:
            raise InputFormatError(
                f"{source}:{number}: the line is longer than {max_line:,} bytes (6 x max_text_bytes plus "
                f"{LINE_ALLOWANCE >> 20} MiB for metadata and vector); reading stopped there",
                hint="expected one memory per line, as `memctl export` writes; raise max_text_bytes for longer texts",
            )
        yield number, raw[:-1] if complete else raw, complete


# A record line starts with "{": a line that does not, read this far without its end, cannot be one, so
# reading stops there instead of at the line cap (/dev/zero, a binary file named by mistake).
LINE_PROBE = 64 << 10


def _read_line(handle: IO[bytes], max_line: int | None, source: str, number: int) -> bytes:
    limit = max_line + 1 if max_line else -1
    first = handle.readline(LINE_PROBE if limit < 0 else min(LINE_PROBE, limit))
    if len(first) < LINE_PROBE or first.endswith(b"\n"):
        return first
    head = first.lstrip()
    if head and not head.startswith(b"{"):
        raise InputFormatError(
            f"{source}:{number}: not a JSON object, and no line end in its first {LINE_PROBE >> 10} KiB; "
            "reading stopped there",
            hint="expected one memory per line, as `memctl export` writes",
        )
    return first + handle.readline(limit - len(first) if limit > 0 else -1)


def _decode(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFormatError(
            f"{where}: not UTF-8 ({exc.reason} at byte {exc.start})", hint="memctl export writes UTF-8"
        ) from exc


def _parse_line(raw: bytes, where: str) -> dict[str, Any] | None:
    line = _decode(raw, where)
    if not line.strip():
        return None
    try:
        obj = json.loads(line, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        # ValueError: bad JSON, NaN/Infinity, or an integer of over 4,300 digits (no .msg then)
        reason = getattr(exc, "msg", None) or ("nested too deeply" if isinstance(exc, RecursionError) else exc)
        raise InputFormatError(
            f"{where}: not valid JSON ({reason})", hint="expected one JSON object per line, as `memctl export` writes"
        ) from exc
    if not isinstance(obj, dict):
        raise InputFormatError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _check_header(obj: dict[str, Any], where: str) -> dict[str, Any]:
    version = obj.get(HEADER_KEY)
    if version not in (EXPORT_FORMAT, EXPORT_FORMAT_SUPERSEDED) or isinstance(version, bool):
        raise InputFormatError(
            f"{where}: export format {version!r} is not one this memctl reads ({EXPORT_FORMAT}, "
            f"{EXPORT_FORMAT_SUPERSEDED})",
            hint="export it again with this memctl, or upgrade memctl",
        )
    count = obj.get("count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
        raise InputFormatError(f"{where}: the header's count {count!r} is not a number of records")
    return obj


def scan_jsonl(handle: IO[bytes], source: str, *, max_text: int | None = None) -> _Scan:
    """Validate every line before anything is written; errors name the file and line. Streams."""
    scan = _Scan()
    for number, raw, complete in iter_jsonl_lines(handle, max_line_bytes(max_text), source):
        where = f"{source}:{number}"
        try:
            obj = _parse_line(raw, where)
        except InputFormatError:
            if not complete and raw.strip():  # the last line, cut off: a truncated file
                scan.truncated_line = number
                break
            raise
        if obj is None:
            continue
        if HEADER_KEY in obj:
            if scan.header is not None or scan.records:
                raise InputFormatError(f"{where}: a second export header", hint="import one export file at a time")
            scan.header = _check_header(obj, where)
            continue
        _check_record(obj, where, max_text)
        scan.records += 1
    return scan


def _records(handle: IO[bytes], source: str, stop: int | None, max_text: int | None) -> Iterator[dict[str, Any]]:
    for number, raw, _ in iter_jsonl_lines(handle, max_line_bytes(max_text), source):
        if stop is not None and number >= stop:
            return
        obj = _parse_line(raw, f"{source}:{number}")
        if obj is not None and HEADER_KEY not in obj:
            yield _check_record(obj, f"{source}:{number}", max_text)


def _check_record(obj: dict[str, Any], where: str, max_text: int | None = None) -> dict[str, Any]:
    """One line's record checked as every write path checks it (memctl.store.validate.check_record), with
    its timestamps in the stored form; errors name the line."""
    try:
        return check_record(obj, now_iso(), max_text or 0)
    except MemctlError as exc:
        raise InputFormatError(f"{where}: {exc.message}", hint=exc.hint) from exc


def _vectors_usable(header: dict[str, Any] | None, info: ModelInfo) -> int | None:
    """The dimension of the records' vectors if the header says they come from the configured model."""
    embedding = (header or {}).get("embedding") or {}
    if not (header or {}).get("vectors") and not embedding:
        return None
    if (embedding.get("provider"), embedding.get("model")) != (info.provider, info.model):
        return None
    return int(embedding.get("dimension") or 0) or None


def identity_key(text: str, area: str | None, metadata: dict[str, Any] | None) -> str:
    """What makes two memories identical for an import: text, area and metadata (key order ignored)."""
    blob = json.dumps([text, area or "main", metadata or {}], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _drop_duplicates(store: StoreBase, batch: list[dict[str, Any]], seen: set[str]) -> list[dict[str, Any]]:
    """The records of `batch` that are not identical to a stored memory nor to an earlier record.

    A record identical to the stored memory of its own id is kept: the id conflict rule decides."""
    from memctl.embeddings import content_hash

    keys = [identity_key(r["text"], r.get("area"), r.get("metadata")) for r in batch]
    hashes = sorted({content_hash(r["text"]) for r in batch})
    stored: dict[str, set[str]] = {}
    for memory in store.memories_with_hashes(hashes):
        stored.setdefault(identity_key(memory.text, memory.area, memory.metadata), set()).add(memory.id)
    kept = []
    for record, key in zip(batch, keys, strict=True):
        if record.get("id") and record["id"] in stored.get(key, ()):
            kept.append(record)  # the same memory, id and all: an id conflict, not a duplicate
            continue
        if key in stored or key in seen:
            continue
        seen.add(key)
        kept.append(record)
    return kept


def import_jsonl(
    store: StoreBase,
    path: Path | None,
    source: IO[bytes] | list[str],
    *,
    batch_size: int = 500,
    on_conflict: str = "skip",
    allow_duplicates: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ImportReport:
    """Import an export (a seekable binary file, or lines) in batches, one transaction each.

    Every line is validated first. Re-running an import (after a kill or Ctrl-C, or twice) adds
    nothing: records whose id is stored are skipped (on_conflict skip), and so are records identical
    (text, area, metadata) to a stored memory or an earlier record, unless allow_duplicates.
    """
    name = str(path) if path else "<stdin>"
    if isinstance(source, list):
        source = io.BytesIO("".join(line + "\n" for line in source).encode("utf-8"))
    max_text = int(store.config.get("max_text_bytes") or 0) or None
    scan = scan_jsonl(source, name, max_text=max_text)
    report = ImportReport(records=scan.records, expected=(scan.header or {}).get("count"))
    report.truncated = scan.truncated_line is not None or (
        report.expected is not None and report.expected != scan.records
    )
    info = store.embedder.info
    store.check_model(info)
    dimension = _vectors_usable(scan.header, info)
    source.seek(0)
    seen: set[str] = set()
    try:
        with store.bulk():
            batches = iter_chunks(_records(source, name, scan.truncated_line, max_text), batch_size)
            batches = _current_only(store, batches, _archive_model(scan.header, info), report)
            if not allow_duplicates:
                batches = _deduplicated(store, batches, seen, report)
            if on_conflict in ("skip", "error"):
                batches = _without_stored_ids(store, batches, on_conflict, report)
            for batch, vectors, embedded in _with_vectors(store, batches, dimension):
                if embedded:
                    report.reembedded += len(batch)
                ids = store.insert_records(batch, vectors, info, actor="import", op="import", on_conflict=on_conflict)
                report.imported += len(ids)
                report.skipped += len(batch) - len(ids)
                report.batches += 1
                report.ids += ids
                if progress:
                    progress(report.imported + report.skipped + report.duplicates, scan.records)
    except KeyboardInterrupt:
        raise ImportInterrupted(
            f"interrupted: {report.imported} memories of {name} were imported and are kept",
            hint="run the same import again: what is stored already is skipped",
        ) from None
    return report


def _archive_model(header: dict[str, Any] | None, info: ModelInfo) -> str | None:
    """`provider:model` of the records' vectors when they are the configured model's (archive rows keep it)."""
    return info.label() if _vectors_usable(header, info) else None


def _current_only(
    store: StoreBase, batches: Iterator[list[dict[str, Any]]], model: str | None, report: ImportReport
) -> Iterator[list[dict[str, Any]]]:
    """The current facts of each batch; its superseded versions go back to the archive (op supersede)."""
    from memctl.store.validity import archive_superseded

    for batch in batches:
        older = [r for r in batch if r.get("superseded") is True]
        if older:
            report.superseded += archive_superseded(store, older, model)
        current = [r for r in batch if r.get("superseded") is not True]
        if current:
            yield current


def _deduplicated(
    store: StoreBase, batches: Iterator[list[dict[str, Any]]], seen: set[str], report: ImportReport
) -> Iterator[list[dict[str, Any]]]:
    for batch in batches:
        kept = _drop_duplicates(store, batch, seen)
        report.duplicates += len(batch) - len(kept)
        if kept:
            yield kept


def _without_stored_ids(
    store: StoreBase, batches: Iterator[list[dict[str, Any]]], on_conflict: str, report: ImportReport
) -> Iterator[list[dict[str, Any]]]:
    """The records whose id the store does not hold, decided before anything is embedded: re-importing an
    export without vectors into its own store embeds nothing (`skip`) or refuses at once (`error`). An id a
    writer takes meanwhile is still skipped or refused by insert_records."""
    for batch in batches:
        stored = store.existing_ids([r["id"] for r in batch if r.get("id")])
        if stored and on_conflict == "error":
            first = next(r["id"] for r in batch if r.get("id") in stored)
            raise UsageError(f"id {first!r} already exists in the store", hint="use --on-conflict skip or new-id")
        kept = [r for r in batch if r.get("id") not in stored]
        report.skipped += len(batch) - len(kept)
        if kept:
            yield kept


def _stored_vectors(batch: list[dict[str, Any]], dimension: int) -> Any:
    import numpy as np

    try:
        vectors = np.stack([np.frombuffer(base64.b64decode(r["vector"]), dtype=np.float32) for r in batch])
    except ValueError as exc:
        raise InputFormatError(f"a stored vector is malformed: {exc}", hint="export again") from exc
    if vectors.shape[1] != dimension:
        raise InputFormatError(f"vector dimension {vectors.shape[1]} does not match the header's {dimension}")
    return vectors


def _with_vectors(
    store: Any, batches: Iterator[list[dict[str, Any]]], dimension: int | None
) -> Iterator[tuple[list[dict[str, Any]], Any, bool]]:
    """(batch, vectors, re-embedded); a batch whose records all carry a vector of the configured
    model uses them. The next batch is embedded while the caller writes this one (the model and
    SQLite both release the GIL), so an import costs about the embedding time alone."""
    from concurrent.futures import Future, ThreadPoolExecutor

    embedder = store.embedder  # the model alone: the store's connection stays in this thread
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending: tuple[list[dict[str, Any]], Future[Any] | Any, bool] | None = None
        for batch in batches:
            if dimension and all(isinstance(r.get("vector"), str) for r in batch):
                current: tuple[list[dict[str, Any]], Any, bool] = (batch, _stored_vectors(batch, dimension), False)
            else:
                current = (batch, pool.submit(embedder.embed, [r["text"] for r in batch]), True)
            if pending is not None:
                yield _resolved(pending)
            pending = current
        if pending is not None:
            yield _resolved(pending)


def _resolved(item: tuple[list[dict[str, Any]], Any, bool]) -> tuple[list[dict[str, Any]], Any, bool]:
    batch, vectors, embedded = item
    return batch, vectors.result() if embedded else vectors, embedded


def export_all(
    root: Path | None,
    out_dir: Path,
    opener: Callable[[str], StoreBase],
    *,
    with_vectors: bool = False,
    area: str | None = None,
    subdirs: Sequence[str] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One JSONL file per subdir under out_dir (`projects/x` -> out_dir/projects/x.jsonl), each written atomically.

    The subdirs are `subdirs` (e.g. those of a PostgreSQL database), else the stores under `root`.
    A store that cannot be read (damaged, locked) does not stop the others: returns (written, failed),
    failed naming each such store and why (the CLI then exits 4)."""

    from memctl.config.paths import list_subdirs

    written: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    names = list(subdirs) if subdirs is not None else list_subdirs(root) if root is not None else []
    for name in names:
        path = out_dir / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with opener(name) as store:
                count = export_to_file(store, path, with_vectors=with_vectors, area=area)
        except (MemctlError, sqlite3.DatabaseError, OSError) as exc:
            failed.append({"subdir": name, "error": str(exc)})
            continue
        written.append({"subdir": name, "path": str(path), "count": count})
    return written, failed
