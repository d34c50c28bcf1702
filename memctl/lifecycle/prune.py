"""Prune: select memories by age, source, access and importance, and remove them in batches."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from memctl.errors import UsageError
from memctl.lifecycle.durations import is_knowledge, parse_duration
from memctl.store.base import StoreBase
from memctl.store.interface import iter_chunks
from memctl.store.records import Memory, parse_time
from memctl.store.validate import check_area

PRUNE_SOURCES = ("knowledge", "conversation")
PRUNE_BATCH = 5000  # memories removed per transaction (the lock is free between them)


@dataclass(frozen=True)
class PruneCriteria:
    """What `prune` removes: memories matching every criterion given (at least one)."""

    older_than: str | None = None  # created more than this long ago
    not_accessed_for: str | None = None  # last returned by `load` (else created) this long ago
    area: str | None = None
    min_importance: float | None = None  # metadata `importance` below this (missing: config default)
    source: str | None = None  # knowledge | conversation
    filter: str | None = None
    decayed_below: float | None = None  # effective importance (memctl.search.importance.effective) below this

    def check(self) -> None:
        if all(v is None for v in asdict(self).values()):
            raise UsageError(
                "prune needs at least one criterion",
                hint="--older-than, --not-accessed-for, --area, --min-importance, --decayed-below, "
                "--source or --filter",
            )
        if self.decayed_below is not None:
            from memctl.search.importance import check

            check(self.decayed_below, "--decayed-below")
        if self.older_than is not None:
            parse_duration(self.older_than, "--older-than")
        if self.not_accessed_for is not None:
            parse_duration(self.not_accessed_for, "--not-accessed-for")
        if self.area is not None:
            check_area(self.area)
        if self.source is not None and self.source not in PRUNE_SOURCES:
            raise UsageError(f"--source must be knowledge or conversation, not {self.source!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def select_for_prune(store: StoreBase, criteria: PruneCriteria, now: datetime | None = None) -> list[Memory]:
    """The one selection both `prune --dry-run` and a real prune use (oldest first).

    A memory whose timestamps cannot be read is never selected by a time criterion.
    """
    criteria.check()
    now = now or datetime.now(UTC)
    created_before = now - parse_duration(criteria.older_than) if criteria.older_than else None
    seen_before = now - parse_duration(criteria.not_accessed_for) if criteria.not_accessed_for else None
    decayed = None
    if criteria.decayed_below is not None:
        from memctl.search.importance import decayed_below

        decayed = decayed_below(
            criteria.decayed_below,
            float(store.config["prune_default_importance"]),
            float(store.config["importance_half_life"]),
            now,
        )
    default_importance = float(store.config["prune_default_importance"])
    flt = store.compile(criteria.filter)
    # The database selects what the filter matches, as a filtered search does (memctl/store/filter_sql.py).
    allowed = store.matching_ids(flt, area=criteria.area) if flt is not None else None
    selected: list[Memory] = []
    for memory, accessed_at in store.iter_with_access(area=criteria.area):
        if created_before is not None and not _before(memory.created_at, created_before):
            continue
        if seen_before is not None and not _before(accessed_at or memory.created_at, seen_before):
            continue
        if criteria.source is not None and is_knowledge(memory.metadata) != (criteria.source == "knowledge"):
            continue
        if decayed is not None and not decayed(memory, accessed_at):
            continue
        if (
            criteria.min_importance is not None
            and not importance(memory.metadata, default_importance) < criteria.min_importance
        ):
            continue
        if allowed is not None and memory.id not in allowed:
            continue
        selected.append(memory)
    return selected


def _before(value: str | None, cutoff: datetime) -> bool:
    stamp = parse_time(value)
    return stamp is not None and stamp < cutoff


def importance(metadata: dict[str, Any], default: float) -> float:
    value = metadata.get("importance")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return float(value)


@dataclass
class PruneReport:
    dry_run: bool
    purged: bool
    criteria: PruneCriteria
    pruned: list[Memory] = field(default_factory=list)
    compacted: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "purged": self.purged,
            "criteria": self.criteria.to_dict(),
            "count": len(self.pruned),
            "compacted": self.compacted,
            "pruned": [m.to_dict() for m in self.pruned],
        }


def prune(
    store: StoreBase,
    criteria: PruneCriteria,
    *,
    dry_run: bool = False,
    purge: bool = False,
    now: datetime | None = None,
    selected: list[Memory] | None = None,
) -> PruneReport:
    """Remove what `select_for_prune` selects (or the `selected` list it returned earlier).

    Pruned memories are archived and restorable; with `purge` they are not archived, their
    history keeps the operations but loses the text, and the database is compacted.
    """
    chosen = select_for_prune(store, criteria, now) if selected is None else selected
    report = PruneReport(dry_run=dry_run, purged=purge and not dry_run, criteria=criteria)
    if dry_run:
        report.pruned = chosen
        return report
    for batch in iter_chunks(chosen, PRUNE_BATCH):
        ids = [m.id for m in batch]
        with store.transaction():
            gone = set(store.delete(ids, cascade=False, actor="prune", op="prune", archive=not purge).deleted)
            if purge:
                store.forget_text(ids)
        report.pruned += [m for m in batch if m.id in gone]
    if purge and report.pruned:
        report.compacted = store.compact()
    return report
