"""Pending items: listed, approved (they become memories), rejected (archived, restorable), proposed by an
agent, and resolved in bulk by a policy (cron: approve what waited long enough and the gate thought
likely durable, reject the rest of what waited that long).

An item enters the queue from `memorize` (the gate's uncertain band, config `memorize_pending: review`)
or from an agent (MCP `memory_propose`). Every decision goes through the store API
(`StoreBase.approve_pending` / `reject_pending`) and is recorded in history with actor `review`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memctl.errors import UsageError
from memctl.lifecycle.durations import parse_duration
from memctl.store.interface import iter_chunks
from memctl.store.records import Memory, PendingItem, parse_time
from memctl.store.validate import check_area

if TYPE_CHECKING:
    from memctl.store.base import StoreBase

ACTOR = "review"
SOURCES = ("memorize", "mcp")  # what puts items in the queue (metadata `source`)
APPROVE_BATCH = 256  # items embedded and inserted per transaction by `resolve`


def list_page(
    store: StoreBase, *, area: str | None = None, limit: int | None = None, page: int = 1
) -> tuple[list[PendingItem], int, int]:
    """(one page of pending items oldest first, how many wait in all (in `area`), the page size)."""
    if page < 1:
        raise UsageError("page must be 1 or more")
    size = int(limit or store.config["list_page_size"])
    return store.pending_items(limit=size, offset=(page - 1) * size, area=area), store.count_pending(area), size


def approve(store: StoreBase, ids: Sequence[str], *, text: str | None = None, dry_run: bool = False) -> list[Memory]:
    """Approve pending items (all or none). Dry run: the memories they would become, nothing written."""
    if dry_run:
        items = store.require_pending(ids)
        if text is not None and len(items) != 1:
            raise UsageError("--text edits one item: give exactly one id with it", hint="approve the others apart")
        return [
            Memory(i.id, text if text is not None else i.text, i.area, i.created_at, i.created_at, i.metadata)
            for i in items
        ]
    return store.get(store.approve_pending(ids, text=text, actor=ACTOR))


def reject(store: StoreBase, ids: Sequence[str], *, dry_run: bool = False) -> list[PendingItem]:
    """Reject pending items (all or none): archived, so `memctl restore ID` brings one back as a memory."""
    items = store.require_pending(ids)
    if not dry_run:
        store.reject_pending([i.id for i in items], actor=ACTOR)
    return items


def propose(
    store: StoreBase,
    text: str,
    *,
    area: str = "main",
    metadata: Mapping[str, Any] | None = None,
    reason: str | None = None,
    source: str = "mcp",
) -> str:
    """Queue a memory an agent proposes: it waits for a person (or a `resolve` policy); its pending id."""
    meta = {**(metadata or {}), "source": source}
    return store.add_pending(text, area, meta, reason=reason or f"proposed by {source}", actor=source)


@dataclass
class ResolvePolicy:
    """What `review resolve` decides. Only items that waited at least `older_than` are decided (all when
    None); of those, approve the ones whose gate P(noise) is at most `max_p_noise` (items the gate never
    scored, such as agent proposals, are not approved by it) or every one (`approve_all`), and with
    `reject_rest` reject the others. Younger items keep waiting for a person."""

    older_than: str | None = None
    max_p_noise: float | None = None
    approve_all: bool = False
    reject_rest: bool = False
    area: str | None = None
    source: str | None = None

    def check(self) -> None:
        if self.max_p_noise is None and not self.approve_all and not self.reject_rest:
            raise UsageError(
                "resolve needs a decision: --max-p-noise P, --approve-all or --reject-rest",
                hint="e.g. memctl review resolve --older-than 7d --max-p-noise 0.5 --reject-rest",
            )
        if self.approve_all and self.max_p_noise is not None:
            raise UsageError("--approve-all and --max-p-noise exclude each other", hint="give one of them")
        if self.max_p_noise is not None and not 0.0 <= self.max_p_noise <= 1.0:
            raise UsageError(f"--max-p-noise {self.max_p_noise} is not in [0, 1]")
        if self.older_than is not None:
            parse_duration(self.older_than, "--older-than")
        if self.area is not None:
            check_area(self.area)
        if self.source is not None and self.source not in SOURCES:
            raise UsageError(f"unknown source {self.source!r}", hint=f"use one of: {', '.join(SOURCES)}")

    def approves(self, item: PendingItem) -> bool:
        if self.approve_all:
            return True
        p = item.p_noise
        return self.max_p_noise is not None and p is not None and p <= self.max_p_noise

    def to_dict(self) -> dict[str, Any]:
        return {
            "older_than": self.older_than,
            "max_p_noise": self.max_p_noise,
            "approve_all": self.approve_all,
            "reject_rest": self.reject_rest,
            "area": self.area,
            "source": self.source,
        }


@dataclass
class ResolveReport:
    dry_run: bool
    policy: ResolvePolicy
    approved: list[PendingItem] = field(default_factory=list)
    rejected: list[PendingItem] = field(default_factory=list)
    waiting: int = 0  # left in the queue afterwards (dry run: would be)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "policy": self.policy.to_dict(),
            "approved": [i.to_dict() for i in self.approved],
            "rejected": [i.to_dict() for i in self.rejected],
            "waiting": self.waiting,
        }


def select(store: StoreBase, policy: ResolvePolicy, now: datetime | None = None) -> tuple[list[PendingItem], ...]:
    """(to approve, to reject, every pending item) under `policy`, nothing written."""
    policy.check()
    items = store.pending_items(area=policy.area)
    cutoff = (now or datetime.now(UTC)) - parse_duration(policy.older_than) if policy.older_than else None
    due = [i for i in items if (policy.source is None or i.source == policy.source) and _due(i, cutoff)]
    approve_ = [i for i in due if policy.approves(i)]
    chosen = {i.id for i in approve_}
    reject_ = [i for i in due if i.id not in chosen] if policy.reject_rest else []
    return approve_, reject_, items


def _due(item: PendingItem, cutoff: datetime | None) -> bool:
    """Waited long enough: created at or before `cutoff` (None: every item is due)."""
    if cutoff is None:
        return True
    created = parse_time(item.created_at)
    return created is not None and created <= cutoff


def resolve(
    store: StoreBase, policy: ResolvePolicy, *, dry_run: bool = False, now: datetime | None = None
) -> ResolveReport:
    """Decide the queue by `policy` (see ResolvePolicy); approvals in batches, each one transaction."""
    to_approve, to_reject, items = select(store, policy, now)
    report = ResolveReport(dry_run, policy, to_approve, to_reject)
    if not dry_run:
        for batch in iter_chunks(to_approve, APPROVE_BATCH):
            store.approve_pending([i.id for i in batch], actor=ACTOR)
        if to_reject:
            store.reject_pending([i.id for i in to_reject], actor=ACTOR)
        report.waiting = store.count_pending()
    else:
        report.waiting = store.count_pending() - len(to_approve) - len(to_reject)
    return report
