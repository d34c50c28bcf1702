"""Purge: remove memories everywhere they live (rows, indexes, history, archive, embedding cache)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memctl.errors import StoreError, UsageError
from memctl.lifecycle.durations import parse_duration
from memctl.store.base import StoreBase
from memctl.store.interface import iter_chunks


@dataclass
class PurgeReport:
    dry_run: bool
    cutoff: str | None
    history: int = 0
    archived: int = 0
    cache_entries: int = 0
    compacted: bool | None = None
    bytes_before: int = 0
    bytes_after: int = 0
    receipt: Any = None  # memctl.lifecycle.receipts.Receipt when asked to verify

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc.pop("receipt")
        return doc | ({"receipt": self.receipt.to_dict()} if self.receipt is not None else {})


def purge(
    store: StoreBase,
    *,
    older_than: str | None = None,
    everything: bool = False,
    dry_run: bool = False,
    now: datetime | None = None,
    verify: bool = False,
) -> PurgeReport:
    """Remove history entries and archived memories older than `older_than` (or all) for good.

    Then the text must be gone from every file: FTS indexes rebuilt, VACUUM, WAL truncated, and the
    embedding cache entries of the removed texts dropped (the cache holds vectors keyed by sha256,
    never text; a hash still confirms a guessed text, and losing an entry costs one re-embedding).
    """
    if everything == (older_than is not None):
        raise UsageError("purge needs exactly one of --older-than or --all")
    cutoff = None if everything else ((now or datetime.now(UTC)) - parse_duration(older_than or "", "--older-than"))
    bound = cutoff.isoformat(timespec="milliseconds") if cutoff else None
    report = PurgeReport(dry_run=dry_run, cutoff=bound, bytes_before=store.size_bytes())
    report.history, report.archived = store.purge_counts(bound)
    if dry_run:
        report.bytes_after = report.bytes_before
        return report
    cache_dir = store.cache_dir
    pending = _PendingScrub(cache_dir)
    hashes = store.purge_rows(bound, found=pending.record)
    try:
        report.compacted = store.compact()
    except (OSError, sqlite3.OperationalError) as exc:
        # The rows are gone (committed, overwritten in place: secure_delete); what failed is the rewrite
        # of the files that drops free pages, which needs room for a copy. Say so instead of "refused".
        raise PurgeIncomplete(report, exc) from exc
    hashes |= pending.load_all()  # this purge's, and those of purges killed before their scrub
    report.cache_entries = scrub_cache(cache_dir, hashes - store.hashes_used_elsewhere(hashes))
    pending.done()
    report.bytes_after = store.size_bytes()
    if verify:
        from memctl.lifecycle.receipts import verify_removal

        report.receipt = verify_removal(store, "purge", [], hashes)
    return report


class PurgeIncomplete(StoreError):
    """Purged, but the store could not be compacted (typically a full disk): run purge again with space."""

    exit_code = 4  # partial: the rows are gone, the compaction is not done

    def __init__(self, report: PurgeReport, cause: BaseException) -> None:
        report.compacted = False
        self.report = report
        super().__init__(
            f"purged {report.history} history entries and {report.archived} archived memories, but the store "
            f"could not be compacted ({cause}): until it is, their text may remain in the file's free pages",
            hint="free some space and run `memctl purge --all` again (it compacts even with nothing left to purge)",
        )


class _PendingScrub:
    """The content hashes a purge must drop from the embedding cache, on disk before the rows go:
    a purge killed after its commit leaves them, and the next purge scrubs them."""

    PREFIX = ".purge-pending-"

    def __init__(self, cache_dir: Path | None) -> None:
        self.cache_dir = cache_dir
        self.files: list[Path] = []

    def record(self, hashes: set[str]) -> None:
        if not hashes or self.cache_dir is None:
            return
        import secrets

        from memctl.files import atomic_write_bytes

        self.cache_dir.mkdir(parents=True, exist_ok=True)
        path = self.cache_dir / f"{self.PREFIX}{secrets.token_hex(6)}.json"
        atomic_write_bytes(path, json.dumps(sorted(hashes)).encode("ascii"))

    def load_all(self) -> set[str]:
        found: set[str] = set()
        if self.cache_dir is None or not self.cache_dir.is_dir():
            return found
        for path in sorted(self.cache_dir.glob(f"{self.PREFIX}*.json")):
            try:
                found.update(str(h) for h in json.loads(path.read_text(encoding="ascii")))
            except (OSError, ValueError, TypeError):
                pass
            self.files.append(path)
        return found

    def done(self) -> None:
        for path in self.files:
            path.unlink(missing_ok=True)


def scrub_cache(cache_dir: Path | None, hashes: set[str]) -> int:
    """Drop these content hashes from every model's embedding cache under cache_dir; return how many."""
    import sqlite3

    if not hashes or cache_dir is None or not cache_dir.is_dir():
        return 0
    removed = 0
    keys = sorted(hashes)
    for path in sorted(cache_dir.glob("*.sqlite")):
        try:
            db = sqlite3.connect(path, timeout=10, isolation_level=None)
        except sqlite3.Error:
            continue
        try:
            for chunk in iter_chunks(keys, 500):
                removed += db.execute(f"DELETE FROM cache WHERE hash IN ({','.join('?' * len(chunk))})", chunk).rowcount
            db.execute("VACUUM")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass  # a cache in use keeps its entries until the next purge; it never held text
        finally:
            db.close()
    return removed
