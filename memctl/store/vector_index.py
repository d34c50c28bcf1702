"""The derived FAISS index: loaded from `index.faiss`, caught up from the journal, rebuilt when in doubt.

SQLite is the source of truth. `index.faiss` is a snapshot of the vectors as of a journal
position (recorded in `index_checkpoints` under the file's sha256). Opening verifies the
sidecar hash, finds that position and replays only later journal rows, so a save never has to
rewrite the index file. Anything that does not add up (missing file, hash mismatch, unknown
checkpoint, a row count that disagrees with SQLite) means: rebuild from the stored vectors —
never an empty index, never a re-embedding.
"""

from __future__ import annotations

import math
import os
import sqlite3
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memctl.files import atomic_write_bytes, file_sha256

if TYPE_CHECKING:
    import numpy as np

INDEX_FILE = "index.faiss"
# From this many vectors on, an unfiltered flat search keeps its scan of every vector (`VectorIndex.scan`) for the
# rest of the search and a warm store runs it on its model thread; below, FAISS's own top-k is cheaper: the
# scan takes under 2 ms there, and keeping and handing it over cost a warm MCP search at 10k ~0.5 ms.
SCAN_MIN = 50_000
SIDECAR_FILE = "index.faiss.sha256"


def vectors_from_blobs(blobs: list[bytes], dimension: int) -> np.ndarray:
    import numpy as np

    if not blobs:
        return np.zeros((0, dimension), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dimension)


@dataclass(frozen=True)
class IndexOptions:
    """`flat` is exact; `ivf` (IndexIVFFlat) is approximate and fast at millions of vectors;
    `auto` is flat below `ivf_min_size` vectors and ivf from there on."""

    kind: str = "auto"
    ivf_min_size: int = 200_000
    nprobe: int = 32

    def wants_ivf(self, count: int) -> bool:
        return self.kind == "ivf" or (self.kind == "auto" and count >= self.ivf_min_size)


