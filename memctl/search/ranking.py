"""Optional re-ranking of recalled memories by importance and recency, after relevance.

Off by default (`rank_importance_weight: 0`). The search first decides which memories pass the
relevance threshold; this module only re-orders those, so an irrelevant memory can never get in
because it is important or new. With a weight w > 0 the order key of a hit is

    (1 - w) * relevance + w * importance * 0.5 ** (age_days / rank_recency_half_life)

where importance is the metadata `importance` (missing: `prune_default_importance`), age is the time since
the memory's text last changed (`updated_at`), and a half-life of 0 turns the recency factor off.
The hit's `score` stays its relevance. Core module: no typer/rich.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from memctl.search import importance

H = TypeVar("H")


def rank_key(hit: Any, weight: float, half_life: float, default: float, now: datetime) -> float:
    prior = importance.of(hit.metadata, default)
    days = importance.age_days(hit.updated_at or hit.created_at, now)
    recency = 1.0 if days is None else importance.halving(days, half_life)
    return (1.0 - weight) * float(hit.score) + weight * prior * recency


def rerank(hits: Sequence[H], config: Any, now: datetime | None = None) -> list[H]:
    """`hits` (all already above the threshold) in the order the configured weights give; stable."""
    weight = float(config["rank_importance_weight"])
    if weight <= 0 or len(hits) < 2:
        return list(hits)
    half_life = float(config["rank_recency_half_life"])
    default = float(config["prune_default_importance"])
    now = now or datetime.now(UTC)
    keys = [rank_key(h, weight, half_life, default, now) for h in hits]
    order = sorted(range(len(hits)), key=lambda i: -keys[i])
    return [hits[i] for i in order]
