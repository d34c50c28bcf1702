"""StoreBase: the whole store contract both backends implement (memctl/store/interface.py's primitives,
memctl/store/writes.py's writes) plus the review queue, doctor runs, stats, whole-store copies and the
search entry points, which hand over to memctl.search (the retrieval pipeline) with a memo of what only a
write changes."""

from __future__ import annotations

import builtins
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from memctl.embeddings import content_hash
from memctl.errors import NotFoundError, UsageError
from memctl.store.doctor_rows import FINDING_KINDS, DoctorRun, Finding
from memctl.store.filters import Filter
from memctl.store.interface import (
    PreparedRow,
    new_id,
)
from memctl.store.records import (
    AREAS,
    ArchivedMemory,
    Hit,
    Memory,
    PendingItem,
    now_iso,
    relevance,
)
from memctl.store.validate import (
    check_area,
    check_metadata,
    normalised_or_kept,
)
from memctl.store.writes import StoreWrites

if TYPE_CHECKING:
    import numpy as np

    from memctl.search.relevance import Calibration

DF_CACHE_MAX = 100_000  # keyword document frequencies kept per store generation (then started afresh)


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


class StoreBase(StoreWrites):
    """The store contract and its backend-neutral half."""

    # -- the review queue (memctl/review) ----------------------------------------------
    # Pending items live in a table of their own: no vector, no keyword row, so nothing that reads
    # memories (search, list, load, recall, consolidation, export) ever sees one.
    def add_pending(
        self,
        text: str,
        area: str = "fragments",
        metadata: Mapping[str, Any] | None = None,
        reason: str = "",
        *,
        actor: str | None = None,
    ) -> str:
        """Queue `text` for review (not embedded, not searchable); its id. The same text already waiting in
        the same area is not queued twice: its id is returned (memorize run again on one transcript)."""
        text = self._check_text(text)
        check_area(area)
        meta = check_metadata(metadata)
        digest = content_hash(text)
        with self._write():
            waiting = self._pending_with_hash(digest, area, text)
            if waiting is not None:
                return waiting
            rid = self._unused_id()
            item = PendingItem(
                rid,
                text,
                area,
                now_iso(),
                str(reason or ""),
                meta,
                _text_or_none(meta.get("source")),
                _text_or_none(meta.get("transcript")),
            )
            self._insert_pending([item])
            self._history(rid, "pending", area=area, new_text=text, new_metadata=meta, actor=actor)
        return rid

    def _unused_id(self) -> str:
        """A new id that no memory, pending item or archived memory has (restore finds archived ones by id)."""
        while True:
            rid = new_id()
            if not self._existing_ids([rid]) and not self._pending_rows([rid]) and self.archived(rid) is None:
                return rid

    def pending_items(
        self, limit: int | None = None, offset: int = 0, area: str | None = None
    ) -> builtins.list[PendingItem]:
        """Pending items, oldest first (the order a queue is worked through), in `area` when given."""
        if area:
            check_area(area)
        return self._pending_page(limit, offset, area)

    def get_pending(self, ids: Sequence[str]) -> builtins.list[PendingItem]:
        """The pending items with these ids that exist, in the order asked."""
        found = {item.id: item for item in self._pending_rows(list(dict.fromkeys(ids)))}
        return [found[i] for i in ids if i in found]

    def count_pending(self, area: str | None = None) -> int:
        """How many items wait for review (in `area`)."""
        if area:
            check_area(area)
        return self._pending_count(area)

    def require_pending(self, ids: Sequence[str]) -> builtins.list[PendingItem]:
        """The pending items `ids` name (duplicates once); NotFoundError naming the first that is not pending."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            raise UsageError("no pending id given", hint="`memctl review list` shows the ids")
        items = self.get_pending(ids)
        missing = [i for i in ids if i not in {item.id for item in items}]
        if missing:
            raise NotFoundError(
                f"no pending item {missing[0]!r} in store {self.name!r}"
                + (f" (nor {len(missing) - 1} more of the ids)" if len(missing) > 1 else "")
                + "; nothing was changed",
                hint="`memctl review list` shows what waits; `memctl history ID` what became of it",
            )
        return items

    def approve_pending(self, ids: Sequence[str], text: str | None = None, actor: str = "review") -> builtins.list[str]:
        """Make pending items memories (all or none): embedded now, inserted with the pending id, the item's
        area, metadata and created_at, and removed from the queue in one transaction; history records op
        `approve` by `actor`. `text` (one id only) replaces the text first (edit, then approve)."""
        items = self.require_pending(ids)
        if text is not None and len(items) != 1:
            raise UsageError("--text edits one item: give exactly one id with it", hint="approve the others apart")
        texts = [self._check_text(text) if text is not None else item.text for item in items]
        vectors = self.embed(texts)  # before the transaction: the model does not hold writers back
        info = self.embedder.info
        if len(items):
            self._ensure_vector_index(int(vectors.shape[1]))
        stamp = now_iso()
        records = [
            {
                "id": i.id,
                "text": t,
                "area": i.area,
                "created_at": i.created_at,
                "updated_at": stamp,
                "metadata": i.metadata,
            }
            for i, t in zip(items, texts, strict=True)
        ]
        approved = [item.id for item in items]
        with self._write():
            self.require_pending(approved)  # another reviewer may have decided them while we embedded
            self.insert_records(records, vectors, info, actor=actor, op="approve", on_conflict="error")
            self._delete_pending(approved)
            self.touch(approved, at=stamp)  # an approval is a use: not pruned tonight for never being read
        return approved

    def reject_pending(self, ids: Sequence[str], actor: str = "review", *, op: str = "reject") -> builtins.list[str]:
        """Remove pending items (all or none), kept in the archive (no vector) so that `memctl restore ID`
        brings one back as a memory; history and archive record `op` (`reject` by a person, `outdated` when
        memorize met the item's newer value) by `actor`."""
        with self._write():
            items = self.require_pending(ids)
            rejected = [item.id for item in items]
            stamp = now_iso()
            for item in items:
                self._history(item.id, op, area=item.area, old_text=item.text, old_metadata=item.metadata, actor=actor)
            self.unarchive(rejected)  # one archived version per id: this one
            self.put_archive(
                [
                    ArchivedMemory(
                        Memory(item.id, item.text, item.area, item.created_at, stamp, item.metadata),
                        None,
                        None,
                        None,
                        stamp,
                        op,
                        actor,
                    )
                    for item in items
                ]
            )
            self._delete_pending(rejected)
        return rejected

    def requeue_pending(self, item: PendingItem, actor: str = "review") -> str:
        """Put a decided item back in the queue with its own id (undo in `memctl review`): the memory an
        approval made must be gone already, a rejection's archived copy goes; history records `requeue`."""
        with self._write():
            if self._existing_ids([item.id]) or self._pending_rows([item.id]):
                raise UsageError(f"{item.id} is a memory or waits already: it cannot be queued again")
            self.unarchive([item.id])
            self._insert_pending([item])
            self._history(
                item.id, "requeue", area=item.area, new_text=item.text, new_metadata=item.metadata, actor=actor
            )
        return item.id

    def put_pending(self, items: Sequence[PendingItem]) -> None:
        """Insert pending items exactly as given, with no history entries (a backup being restored, a
        migration). Joins an open transaction."""
        with self._write():
            self._insert_pending(items)

    # -- doctor runs (memctl/review/doctor.py; m010_doctor_runs) -------------------------
    def record_doctor_run(self, at: str, figures: Mapping[str, Any], findings: Sequence[Finding]) -> int:
        """Keep one `memctl doctor` run and make its findings the store's current ones (the previous run's
        go), in one transaction; the run's number."""
        unknown = {f.kind for f in findings} - set(FINDING_KINDS)
        if unknown:
            raise UsageError(f"unknown finding kinds {sorted(unknown)}")
        with self._write():
            run = self._insert_doctor_run(at, json.dumps(dict(figures), ensure_ascii=False))
            self._replace_findings(run, findings)
        return run

    def doctor_runs(self, last: int | None = None) -> builtins.list[DoctorRun]:
        """The kept doctor runs, oldest first: all, or the `last` ones."""
        return self._doctor_runs(last)

    def doctor_findings(self, kind: str | None = None) -> builtins.list[Finding]:
        """The latest run's findings (of `kind`), by kind then memory id."""
        if kind is not None and kind not in FINDING_KINDS:
            raise UsageError(f"unknown kind {kind!r}", hint=f"use one of: {', '.join(FINDING_KINDS)}")
        return self._doctor_findings(kind)

    def stats(self) -> dict[str, Any]:
        """What `memctl stats` shows for this store."""
        areas = {area: {"count": 0, "knowledge": 0, "conversation": 0} for area in AREAS}
        for area, count, knowledge in self._area_counts():
            areas[area] = {"count": count, "knowledge": knowledge, "conversation": count - knowledge}
        oldest, newest, never, last = self._age_summary()
        archived, history = self._log_counts()
        knowledge = sum(a["knowledge"] for a in areas.values())
        count = sum(a["count"] for a in areas.values())
        return {
            "subdir": self.name,
            "path": self.location,
            "count": count,
            "areas": areas,
            "knowledge": knowledge,
            "conversation": count - knowledge,
            "oldest": oldest,
            "newest": newest,
            "never_accessed": never,
            "last_accessed": last,
            "archived": archived,
            "history": history,
            "pending": self.count_pending(),
            "bytes": self.size_bytes(),
            "model": self.model_info(),
        }

    # -- whole-store copies (memctl/lifecycle/backup.py) -------------------------------------------
    def snapshot(self) -> AbstractContextManager[Any]:
        """Reads inside see one consistent state of the store (writers go on)."""
        from contextlib import nullcontext

        return nullcontext(self)

    def _restored_row(self, memory: Memory, vector: Any) -> PreparedRow:
        """`memory` as the columns of its row, ids and times as given (put_rows: a backup being restored)."""
        metadata = json.dumps(memory.metadata, ensure_ascii=False)
        return PreparedRow(
            memory.id,
            memory.text,
            memory.area,
            normalised_or_kept(memory.created_at) or memory.created_at,
            normalised_or_kept(memory.updated_at) or memory.updated_at,
            metadata,
            vector,
            content_hash(memory.text),
            self._keywords(memory.metadata),
        )

    def search(
        self,
        query: str,
        limit: int = 10,
        threshold: float | None = None,
        area: str | None = None,
        filter: str | Filter | None = None,
        mode: str = "hybrid",
    ) -> builtins.list[Hit]:
        """Best matches at or above threshold (None: config search_threshold, else the calibration's default).

        mode "dense": the vector index only. "keyword": the keyword index (BM25 embedded, ts_rank_cd on
        PostgreSQL). "hybrid" (default): both, fused. `score` is the relevance (memctl/search/relevance.py): for
        an embedding model with shipped calibration parameters the estimated probability that the memory
        answers the query, which orders the results and cuts them; otherwise (1 + cosine) / 2. The pipeline
        is memctl/search/pipeline.py."""
        return [hit for hit, _ in self.search_evidence(query, limit, threshold, area, filter, mode)]

    def search_evidence(
        self,
        query: str,
        limit: int = 10,
        threshold: float | None = None,
        area: str | None = None,
        filter: str | Filter | None = None,
        mode: str = "hybrid",
    ) -> builtins.list[tuple[Hit, dict[str, float] | None]]:
        """`search`, each hit with the evidence its score was computed from (memctl.search.relevance.FEATURES;
        None when the plain formula scored it). scripts/fit_relevance.py fits the calibration on it."""
        from memctl.search.pipeline import search_evidence

        return search_evidence(self, query, limit, threshold, area, filter, mode)

    def default_threshold(self, purpose: str = "load") -> float:
        """The cut a search (purpose "load") or the recall block ("recall") uses when the caller names none."""
        from memctl.search.pipeline import default_threshold

        return default_threshold(self, purpose)

    # -- what searches keep between calls: facts only a write changes --------------------
    def _generation(self) -> Any:
        """A value that changes whenever a row, the keyword index or the store itself may have changed (a
        write by this handle or any other process, a restore); None: nothing is kept between searches."""
        return None

    def _memo(self) -> dict[Any, Any]:
        """This generation's cache (document frequencies, per-row facts); a new one when it changed. Looked up
        once per search (the store does not change while one runs)."""
        scope = self._scope()
        if scope is not None and "memo" in scope:
            return scope["memo"]
        generation = self._generation()
        memo: dict[Any, Any] = {}
        if generation is not None:
            held = self.__dict__.get("_memo_held")
            if held is None or held[0] != generation:
                held = (generation, memo)
                self.__dict__["_memo_held"] = held
            memo = held[1]
        if scope is not None:
            scope["memo"] = memo
        return memo

    def _df_cache(self) -> dict[Any, Any]:
        """Keyword document frequencies counted since the store last changed (each backend keys its own)."""
        memo = self._memo()
        cache: dict[Any, Any] | None = memo.get("df")
        if cache is None or len(cache) > DF_CACHE_MAX:
            cache = memo["df"] = {}
        return cache

    def _scope(self) -> dict[str, Any] | None:
        """What the search running in this thread keeps until it returns (None outside a search)."""
        local = self.__dict__.get("_scope_local")
        return None if local is None else getattr(local, "scope", None)

    @contextmanager
    def _search_scope(self) -> Iterator[None]:
        local = self.__dict__.get("_scope_local")
        if local is None:
            local = self.__dict__["_scope_local"] = threading.local()
        if getattr(local, "scope", None) is not None:  # a search inside a search: the outer one's
            yield
            return
        local.scope = {}
        try:
            yield
        finally:
            local.scope = None

    def _size(self) -> int:
        """len(self), counted once per search."""
        scope = self._scope()
        if scope is None:
            return len(self)
        if "len" not in scope:
            scope["len"] = len(self)
        return int(scope["len"])

    def _seq_meta(self, seqs: builtins.list[int]) -> dict[int, tuple[str, dict[str, Any]]]:
        """seq -> (area, metadata) of the rows that exist (a backend may read less than a whole row)."""
        return {key: (hit.area, hit.metadata) for key, hit in self._seq_hits([(key, 0.0) for key in seqs])}

    def calibration(self) -> Calibration | None:
        """The relevance calibration of this store's embedding model (None: plain (1 + cosine) / 2)."""
        from memctl.search.relevance import shipped
        from memctl.search.tuning import tuning_of

        if not tuning_of(self).calibrated:
            return None
        return shipped(self.embedder.info.model)

    def search_vector(
        self,
        vector: np.ndarray,
        *,
        limit: int = 10,
        threshold: float = 0.0,
        area: str | None = None,
        filter: str | Filter | None = None,
    ) -> builtins.list[Hit]:
        """Dense search with a query vector, ordered by relevance."""
        only = self._candidates(area, self.compile(filter))
        if only is not None and len(only) == 0:
            return []
        pairs = [(key, relevance(ip)) for key, ip in self._dense_pairs(vector, limit, only)]
        return self._hits([(key, score) for key, score in pairs if score >= threshold])

    def search_all_above(
        self, query: str, threshold: float, area: str | None = None, filter: str | Filter | None = None
    ) -> builtins.list[Hit]:
        """Every memory at or above threshold, however many (no silent cap). `query` is a statement compared
        with stored statements (forget, memorize's replace): it is embedded as a stored text is (E5's passage
        side, not its query side), so the same text has similarity 1.0 and the threshold means the same on
        every model (scripts/forget_threshold.py)."""
        flt = self.compile(filter)
        query = self._check_text(query)
        if self._is_empty():
            return []
        vector = self.embed([query])[0]
        k = 64
        while True:
            hits = self.search_vector(vector, limit=k, threshold=threshold, area=area, filter=flt)
            if len(hits) < k or k >= len(self):
                return hits
            k *= 4

    def _hits(self, pairs: builtins.list[tuple[int, float]]) -> builtins.list[Hit]:
        return [hit for _, hit in self._seq_hits(pairs)]
