"""Moving stores in and out: JSONL export and import (bulk, one transaction per batch)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from memctl.embeddings import ModelInfo
from memctl.errors import InputFormatError
from memctl.store.embedded import EmbeddedStore, check_area, check_metadata, iter_chunks
from memctl.store.records import now_iso

EXPORT_FORMAT = 1
HEADER_KEY = "memctl_export"


def export_lines(store: EmbeddedStore, *, with_vectors: bool = False, area: str | None = None) -> Iterator[str]:
    """The header line, then one JSON object per memory (oldest first)."""
    info = store.model_info()
    header = {HEADER_KEY: EXPORT_FORMAT, "subdir": store.folder.name, "exported_at": now_iso(),
              "count": len(store), "vectors": with_vectors, "embedding": info if with_vectors else None}
    yield json.dumps(header, ensure_ascii=False)
    for memory, blob in store.iter_all(area=area, with_vectors=with_vectors):
        record = memory.to_dict()
        if with_vectors and blob is not None:
            record["vector"] = base64.b64encode(blob).decode("ascii")
        yield json.dumps(record, ensure_ascii=False)


def export_jsonl(store: EmbeddedStore, out: IO[str], *, with_vectors: bool = False, area: str | None = None,
                 progress: Callable[[int], None] | None = None) -> int:
    count = -1
    for count, line in enumerate(export_lines(store, with_vectors=with_vectors, area=area)):
        out.write(line + "\n")
        if progress and count % 1000 == 0:
            progress(count)
    return max(count, 0)


@dataclass
class ImportReport:
    imported: int = 0
    skipped: int = 0
    reembedded: int = 0
    batches: int = 0
    ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("ids")
        return data


def parse_jsonl(lines: list[str], source: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Validate every line before anything is written; errors name the file and line."""
    header: dict[str, Any] | None = None
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise InputFormatError(f"{source}:{number}: not valid JSON ({exc.msg})",
                                   hint="expected one JSON object per line, as `memctl export` writes") from exc
        if not isinstance(obj, dict):
            raise InputFormatError(f"{source}:{number}: expected a JSON object, got {type(obj).__name__}")
        if HEADER_KEY in obj:
            header = obj
            continue
        records.append(_check_record(obj, f"{source}:{number}"))
    return header, records


def _check_record(obj: dict[str, Any], where: str) -> dict[str, Any]:
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        raise InputFormatError(f"{where}: record has no text", hint='each line needs at least {"text": "..."}')
    try:
        check_area(obj.get("area") or "main")
        check_metadata(obj.get("metadata") or {})
    except Exception as exc:  # noqa: BLE001 - re-raised with the line number
        raise InputFormatError(f"{where}: {exc}") from exc
    for key in ("id", "created_at", "updated_at"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            raise InputFormatError(f"{where}: {key} must be a string")
    return obj


def _vectors_usable(header: dict[str, Any] | None, records: list[dict[str, Any]], info: ModelInfo) -> int | None:
    """The dimension of the records' vectors if they all exist and come from the configured model."""
    embedding = (header or {}).get("embedding") or {}
    if (embedding.get("provider"), embedding.get("model")) != (info.provider, info.model):
        return None
    if not records or not all(isinstance(r.get("vector"), str) for r in records):
        return None
    return int(embedding.get("dimension") or 0) or None


def import_jsonl(store: EmbeddedStore, path: Path | None, lines: list[str], *, batch_size: int = 500,
                 on_conflict: str = "skip", progress: Callable[[int, int], None] | None = None) -> ImportReport:
    import numpy as np

    header, records = parse_jsonl(lines, str(path) if path else "<stdin>")
    info = store.embedder.info
    store.check_model(info)
    dimension = _vectors_usable(header, records, info)
    report = ImportReport()
    for batch in iter_chunks(records, batch_size):
        if dimension:
            try:
                vectors = np.stack([np.frombuffer(base64.b64decode(r["vector"]), dtype=np.float32) for r in batch])
            except ValueError as exc:
                raise InputFormatError(f"a stored vector is malformed: {exc}", hint="export again") from exc
            if vectors.shape[1] != dimension:
                raise InputFormatError(f"vector dimension {vectors.shape[1]} does not match the header's {dimension}")
        else:
            vectors = store.embed([r["text"] for r in batch])
            report.reembedded += len(batch)
        ids = store.insert_records(batch, vectors, info, actor="import", op="import", on_conflict=on_conflict)
        report.imported += len(ids)
        report.skipped += len(batch) - len(ids)
        report.batches += 1
        report.ids += ids
        if progress:
            progress(report.imported + report.skipped, len(records))
    return report
