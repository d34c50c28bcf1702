"""The embedded store's search side: the vector index (index.faiss, kept in step with the database), the
keyword and dense candidates, and embedding the query while the index loads.

The third of EmbeddedStore's layers, over the rows (memctl/store/embedded/rows.py)."""

from __future__ import annotations

import builtins
import json
import sqlite3
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from memctl.embeddings import Embedder, embed_queries
from memctl.errors import ConfigError, ModelMismatchError
from memctl.store.embedded.rows import _EmbeddedRows
from memctl.store.filters import Filter
from memctl.store.layout import LOCK_FILE
from memctl.store.records import MEMORY_COLUMNS, Hit, RowReader, relevance
from memctl.store.validate import check_area
from memctl.store.vector_index import SCAN_MIN, IndexOptions, VectorIndex

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np


INDEX_TEMP_PREFIX = "index.faiss."  # temp files of checkpoints: .index.faiss.XXXX (vector_index.py)
# With an approximate index, filtered searches over at most this many candidates are done exactly.
EXACT_FILTERED_MAX = 200_000


class _EmbeddedSearch(_EmbeddedRows):
    """The vector index and the search primitives StoreBase's retrieval pipeline asks for."""

    # -- the vector index ----------------------------------------------------------------
    def _index_options(self) -> IndexOptions:
        kind = self.config["index_type"]
        if kind not in ("auto", "flat", "ivf"):
            raise ConfigError(f"index_type must be auto, flat or ivf, not {kind!r}")
        return IndexOptions(kind, int(self.config["index_ivf_min_size"]), int(self.config["index_nprobe"]))

    def vector_index(self) -> VectorIndex | None:
        self._refresh_for_read()
        dim = self.dimension()
        if dim is None:
            return None
        if self._index is None or self._index.dimension != dim:
            self._index = VectorIndex(self.folder, dim, self._index_options())
        self._index.sync(self.db)
        if self._index.rebuilt and not self.read_only:  # a read-only open rebuilds in memory, writes nothing
            self._persist_rebuilt_index()
        return self._index

    def vector_count(self) -> int:
        """The vectors the FAISS index holds (brought up to date with the database first)."""
        index = self.vector_index()
        return int(index.index.ntotal) if index is not None else 0

    def _persist_rebuilt_index(self) -> None:
        """A rebuilt index is written back if no writer is busy; otherwise the next open rebuilds too."""
        import filelock

        lock = filelock.FileLock(str(self.folder / LOCK_FILE), timeout=0)
        try:
            with lock:
                assert self._index is not None
                self._index.checkpoint(self.db)
                self._index.rebuilt = False
        except (filelock.Timeout, OSError, sqlite3.Error, RuntimeError):  # RuntimeError: faiss's write errors
            pass

    def _checkpoint_after_commit(self) -> None:
        """The index checkpoint a commit may trigger. The memory is committed already: a failure here
        (disk full while the index file is rewritten) must not make the caller retry and store it
        twice. The index is derived; the next checkpoint or open catches up from the journal."""
        try:
            self._maybe_checkpoint()
        except (OSError, RuntimeError, sqlite3.Error):  # faiss reports write errors as RuntimeError
            self._index = None
            self._remove_stale_temp_files()

    def _remove_stale_temp_files(self) -> None:
        """Temp files of index checkpoints that a kill or a full disk left (write lock held: none is in use)."""
        for path in self.folder.glob(f".{INDEX_TEMP_PREFIX}*"):
            try:
                path.unlink()
            except OSError:
                pass

    def _maybe_checkpoint(self) -> None:
        dim = self.dimension()
        if dim is None or self._reindexing_now or self._bulk:
            return
        index = self._index if self._index is not None else VectorIndex(self.folder, dim, self._index_options())
        if index.pending(self.db) >= int(self.config["index_checkpoint_every"]) or not index.path.exists():
            self._remove_stale_temp_files()
            self._index = index
            index.checkpoint(self.db)
            index.rebuilt = False

    def rebuild_index(self) -> int:
        """Rebuild the vector index from stored vectors and write it (reindex --index-only)."""
        dim = self.dimension()
        if dim is None:
            return 0
        with self._locked():
            self._remove_stale_temp_files()
            self._index = VectorIndex(self.folder, dim, self._index_options())
            self.db.execute("BEGIN")
            try:
                self._index._rebuild(self.db)
            finally:
                self.db.execute("COMMIT")
            self._index.checkpoint(self.db)
            self._index.rebuilt = False
        return int(self._index.index.ntotal)

    # -- searching -----------------------------------------------------------------------
    def _candidates(self, area: str | None, flt: Filter | None) -> np.ndarray | None:
        """Seqs allowed by area/filter (None = all). Applied before the top-k cut."""
        import numpy as np

        from memctl.store.keyword import other_areas

        if area is None and flt is None:
            return None
        if flt is None:
            if other_areas(self.db, check_area(area or "")) is False:
                return None  # every memory is in that area: no need to list (and then test) them all
            rows = self.db.execute("SELECT seq FROM memories WHERE area = ?", (check_area(area or ""),))
            return np.array([r[0] for r in rows], dtype=np.int64)
        return np.array([seq for seq, _ in self._filtered(area, flt)], dtype=np.int64)

    def _keyword_pairs(
        self, query: str, k: int, area: str | None, only: Any, common_df: int, common_text_df: int = 0
    ) -> builtins.list[tuple[int, float]]:
        from memctl.store.keyword import keyword_search

        if only is not None and len(only) >= self._size():
            only = None  # a filter that allows every memory (distinct seqs, as _candidates gives): none to test
        return keyword_search(
            self.db, query, k, area, only, common_df=common_df, common_text_df=common_text_df, cache=self._df_cache()
        )

    def _rare_tokens(self, tokens: Sequence[str], max_df: int) -> set[str]:
        from memctl.store.keyword import rare_tokens

        return rare_tokens(self.db, tokens, max_df, self._df_cache())

    def _common_tokens(self, tokens: Sequence[str], min_df: int) -> set[str]:
        from memctl.store.keyword import doc_freq

        cache = self._df_cache()
        return {t for t in tokens if doc_freq(self.db, t, cache=cache) > min_df}

    def _search_index(self) -> VectorIndex | None:
        """vector_index(), synced once per search."""
        scope = self._scope()
        if scope is None:
            return self.vector_index()
        if "index" not in scope:
            scope["index"] = self.vector_index()
        return scope["index"]

    def _generation(self) -> Any:
        """Changes with every commit, by this handle (the commit counter) or any other connection (SQLite's
        data_version), and when a restore replaced the database; None inside a transaction."""
        if self._depth or self.db.in_transaction:
            return None
        self._refresh_for_read()
        version = self.db.execute("PRAGMA data_version").fetchone()[0]
        commits = self.db.execute("SELECT value FROM counters WHERE name = 'commits'").fetchone()
        return (id(self.db), self._ident, int(version), int(commits[0]) if commits else 0)

    def _seq_meta(self, seqs: builtins.list[int]) -> dict[int, tuple[str, dict[str, Any]]]:
        found: dict[int, tuple[str, dict[str, Any]]] = {}
        for start in range(0, len(seqs), 900):
            chunk = [int(s) for s in seqs[start : start + 900]]
            for seq, area, metadata in self.db.execute(
                f"SELECT seq, area, metadata FROM memories WHERE seq IN ({','.join('?' * len(chunk))})", chunk
            ):
                found[seq] = (area, json.loads(metadata))
        return found

    def _dense_pairs(
        self, vector: np.ndarray, k: int, only: Collection[int] | None
    ) -> builtins.list[tuple[int, float]]:
        import numpy as np

        index = self._search_index()
        if index is None:
            return []
        keys = None if only is None else np.asarray(only, dtype=np.int64)  # a no-op for _candidates' array
        if keys is not None and index.is_approximate and len(keys) <= EXACT_FILTERED_MAX:
            return self._exact_search(vector, k, keys)  # a filter must not lose matches to IVF probing
        return index.search(vector, k, keys)

    def _keys_of(self, ids: Sequence[str], area: str | None) -> dict[int, str]:
        found: dict[int, str] = {}
        for start in range(0, len(ids), 500):  # below SQLite's bound-variable limit
            chunk = list(ids[start : start + 500])
            marks = ", ".join("?" * len(chunk))
            sql = f"SELECT seq, id FROM memories WHERE id IN ({marks})"  # noqa: S608 - placeholders only
            args: builtins.list[Any] = chunk
            if area is not None:
                sql, args = sql + " AND area = ?", [*chunk, check_area(area)]
            found.update({int(seq): str(i) for seq, i in self.db.execute(sql, args)})
        return found

    def _relevance_of(self, seqs: builtins.list[int], vector: np.ndarray) -> dict[int, float]:
        import numpy as np

        if not seqs:
            return {}
        index = self._search_index()
        found = index.inner_products(vector, np.array(seqs)) if index is not None else None
        if found is not None:
            return {seq: relevance(ip) for seq, ip in found.items()}
        return {seq: relevance(ip) for seq, ip in self._exact_search(vector, len(seqs), np.array(seqs))}

    def _embed_query(self, query: str) -> np.ndarray:
        """Embed the query while the vector index loads: a cold CLI call pays for the slower of the two."""
        from concurrent.futures import ThreadPoolExecutor

        self.check_model()
        embedder = self.embedder
        if self._index is not None:  # a warm handle (a server): the index only syncs, no thread to start
            vector = embed_queries(embedder, [query])[0]
            self._search_index()
        else:
            with ThreadPoolExecutor(max_workers=1) as pool:
                future = pool.submit(embed_queries, embedder, [query])
                self._search_index()
                vector = future.result()[0]
        self._check_query_dimension(vector.shape[0])
        return vector

    def _start_query_embedding(
        self, queries: builtins.list[str], scan: bool = False
    ) -> Callable[[], builtins.list[np.ndarray]]:
        """A warm handle embeds on a thread it keeps (one started per query cost more than it saved), so the
        search reads its keyword side meanwhile: the model call (onnxruntime, an HTTP request) releases the
        GIL, and this thread keeps the connection to itself. With `scan`, the thread then scans the flat index
        with the last vector (`_embed_and_scan`). A cold handle (the CLI's one search) embeds beside the index
        load instead (`_embed_query`); a handle whose `_embed_query` a caller replaced (bench/hybrid_search.py
        hands precomputed vectors in through it) embeds at once, and only the scan goes to the thread."""
        if self._index is None:
            return super()._start_query_embedding(queries, scan)
        if "_embed_query" in self.__dict__:
            import numpy as np

            computed = super()._start_query_embedding(queries)()
            index = self._search_index()
            if scan and index is not None and index.can_scan(SCAN_MIN):
                self._model_executor().submit(_scanned, np.stack(computed), index)
            return lambda: computed
        self.check_model()
        index = self._search_index()  # synced here: the thread touches no connection but the embedding cache's
        embedded: Future[np.ndarray] = Future()
        self._model_executor().submit(_embed_and_scan, self.embedder, list(queries), index if scan else None, embedded)

        def wait() -> builtins.list[np.ndarray]:
            vectors = embedded.result()
            self._check_query_dimension(vectors.shape[1])
            return list(vectors)

        return wait

    def _model_executor(self) -> ThreadPoolExecutor:
        if self._model_thread is None:
            from concurrent.futures import ThreadPoolExecutor

            self._model_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memctl-embed")
        return self._model_thread

    def _check_query_dimension(self, dimension: int) -> None:
        dim = self.dimension()
        if dim is not None and dimension != dim:
            raise ModelMismatchError(
                f"embedding dimension {dimension} differs from the store's {dim}", hint="run `memctl reindex`"
            )

    def _exact_search(self, vector: np.ndarray, k: int, only: np.ndarray) -> builtins.list[tuple[int, float]]:
        import numpy as np

        from memctl.store.vector_index import vectors_from_blobs

        seqs: builtins.list[int] = []
        blobs: builtins.list[bytes] = []
        for start in range(0, len(only), 900):
            chunk = [int(x) for x in only[start : start + 900]]
            for seq, blob in self.db.execute(
                f"SELECT seq, vector FROM memories WHERE seq IN ({','.join('?' * len(chunk))})", chunk
            ):
                seqs.append(seq)
                blobs.append(blob)
        if not seqs:
            return []
        scores = vectors_from_blobs(blobs, len(vector)) @ vector.astype(np.float32)
        top = np.argsort(-scores, kind="stable")[:k]
        return [(seqs[i], float(scores[i])) for i in top]

    def _seq_hits(self, pairs: builtins.list[tuple[int, float]]) -> builtins.list[tuple[int, Hit]]:
        """(seq, Hit) for the pairs whose rows still exist, in the given order."""
        if not pairs:
            return []
        rows: dict[int, tuple[RowReader, tuple[Any, ...]]] = {}
        seqs = [p[0] for p in pairs]
        for start in range(0, len(seqs), 900):
            chunk = seqs[start : start + 900]
            read, found = self._named(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE seq IN ({','.join('?' * len(chunk))})", chunk
            )
            rows.update((read.get(r, "seq"), (read, r)) for r in found)
        return [(seq, rows[seq][0].hit(rows[seq][1], round(score, 6))) for seq, score in pairs if seq in rows]


def _embed_and_scan(
    embedder: Embedder, queries: builtins.list[str], index: VectorIndex | None, embedded: Future[np.ndarray]
) -> None:
    """On the model thread: the query vectors (handed over through `embedded` as soon as they exist), then
    the flat index scanned for the last one, the vector the dense side ranks with (`VectorIndex.scan` keeps
    the scores for the search; a search that asks for them meanwhile waits on the scan's lock). The scan
    runs without the GIL while the search reads its keyword side. A dimension that does not fit is left
    for the caller to report."""
    try:
        vectors = embed_queries(embedder, queries)
    except BaseException as exc:  # noqa: BLE001 - handed to the waiting search, which raises it
        embedded.set_exception(exc)
        return
    embedded.set_result(vectors)
    _scanned(vectors, index)


def _scanned(vectors: np.ndarray, index: VectorIndex | None) -> None:
    if index is not None and index.can_scan(SCAN_MIN) and len(vectors) and vectors.shape[1] == index.dimension:
        index.scan(vectors[-1])