class VectorIndex:
    """A FAISS index whose ids are `memories.seq`: IndexIDMap2(IndexFlatIP), or IndexIVFFlat when large."""

    def __init__(self, folder: Path, dimension: int, options: IndexOptions | None = None) -> None:
        self.folder = folder
        self.dimension = dimension
        self.options = options or IndexOptions()
        self.index: Any = None
        self.applied_jseq = 0
        self.rebuilt = False  # True when the last sync had to rebuild from stored vectors
        self.version = 0  # bumped whenever the vectors in `index` change (keys the seq -> position cache)
        self._positions_cache: tuple[Any, ...] | None = None
        self._scans: dict[tuple[int, bytes], np.ndarray] = {}  # (version, query bytes) -> scores of `scan`
        # Held by a scan (it may run on a search's model thread) and by anything that changes `index`.
        self._lock = threading.Lock()
        self._huge_pages = (0, 0)  # (address of the scanned vector buffer, bytes of it moved to huge pages)

    @property
    def path(self) -> Path:
        return self.folder / INDEX_FILE

    # -- loading -------------------------------------------------------------------------
    def sync(self, db: sqlite3.Connection) -> None:
        """Bring the in-memory index up to date with SQLite (inside one read snapshot)."""
        own_txn = not db.in_transaction
        if own_txn:
            db.execute("BEGIN")
        try:
            if self.index is None:
                self._load_or_rebuild(db)
            elif _journal_top(db) != self.applied_jseq:  # something changed since the last sync
                self._replay(db)
                if self.index.ntotal != _count(db):
                    self._rebuild(db)
        finally:
            if own_txn:
                db.execute("COMMIT")

    def _load_or_rebuild(self, db: sqlite3.Connection) -> None:
        loaded = self._load_file(db)
        if loaded is not None:
            with self._lock:
                self.index, self.applied_jseq = loaded
                self.version += 1
            self.rebuilt = False
            self._replay(db)
            if self.index.ntotal == _count(db):
                return
        self._rebuild(db)

    def _load_file(self, db: sqlite3.Connection) -> tuple[Any, int] | None:
        """The index file if its hash matches the sidecar and a known checkpoint, else None (rebuild)."""
        from concurrent.futures import ThreadPoolExecutor

        sidecar = self.folder / SIDECAR_FILE
        if not self.path.is_file() or not sidecar.is_file():
            return None
        try:
            expected = sidecar.read_text(encoding="ascii").split()[0]
            before = self.path.stat()
            known = db.execute("SELECT jseq, ntotal FROM index_checkpoints WHERE sha256 = ?", (expected,)).fetchone()
            if known is None or before.st_size < int(known[1]) * self.dimension * 4:
                return None  # unknown or visibly truncated: do not hand it to faiss at all
            # Hashing and reading both release the GIL: overlapped, an open costs the slower of the two.
            with ThreadPoolExecutor(max_workers=1) as pool:
                digest = pool.submit(file_sha256, self.path)
                index = self._read_index()
                actual = digest.result()
            after = self.path.stat()
        except (OSError, UnicodeDecodeError, IndexError):
            return None
        same_file = (before.st_ino, before.st_size, before.st_mtime_ns) == (
            after.st_ino,
            after.st_size,
            after.st_mtime_ns,
        )
        if index is None or actual != expected or not same_file or index.d != self.dimension:
            return None  # a checkpoint replaced the file mid-read, or it is damaged: rebuild
        return index, int(known[0])

    def _read_index(self) -> Any:
        import faiss

        try:
            return faiss.read_index(str(self.path))
        except RuntimeError:
            return None

    def _replay(self, db: sqlite3.Connection) -> None:
        import numpy as np

        rows = db.execute("SELECT DISTINCT seq FROM index_journal WHERE jseq > ?", (self.applied_jseq,)).fetchall()
        top = _journal_top(db)
        if rows:
            touched = np.array([r[0] for r in rows], dtype=np.int64)
            seqs, blobs = [], []
            for start in range(0, len(touched), 900):
                chunk = [int(s) for s in touched[start : start + 900]]
                marks = ",".join("?" * len(chunk))
                for seq, blob in db.execute(f"SELECT seq, vector FROM memories WHERE seq IN ({marks})", chunk):
                    seqs.append(seq)
                    blobs.append(blob)
            with self._lock:
                self.version += 1
                self.index.remove_ids(touched)
                if seqs:
                    self.index.add_with_ids(vectors_from_blobs(blobs, self.dimension), np.array(seqs, dtype=np.int64))
        self.applied_jseq = max(self.applied_jseq, int(top))

    def _rebuild(self, db: sqlite3.Connection) -> None:
        import numpy as np

        count = _count(db)
        index = self._empty(db, count)
        cursor = db.execute("SELECT seq, vector FROM memories ORDER BY seq")
        while batch := cursor.fetchmany(20000):
            seqs = np.array([r[0] for r in batch], dtype=np.int64)
            index.add_with_ids(vectors_from_blobs([r[1] for r in batch], self.dimension), seqs)
        with self._lock:
            self.version += 1
            self.index = index
            self.applied_jseq = _journal_top(db)
        self.rebuilt = True

    def _empty(self, db: sqlite3.Connection, count: int) -> Any:
        import faiss

        if not self.options.wants_ivf(count) or count < 1000:
            return faiss.IndexIDMap2(faiss.IndexFlatIP(self.dimension))
        # ~4 sqrt(n) lists, trained on up to 64 vectors per list: a balance of build time and recall.
        nlist = max(16, int(4 * math.sqrt(count)))
        quantizer = faiss.IndexFlatIP(self.dimension)
        index = faiss.IndexIVFFlat(quantizer, self.dimension, nlist, faiss.METRIC_INNER_PRODUCT)
        index.train(self._training_sample(db, min(count, 64 * nlist)))
        index.nprobe = self.options.nprobe
        return index

    def _training_sample(self, db: sqlite3.Connection, size: int) -> np.ndarray:
        rows = db.execute("SELECT vector FROM memories ORDER BY random() LIMIT ?", (size,)).fetchall()
        return vectors_from_blobs([r[0] for r in rows], self.dimension)

    @property
    def is_approximate(self) -> bool:
        # By type name: `hasattr(index, "id_map")` builds a SWIG proxy on every call.
        return self.index is not None and not type(self.index).__name__.startswith("IndexIDMap")

    def needs_retype(self) -> bool:
        """True when the configured index type no longer fits the store size (checked at checkpoints)."""
        if self.index is None:
            return False
        return self.options.wants_ivf(self.index.ntotal) != self.is_approximate and self.index.ntotal >= 1000

    # -- persisting ----------------------------------------------------------------------
    def pending(self, db: sqlite3.Connection) -> int:
        """Journal rows written since the newest checkpoint (what an open would replay)."""
        row = db.execute("SELECT COALESCE(MAX(jseq), 0) FROM index_checkpoints").fetchone()
        return int(db.execute("SELECT COUNT(*) FROM index_journal WHERE jseq > ?", (row[0],)).fetchone()[0])

    def checkpoint(self, db: sqlite3.Connection) -> None:
        """Write index.faiss atomically and record its journal position. Caller holds the write lock."""

        self.sync(db)
        if self.needs_retype():
            db.execute("BEGIN")
            try:
                self._rebuild(db)
            finally:
                db.execute("COMMIT")
        fd, tmp_name = tempfile.mkstemp(prefix=".index.faiss.", dir=self.folder)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            write_index_file(self.index, tmp)
            with tmp.open("rb+") as handle:
                os.fsync(handle.fileno())
            sha = file_sha256(tmp)
            self._record_checkpoint(db, sha)
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        atomic_write_bytes(self.folder / SIDECAR_FILE, f"{sha}  {INDEX_FILE}\n".encode("ascii"))

    def _record_checkpoint(self, db: sqlite3.Connection, sha: str) -> None:
        from memctl.store.records import now_iso

        db.execute("BEGIN IMMEDIATE")
        try:
            previous = db.execute("SELECT COALESCE(MAX(jseq), 0) FROM index_checkpoints").fetchone()[0]
            db.execute(
                "INSERT OR REPLACE INTO index_checkpoints VALUES (?, ?, ?, ?)",
                (sha, self.applied_jseq, self.index.ntotal, now_iso()),
            )
            # Keep the previous checkpoint and the journal after it, for readers holding the old file.
            db.execute("DELETE FROM index_checkpoints WHERE jseq < ?", (previous,))
            db.execute("DELETE FROM index_journal WHERE jseq <= ?", (previous,))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    # -- searching -----------------------------------------------------------------------
    def search(self, query: np.ndarray, k: int, only: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Top-k (seq, inner product) pairs, optionally restricted to the seqs in `only`."""
        import numpy as np

        if self.index is None or self.index.ntotal == 0 or k <= 0:
            return []
        k = min(k, self.index.ntotal if only is None else len(only))
        if k <= 0:
            return []
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, -1)
        if not self.is_approximate:
            return self._flat_search(q, k, only)
        import faiss

        params = None
        if only is not None:
            selector = faiss.IDSelectorBatch(np.asarray(only, dtype=np.int64))
            params = faiss.SearchParametersIVF(sel=selector, nprobe=self.options.nprobe)
        scores, ids = self.index.search(q, k, params=params)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]

    def _flat_parts(self) -> tuple[Any, np.ndarray, np.ndarray]:
        """The IndexFlatIP inside the id map, and zero-copy views of its vectors and of the seq at each position."""
        import faiss

        flat = faiss.downcast_index(self.index.index)
        n = int(self.index.ntotal)
        vectors = faiss.rev_swig_ptr(flat.get_xb(), n * self.dimension).reshape(n, self.dimension)
        seqs = faiss.rev_swig_ptr(self.index.id_map.data(), n)
        return flat, vectors, seqs

    def _flat_search(self, q: np.ndarray, k: int, only: np.ndarray | None) -> list[tuple[int, float]]:
        """Exact search. From SCAN_MIN vectors on, from one scan of every vector (`scan`), kept for the query:
        a hybrid search ranks the whole store, then the memories of a named speaker, then scores its hits,
        all from the same scores. Below, unfiltered, the flat index's own search (not IndexIDMap.search:
        its label translation is an OpenMP loop over k items, and on a busy machine waking a second thread
        for it cost more than the search). Without a scan kept, a small candidate set is scored directly
        from the index's own vectors. Ties rank in index order on every path."""
        import numpy as np

        flat, vectors, seqs = self._flat_parts()
        kept = self._kept_scan(q[0])
        if only is None:
            if kept is None and len(seqs) < SCAN_MIN:  # FAISS's own top-k: no scores to keep at this size
                found, positions = flat.search(q, k)
                pairs = [(int(p), float(s)) for p, s in zip(positions[0], found[0], strict=True) if p >= 0]
                pairs.sort(key=lambda pair: (-pair[1], pair[0]))  # ties in index order, as `_top_k` ranks them
                return [(int(seqs[p]), s) for p, s in pairs]
            scores = self.scan(q[0]) if kept is None else kept
            top = _top_k(scores, k)
            return [(int(seqs[p]), float(scores[p])) for p in top]
        positions = self._positions(np.asarray(only, dtype=np.int64), seqs)
        if len(positions) == 0:
            return []
        if kept is not None:
            scores = kept[positions]
        elif len(positions) * 4 > len(seqs):  # a large share of the store: one scan
            scores = self.scan(q[0])[positions]
        else:
            scores = vectors[positions] @ q[0]
        top = np.argsort(-scores, kind="stable")[:k] if len(scores) <= 4 * k else _top_k(scores, k)
        return [(int(seqs[positions[i]]), float(scores[i])) for i in top]

    def scan(self, query: np.ndarray) -> np.ndarray:
        """Inner products of `query` with every vector of a flat index, by position, kept for the query (the
        last two queries; any change to the index forgets them). FAISS's own kernel (the one IndexFlatIP
        search uses, same scores) on one thread, without holding the GIL: a warm store runs it on the
        search's model thread beside the keyword side (memctl/store/embedded/search.py, `_embed_and_scan`)."""
        import faiss
        import numpy as np

        q = np.ascontiguousarray(query, dtype=np.float32).reshape(-1)
        found = self._kept_scan(q)
        if found is not None:
            return found
        key = (self.version, q.tobytes())
        with self._lock:
            if key[0] != self.version:  # changed since the caller looked: scan what is there now
                key = (self.version, key[1])
            found = self._scans.get(key)
            if found is not None:  # made by the scan this call waited for (the model thread's)
                return found
            flat = faiss.downcast_index(self.index.index)
            n = int(self.index.ntotal)
            scores = np.empty(n, dtype=np.float32)
            if n:
                faiss.fvec_inner_products_ny(
                    faiss.swig_ptr(scores), faiss.swig_ptr(q), flat.get_xb(), self.dimension, n
                )
                self._on_huge_pages(flat.get_xb(), n)
        kept = {k: v for k, v in self._scans.items() if k[0] == key[0]}
        kept = dict(list(kept.items())[-1:])
        kept[key] = scores
        self._scans = kept  # replaced whole: a scan finishing on the model thread never sees a half-made dict
        return scores

    def _on_huge_pages(self, pointer: Any, n: int) -> None:
        """From the second scan of the same vector buffer on, its pages moved to 2 MiB pages once (only the
        part not moved yet when saves made it grow in place): memctl/store/huge_pages.py."""
        import faiss

        from memctl.store import huge_pages

        address = int(faiss.rev_swig_ptr(pointer, 1).__array_interface__["data"][0])
        size = n * self.dimension * 4
        seen, done = self._huge_pages
        if seen != address:  # a buffer not scanned before (a one-shot search stops here)
            self._huge_pages = (address, 0)
            return
        if size - done >= huge_pages.HUGE_PAGE:
            start = address + done // huge_pages.HUGE_PAGE * huge_pages.HUGE_PAGE
            huge_pages.collapse(start, address + size - start)
            self._huge_pages = (address, size)

    def _kept_scan(self, query: np.ndarray) -> np.ndarray | None:
        import numpy as np

        q = np.ascontiguousarray(query, dtype=np.float32).reshape(-1)
        return self._scans.get((self.version, q.tobytes()))

    def can_scan(self, at_least: int = 1) -> bool:
        """A flat index with at least `at_least` vectors: `scan` applies."""
        return self.index is not None and not self.is_approximate and self.index.ntotal >= max(1, at_least)

    def inner_products(self, query: np.ndarray, keys: np.ndarray) -> dict[int, float] | None:
        """seq -> inner product with `query` for the `keys` the index holds, read from a flat index's own
        vectors (no database read); None for an approximate index (it keeps no exact vectors)."""
        import numpy as np

        if self.index is None or self.is_approximate or self.index.ntotal == 0:
            return None
        _, vectors, seqs = self._flat_parts()
        positions = self._positions(np.asarray(keys, dtype=np.int64), seqs)
        kept = self._kept_scan(query)
        scores = kept[positions] if kept is not None else vectors[positions] @ np.asarray(query, dtype=np.float32)
        return {int(seqs[p]): float(s) for p, s in zip(positions, scores, strict=True)}

    def _positions(self, only: np.ndarray, seqs: np.ndarray) -> np.ndarray:
        """Positions in the index of the seqs in `only` that it holds."""
        import numpy as np

        key = (self.version, id(self.index), len(seqs))
        if self._positions_cache is None or self._positions_cache[0] != key:
            order = np.argsort(seqs, kind="stable")
            in_order = bool(np.all(order[1:] > order[:-1]))  # as a rebuild (and appending saves) leave it
            self._positions_cache = (key, None if in_order else order, seqs[order].copy())
        _, order, sorted_seqs = self._positions_cache
        if len(sorted_seqs) == 0:
            return np.zeros(0, dtype=np.int64)
        at = np.minimum(np.searchsorted(sorted_seqs, only), len(sorted_seqs) - 1)
        found = at[sorted_seqs[at] == only]
        if order is None and bool(np.all(found[1:] > found[:-1])):
            return found  # sorted, without repeats already: np.unique's sort cost ~2 ms for 15k at 100k
        return np.unique(found if order is None else order[found])  # sorted, without repeats


