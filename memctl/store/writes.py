"""The write half every backend shares: validation, ids, embedding and the store's model, inserts,
updates, deletes and links, over the primitives of memctl/store/interface.py."""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from memctl.embeddings import CachedEmbedder, Embedder, ModelInfo, content_hash, make_embedder
from memctl.errors import ModelMismatchError, NotFoundError, UsageError
from memctl.store.filters import Filter, compile_filter
from memctl.store.interface import (
    PreparedRow,
    StoreInterface,
    keywords_of,
    new_id,
)
from memctl.store.records import (
    DeleteResult,
    Memory,
    now_iso,
)
from memctl.store.validate import (
    check_area,
    check_metadata,
    check_record,
    check_stored_metadata,
    check_text_size,
    normalised_or_kept,
)
from memctl.text.chat_line import with_speaker

if TYPE_CHECKING:
    import numpy as np

    from memctl.config import Config


def _stored_record(record: Mapping[str, Any], now: str) -> dict[str, Any]:
    """A memory a store already held, as _prepare_rows inserts it: timestamps in the stored form when they
    read as timestamps, nothing else refused but what no row may hold (metadata that is not JSON, an area
    memctl does not have)."""
    created_at = normalised_or_kept(record.get("created_at")) or now
    return {
        **record,
        "area": check_area(record.get("area") or "main"),
        "metadata": check_stored_metadata(record.get("metadata")),
        "created_at": created_at,
        "updated_at": normalised_or_kept(record.get("updated_at")) or created_at,
    }


