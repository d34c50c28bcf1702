"""Consolidating what is already stored (`memctl consolidate`): groups of similar memories, each group settled
by the Consolidator (memctl/memorize/consolidate.py) as memorize settles a new fact against its neighbours."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memctl.memorize.consolidate import Consolidator, GroupOutcome, Similar, same_subject

if TYPE_CHECKING:
    from memctl.llm import UtilityModel
    from memctl.memorize.same_slot import SameSlot
    from memctl.store.base import StoreBase


@dataclass
class StoreConsolidation:
    dry_run: bool
    areas: list[str]
    groups: list[GroupOutcome] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for group in self.groups:
            counts[group.fate] = counts.get(group.fate, 0) + 1
        return {"groups": len(self.groups), "removed": sum(len(g.removed) for g in self.groups), **counts}

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "areas": self.areas,
            "summary": self.summary(),
            "groups": [g.to_dict() for g in self.groups],
        }


def similar_groups(
    store: StoreBase,
    area: str,
    threshold: float,
    max_size: int,
    keyword_overlap: float | None = None,
    same_slot: SameSlot | None = None,
) -> list[list[Similar]]:
    """Groups of memories that may act on each other, the closest pairs first.

    With `same_slot` (the embedding model's fitted update safety), a pair is any near neighbour or keyword
    match the model lets act. Otherwise a pair is at least `threshold` similar by vector, or (with
    `keyword_overlap`) found by a keyword search for one's text with enough keyword evidence (`same_subject`):
    an old value that only shares the subject's words still meets its new value. Pairs are joined greedily
    from the most similar down (a group stops
    growing at `max_size`), so near-duplicates are settled before looser neighbours. Knowledge chunks are
    left out.
    """
    import numpy as np

    from memctl.store.vector_index import vectors_from_blobs

    dim = store.dimension()
    rows = [
        (m, blob)
        for m, blob in store.iter_all(area=area, with_vectors=True)
        if blob is not None and not m.metadata.get("knowledge_source")
    ]
    if dim is None or len(rows) < 2:
        return []
    vectors = vectors_from_blobs([blob for _, blob in rows], dim)
    position = {m.id: i for i, (m, _) in enumerate(rows)}
    pairs: dict[tuple[int, int], float] = {}
    # each memory's vector neighbours' scores, best first: its neighbourhood for the update safety
    neighbours: list[list[float]] = []

    def relevance(i: int, j: int) -> float:
        return float(np.clip((1.0 + vectors[i] @ vectors[j]) / 2.0, 0.0, 1.0))

    def place(i: int, score: float) -> tuple[float, int]:
        """The best score of memory i's neighbourhood (at least `score`), and where `score` stands in it."""
        around = neighbours[i]
        return max(around[0] if around else score, score), sum(s > score for s in around)

    floor = 0.0 if same_slot else threshold
    for i in range(len(rows)):
        text = rows[i][0].text
        near = [
            h
            for h in store.search_vector(vectors[i], limit=max_size + 1, threshold=floor, area=area)
            if position.get(h.id, i) != i
        ]
        neighbours.append(sorted((h.score for h in near), reverse=True))
        for hit in near:
            at = position[hit.id]
            if same_slot is None or same_slot.may_act(text, hit.text, hit.score, *place(i, hit.score)):
                pairs[(min(i, at), max(i, at))] = hit.score
        if keyword_overlap is None and same_slot is None:
            continue
        for hit in store.search(text, limit=max_size + 1, threshold=0.0, area=area, mode="keyword"):
            j = position.get(hit.id)
            if j is None or j == i or (min(i, j), max(i, j)) in pairs:
                continue
            r = relevance(i, j)
            if (
                same_slot.may_act(text, hit.text, r, *place(i, r))
                if same_slot
                else same_subject(text, hit.text, keyword_overlap or 2.0)
            ):
                pairs[(min(i, j), max(i, j))] = r
    parent = list(range(len(rows)))
    size = [1] * len(rows)

    def root(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    best: dict[int, float] = {}
    for (i, j), score in sorted(pairs.items(), key=lambda kv: -kv[1]):
        a, b = root(i), root(j)
        if a == b or size[a] + size[b] > max_size:
            continue
        parent[b] = a
        size[a] += size[b]
        best[a] = max(best.get(a, 0.0), best.pop(b, 0.0), score)
    members: dict[int, list[int]] = {}
    for k in range(len(rows)):
        members.setdefault(root(k), []).append(k)
    groups: list[tuple[float, list[Similar]]] = []
    for key, indices in members.items():
        if len(indices) < 2:
            continue
        newest = max(indices, key=lambda k: (rows[k][0].created_at, k))
        ordered = [newest] + [k for k in indices if k != newest]
        scores = np.clip((1.0 + vectors[ordered] @ vectors[newest]) / 2.0, 0.0, 1.0)
        group = [Similar(rows[newest][0].id, rows[newest][0].text, float(scores[0]), dict(rows[newest][0].metadata))]
        for k, score in zip(ordered[1:], scores[1:], strict=True):
            # the newest plays the candidate: its neighbourhood is the one its pairs were judged in
            top, rank = place(newest, float(score))
            group.append(Similar(rows[k][0].id, rows[k][0].text, float(score), dict(rows[k][0].metadata), top, rank))
        groups.append((best.get(key, 0.0), group))
    groups.sort(key=lambda g: -g[0])
    return [g for _, g in groups]


def consolidate_store(
    store: StoreBase,
    llm: UtilityModel,
    *,
    area: str | None = None,
    dry_run: bool = False,
    progress: Any = None,
    actor: str = "consolidate",
) -> StoreConsolidation:
    """Consolidate groups of similar stored memories, near-duplicates first, one transaction per group."""
    from memctl.store.validate import check_area

    areas: list[str] = [check_area(area)] if area else ["fragments", "solutions", "main"]
    worker = Consolidator(store, llm, actor=actor, dry_run=dry_run)
    report = StoreConsolidation(dry_run, areas)
    plan = [
        (a, g)
        for a in areas
        for g in similar_groups(
            store, a, worker.consider_min, worker.limit + 1, worker.keyword_overlap, worker.same_slot
        )
    ]
    for done, (group_area, group) in enumerate(plan, start=1):
        report.groups.append(worker.consolidate_group(group_area, group))
        if progress:
            progress(done, len(plan))
    return report
