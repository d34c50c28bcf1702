"""Restore: bring deleted memories back from history or the archive."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memctl.errors import NotFoundError, UsageError
from memctl.store.base import StoreBase
from memctl.store.interface import iter_chunks
from memctl.store.records import Memory, now_iso


@dataclass
class Version:
    """A removed memory as it can be brought back."""

    memory: Memory
    source: str  # archive | history
    vector: bytes | None = None
    model: str | None = None
    accessed_at: str | None = None


def restorable(store: StoreBase, memory_id: str) -> Version | None:
    """The archived row of a removed memory, else its last removal in history (text, area, metadata)."""
    archived = store.archived(memory_id)
    if archived is not None:
        return Version(
            archived.memory, "archive", vector=archived.vector, model=archived.model, accessed_at=archived.accessed_at
        )
    entries = store.history(memory_id)
    if not entries or entries[0].old_text is None or entries[0].new_text is not None:
        return None  # never existed, purged, or its last change was not a removal
    last = entries[0]
    first = entries[-1]
    changed = next((e.at for e in entries[1:] if e.new_text is not None), first.at)
    memory = Memory(
        id=memory_id,
        text=last.old_text or "",
        area=last.area or "main",
        created_at=first.at,
        updated_at=changed,
        metadata=dict(last.old_metadata or {}),
    )
    return Version(memory, "history")


@dataclass
class RestoreReport:
    restored: list[Memory] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    reembedded: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "restored": [m.to_dict() for m in self.restored],
            "sources": self.sources,
            "reembedded": self.reembedded,
        }


def restore(store: StoreBase, ids: list[str], *, actor: str | None = None) -> RestoreReport:
    """Bring removed memories back with their id, text, area, metadata and timestamps (all or none).

    The archived vector is reused when it was made by the configured model; otherwise (or when
    only history holds the memory) the text is re-embedded.
    """
    import numpy as np

    ids = list(dict.fromkeys(ids))
    if not ids:
        raise UsageError("no id to restore")
    _refuse_existing(store, ids)
    versions: dict[str, Version] = {}
    for memory_id in ids:
        version = restorable(store, memory_id)
        if version is None:
            raise NotFoundError(
                f"no restorable version of {memory_id!r} in store {store.name!r}",
                hint="`memctl history ID` shows what is known; purge removes versions for good",
            )
        versions[memory_id] = version
    info = store.embedder.info
    dim = store.dimension()
    vectors: dict[str, Any] = {}
    for memory_id, version in versions.items():
        blob = version.vector
        if blob and version.model == info.label() and (dim is None or len(blob) == 4 * dim):
            vectors[memory_id] = np.frombuffer(blob, dtype=np.float32)
    fresh = [i for i in ids if i not in vectors]
    if fresh:
        for memory_id, vector in zip(fresh, store.embed([versions[i].memory.text for i in fresh]), strict=True):
            vectors[memory_id] = vector
    records = [versions[i].memory.to_dict() for i in ids]
    stamp = now_iso()
    with store.transaction():
        _refuse_existing(store, ids)  # nobody took an id while we embedded
        store.insert_records(
            records,
            np.stack([vectors[i] for i in ids]),
            info,
            actor=actor,
            op="restore",
            on_conflict="error",
            stored=True,
        )
        store.unarchive(ids)
        # A restore is a use: the memory is not pruned again tonight for not being accessed.
        for chunk in iter_chunks(ids, 900):
            store.touch(chunk, at=stamp)
    return RestoreReport(restored=store.get(ids), sources={i: versions[i].source for i in ids}, reembedded=fresh)


def _refuse_existing(store: StoreBase, ids: list[str]) -> None:
    present = [m.id for m in store.get(ids)]
    if present:
        raise UsageError(
            f"memory {present[0]!r} exists in store {store.name!r}; nothing was restored",
            hint="restore brings back deleted, replaced or pruned memories; `memctl show ID` shows it",
        )
