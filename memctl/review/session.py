"""Working through the review queue one item at a time, with undo: the core of `memctl review` on a terminal.

A `ReviewSession` holds the items to decide (a filtered snapshot of the queue, oldest first), where the
reviewer is, and a stack of what was done. Every decision goes through the store API (`approve_pending`,
`reject_pending`, `update`, `requeue_pending`) with actor `review`, so history shows it and `restore` can
bring a rejected item back; undo is itself a store change that history records.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from memctl.errors import UsageError
from memctl.review.queue import ACTOR, SOURCES
from memctl.store.records import Hit, PendingItem
from memctl.store.validate import check_area

if TYPE_CHECKING:
    from memctl.store.base import StoreBase

KINDS = ("pending",)  # what the queue holds today; doctor's findings join it as kinds of their own


@dataclass(frozen=True)
class ReviewFilter:
    kind: str | None = None
    area: str | None = None
    source: str | None = None

    @classmethod
    def parse(cls, text: str) -> ReviewFilter:
        """`kind=pending area=main source=mcp` (any subset, any order; empty text: everything)."""
        values: dict[str, str] = {}
        for word in text.split():
            key, sep, value = word.partition("=")
            if not sep or key not in ("kind", "area", "source") or not value:
                raise UsageError(f"bad filter term {word!r}", hint="use kind=K area=A source=S")
            values[key] = value
        found = cls(**values)
        found.check()
        return found

    def check(self) -> None:
        if self.kind is not None and self.kind not in KINDS:
            raise UsageError(f"unknown kind {self.kind!r}", hint=f"use one of: {', '.join(KINDS)}")
        if self.area is not None:
            check_area(self.area)
        if self.source is not None and self.source not in SOURCES:
            raise UsageError(f"unknown source {self.source!r}", hint=f"use one of: {', '.join(SOURCES)}")

    def matches(self, item: PendingItem) -> bool:
        return (self.area is None or item.area == self.area) and (self.source is None or item.source == self.source)

    def describe(self) -> str:
        terms = [f"{k}={v}" for k, v in (("kind", self.kind), ("area", self.area), ("source", self.source)) if v]
        return " ".join(terms) or "all"


@dataclass
class Action:
    """One decision, enough to undo it."""

    verb: str  # approve, edit, reject, merge, skip
    item: PendingItem
    position: int
    target: str | None = None  # merge: the memory the item was merged into
    target_text: str | None = None  # merge: that memory's text before


@dataclass
class ReviewSession:
    store: StoreBase
    filter: ReviewFilter = field(default_factory=ReviewFilter)
    items: list[PendingItem] = field(default_factory=list)
    decided: dict[str, str] = field(default_factory=dict)  # item id -> verb
    position: int = 0
    done: list[Action] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.reload()

    def reload(self) -> None:
        """A fresh snapshot of the queue under the filter; decisions made so far stay counted."""
        self.filter.check()
        self.items = [i for i in self.store.pending_items(area=self.filter.area) if self.filter.matches(i)]
        self.decided = {}
        self.done = []
        self.position = 0

    def set_filter(self, found: ReviewFilter) -> None:
        self.filter = found
        self.reload()

    # -- where the reviewer is ------------------------------------------------------------
    @property
    def current(self) -> PendingItem | None:
        return self.items[self.position] if self.position < len(self.items) else None

    @property
    def progress(self) -> tuple[int, int]:
        """(1-based number of the current item, how many there are); (n + 1, n) when all are seen."""
        return self.position + 1, len(self.items)

    def nearest(self, item: PendingItem) -> Hit | None:
        """The stored memory most like the item (what a merge would merge into), if any."""
        hits = self.store.search(item.text, limit=1, threshold=0.0, area=item.area, mode="dense")
        return hits[0] if hits else None

    # -- decisions --------------------------------------------------------------------------
    def approve(self, text: str | None = None) -> str:
        item = self._require()
        if text is not None and not text.strip():
            raise UsageError("the edited text is empty", hint="reject the item instead")
        self.store.approve_pending([item.id], text=text, actor=ACTOR)
        return self._advance(Action("edit" if text is not None else "approve", item, self.position))

    def reject(self) -> str:
        item = self._require()
        self.store.reject_pending([item.id], actor=ACTOR)
        return self._advance(Action("reject", item, self.position))

    def merge(self, target_id: str, text: str) -> str:
        """The item's content goes into memory `target_id` (its text becomes `text`); the item is rejected
        (archived, so `restore` still has it)."""
        item = self._require()
        if not text.strip():
            raise UsageError("the merged text is empty")
        before = self.store.get_one(target_id).text
        self.store.update(target_id, text=text, actor=ACTOR, op="merge")
        self.store.reject_pending([item.id], actor=ACTOR)
        return self._advance(Action("merge", item, self.position, target_id, before))

    def skip(self) -> str:
        return self._advance(Action("skip", self._require(), self.position))

    def undo(self) -> str | None:
        """Take the last decision back (the store as it was, the reviewer on that item); None if none."""
        if not self.done:
            return None
        action = self.done.pop()
        if action.verb in ("approve", "edit"):
            self.store.delete([action.item.id], cascade=False, actor=ACTOR, op="undo", archive=False)
            self.store.requeue_pending(action.item, actor=ACTOR)
        elif action.verb == "reject":
            self.store.requeue_pending(action.item, actor=ACTOR)
        elif action.verb == "merge":
            assert action.target is not None and action.target_text is not None
            self.store.update(action.target, text=action.target_text, actor=ACTOR, op="undo")
            self.store.requeue_pending(action.item, actor=ACTOR)
        self.decided.pop(action.item.id, None)
        self.position = action.position
        return action.verb

    def summary(self) -> dict[str, int]:
        counts = {verb: 0 for verb in ("approve", "edit", "reject", "merge", "skip")}
        for verb in self.decided.values():
            counts[verb] += 1
        return counts

    def _require(self) -> PendingItem:
        item = self.current
        if item is None:
            raise UsageError("no item left to review", hint="undo, or change the filter")
        return item

    def _advance(self, action: Action) -> str:
        self.done.append(replace(action))
        self.decided[action.item.id] = action.verb
        self.position += 1
        return action.verb
