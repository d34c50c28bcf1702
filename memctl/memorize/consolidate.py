"""Consolidation: a new memory meets the similar memories already stored, and the store keeps the
current truth once instead of every version of it.

For each candidate: find similar memories in the same area (by vector, and by keyword search over the
full text plus 2–4 keywords the utility model extracts — or the first sentence when that fails),
score each by its real relevance to the candidate (vector similarity, never a query score) and its
keyword evidence (the share of content words the two have in common), and ask the model for one
action. The model is shown only memories it may act on (see Safety):

- ``skip``          the store already says it: nothing is written
- ``keep_separate`` a different fact: the candidate is inserted as it is
- ``update``        one stored memory changed: it is rewritten in place (same id; history keeps the old text)
- ``replace``       the candidate supersedes the targets: they are removed, the candidate inserted
- ``merge``         candidate and targets become one new memory: they are removed, the merged text inserted

Safety: a stored memory may be acted on (shown to the model, and updated) when its real relevance
reaches ``consolidation_threshold`` *or* the keyword evidence says it is about the same subject
(``consolidation_keyword_overlap``: at least two shared content words, and that share of the shorter
memory's content words; Chinese text counts character pairs). So an old value that only the keyword
side finds ("ledgerline's API is built with Flask", relevance 0.65) can still be updated, while an
unrelated memory can not. Replace and merge *remove* memories only at ``replace_similarity_threshold``;
a replace or merge whose targets are all below it (but may be acted on) rewrites the first target in
place instead (an update: same id, the old text kept in history), so a stale value never survives
an action the model asked for.
Targets are re-read inside the write transaction: one that vanished or changed since the model saw
it is left out. Every action is applied in ONE transaction. Any failure or timeout of the model,
or an unusable reply, inserts the candidate as it is: nothing is lost, and the outcome says why.

Provenance: removed memories are the *parents* of the memory that took their place, in the link
table (``consolidated_from`` for merge, ``replaced`` for replace, ``updated_from`` when a stored
memory is absorbed into another by ``memctl consolidate``); ``show ID`` of an original lists what it
became. Because `delete` cascades parent -> child, the originals are deleted with cascade off and
*before* the result is linked to them, in the same transaction; a deleted id never starts a cascade
again, so the merged memory can never be cascaded away by its own originals, and deleting the
merged memory later removes nothing else (it has no children).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from memctl.errors import MemctlError
from memctl.llm import LLMError, UtilityModel
from memctl.store.validity import supersede
from memctl.text.cjk import KANA_HAN

if TYPE_CHECKING:
    import numpy as np

    from memctl.memorize.same_slot import SameSlot
    from memctl.store.base import StoreBase
    from memctl.store.records import Memory

ACTIONS = ("merge", "replace", "update", "keep_separate", "skip")
# action -> the fate shown in reports
FATE = {
    "merge": "merged",
    "replace": "replaced",
    "update": "updated",
    "keep_separate": "kept_separate",
    "skip": "skipped",
    "insert": "inserted",
}
LINK_KIND = {"merge": "consolidated_from", "replace": "replaced", "update": "updated_from"}
_ALIASES = {
    "keep": "keep_separate",
    "separate": "keep_separate",
    "keepseparate": "keep_separate",
    "new": "keep_separate",
    "insert": "keep_separate",
    "add": "keep_separate",
    "store": "keep_separate",
    "duplicate": "skip",
    "ignore": "skip",
    "none": "skip",
    "nothing": "skip",
    "combine": "merge",
    "supersede": "replace",
    "overwrite": "replace",
    "modify": "update",
    "edit": "update",
}


@dataclass
class Similar:
    id: str
    text: str
    score: float  # real relevance (1 + cos) / 2 between this memory and the candidate
    metadata: dict[str, Any] = field(default_factory=dict)
    # Where it stands among the memories the candidate was compared with (the update safety's neighbourhood
    # features): the best of their scores, and its place by score (0 = the nearest). None: counts as the nearest.
    nearest: float | None = None
    rank: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "score": round(self.score, 4), "text": self.text}


def by_relevance(similar: Iterable[Similar]) -> list[Similar]:
    """`similar` best first, each told the best score and its own place among them."""
    ranked = sorted(similar, key=lambda s: -s.score)
    top = ranked[0].score if ranked else None
    for place, item in enumerate(ranked):
        item.nearest, item.rank = top, place
    return ranked


@dataclass
class Decision:
    action: str
    targets: list[int] = field(default_factory=list)
    text: str | None = None
    reason: str = ""


@dataclass
class Outcome:
    """What happened to one candidate (or, in a dry run, what would)."""

    text: str
    area: str
    fate: str  # merged, replaced, updated, kept_separate, skipped, inserted (and gated, set by memorize)
    reason: str = ""
    ids: list[str] = field(default_factory=list)  # memories that hold the result (new or updated)
    removed: list[str] = field(default_factory=list)
    similar: list[Similar] = field(default_factory=list)
    result_text: str | None = None  # the text stored when it differs from the candidate
    notes: list[str] = field(default_factory=list)
    outdated: list[str] = field(default_factory=list)  # queued review items this one made stale (memorize.queue)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "area": self.area,
            "fate": self.fate,
            "reason": self.reason,
            "ids": self.ids,
            "removed": self.removed,
            "result_text": self.result_text,
            "similar": [s.to_dict() for s in self.similar],
            "notes": self.notes,
            "outdated": self.outdated,
        }


def merge_metadata(*metas: Mapping[str, Any] | None) -> dict[str, Any]:
    """Later wins, except `tags`: the union of every list, in first-seen order."""
    merged: dict[str, Any] = {}
    tags: list[Any] = []
    for meta in metas:
        for key, value in (meta or {}).items():
            if key == "tags" and isinstance(value, list):
                tags += [t for t in value if t not in tags]
            else:
                merged[key] = value
    if tags:
        merged["tags"] = tags
    return merged


def plausible(result: str, sources: Sequence[str], min_share: float = 0.5) -> bool:
    """Does a model-written memory restate its sources? At least half of its content words must come
    from them (a weak model's prose, an echo of the prompt, or an invented fact fails), and it must not
    be far longer than all of them together."""
    from memctl.memorize.grounding import content_stems

    words = content_stems(result)
    known = {w for text in sources for w in content_stems(text)}
    if not words or len(result) > 2 * sum(len(t) for t in sources) + 200:
        return False
    return sum(1 for w in words if w in known) / len(words) >= min_share


def first_sentence(text: str, limit: int = 200) -> str:
    head = re.split(r"(?<=[.!?;])\s|\s->\s|\n", text.strip(), maxsplit=1)[0]
    return head[:limit].strip() or text[:limit]


_CJK_RUN = re.compile(f"[{KANA_HAN}]+")


def evidence_words(text: str) -> set[str]:
    """Content words for keyword evidence: stems of the Latin-script words (frame words such as "user" or
    "prefers" left out) and overlapping character pairs of Chinese/Japanese runs (no spaces to split on)."""
    from memctl.memorize.grounding import content_stems

    words = set(content_stems(_CJK_RUN.sub(" ", text)))
    for run in _CJK_RUN.findall(text):
        words.update([run] if len(run) == 1 else (run[i : i + 2] for i in range(len(run) - 1)))
    return words


def keyword_evidence(a: str, b: str) -> tuple[int, float]:
    """(shared content words, their share of the smaller side's content words)."""
    left, right = evidence_words(a), evidence_words(b)
    shared = len(left & right)
    return shared, shared / (min(len(left), len(right)) or 1)


def same_subject(a: str, b: str, min_share: float) -> bool:
    """Keyword evidence that two memories are about the same thing: at least two content words in common,
    and at least `min_share` of the shorter one's. min_share above 1 turns the keyword route off."""
    shared, share = keyword_evidence(a, b)
    return shared >= 2 and share >= min_share


@dataclass
class Resolved:
    """What a model decision comes to once the safety rules have judged it (`Consolidator.resolve`):
    the action carried out, its targets, the notes, and why it was downgraded (or "")."""

    action: str  # skip, keep_separate, update, replace, merge
    targets: list[Similar] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    downgraded: str = ""


class Consolidator:
    """Consolidates candidates into one store; `dry_run` decides without writing."""

    def __init__(
        self, store: StoreBase, llm: UtilityModel | None, *, actor: str = "memorize", dry_run: bool = False
    ) -> None:
        self.store = store
        self.llm = llm
        self.actor = actor
        self.dry_run = dry_run
        config = store.config
        self.enabled = bool(config["memorize_consolidation"])
        self.replace_min = float(config["replace_similarity_threshold"])
        self.consider_min = float(config["consolidation_threshold"])
        self.keyword_overlap = float(config["consolidation_keyword_overlap"])
        self.limit = int(config["consolidation_search_limit"])
        # None: not looked up yet; False: none (the rule decides)
        self._same_slot: SameSlot | None | Literal[False] = None if config["consolidation_same_slot"] else False

    @property
    def same_slot(self) -> SameSlot | None:
        """The fitted update safety of the store's embedding model (None: the rule decides). Looked up on
        first use: naming the model may load it."""
        if self._same_slot is None:
            from memctl.memorize.same_slot import for_model

            self._same_slot = for_model(self.store.embedder.info.model) or False
        return self._same_slot or None

    # -- the entry point ------------------------------------------------------------------------
    def consolidate(self, text: str, area: str, metadata: Mapping[str, Any] | None = None) -> Outcome:
        if not self.enabled or self.llm is None:
            return self.replace_above(text, area, metadata)
        vector = self.store.embed([text])[0]
        notes: list[str] = []
        try:
            similar = self.find_similar(text, vector, area, notes)
        except MemctlError as exc:
            return self._insert(
                Outcome(
                    text, area, "inserted", f"similar-memory search failed, inserted as is: {exc.message}", notes=notes
                ),
                metadata,
                vector,
            )
        if not similar:
            return self._insert(Outcome(text, area, "inserted", "no similar memory", notes=notes), metadata, vector)
        try:
            decision = self.decide(text, area, similar)
        except LLMError as exc:
            return self._insert(
                Outcome(
                    text,
                    area,
                    "inserted",
                    f"consolidation failed, inserted as is: {exc.message}",
                    similar=similar,
                    notes=notes,
                ),
                metadata,
                vector,
            )
        return self.apply(text, area, metadata, vector, similar, decision, notes)

    def settle_pending(
        self,
        text: str,
        area: str,
        metadata: Mapping[str, Any] | None = None,
        change_grounded: Callable[[str], bool] | None = None,
    ) -> Outcome | None:
        """A candidate the gate is unsure of, settled by the store when it can be: the utility model says it is
        already stored (skip) or a new value of a stored memory (update, replace, merge), so the slot is one a
        kept fact already holds and the stale value must not stay searchable while a person reviews. Returns
        the carried-out outcome, or None (nothing stored to act on, no utility model, or a failure): it stays
        pending. Without consolidation nothing is settled: the plain replace rule has no model to ask.
        `change_grounded(old)`: given, a new value is carried out only when what it changes in each memory `old`
        it acts on is grounded in the transcript; otherwise it stays pending."""
        if not self.enabled or self.llm is None or len(self.store) == 0:
            return None
        notes: list[str] = []
        try:
            vector = self.store.embed([text])[0]
            similar = self.find_similar(text, vector, area, notes)
            if not similar:
                return None
            decision = self.decide(text, area, similar)
        except MemctlError:  # LLMError included: the candidate waits for a person instead
            return None
        resolved = self.resolve(decision.action, [similar[i] for i in decision.targets], text, skip_needs_close=False)
        if resolved.action not in ("skip", "update", "replace", "merge"):
            return None
        changes = resolved.action in ("update", "replace", "merge")
        if changes and change_grounded is not None and not all(change_grounded(t.text) for t in resolved.targets):
            return None
        outcome = self.apply(text, area, metadata, vector, similar, decision, notes)
        outcome.notes.insert(0, "the gate was unsure; the store already holds this fact's slot")
        return outcome

    # -- finding similar memories --------------------------------------------------------------
    def keywords(self, text: str, notes: list[str]) -> list[str]:
        """2–4 search keywords from the model; the first sentence when that fails."""
        assert self.llm is not None
        try:
            reply = self.llm.ask_json("memorize_keywords", text=text)
        except LLMError as exc:
            notes.append(f"keyword extraction failed, searched the first sentence: {exc.message}")
            return [first_sentence(text)]
        if isinstance(reply, dict):
            reply = next((v for v in reply.values() if isinstance(v, list)), None)
        words = [" ".join(str(w).split())[:100] for w in reply or [] if isinstance(w, str | int | float)]
        words = [w for w in dict.fromkeys(words) if w.strip()][:4]
        if not words:
            notes.append("keyword extraction gave no keywords, searched the first sentence")
            return [first_sentence(text)]
        return words

    def find_similar(self, text: str, vector: np.ndarray, area: str, notes: list[str]) -> list[Similar]:
        """Memories of `area` the candidate may act on: near it by vector, or found by keyword search (its full
        text, its keywords) with enough keyword evidence. Best first by real relevance; the others are left
        out with a note (the model is never shown a memory it may not act on)."""
        if len(self.store) == 0:
            return []
        found: dict[str, Memory] = {}
        floor = 0.0 if self.same_slot else self.consider_min  # the fitted safety judges every near memory
        for hit in self.store.search_vector(vector, limit=self.limit, threshold=floor, area=area):
            found.setdefault(hit.id, hit)
        queries = [text, *self.keywords(text, notes)]
        self._warm_queries(queries)
        for query in queries:  # rare identifiers the vector side misses
            for hit in self.store.search(query, limit=self.limit, threshold=0.0, area=area, mode="keyword"):
                found.setdefault(hit.id, hit)
        found = {i: m for i, m in found.items() if not m.metadata.get("knowledge_source")}  # files own those
        scores = self.real_scores(vector, list(found), area)
        ranked = by_relevance(Similar(i, found[i].text, scores.get(i, 0.0), dict(found[i].metadata)) for i in found)
        shown = [s for s in ranked if self.may_act(text, s)]
        if len(shown) < len(ranked):
            notes.append(f"{len(ranked) - len(shown)} similar memor(ies) left out: {self.safety_words()}")
        return shown[: self.limit]

    def _warm_queries(self, queries: list[str]) -> None:
        """One batch for the keyword searches' query vectors (each search reads it from the cache)."""
        from memctl.embeddings import embed_queries

        try:
            embed_queries(self.store.embedder, list(dict.fromkeys(queries)))
        except MemctlError:
            pass  # the search that needs the vector reports the failure

    def may_act(self, text: str, other: Similar) -> bool:
        """The update safety: the fitted same-slot model of the embedding model (memctl/memorize/same_slot.py),
        else the rule: close by vector, or the same subject by keyword evidence."""
        if self.same_slot is not None:
            return self.same_slot.may_act(text, other.text, other.score, other.nearest, other.rank)
        return other.score >= self.consider_min or same_subject(text, other.text, self.keyword_overlap)

    def safety_words(self) -> str:
        """Why a memory may not be acted on, for notes."""
        if self.same_slot is not None:
            return f"the update safety's P(same slot) < {self.same_slot.cut:.3f}"
        return f"below consolidation_threshold {self.consider_min} without enough keyword evidence"

    def real_scores(self, vector: np.ndarray, ids: Sequence[str], area: str | None) -> dict[str, float]:
        """Relevance of each stored memory to `vector` (not to whichever query found it)."""
        return self.store.scores_of(vector, ids, area)

    # -- asking the model ------------------------------------------------------------------------
    def decide(self, text: str, area: str, similar: Sequence[Similar]) -> Decision:
        assert self.llm is not None
        existing = "\n".join(f"{i}. [{s.score:.2f}] {' '.join(s.text.split())}" for i, s in enumerate(similar))
        reply = self.llm.ask_json("consolidate", text=text, area=area, existing=existing)
        return parse_decision(reply, len(similar), [s.id for s in similar])

    # -- applying the decision -------------------------------------------------------------------
    def apply(
        self,
        text: str,
        area: str,
        metadata: Mapping[str, Any] | None,
        vector: np.ndarray,
        similar: list[Similar],
        decision: Decision,
        notes: list[str],
    ) -> Outcome:
        base = Outcome(text, area, "inserted", decision.reason, similar=similar, notes=notes)
        result_text = (decision.text or "").strip() or None
        sources = [text] + [similar[i].text for i in decision.targets]
        if result_text and decision.action in ("merge", "replace", "update") and not plausible(result_text, sources):
            base.reason = (
                f"consolidation failed, inserted as is: the model's {decision.action} text does not "
                f"restate the memories it combines ({result_text[:80]!r})"
            )
            return self._insert(base, metadata, vector)
        result_vector = None
        if result_text and result_text != text and decision.action in ("merge", "replace"):
            try:
                result_vector = self.store.embed([result_text])[0]
            except MemctlError as exc:
                notes.append(f"could not embed the model's text, inserted as is: {exc.message}")
                return self._insert(base, metadata, vector)
        elif result_text and decision.action == "update":
            try:
                self.store.embed([result_text])  # warm the cache: update() embeds again under the lock
            except MemctlError as exc:
                notes.append(f"could not embed the updated text, inserted as is: {exc.message}")
                return self._insert(base, metadata, vector)
        try:
            if self.dry_run:
                return self._plan(base, metadata, vector, similar, decision, result_text, result_vector, write=False)
            with self.store.transaction():
                return self._plan(base, metadata, vector, similar, decision, result_text, result_vector, write=True)
        except MemctlError as exc:
            base = Outcome(
                text,
                area,
                "inserted",
                f"applying {decision.action} failed, inserted as is: {exc.message}",
                similar=similar,
                notes=notes,
            )
            return self._insert(base, metadata, vector)

    def resolve(self, action: str, live: list[Similar], text: str, *, skip_needs_close: bool) -> Resolved:
        """The one rule book of both entry points (a new candidate, a stored group's newest member):
        - update rewrites the first target the candidate may act on (close by vector, or the same subject);
        - replace/merge remove only targets at or above replace_similarity_threshold; with none, a target
          it may act on is updated in place instead (the stale value must not survive), else nothing;
        - skip: the candidate is dropped (a stored newest member only when a close target keeps its content)."""
        if action == "keep_separate":
            return Resolved("keep_separate")
        actable = [t for t in live if self.may_act(text, t)]
        close = [t for t in live if t.score >= self.replace_min]
        notes: list[str] = []
        if action in ("replace", "merge") and not close and actable:
            notes.append(
                f"{action} of {actable[0].id} below replace_similarity_threshold {self.replace_min} "
                "applied as an update"
            )
            action = "update"
        if action == "update":
            if not actable:
                why = (
                    "its target is gone"
                    if not live
                    else f"target similarity {live[0].score:.3f}: {self.safety_words()}"
                )
                return Resolved("keep_separate", notes=notes, downgraded=f"update downgraded to keep_separate: {why}")
            return Resolved("update", actable[:1], notes)
        if action == "skip" and not skip_needs_close:
            return Resolved("skip", live[:1])
        if not close:
            best = f" (best {max(t.score for t in live):.3f})" if live else ""
            return Resolved(
                "keep_separate",
                notes=notes,
                downgraded=f"{action} downgraded to keep_separate: no target reaches replace_similarity_threshold "
                f"{self.replace_min}{best}",
            )
        for target in live:
            if target.score < self.replace_min:
                notes.append(
                    f"{action}: kept {target.id}, similarity {target.score:.3f} < "
                    f"replace_similarity_threshold {self.replace_min}"
                )
        return Resolved(action, close, notes)

    def _plan(
        self,
        out: Outcome,
        metadata: Mapping[str, Any] | None,
        vector: np.ndarray,
        similar: list[Similar],
        decision: Decision,
        result_text: str | None,
        result_vector: np.ndarray | None,
        *,
        write: bool,
    ) -> Outcome:
        """Re-check the targets, apply the safety rules and (with write) carry out the action."""
        action = decision.action
        targets = [similar[i] for i in decision.targets]
        current = {m.id: m for m in self.store.get([t.id for t in targets])}
        live = []
        for target in targets:
            memory = current.get(target.id)
            if memory is None:
                out.notes.append(f"target {target.id} no longer exists; left out")
            elif memory.text != target.text:
                out.notes.append(f"target {target.id} changed since it was read; left out")
            else:
                live.append(target)
        resolved = self.resolve(action, live, out.text, skip_needs_close=False)
        out.notes.extend(resolved.notes)
        if resolved.downgraded:
            out.reason = resolved.downgraded
        action = resolved.action
        if action == "skip":
            out.fate, out.ids = "skipped", [t.id for t in resolved.targets]
            return out
        if action == "keep_separate":
            return self._insert(out, metadata, vector, write=write, fate="kept_separate")
        if action == "update":
            return self._update(out, metadata, resolved.targets[0], result_text, write=write)
        removable = resolved.targets
        final_text = result_text if (result_text and (action == "merge" or result_vector is not None)) else out.text
        if action == "merge" and not result_text:
            out.notes.append("merge without a merged text: the candidate's text is stored")
        final_vector = result_vector if final_text != out.text and result_vector is not None else vector
        meta = merge_metadata(*[t.metadata for t in removable], metadata, {"consolidation_action": action})
        out.removed = [t.id for t in removable]
        out.fate = FATE[action]
        out.result_text = final_text if final_text != out.text else None
        if write:
            self.store.delete(out.removed, cascade=False, actor=self.actor, op=action)
            out.ids = self.store.insert_records(
                [{"text": final_text, "area": out.area, "metadata": meta}],
                final_vector[None, :],
                self.store.embedder.info,
                actor=self.actor,
                links={LINK_KIND[action]: out.removed},
            )
        return out

    def _update(
        self,
        out: Outcome,
        metadata: Mapping[str, Any] | None,
        target: Similar,
        result_text: str | None,
        *,
        write: bool,
    ) -> Outcome:
        new_text = result_text or out.text
        meta = merge_metadata(target.metadata, metadata, {"consolidation_action": "update"})
        out.fate, out.ids = "updated", [target.id]
        out.result_text = new_text if new_text != out.text else None
        if write:  # the old value is kept as a superseded version (--as-of), not rewritten away
            out.ids = [supersede(self.store, [target.id], new_text, metadata=meta, actor=self.actor).id]
        return out

    def _insert(
        self,
        out: Outcome,
        metadata: Mapping[str, Any] | None,
        vector: np.ndarray | None,
        *,
        write: bool | None = None,
        fate: str | None = None,
    ) -> Outcome:
        """Insert the candidate as it is (keep_separate, and the safe path of every failure)."""
        out.fate = fate or "inserted"
        out.removed, out.result_text = [], None
        if write is None:
            write = not self.dry_run
        if write:
            if vector is None:
                out.ids = self.store.add([out.text], area=out.area, metadata=[dict(metadata or {})], actor=self.actor)
            else:
                out.ids = self.store.insert_records(
                    [{"text": out.text, "area": out.area, "metadata": dict(metadata or {})}],
                    vector[None, :],
                    self.store.embedder.info,
                    actor=self.actor,
                )
        return out

    # -- consolidating stored memories (`memctl consolidate`) -------------------------------------------
    def consolidate_group(self, area: str, group: list[Similar]) -> GroupOutcome:
        """The newest memory of the group plays the new candidate; the members it may act on are shown."""
        newest = group[0]
        others = [m for m in group[1:] if self.may_act(newest.text, m)]
        out = GroupOutcome(area, group, "unchanged")
        if not others:
            out.reason = "no member is close enough to the newest to act on; nothing changed"
            return out
        try:
            decision = self.decide(newest.text, area, others)
        except LLMError as exc:
            out.reason = f"consolidation failed, nothing changed: {exc.message}"
            return out
        out.reason = decision.reason
        targets = [others[i] for i in decision.targets]
        text = decision.text
        if text and not plausible(text, [newest.text] + [t.text for t in targets]):
            out.reason = f"the model's {decision.action} text does not restate the memories; nothing changed"
            return out
        result_vector = None
        if decision.action in ("merge", "update", "replace") and text:
            try:
                result_vector = self.store.embed([text])[0]
            except MemctlError as exc:
                out.reason = f"could not embed the model's text, nothing changed: {exc.message}"
                return out
        try:
            if self.dry_run:
                return self._apply_group(out, newest, targets, decision, result_vector, write=False)
            with self.store.transaction():
                return self._apply_group(out, newest, targets, decision, result_vector, write=True)
        except MemctlError as exc:
            out.fate, out.ids, out.removed = "unchanged", [], []
            out.reason = f"applying {decision.action} failed, nothing changed: {exc.message}"
            return out

    def _apply_group(
        self,
        out: GroupOutcome,
        newest: Similar,
        targets: list[Similar],
        decision: Decision,
        result_vector: Any,
        *,
        write: bool,
    ) -> GroupOutcome:
        current = {m.id: m for m in self.store.get([newest.id] + [t.id for t in targets])}
        if newest.id not in current or current[newest.id].text != newest.text:
            out.reason = f"{newest.id} changed or vanished since it was read; nothing changed"
            return out
        live = []
        for target in targets:
            if target.id not in current or current[target.id].text != target.text:
                out.notes.append(f"target {target.id} changed or vanished; left out")
            else:
                live.append(target)
        resolved = self.resolve(decision.action, live, newest.text, skip_needs_close=True)
        out.notes.extend(resolved.notes)
        action, close = resolved.action, resolved.targets
        if action == "keep_separate":
            out.fate = "kept_separate"
            if resolved.downgraded:
                out.reason = resolved.downgraded
            return out
        if action == "update":  # the target is rewritten; the newest is absorbed into it
            return self._update_group(out, newest, close[0], decision.text, write=write)
        if action == "skip":  # the newest says nothing new: it goes
            out.fate, out.removed, out.ids = "skipped", [newest.id], [close[0].id]
            if write:
                self.store.delete([newest.id], cascade=False, actor=self.actor, op="consolidate")
            return out
        if action == "replace":  # the newest supersedes the close targets
            out.fate, out.removed, out.ids = "replaced", [t.id for t in close], [newest.id]
            if write:
                self.store.delete(out.removed, cascade=False, actor=self.actor, op="replace")
                self.store.link(out.removed, newest.id, LINK_KIND["replace"])
            return out
        # merge: the newest and the close targets become one new memory
        out.fate, out.removed, out.result_text = "merged", [newest.id] + [t.id for t in close], decision.text
        if write:
            meta = merge_metadata(
                *[t.metadata for t in reversed(close)], newest.metadata, {"consolidation_action": "merge"}
            )
            self.store.delete(out.removed, cascade=False, actor=self.actor, op="merge")
            out.ids = self.store.insert_records(
                [{"text": decision.text, "area": out.area, "metadata": meta}],
                result_vector[None, :],
                self.store.embedder.info,
                actor=self.actor,
                links={LINK_KIND["merge"]: out.removed},
            )
        return out

    def _update_group(
        self, out: GroupOutcome, newest: Similar, target: Similar, text: str | None, *, write: bool
    ) -> GroupOutcome:
        text = text or newest.text
        out.fate, out.removed, out.ids, out.result_text = "updated", [newest.id], [target.id], text
        if write:
            meta = merge_metadata(target.metadata, newest.metadata, {"consolidation_action": "update"})
            self.store.delete([newest.id], cascade=False, actor=self.actor, op="update")
            out.ids = [supersede(self.store, [target.id], text, metadata=meta, actor=self.actor).id]
            self.store.link([newest.id], out.ids[0], LINK_KIND["update"])
        return out

    # -- without the model ---------------------------------------------------------------------------
    def replace_above(self, text: str, area: str, metadata: Mapping[str, Any] | None) -> Outcome:
        """memorize_consolidation false: same-area memories at or above replace_similarity_threshold go, then insert."""
        vector = self.store.embed([text])[0]
        hits = (
            [
                h
                for h in self.store.search_all_above(text, self.replace_min, area=area)
                if not h.metadata.get("knowledge_source")
            ]
            if len(self.store)
            else []
        )
        out = Outcome(
            text,
            area,
            "replaced" if hits else "inserted",
            f"memorize_consolidation off: replaced memories at or above {self.replace_min}"
            if hits
            else "memorize_consolidation off: inserted",
            removed=[h.id for h in hits],
            similar=[Similar(h.id, h.text, h.score) for h in hits],
        )
        if self.dry_run:
            return out
        with self.store.transaction():
            if hits:
                self.store.delete(out.removed, cascade=False, actor=self.actor, op="replace")
            out.ids = self.store.insert_records(
                [{"text": text, "area": area, "metadata": dict(metadata or {})}],
                vector[None, :],
                self.store.embedder.info,
                actor=self.actor,
                links={"replaced": out.removed} if hits else None,
            )
        return out


def parse_decision(reply: Any, count: int, ids: Sequence[str] = ()) -> Decision:
    """A Decision from the model's JSON; LLMError when it is not a usable one."""
    if isinstance(reply, list) and len(reply) == 1 and isinstance(reply[0], dict):
        reply = reply[0]
    if not isinstance(reply, dict):
        raise LLMError(f"consolidation reply is not a JSON object: {str(reply)[:120]!r}")
    raw = str(reply.get("action") or reply.get("decision") or "").strip().lower()
    action = re.sub(r"[\s-]+", "_", raw)
    action = _ALIASES.get(action.replace("_", ""), _ALIASES.get(action, action))
    if action not in ACTIONS:
        raise LLMError(f"consolidation reply has no valid action (got {raw[:40]!r})")
    raw_targets = reply.get("targets", reply.get("target", reply.get("indices", [])))
    if not isinstance(raw_targets, list):
        raw_targets = [raw_targets]
    targets: list[int] = []
    for item in raw_targets:
        if isinstance(item, bool):
            continue
        if isinstance(item, str) and item in ids:
            item = list(ids).index(item)
        elif isinstance(item, str) and item.strip().isdigit():
            item = int(item.strip())
        if isinstance(item, int) and 0 <= item < count and item not in targets:
            targets.append(item)
    text = reply.get("text", reply.get("memory", reply.get("merged")))
    text = " ".join(text.split()) if isinstance(text, str) else None
    reason = str(reply.get("reason") or "")[:300]
    if action in ("merge", "replace", "update") and not targets:
        raise LLMError(f"consolidation reply says {action} but names no valid target")
    if action in ("merge", "update") and not text:
        raise LLMError(f"consolidation reply says {action} but gives no text")
    return Decision(action, targets, text, reason)


@dataclass
class GroupOutcome:
    """One group of similar stored memories and what consolidation did with it."""

    area: str
    members: list[Similar]  # the newest first; scores are relevance to the newest
    fate: str  # merged, replaced, updated, kept_separate, skipped, unchanged
    reason: str = ""
    ids: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    result_text: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "area": self.area,
            "members": [m.to_dict() for m in self.members],
            "fate": self.fate,
            "reason": self.reason,
            "ids": self.ids,
            "removed": self.removed,
            "result_text": self.result_text,
            "notes": self.notes,
        }
