"""Removal receipts: proof, after `forget`, `delete` or `purge`, that the removed texts cannot be recalled.

A removal is described by the content hashes of the removed texts (and the removed ids). The proof holds
them against every place a text lives in a store: the live rows, the derived vector and keyword indexes
(an entry there that belongs to no live row is a stray), the history and the archive (which keep a
deleted text for `memctl restore` until `memctl purge`), and the embedding cache (vectors keyed by the
text's hash: a hash still confirms a guessed text). Before the check the removal is made complete where
memctl can: the vector index is written out, and the cache entries of the removed texts no live
memory here or in another store of the root uses are dropped.

Core only: both backends answer through the primitives of `StoreBase` (`ids_with_hashes`,
`index_strays`, `history`, `iter_archive`), so the receipt means the same on either.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memctl.embeddings import content_hash
from memctl.store.base import StoreBase
from memctl.store.interface import iter_chunks

# The places a text can be recalled from, in the order a receipt lists them.
LOCATIONS = ("live_rows", "vector_index", "keyword_index", "history", "archive", "embedding_cache")
# After forget/delete these keep the text by design (restore); purge is what removes it from them.
RESTORABLE = ("history", "archive")


@dataclass
class Receipt:
    """`found[location]`: what still holds a removed text there (ids, or hashes for the cache; for an
    index, how many stray entries). `verified`: nothing in a location this removal had to clear."""

    operation: str
    removed: int
    found: dict[str, list[str]] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    cache_entries_dropped: int = 0

    @property
    def verified(self) -> bool:
        return not any(self.found.get(location) for location in self.required)

    def failures(self) -> list[str]:
        return [location for location in self.required if self.found.get(location)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "verified": self.verified,
            "operation": self.operation,
            "removed": self.removed,
            "cache_entries_dropped": self.cache_entries_dropped,
            "locations": {
                location: {
                    "clear": not self.found.get(location),
                    "checked": True,
                    "required": location in self.required,
                    "found": self.found.get(location, []),
                }
                for location in LOCATIONS
            },
        }

    def summary(self) -> str:
        if not self.verified:
            return "NOT verified: a removed text is still in " + ", ".join(
                f"{loc} ({', '.join(self.found[loc][:5])})" for loc in self.failures()
            )
        kept = [loc for loc in RESTORABLE if self.found.get(loc) and loc not in self.required]
        return f"verified: {self.removed} removed texts are in none of: {', '.join(self.required)}" + (
            f"; {' and '.join(kept)} keep them for `memctl restore` until `memctl purge`" if kept else ""
        )


def hashes_of(texts: Iterable[str | None]) -> set[str]:
    return {content_hash(text) for text in texts if text}


def verify_removal(store: StoreBase, operation: str, ids: Iterable[str], hashes: set[str]) -> Receipt:
    """Finish and prove the removal of `ids` (texts with `hashes`); `operation` is forget, delete or purge."""
    ids = set(ids)
    after_purge = operation == "purge"
    required = LOCATIONS if after_purge else tuple(loc for loc in LOCATIONS if loc not in RESTORABLE)
    receipt = Receipt(operation, len(ids) if ids else len(hashes), required=required)
    live = {m.id for m in store.get(sorted(ids))} | set(store.ids_with_hashes(hashes))
    receipt.found["live_rows"] = sorted(live)
    for index, strays in store.index_strays().items():
        receipt.found[index] = [f"{strays} entries of no live memory"] if strays else []
    receipt.found["history"] = sorted(
        {e.memory_id for e in store.history() if e.memory_id in ids or hashes_of([e.old_text, e.new_text]) & hashes}
    )
    receipt.found["archive"] = sorted(
        {a.memory.id for a in store.iter_archive() if a.memory.id in ids or content_hash(a.memory.text) in hashes}
    )
    gone = hashes - hashes_of(m.text for m in store.get(sorted(live)))
    gone -= store.hashes_used_elsewhere(gone)  # another store of the root still needs its cached vector
    receipt.cache_entries_dropped = _drop_cached(store.cache_dir, gone)
    receipt.found["embedding_cache"] = sorted(_cached(store.cache_dir, gone))
    return receipt


def _cache_files(cache_dir: Path | None) -> list[Path]:
    return sorted(cache_dir.glob("*.sqlite")) if cache_dir is not None and cache_dir.is_dir() else []


def _drop_cached(cache_dir: Path | None, hashes: set[str]) -> int:
    from memctl.lifecycle.purge import scrub_cache

    return scrub_cache(cache_dir, hashes) if _cached(cache_dir, hashes) else 0


def _cached(cache_dir: Path | None, hashes: set[str]) -> set[str]:
    """The hashes some model's cache under `cache_dir` still holds (read-only: a cache is never created here)."""
    found: set[str] = set()
    for path in _cache_files(cache_dir):
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        except sqlite3.Error:
            continue
        try:
            for chunk in iter_chunks(sorted(hashes), 500):
                marks = ",".join("?" * len(chunk))
                found.update(r[0] for r in db.execute(f"SELECT hash FROM cache WHERE hash IN ({marks})", chunk))
        except sqlite3.Error:
            found.update(hashes)  # unreadable: nothing proven about it
        finally:
            db.close()
    return found
