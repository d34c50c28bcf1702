"""`memctl migrate`: copy a store between backends (embedded folder <-> PostgreSQL), vectors and history kept.

Core only (no typer/rich). The copy is one transaction on the destination: it lands whole or not
at all. Ids, texts, areas, metadata, timestamps and vectors are copied as they are (nothing is
re-embedded), then the source's history (op, actor and time kept) and provenance links; each
copied memory also gets a `migrate` history entry. Archived memories and access times stay behind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from memctl.embeddings import ModelInfo
from memctl.errors import StoreError, UsageError
from memctl.store.base import StoreBase
from memctl.store.interface import iter_chunks
from memctl.store.records import HistoryEntry

BATCH = 2000


@dataclass
class MigrateReport:
    count: int = 0
    history: int = 0
    links: int = 0
    model: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def destination(to: str, root: str | None) -> tuple[str, str | None]:
    """`--to` as (store argument of open_store, root): a database URL, 'embedded' (--root), or a root DIR."""
    from memctl.store import EMBEDDED, is_store_url, url_forms

    if is_store_url(to):
        return to, root
    if to == EMBEDDED:
        return EMBEDDED, root
    if "://" in to or not to.strip():
        raise UsageError(f"--to {to.split('@')[-1]!r} is neither a {url_forms()} URL, {EMBEDDED!r} nor a folder")
    return EMBEDDED, to


def describe(
    store: str | None,
    root: str | None,
    subdir: str,
    overrides: dict[str, Any] | None = None,
    *,
    must_exist: bool = False,
) -> str:
    """Where a store is, for messages and the JSON document (a URL without its password, or the folder)."""
    from memctl.store import store_location

    return store_location(root, subdir, store=store, overrides=overrides, must_exist=must_exist)


_NUL_SHOWN = 5


def _has_nul(*values: Any) -> bool:
    """U+0000 in a value, or in any key or string nested in one (jsonb refuses it as much as text does)."""
    for value in values:
        if isinstance(value, str) and "\x00" in value:
            return True
        if isinstance(value, dict) and (_has_nul(*value) or _has_nul(*value.values())):
            return True
        if isinstance(value, list | tuple) and _has_nul(*value):
            return True
    return False


def _refuse_nul(source: StoreBase, history: list[HistoryEntry]) -> None:
    """PostgreSQL cannot hold U+0000: name the memories and history entries that do, before anything is written."""
    memories = [m.id for m, _ in source.iter_all() if _has_nul(m.id, m.text, m.area, m.metadata, m.created_at)]
    entries = [
        e
        for e in history
        if _has_nul(e.memory_id, e.op, e.actor, e.area, e.old_text, e.new_text, e.old_metadata, e.new_metadata)
    ]
    if not memories and not entries:
        return
    named = [f"memory {i!r}" for i in memories[:_NUL_SHOWN]] + [
        f"history entry {e.hid} ({e.op} of {e.memory_id!r} at {e.at})" for e in entries[:_NUL_SHOWN]
    ]
    more = len(memories) + len(entries) - len(named)
    raise UsageError(
        f"PostgreSQL cannot store the NUL character (U+0000) that {len(memories)} memories and {len(entries)} "
        f"history entries hold: {', '.join(named)}{f' and {more} more' if more else ''}; nothing was copied",
        hint="remove it: `memctl update ID --text ...` (and --meta) for a memory; `memctl purge` drops old "
        "history (its texts are gone for good); then migrate again",
    )


def migrate_store(
    source: StoreBase, dest: StoreBase, *, progress: Callable[[int, int], None] | None = None
) -> MigrateReport:
    """Copy every memory (with its vector), the history and the links of `source` into the empty `dest`."""
    import numpy as np

    held = len(dest)
    if held:
        raise UsageError(
            f"the destination store {dest.name!r} already holds {held} memories; nothing was copied",
            hint="migrate into a new subdir (--to-subdir NAME), or empty the destination first",
        )
    stored = source.model_info()
    total = len(source)
    if total and not stored:
        raise StoreError(
            f"store {source.name!r} has memories but no recorded embedding model",
            hint="run `memctl reindex` on it first",
        )
    info = ModelInfo(stored["provider"], stored["model"]) if stored else None
    dimension = int(stored["dimension"]) if stored else 0
    report = MigrateReport(model=stored)
    history = list(reversed(source.history()))  # oldest first, as they happened
    links = source.links()
    if not dest.holds_nul:
        _refuse_nul(source, history)
    with dest.transaction():
        dest.append_history(history)
        report.history = len(history)
        for batch in iter_chunks(source.iter_all(with_vectors=True), BATCH):
            vectors = np.stack([np.frombuffer(blob, dtype=np.float32) for _, blob in batch])
            if vectors.shape[1] != dimension:
                raise StoreError(
                    f"a stored vector of {batch[0][0].id!r} has {vectors.shape[1]} dimensions, "
                    f"the store says {dimension}",
                    hint="run `memctl reindex` on the source first",
                )
            assert info is not None  # a store with memories has a model: checked above
            dest.insert_records(
                [memory.to_dict() for memory, _ in batch],
                vectors,
                info,
                actor="migrate",
                op="migrate",
                on_conflict="error",
                stored=True,  # what the source holds is copied, timestamps in the stored form
            )
            report.count += len(batch)
            if progress:
                progress(report.count, total)
        for parent, child, kind, _ in links:
            dest.link([parent], child, kind)
        report.links = len(links)
    if report.count:
        dest.rebuild_index()  # embedded: write index.faiss now; PostgreSQL: make sure the HNSW index exists
    return report
