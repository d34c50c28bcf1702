"""Agent Zero -> memctl: `import-agent-zero`, and `--sync` (apply what Agent Zero changed since)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from memctl.embeddings import ModelInfo
from memctl.errors import UsageError
from memctl.integrations.agent_zero.folder import (
    EMBEDDING_JSON,
    AgentZeroDocument,
    AgentZeroFolder,
    folder_state,
    model_matches,
    sync_base,
    write_sync_base,
)

if TYPE_CHECKING:
    import numpy as np

    from memctl.store.base import StoreBase


# -- importing ---------------------------------------------------------------------------------------
@dataclass
class AgentZeroImportReport:
    source: str
    documents: int = 0
    imported: int = 0
    reused_vectors: int = 0
    reembedded: int = 0
    batches: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "documents": self.documents,
            "imported": self.imported,
            "reused_vectors": self.reused_vectors,
            "reembedded": self.reembedded,
            "batches": self.batches,
            "skipped": self.skipped,
            "notes": self.notes,
        }


def import_agent_zero(
    store: StoreBase,
    source: AgentZeroFolder,
    *,
    batch_size: int = 500,
    progress: Callable[[int, int], None] | None = None,
) -> AgentZeroImportReport:
    """Insert the documents (ids, texts, areas, timestamps, metadata kept); ids the store has are skipped.

    Stored vectors are reused (normalised) when embedding.json names the configured model and the
    index can be trusted; otherwise the texts are embedded with the configured model.
    """
    from memctl.store.interface import iter_chunks

    info = store.embedder.info
    store.check_model(info)
    report = AgentZeroImportReport(source=str(source.path), documents=source.total, skipped=list(source.skipped))
    vectors = _reusable_vectors(store, source, info)
    done = 0
    for chunk in iter_chunks(source.documents, batch_size):
        existing = {m.id for m in store.get([d.id for d in chunk])}  # not embedded for nothing
        batch = [d for d in chunk if d.id not in existing]
        inserted: set[str] = set()
        if batch:
            matrix = _batch_vectors(store, batch, vectors, report)
            records = [
                {
                    "id": d.id,
                    "text": d.text,
                    "area": d.area,
                    "created_at": d.created_at,
                    "updated_at": d.created_at,
                    "metadata": d.metadata,
                }
                for d in batch
            ]
            ids = store.insert_records(
                records, matrix, info, actor="import-agent-zero", op="import", on_conflict="skip"
            )  # "skip" also covers a writer racing us
            inserted = set(ids)
            report.imported += len(ids)
            report.ids += ids
            report.batches += 1
        report.skipped += [{"id": d.id, "reason": "id exists in the store"} for d in chunk if d.id not in inserted]
        done += len(chunk)
        if progress:
            progress(done, len(source.documents))
    report.notes = source.notes.render()
    return report


def _reusable_vectors(store: StoreBase, source: AgentZeroFolder, info: ModelInfo) -> np.ndarray | None:
    if source.vectors is None or not any(d.row is not None for d in source.documents):
        return None
    if not model_matches(source.embedding, info):
        if source.embedding:
            named = f"{source.embedding.get('model_provider')}/{source.embedding.get('model_name')}"
            source.notes.add(
                f"{EMBEDDING_JSON} names {named}, the configured model is {info.label()}: texts are re-embedded"
            )
        return None
    dim = store.dimension()
    if dim is not None and len(store) and source.vectors.shape[1] != dim:
        source.notes.add(
            f"stored vectors have dimension {source.vectors.shape[1]}, the store {dim}: texts are re-embedded"
        )
        return None
    return source.vectors


def _batch_vectors(
    store: StoreBase, batch: list[AgentZeroDocument], vectors: np.ndarray | None, report: AgentZeroImportReport
) -> np.ndarray:
    import numpy as np

    rows: list[Any] = []
    for doc in batch:
        if vectors is None or doc.row is None or not 0 <= doc.row < len(vectors):
            rows.append(None)
            continue
        vector = vectors[doc.row]
        norm = float(np.linalg.norm(vector))
        rows.append(vector / norm if norm > 0 and np.isfinite(norm) else None)  # memctl keeps unit vectors
    todo = [i for i, row in enumerate(rows) if row is None]
    report.reused_vectors += len(batch) - len(todo)
    report.reembedded += len(todo)
    if todo:
        fresh = store.embed([batch[i].text for i in todo])
        for i, vector in zip(todo, fresh, strict=True):
            rows[i] = vector
    return np.ascontiguousarray(np.stack(rows), dtype=np.float32)


@dataclass
class AgentZeroSyncReport:
    source: str
    documents: int = 0
    added: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    reembedded: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sync_agent_zero(store: StoreBase, source: AgentZeroFolder, *, batch_size: int = 500) -> AgentZeroSyncReport:
    """Apply what Agent Zero added, edited and deleted since this store last imported or exported the
    folder: new documents are inserted, edited ones updated (text, area, metadata), deleted ones
    deleted (archived: `memctl restore` brings them back). Memories memctl changed that Agent Zero did
    not touch are kept as memctl has them."""
    base = sync_base(source.path, store)
    if base is None:
        raise UsageError(
            f"store {store.name!r} has not imported or exported {source.path} before",
            hint="run import-agent-zero without --sync first",
        )
    state = folder_state(source)
    report = AgentZeroSyncReport(source=str(source.path), documents=len(state))
    added = [d for d in source.documents if d.id not in base]
    edited = [d for d in source.documents if d.id in base and base[d.id] != state[d.id]]
    gone = [doc_id for doc_id in base if doc_id not in state]
    report.unchanged = len(state) - len(added) - len(edited)
    if added:
        sub = AgentZeroFolder(
            path=source.path,
            documents=added,
            total=len(added),
            skipped=[],
            embedding=source.embedding,
            vectors=source.vectors,
            notes=source.notes,
        )
        inserted = import_agent_zero(store, sub, batch_size=batch_size)
        report.added, report.reembedded = inserted.imported, inserted.reembedded
    present = {m.id: m for m in store.get([d.id for d in edited])}
    for doc in edited:
        if doc.id not in present:  # deleted in memctl meanwhile: Agent Zero's edit brings it back
            sub = AgentZeroFolder(
                path=source.path,
                documents=[doc],
                total=1,
                skipped=[],
                embedding=source.embedding,
                vectors=source.vectors,
                notes=source.notes,
            )
            report.updated += import_agent_zero(store, sub).imported
            continue
        memory = present[doc.id]
        store.update(
            doc.id,
            text=doc.text if doc.text != memory.text else None,
            metadata=doc.metadata,
            replace_metadata=True,
            area=doc.area,
            actor="import-agent-zero",
            op="update",
        )
        report.updated += 1
    if gone:
        report.deleted = len(store.delete(gone, cascade=False, actor="import-agent-zero").deleted)
    write_sync_base(source.path, store, state)
    report.notes = source.notes.render()
    return report