def index_keys(index: Any) -> np.ndarray:
    """Every id (memories.seq) a FAISS index holds: the id map of a flat index, the inverted lists of an IVF."""
    import faiss
    import numpy as np

    if type(index).__name__.startswith("IndexIDMap"):
        return faiss.vector_to_array(index.id_map)
    lists = faiss.extract_index_ivf(index).invlists
    parts = [
        faiss.rev_swig_ptr(lists.get_ids(i), lists.list_size(i)).copy()
        for i in range(lists.nlist)
        if lists.list_size(i)
    ]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def write_index_file(index: Any, path: Path) -> None:
    """faiss.write_index, its failures told as the OSError they are. FAISS reports a short write (a full
    disk, a quota) as a bare RuntimeError carrying no errno: the free space of the file system says which."""
    import errno

    import faiss

    try:
        faiss.write_index(index, str(path))
    except RuntimeError as exc:
        try:
            stats = os.statvfs(path.parent)
            full = stats.f_bavail * stats.f_frsize < (1 << 20) or "write error" in str(exc)
        except OSError:
            full = False
        code = errno.ENOSPC if full else errno.EIO
        raise OSError(code, os.strerror(code), str(path)) from exc


def _top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k best scores, best first, ties in index order."""
    import numpy as np

    part = np.argpartition(-scores, k - 1)[:k]
    bound = scores[part].min()
    candidates = np.nonzero(scores >= bound)[0]  # every tie at the boundary, in index order
    return candidates[np.argsort(-scores[candidates], kind="stable")][:k]


def _count(db: sqlite3.Connection) -> int:
    """Rows in `memories`, from the trigger-maintained counter (O(1); COUNT(*) scans the table)."""
    return int(db.execute("SELECT value FROM counters WHERE name = 'memories'").fetchone()[0])


def _journal_top(db: sqlite3.Connection) -> int:
    """The newest journal position ever written (AUTOINCREMENT's counter survives pruning)."""
    row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'index_journal'").fetchone()
    return int(row[0]) if row else 0
