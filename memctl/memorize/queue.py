"""A newer value retires its stale one from the review queue.

The gate leaves a candidate it is unsure of in the review queue (`memctl review`). When a later conversation
states the same slot again ("membership is now £78" after a queued "membership is £72"), the queue must not
hold both values for a person to approve: the stale one would come back as a memory. So each candidate of a
conversation is compared, as consolidation compares it with stored memories, with the queued items of its area
from earlier conversations: the close ones are shown to the utility model, and an item it calls an older value
(update, replace, merge) or the same fact (skip) leaves the queue. It is archived with op `outdated` (`memctl
restore ID` brings it back) and the candidate's outcome names it. A candidate the gate kept retires the queued
item the same way (the slot is stored now). A candidate that is itself pending and that the model calls a
*new value* of a queued item (update, replace, merge; not a plain restatement, skip) at
replace_similarity_threshold is stored instead of queued (memctl.memorize.pipeline): two conversations setting
one slot make it a fact that recurs, and leaving the newest value in the queue would leave that slot empty in
the store. Any other pending candidate is queued in the item's place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memctl.errors import MemctlError
from memctl.store.records import relevance

if TYPE_CHECKING:
    import numpy as np

    from memctl.memorize.consolidate import Consolidator, Similar
    from memctl.store.records import PendingItem

# Queued items of the area read per candidate: the queue is a person's worklist, not a corpus; past this
# many the oldest are not compared (a queue that long is a review backlog, `memctl doctor` says so).
QUEUE_SCAN = 500
OUTDATED_OP = "outdated"
_RETIRING = ("update", "replace", "merge", "skip")
# The actions that make the candidate a newer value of the queued item (skip only says the same thing again,
# which is no evidence the slot lasts: one transient, a ticket number, can be restated in two sessions).
_NEW_VALUE = ("update", "replace", "merge")


@dataclass
class QueueCheck:
    """The queued items a candidate makes stale, and what the model said."""

    stale: list[str] = field(default_factory=list)
    reason: str = ""
    texts: list[str] = field(default_factory=list)  # the stale items' texts, in the order of `stale`
    action: str = ""  # what the model said of them (one of _RETIRING), "" when nothing is stale
    closest: float = 0.0  # the best stale item's relevance to the candidate

    @property
    def new_value(self) -> bool:
        """The candidate is a newer value of the stale items (not a restatement of them)."""
        return bool(self.stale) and self.action in _NEW_VALUE


def queued_neighbours(
    consolidator: Consolidator, text: str, area: str, vector: np.ndarray, transcript: str
) -> list[Similar]:
    """Queued items of `area` from other conversations that the candidate may act on, closest first."""
    from memctl.memorize.consolidate import Similar, by_relevance

    store = consolidator.store
    items: list[PendingItem] = [
        item for item in store.pending_items(limit=QUEUE_SCAN, area=area) if item.transcript != transcript
    ]
    if not items:
        return []
    vectors = store.embed([item.text for item in items])
    scores = vectors @ vector
    ranked = by_relevance(
        Similar(item.id, item.text, relevance(float(score)), dict(item.metadata))
        for item, score in zip(items, scores, strict=True)
    )
    return [s for s in ranked if consolidator.may_act(text, s)][: consolidator.limit]


def stale_in_queue(consolidator: Consolidator, text: str, area: str, vector: np.ndarray, transcript: str) -> QueueCheck:
    """The queued items `text` is a newer value or a restatement of (none without a utility model, with
    consolidation off, or when the model fails: the queue is then left as it is)."""
    if not consolidator.enabled or consolidator.llm is None:
        return QueueCheck()
    try:
        near = queued_neighbours(consolidator, text, area, vector, transcript)
        if not near:
            return QueueCheck()
        decision = consolidator.decide(text, area, near)
    except MemctlError:  # LLMError included
        return QueueCheck()
    if decision.action not in _RETIRING:
        return QueueCheck()
    targets = [near[i] for i in decision.targets if consolidator.may_act(text, near[i])]
    if not targets:
        return QueueCheck()
    best = max(t.score for t in targets)
    return QueueCheck([t.id for t in targets], decision.reason, [t.text for t in targets], decision.action, best)


def retire(consolidator: Consolidator, check: QueueCheck) -> list[str]:
    """Archive the stale queued items (op `outdated`); the ids retired."""
    store = consolidator.store
    waiting = [item.id for item in store.get_pending(check.stale)]  # another writer may have decided some
    if not waiting:
        return []
    return store.reject_pending(waiting, actor=consolidator.actor, op=OUTDATED_OP)