class StoreWrites(StoreInterface):
    """Validation, ids, the embedder and the write paths, shared by every backend."""

    def _is_empty(self) -> bool:
        return len(self) == 0

    def check_model(self, info: ModelInfo | None = None) -> None:
        """Refuse to mix vectors of different models in one store (an interrupted reindex too)."""
        info = info or self.embedder.info
        reindexing, stored = self._model_state()
        if reindexing:
            raise ModelMismatchError(
                f"a reindex of store {self.name!r} was interrupted", hint="run `memctl reindex` to finish it"
            )
        if stored is None or self._is_empty():
            return
        if (stored.get("provider"), stored.get("model")) != (info.provider, info.model):
            raise ModelMismatchError(
                f"store {self.name!r} was built with embedding model "
                f"{stored.get('provider')}:{stored.get('model')}, but the configured model is {info.label()}",
                hint="run `memctl reindex` to re-embed it with the configured model, or change embedding_model back",
            )

    def _record_model(self, info: ModelInfo, dimension: int) -> None:
        """Make the store's model record say `info` and `dimension` (joins an open transaction)."""
        if self.model_info() != {"provider": info.provider, "model": info.model, "dimension": int(dimension)}:
            self._write_model(info, dimension)

    def find_exact(
        self, text: str, area: str | None = None, filter: str | Filter | None = None
    ) -> builtins.list[Memory]:
        """The memories whose text is exactly `text` (in `area`, matching `filter`), oldest first."""
        if area:
            check_area(area)
        flt = self.compile(filter)
        return [m for m in self._exact_rows(text, area) if flt is None or flt.matches(m.filter_names())]

    def list(
        self, *, area: str | None = None, filter: str | Filter | None = None, limit: int = 20, offset: int = 0
    ) -> tuple[builtins.list[Memory], int]:
        """One page of memories, newest first, and how many match in all."""
        if area:
            check_area(area)
        flt = self.compile(filter)
        if flt is None:
            return self._page(area, limit, offset)
        matched = [seq for seq, _ in self._filtered(area, flt, order="created_at DESC, seq DESC")]
        page = matched[offset : offset + limit]
        rows = dict(self._seq_rows(page))
        return [rows[seq] for seq in page if seq in rows], len(matched)

    def reindex(self, batch_size: int = 256, progress: Any = None) -> int:
        """Re-embed every memory with the configured model, then rebuild the index; the number re-embedded.

        Resumable: progress is committed with each batch, so a killed reindex continues where it stopped.
        """
        info = self.embedder.info
        state = self._reindex_state()
        resuming = bool(state) and state.get("model") == info.label()
        last_seq = int(state["last_seq"]) if resuming else 0
        dimension = state.get("dimension") if resuming else None
        total, done = len(self), 0
        with self._reindexing():  # before the first write: the old model record may be what is broken
            with self._write():
                self._set_reindex_state({"model": info.label(), "last_seq": last_seq, "dimension": dimension})
            while rows := self._texts_after(last_seq, batch_size):
                vectors = self.embedder.embed([text for _, text in rows])
                dimension, last_seq = int(vectors.shape[1]), rows[-1][0]
                with self._write():
                    self._set_vectors([(seq, vector) for (seq, _), vector in zip(rows, vectors, strict=True)])
                    self._set_reindex_state({"model": info.label(), "last_seq": last_seq, "dimension": dimension})
                done += len(rows)
                if progress:
                    progress(done, total)
            with self._write():
                if dimension is not None:
                    self._write_model(info, int(dimension))
                self._set_reindex_state(None)
        self.rebuild_index()
        return done

    def _reindexing(self) -> AbstractContextManager[Any]:
        """Held while `reindex` runs (a backend with derived files defers their upkeep)."""
        from contextlib import nullcontext

        return nullcontext()

    def bulk(self) -> AbstractContextManager[Any]:
        """Context for many writes in a row; backends with deferred maintenance override it."""
        from contextlib import nullcontext

        return nullcontext(self)

    def _checked_dimension(self, records: Sequence[Mapping[str, Any]], vectors: np.ndarray, info: ModelInfo) -> int:
        """The dimension of a batch about to be inserted (0 for an empty batch), once the model, the
        record/vector counts and the store's dimension agree."""
        self.check_model(info)
        if len(records) != len(vectors):
            raise UsageError(f"{len(records)} records but {len(vectors)} vectors")
        dim = int(vectors.shape[1]) if len(records) else 0
        known_dim = self.dimension()
        if known_dim is not None and dim and dim != known_dim and not self._is_empty():
            raise ModelMismatchError(
                f"vectors of dimension {dim} cannot join a store of dimension {known_dim}", hint="run `memctl reindex`"
            )
        return dim

    def _prepare_rows(
        self,
        records: Sequence[Mapping[str, Any]],
        vectors: np.ndarray,
        taken: set[str],
        on_conflict: str,
        op: str,
        actor: str | None,
        stored: bool = False,
    ) -> tuple[builtins.list[PreparedRow], builtins.list[tuple[Any, ...]]]:
        """Validated rows to insert and their history rows; resolves id conflicts (skip / error / new-id).
        `stored`: memories a store already held (migrate, restore) keep what memctl once accepted; their
        timestamps only take the stored form."""
        now = now_iso()
        rows: builtins.list[PreparedRow] = []
        history: builtins.list[tuple[Any, ...]] = []
        for record, vector in zip(records, vectors, strict=True):
            rid = record.get("id") or new_id()
            if rid in taken:
                if on_conflict == "skip":
                    continue
                if on_conflict == "error":
                    raise UsageError(f"id {rid!r} already exists in the store", hint="use --on-conflict skip or new-id")
                rid = new_id()
            taken.add(rid)
            checked = (
                _stored_record(record, now)
                if stored
                else check_record(record, now, int(self.config.get("max_text_bytes") or 0))
            )
            meta, area = checked["metadata"], checked["area"]
            meta_json = json.dumps(meta, ensure_ascii=False)
            rows.append(
                PreparedRow(
                    rid,
                    record["text"],
                    area,
                    checked["created_at"],
                    checked["updated_at"],
                    meta_json,
                    vector,
                    content_hash(record["text"]),
                    self._keywords(meta),
                )
            )
            history.append((rid, op, actor or self.actor, now, area, None, record["text"], None, meta_json))
        return rows, history

    def insert_records(
        self,
        records: Sequence[Mapping[str, Any]],
        vectors: np.ndarray,
        info: ModelInfo,
        *,
        actor: str | None = None,
        op: str = "add",
        on_conflict: str = "error",
        links: Mapping[str, Sequence[str]] | None = None,
        stored: bool = False,
    ) -> builtins.list[str]:
        """Insert fully prepared records (ids and timestamps optional) with their vectors, atomically.

        on_conflict: "error" (refuse the batch), "skip" (keep the stored one) or "new-id".
        Every record is validated (memctl.store.validate.check_record) unless `stored` (memories a store
        held: migrate, restore).
        Returns the ids inserted (skipped records are left out).
        """
        dim = self._checked_dimension(records, vectors, info)
        if dim:
            self._ensure_vector_index(dim)
        inserted: builtins.list[str] = []
        with self._insert_errors(), self._write():
            if dim:
                self._record_model(info, dim)
            taken = self._existing_ids([r["id"] for r in records if r.get("id")])
            prepared, history = self._prepare_rows(records, vectors, taken, on_conflict, op, actor, stored)
            inserted += [r.id for r in prepared]
            self._insert_prepared(prepared, history)
            for kind, parents in (links or {}).items():
                for rid in inserted:
                    self._link(parents, rid, kind)
        return inserted

    def _ensure_vector_index(self, dim: int) -> None:  # noqa: B027 - a hook: most backends need nothing here
        """Make sure an index serves vectors of `dim` dimensions; called outside any transaction."""

    def _insert_errors(self) -> AbstractContextManager[Any]:
        """Around an insert: turns the backend's errors about the rows (an id taken meanwhile, a text it
        cannot store) into UsageError."""
        from contextlib import nullcontext

        return nullcontext()

    def existing_ids(self, ids: Sequence[str]) -> set[str]:
        """The ids among `ids` that a memory of this store has."""
        return self._existing_ids(ids) if ids else set()

    @contextmanager
    def transaction(self) -> Iterator[Self]:
        """Group writes into one atomic transaction (nested uses join it). Embed before entering: embedding
        inside holds the store's writers back while the model runs."""
        with self._write():
            yield self

    def update(
        self,
        memory_id: str,
        *,
        text: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        replace_metadata: bool = False,
        unset: Sequence[str] = (),
        area: str | None = None,
        actor: str | None = None,
        op: str = "update",
    ) -> Memory:
        """Change text (re-embedded) and/or metadata in place; history keeps the old version."""
        old = self.get_one(memory_id)
        new_text = self._check_text(text) if text is not None else old.text
        new_meta = {} if replace_metadata else dict(old.metadata)
        new_meta.update(check_metadata(metadata))
        for key in unset:
            new_meta.pop(key, None)
        new_area = check_area(area) if area is not None else old.area
        vector = self.embed([new_text])[0] if new_text != old.text else None
        with self._write():
            self._lock_ids([memory_id])  # concurrent updates of one memory queue up
            current = self.get_one(memory_id)  # it may have changed or gone while we embedded
            self._update_row(memory_id, new_text if vector is not None else None, vector, new_meta, new_area, now_iso())
            self._history(
                memory_id,
                op,
                area=new_area,
                old_text=current.text,
                new_text=new_text,
                old_metadata=current.metadata,
                new_metadata=new_meta,
                actor=actor,
            )
        return self.get_one(memory_id)

    def delete(
        self,
        ids: Sequence[str],
        *,
        cascade: bool = True,
        actor: str | None = None,
        op: str = "delete",
        archive: bool = True,
    ) -> DeleteResult:
        """Delete ids (and, with cascade, what was derived from them) in one transaction.

        `archive` keeps each removed row (vector included) in the archive for `restore`.
        """
        ids = list(dict.fromkeys(ids))
        with self._write():
            plan = self._delete_plan(ids, self._lock_ids(ids), cascade)
            if plan.cascaded:
                self._lock_ids(plan.cascaded)
            removed = plan.deleted + plan.cascaded
            for memory in self.get(removed):
                self._history(
                    memory.id, op, area=memory.area, old_text=memory.text, old_metadata=memory.metadata, actor=actor
                )
            if removed:
                if archive:
                    self._archive(removed, op, actor)
                self._delete_rows(removed)
        return plan

    def delete_plan(self, ids: Sequence[str], *, cascade: bool = True) -> DeleteResult:
        """What `delete` would remove now (`delete --dry-run`): the ids found, what derives from them, the missing."""
        ids = list(dict.fromkeys(ids))
        return self._delete_plan(ids, self._existing_ids(ids), cascade)

    def _delete_plan(self, ids: builtins.list[str], present: set[str], cascade: bool) -> DeleteResult:
        targets = [i for i in ids if i in present]
        cascaded = [i for i in self.derived_ids(targets) if i not in present] if cascade else []
        return DeleteResult(deleted=targets, cascaded=cascaded, missing=[i for i in ids if i not in present])

    def link(self, parent_ids: Sequence[str], child_id: str, kind: str) -> None:
        """Record that `child_id` derives from `parent_ids` (a provenance link of `kind`)."""
        with self._write():
            self._link(parent_ids, child_id, kind)

    def _start_query_embedding(
        self, queries: builtins.list[str], scan: bool = False
    ) -> Callable[[], builtins.list[np.ndarray]]:
        """Start embedding `queries`; the function returned waits for their vectors, in order. Here they are
        embedded at once, one by one through `_embed_query`; a backend that can run the model on a thread of
        its own returns before it is done, and the search reads its keyword side meanwhile. `scan`: the dense
        side will rank the whole store with the last vector (a backend may start that there too)."""
        vectors = [self._embed_query(query) for query in queries]
        return lambda: vectors

    def matching_ids(self, filter: str | Filter, area: str | None = None) -> set[str]:
        """Ids of the memories (in `area`) a filter matches, selected in the database as `_candidates` selects
        them (memctl/store/filter_sql.py); `prune --filter` uses it."""
        flt = self.compile(filter)
        if flt is None:
            raise UsageError("matching_ids needs a filter")
        return {rid for _, rid in self._filtered(area, flt)}

    def scores_of(self, vector: np.ndarray, ids: Sequence[str], area: str | None = None) -> dict[str, float]:
        """Relevance `(1 + cosine) / 2` of each listed memory (in `area`) to `vector`; absent ids left out."""
        keys = self._keys_of(list(dict.fromkeys(ids)), area)
        return {keys[key]: score for key, score in self._relevance_of(list(keys), vector).items()}

    # -- shared --------------------------------------------------------------------------
    def __enter__(self) -> Self:
        """The store itself; leaving the block closes it."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the store."""
        self.close()

    def _close_embedder(self) -> None:
        if isinstance(self._embedder, CachedEmbedder):
            self._embedder.close()

    @property
    def embedder(self) -> Embedder:
        """The configured embedding model (made on first use, with the root's embedding cache): the model the
        store records where embedding_model is left at its default (`embedding_config`)."""
        if self._embedder is None:
            self.config = self.embedding_config()
            cache = self._cache_dir if self.config["embedding_cache"] else None
            self._embedder = make_embedder(self.config, cache)
        return self._embedder

    def share_embedder(self, embedder: Embedder) -> None:
        """Use `embedder` (a server's, shared by its stores) instead of making one: call it with an embedder of
        `embedding_config()`, before the first embedding."""
        self.config = self.embedding_config()
        self._embedder = embedder

    def embedding_config(self) -> Config:
        """The store's config with, where no layer sets embedding_model, the local model its vectors were made
        with (or an unfinished reindex is moving them to): stores made while MiniLM was the default keep it.
        A store that records nothing gets the default (memctl.embeddings.with_recorded_model)."""
        from memctl.embeddings import with_recorded_model
        from memctl.errors import MemctlError

        if self.config.sources.get("embedding_model") != "default":
            return self.config
        try:
            reindexing, stored = self._model_state()
        except MemctlError:
            return self.config  # a damaged model record: check_model names the fix when the model is used
        if isinstance(reindexing, dict) and isinstance(reindexing.get("model"), str):
            provider, _, model = reindexing["model"].partition(":")
            stored = {"provider": provider, "model": model}
        return with_recorded_model(self.config, stored)

    @property
    def cache_dir(self) -> Path | None:
        """The embedding cache folder (shared by the stores of one root), if any."""
        return self._cache_dir

    def dimension(self) -> int | None:
        """The dimension of the stored vectors (None before the first)."""
        info = self.model_info()
        return int(info["dimension"]) if info and info.get("dimension") else None

    def embed(self, texts: builtins.list[str]) -> np.ndarray:
        """Vectors of `texts` by the configured model, once it is the store's model and dimension."""
        self.check_model()
        vectors = self.embedder.embed(texts)
        dim = self.dimension()
        if dim is not None and not self._is_empty() and vectors.shape[1] != dim:
            raise ModelMismatchError(
                f"embedding dimension {vectors.shape[1]} differs from the store's {dim}", hint="run `memctl reindex`"
            )
        return vectors

    def _check_text(self, text: Any) -> str:
        if not isinstance(text, str) or not text.strip():
            raise UsageError("memory text is empty", hint="pass the text to store")
        check_text_size(text, int(self.config.get("max_text_bytes") or 0))
        return text

    def _keywords(self, metadata: Mapping[str, Any]) -> str:
        return keywords_of(self.config, metadata)

    def compile(self, filter: str | Filter | None) -> Filter | None:
        """A filter expression compiled (config filter_max_length applies); a compiled one or None as is."""
        if filter is None or isinstance(filter, Filter):
            return filter
        return compile_filter(filter, max_length=int(self.config["filter_max_length"]))

    def get_one(self, memory_id: str) -> Memory:
        """The memory with this id; NotFoundError when there is none."""
        got = self.get([memory_id])
        if not got:
            raise NotFoundError(
                f"no memory with id {memory_id!r} in store {self.name!r}", hint="`memctl list` shows the ids"
            )
        return got[0]

    def add(
        self,
        texts: Sequence[str],
        area: str = "main",
        metadata: Sequence[Mapping[str, Any] | None] | None = None,
        *,
        derived_from: Mapping[str, Sequence[str]] | None = None,
        actor: str | None = None,
    ) -> builtins.list[str]:
        """Embed and insert texts in one transaction; return their new ids.

        `derived_from` maps a link kind (e.g. "consolidated_from") to parent ids each new memory derives from.
        """
        texts = [self._check_text(t) for t in texts]
        check_area(area)
        metas = [check_metadata(m) for m in (metadata or [None] * len(texts))]
        if len(metas) != len(texts):
            raise UsageError(f"{len(texts)} texts but {len(metas)} metadata entries")
        if self.config["speaker_from_text"]:  # "Caroline: ..." -> speaker Caroline (memctl.text.chat_line)
            metas = [with_speaker(t, m) for t, m in zip(texts, metas, strict=True)]
        if not texts:
            return []
        vectors = self.embed(list(texts))
        stamp = now_iso()
        records = [
            {"id": None, "text": t, "area": area, "created_at": stamp, "updated_at": stamp, "metadata": m}
            for t, m in zip(texts, metas, strict=True)
        ]
        return self.insert_records(records, vectors, self.embedder.info, actor=actor, links=derived_from)
