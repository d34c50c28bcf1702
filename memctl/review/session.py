"""Working through the review queue one item at a time, with undo: the core of `memctl review` on a terminal.

The queue holds pending candidates (kind `pending`: memorize's uncertain band, agent proposals) and the
latest `memctl doctor` run's findings about stored memories (kinds junk, duplicate, conflict, stale). A
`ReviewSession` holds a filtered snapshot of them, where the reviewer is, and a stack of what was done.
Every decision goes through the store API with actor `review`, so history shows it and `restore` brings a
rejected memory back; undo is itself a store change that history records.

What each key means for the two families:

| action | pending candidate | stored memory (a finding) |
|---|---|---|
| approve | becomes a memory | kept as it is (nothing written) |
| edit | becomes a memory with the new text | its text is changed |
| reject | archived (`restore` brings it back) | deleted, archived |
| merge | its content goes into the other memory; archived | the same |
| supersede | becomes a memory; the other one is kept as its superseded version | the other one: a superseded version |

"The other memory" is the finding's related memory (its duplicate or conflicting value), else the stored
memory closest to the item.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from memctl.errors import UsageError
from memctl.review.queue import ACTOR, SOURCES
from memctl.store.doctor_rows import FINDING_KINDS
from memctl.store.records import Hit, Memory, PendingItem, now_iso
from memctl.store.validate import check_area
from memctl.store.validity import SUPERSEDED_BY, SUPERSEDES, VALID_FROM, VALID_TO, end_validity

if TYPE_CHECKING:
    from memctl.store.base import StoreBase

KINDS = ("pending", *FINDING_KINDS)
VERBS = ("approve", "edit", "reject", "merge", "supersede", "skip")


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

    def describe(self) -> str:
        terms = [f"{k}={v}" for k, v in (("kind", self.kind), ("area", self.area), ("source", self.source)) if v]
        return " ".join(terms) or "all"


@dataclass
class ReviewItem:
    """One thing to decide: a pending candidate, or a stored memory a doctor run found."""

    kind: str
    memory: Memory  # for a pending candidate: what it would become
    reason: str
    source: str | None = None
    transcript: str | None = None
    score: float | None = None
    related: list[str] = field(default_factory=list)
    pending: PendingItem | None = None

    @property
    def id(self) -> str:
        return self.memory.id

    @property
    def text(self) -> str:
        return self.memory.text

    @classmethod
    def of_pending(cls, item: PendingItem) -> ReviewItem:
        memory = Memory(item.id, item.text, item.area, item.created_at, item.created_at, item.metadata)
        return cls("pending", memory, item.reason, item.source, item.transcript, pending=item)


@dataclass
class Action:
    """One decision, enough to undo it."""

    verb: str
    item: ReviewItem
    position: int
    target: str | None = None  # merge / supersede: the other memory
    before: Memory | None = None  # the memory changed (edit, merge target, supersede target) as it was


@dataclass
class ReviewSession:
    store: StoreBase
    filter: ReviewFilter = field(default_factory=ReviewFilter)
    items: list[ReviewItem] = field(default_factory=list)
    decided: dict[str, str] = field(default_factory=dict)  # item id -> verb
    position: int = 0
    done: list[Action] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.reload()

    def reload(self) -> None:
        """A fresh snapshot of the queue under the filter (pending first, oldest first; then findings)."""
        self.filter.check()
        kind, area, source = self.filter.kind, self.filter.area, self.filter.source
        items: list[ReviewItem] = []
        if kind in (None, "pending"):
            pending = self.store.pending_items(area=area)
            items += [ReviewItem.of_pending(i) for i in pending if source is None or i.source == source]
        if kind != "pending" and source is None:  # findings are of stored memories, which have no queue source
            items += self._findings([kind] if kind else list(FINDING_KINDS), area)
        self.items, self.decided, self.done, self.position = items, {}, [], 0

    def _findings(self, kinds: list[str], area: str | None) -> list[ReviewItem]:
        from memctl.review.doctor import findings_page

        seen: set[str] = set()
        out = []
        for kind in kinds:
            found, _, _, _ = findings_page(self.store, kind, area=area, limit=1 << 30)
            for f in found:
                if f.memory.id not in seen:  # a memory found twice is decided once
                    seen.add(f.memory.id)
                    meta = f.memory.metadata
                    source, transcript = _text(meta.get("source")), _text(meta.get("transcript"))
                    item = ReviewItem(kind, f.memory, f.finding.reason, source, transcript, f.finding.score)
                    item.related = list(f.finding.related)
                    out.append(item)
        return out

    def set_filter(self, found: ReviewFilter) -> None:
        self.filter = found
        self.reload()

    # -- where the reviewer is ------------------------------------------------------------
    @property
    def current(self) -> ReviewItem | None:
        return self.items[self.position] if self.position < len(self.items) else None

    @property
    def progress(self) -> tuple[int, int]:
        """(1-based number of the current item, how many there are); (n + 1, n) when all are seen."""
        return self.position + 1, len(self.items)

    def other(self, item: ReviewItem) -> Hit | Memory | None:
        """The memory a merge or supersede acts on: the finding's related memory, else the closest one."""
        related = self.store.get(item.related) if item.related else []
        if related:
            return related[0]
        hits = self.store.search(item.text, limit=2, threshold=0.0, area=item.memory.area, mode="dense")
        return next((h for h in hits if h.id != item.id), None)

    # -- decisions --------------------------------------------------------------------------
    def approve(self, text: str | None = None) -> str:
        item = self._require()
        if text is not None and not text.strip():
            raise UsageError("the edited text is empty", hint="reject the item instead")
        verb = "edit" if text is not None else "approve"
        if item.pending is not None:
            self.store.approve_pending([item.id], text=text, actor=ACTOR)
            return self._advance(Action(verb, item, self.position))
        before = self.store.get_one(item.id)
        if text is not None and text != before.text:
            self.store.update(item.id, text=text, actor=ACTOR, op="edit")
        return self._advance(Action(verb, item, self.position, before=before))

    def reject(self) -> str:
        item = self._require()
        if item.pending is not None:
            self.store.reject_pending([item.id], actor=ACTOR)
        else:
            self.store.delete([item.id], cascade=False, actor=ACTOR, op="reject")
        return self._advance(Action("reject", item, self.position))

    def merge(self, target_id: str, text: str) -> str:
        """The item's content goes into memory `target_id` (its text becomes `text`); the item is rejected
        (archived, so `restore` still has it)."""
        item = self._require()
        if not text.strip():
            raise UsageError("the merged text is empty")
        if target_id == item.id:
            raise UsageError("a memory cannot be merged into itself")
        before = self.store.get_one(target_id)
        with self.store.transaction():
            self.store.update(target_id, text=text, actor=ACTOR, op="merge")
            if item.pending is not None:
                self.store.reject_pending([item.id], actor=ACTOR)
            else:
                self.store.delete([item.id], cascade=False, actor=ACTOR, op="merge")
        return self._advance(Action("merge", item, self.position, target_id, before))

    def supersede(self, target_id: str) -> str:
        """The item is the current value; memory `target_id` is kept as its superseded version."""
        item = self._require()
        if target_id == item.id:
            raise UsageError("a memory cannot supersede itself")
        before = self.store.get_one(target_id)
        stamp = now_iso()
        if item.pending is not None:
            self.store.approve_pending([item.id], actor=ACTOR)
        with self.store.transaction():
            end_validity(self.store, [target_id], item.id, stamp, actor=ACTOR)
            current = self.store.get_one(item.id)
            earlier = [str(i) for i in current.metadata.get(SUPERSEDES) or []]
            changes: dict[str, Any] = {SUPERSEDES: [*earlier, target_id]}
            if item.pending is not None:
                changes[VALID_FROM] = stamp
            self.store.update(item.id, metadata=changes, actor=ACTOR, op="supersede")
        return self._advance(Action("supersede", item, self.position, target_id, before))

    def skip(self) -> str:
        return self._advance(Action("skip", self._require(), self.position))

    def undo(self) -> str | None:
        """Take the last decision back (the store as it was, the reviewer on that item); None if none."""
        if not self.done:
            return None
        action = self.done.pop()
        item, verb = action.item, action.verb
        if verb == "merge" and action.before is not None:
            self.store.update(action.before.id, text=action.before.text, actor=ACTOR, op="undo")
        if verb == "supersede" and action.before is not None:
            self._restore([action.before.id])
            self.store.update(action.before.id, metadata=action.before.metadata, replace_metadata=True, actor=ACTOR)
        if item.pending is not None and verb != "skip":
            if verb in ("approve", "edit", "supersede"):
                self.store.delete([item.id], cascade=False, actor=ACTOR, op="undo", archive=False)
            self.store.requeue_pending(item.pending, actor=ACTOR)
        elif item.pending is None:
            if verb in ("reject", "merge"):
                self._restore([item.id])
            elif verb == "edit" and action.before is not None:
                self.store.update(item.id, text=action.before.text, actor=ACTOR, op="undo")
            elif verb == "supersede":
                self.store.update(item.id, metadata=item.memory.metadata, replace_metadata=True, actor=ACTOR)
        self.decided.pop(item.id, None)
        self.position = action.position
        return verb

    def summary(self) -> dict[str, int]:
        counts = dict.fromkeys(VERBS, 0)
        for verb in self.decided.values():
            counts[verb] += 1
        return counts

    def _restore(self, ids: list[str]) -> None:
        from memctl.lifecycle.restore import restore

        restore(self.store, ids, actor=ACTOR)
        for memory in self.store.get(ids):  # a superseded version comes back current: its end goes
            if any(k in memory.metadata for k in (VALID_TO, SUPERSEDED_BY)):
                self.store.update(memory.id, unset=[VALID_TO, SUPERSEDED_BY], actor=ACTOR, op="undo")

    def _require(self) -> ReviewItem:
        item = self.current
        if item is None:
            raise UsageError("no item left to review", hint="undo, or change the filter")
        return item

    def _advance(self, action: Action) -> str:
        self.done.append(replace(action))
        self.decided[action.item.id] = action.verb
        self.position += 1
        return action.verb


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
