"""Memorize: a finished conversation -> durable memories.

1. The transcript is read (memctl.memorize.transcripts) and cut to `memorize_max_history_chars` from the
   oldest end.
2. The utility model extracts candidate facts (area `fragments`, or `--area`) and, unless turned
   off, problem -> solution know-how (area `solutions`) with prompts/memorize_*.
3. The quality gate (memctl.memorize.quality) drops transient noise, ungrounded inventions and echoes of
   memories memctl itself recalled into the conversation; each drop names its reason.
4. Every remaining candidate is consolidated with what is stored (memctl.memorize.consolidate).

Failures never lose memories: a failed extraction stores nothing new, says so, and counts as a
failure of its transcript (`failed` in the summary; the CLI exits 4); a failed consolidation
inserts the candidate as it is.
"""

from __future__ import annotations

import glob
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memctl.errors import MemctlError, UsageError
from memctl.llm import LLMError, UtilityModel
from memctl.memorize.consolidate import Consolidator, Outcome
from memctl.memorize.grounding import Grounding
from memctl.memorize.importance import Rater, Weights
from memctl.memorize.quality import Verdict, check, for_review, gate_embedding
from memctl.memorize.queue import QueueCheck, retire, stale_in_queue
from memctl.memorize.transcripts import Message, as_text, parse_transcript, read_transcript_text, trim
from memctl.store.records import AREAS

if TYPE_CHECKING:
    from memctl.store.base import StoreBase

FATES = ("gated", "pending", "merged", "replaced", "updated", "kept_separate", "skipped", "inserted")
TRANSCRIPT_SUFFIXES = (".json", ".jsonl", ".txt", ".md", ".log")
PENDING_POLICIES = ("review", "keep", "drop")
MAX_CANDIDATES = 50  # per transcript and kind: more is a runaway reply, not a conversation's worth


@dataclass
class TranscriptReport:
    source: str
    messages: int = 0
    chars: int = 0
    trimmed: bool = False
    candidates: list[Outcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    extraction_failed: list[str] = field(default_factory=list)  # "fact", "solution": the model gave nothing usable

    @property
    def failed(self) -> bool:
        return bool(self.error or self.extraction_failed)

    def counts(self) -> dict[str, int]:
        found = Counter(c.fate for c in self.candidates)
        return {fate: found.get(fate, 0) for fate in FATES}

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "messages": self.messages,
            "chars": self.chars,
            "trimmed": self.trimmed,
            "error": self.error,
            "extraction_failed": self.extraction_failed,
            "notes": self.notes,
            "counts": self.counts(),
            "candidates": [c.to_dict() for c in self.candidates],
        }


@dataclass
class MemorizeReport:
    dry_run: bool
    transcripts: list[TranscriptReport] = field(default_factory=list)

    @property
    def failed(self) -> list[TranscriptReport]:
        return [t for t in self.transcripts if t.failed]

    def summary(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for report in self.transcripts:
            total.update(report.counts())
        return {fate: total.get(fate, 0) for fate in FATES} | {
            "transcripts": len(self.transcripts),
            "failed": len(self.failed),
            "extractions_failed": sum(len(t.extraction_failed) for t in self.transcripts),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "summary": self.summary(),
            "transcripts": [t.to_dict() for t in self.transcripts],
        }


def resolve_batch(spec: str) -> list[Path]:
    """A folder (its transcript files) or a glob, in name order."""
    path = Path(spec).expanduser()
    if path.is_dir():
        files = [
            p
            for p in path.iterdir()
            if p.is_file() and p.suffix.lower() in TRANSCRIPT_SUFFIXES and not p.name.startswith(".")
        ]
    else:
        files = [Path(p) for p in glob.glob(str(path)) if Path(p).is_file()]
    if not files:
        raise UsageError(
            f"--batch {spec!r} matches no transcript file",
            hint=f"give a folder of {', '.join(TRANSCRIPT_SUFFIXES)} files or a glob like 'logs/*.json'",
        )
    return sorted(files, key=lambda p: (p.name, str(p)))


def load_transcript(path: Path, max_chars: int) -> tuple[list[Message], int, bool]:
    """(messages kept, characters kept, whether older messages were cut)."""
    messages = parse_transcript(read_transcript_text(path), str(path))
    kept = trim(messages, max_chars)
    full = sum(len(m.content) for m in messages)
    chars = sum(len(m.content) for m in kept)
    return kept, chars, chars < full


def extract(llm: UtilityModel, prompt: str, transcript: str, notes: list[str], label: str) -> list[str] | None:
    """Candidate texts from the model; None (and a note) when the call failed or the reply is unusable."""
    try:
        reply = llm.ask_json(prompt, transcript=transcript)
    except LLMError as exc:
        notes.append(f"{label} extraction failed, nothing extracted: {exc.message}")
        return None
    if isinstance(reply, dict):
        reply = next((v for v in reply.values() if isinstance(v, list)), None)
    if not isinstance(reply, list):
        notes.append(f"{label} extraction failed, the reply is not a list: nothing extracted")
        return None
    texts: list[str] = []
    for item in reply:
        if isinstance(item, dict):
            item = next((item[k] for k in ("text", "fact", "memory", "content", "solution") if k in item), None)
        if isinstance(item, str) and item.strip():
            texts.append(" ".join(item.split()))
    if len(texts) > MAX_CANDIDATES:
        notes.append(f"{label} extraction returned {len(texts)} items; kept the first {MAX_CANDIDATES}")
    return texts[:MAX_CANDIDATES]


def memorize_messages(
    store: StoreBase,
    messages: Sequence[Message],
    llm: UtilityModel,
    *,
    source: str = "<messages>",
    area: str = "fragments",
    solutions: bool = True,
    dry_run: bool = False,
    recalled: Sequence[str] = (),
    actor: str = "memorize",
    report: TranscriptReport | None = None,
) -> TranscriptReport:
    """Extract, gate and consolidate one conversation into `store`."""
    if area not in AREAS:
        raise UsageError(f"unknown area {area!r}", hint=f"use one of: {', '.join(AREAS)}")
    config = store.config
    if report is None:
        kept = trim(list(messages), int(config["memorize_max_history_chars"]))
        chars = sum(len(m.content) for m in kept)
        report = TranscriptReport(source, len(kept), chars, chars < sum(len(m.content) for m in messages))
        messages = kept
    if report.trimmed:
        report.notes.append(
            f"history longer than memorize_max_history_chars "
            f"({config['memorize_max_history_chars']}): the oldest part was cut"
        )
    transcript = as_text(list(messages))
    kinds = [(area, "memorize_fragments", "fact")] + (
        [("solutions", "memorize_solutions", "solution")] if solutions else []
    )
    grounding = Grounding.from_messages(
        messages,
        recalled,
        embed=store.embed,
        min_overlap=float(config["memorize_grounding_overlap"]),
        similarity=float(config["memorize_grounding_similarity"]),
        echo_similarity=float(config["memorize_echo_similarity"]),
    )
    gate_embed, gate_model_name = gate_embedding(store.embedder.info, store.embed)
    pending_policy = _pending_policy(store)
    consolidator = Consolidator(store, llm, actor=actor, dry_run=dry_run)
    metadata = {"source": "memorize", "transcript": Path(source).name}
    rater = Rater([m.content for m in messages if m.role == "user"], Weights.from_config(config))
    seen: set[tuple[str, str]] = set()
    outdated: set[tuple[str, str]] = set()  # queued texts this conversation retired: not queued again
    for target_area, prompt, label in kinds:
        texts = extract(llm, prompt, transcript, report.notes, label)
        if texts is None:
            report.extraction_failed.append(label)
        _warm_embeddings(store, texts or [])
        for text in texts or []:
            key = (target_area, text.casefold())
            if key in seen:
                report.candidates.append(Outcome(text, target_area, "skipped", "duplicate candidate"))
                continue
            seen.add(key)
            verdict = check(
                text, "solutions" if target_area == "solutions" else "fragments", grounding, gate_embed, gate_model_name
            )
            unsupported = verdict.reason == "ungrounded" and pending_policy == "review"
            if unsupported:  # waits for a person; it may change the store only as settle_pending allows below
                verdict = for_review(verdict)
            if verdict.pending and pending_policy == "keep":
                verdict = Verdict(text, target_area)
            if not verdict.ok:
                if verdict.pending and key in outdated:  # the old value, restated beside the new one
                    reason = "an older value this conversation replaced in the review queue"
                    report.candidates.append(Outcome(text, target_area, "skipped", reason))
                    continue
                settled, found = None, None
                if verdict.pending and pending_policy == "review":
                    importance = rater.rate(text, target_area).value
                    meta = {**metadata, "importance": importance}
                    # what the chat does not support may be found already stored, or change a stored memory
                    # only by what the chat says (a new value written out with its slot's context)
                    change = (lambda old, text=text: grounding.grounds_change(text, old)) if unsupported else None
                    settled = consolidator.settle_pending(text, target_area, meta, change_grounded=change)
                    if settled is None and not unsupported:
                        found = _queue_check(consolidator, text, target_area, metadata["transcript"])
                        settled = _settle_from_queue(consolidator, text, target_area, meta, found)
                outcome = settled or _held_back(store, verdict, target_area, pending_policy, metadata, dry_run)
                if not unsupported:  # an unsupported candidate stands in for no queued item
                    outcome = _clear_queue(consolidator, outcome, metadata["transcript"], outdated, found)
                report.candidates.append(outcome)
                continue
            rating = rater.rate(text, target_area)  # metadata `importance` (memctl.memorize.importance)
            outcome = consolidator.consolidate(text, target_area, {**metadata, "importance": rating.value})
            outcome.notes.append(f"importance {rating.value:.2f}: {'; '.join(rating.reasons)}")
            report.candidates.append(_clear_queue(consolidator, outcome, metadata["transcript"], outdated))
    return report


def _queue_check(consolidator: Consolidator, text: str, area: str, transcript: str) -> QueueCheck:
    """The queued items of earlier conversations `text` is a newer value or a restatement of (none when the
    candidate cannot be embedded: the queue is then left as it is)."""
    try:
        vector = consolidator.store.embed([text])[0]
    except MemctlError:
        return QueueCheck()
    return stale_in_queue(consolidator, text, area, vector, transcript)


def _settle_from_queue(
    consolidator: Consolidator, text: str, area: str, metadata: dict[str, Any], found: QueueCheck
) -> Outcome | None:
    """A candidate the gate is unsure of that the utility model calls a new value of an item an earlier
    conversation left in the review queue is stored (consolidated like a kept one), not queued: the slot was set
    in two conversations, so it lasts, and queueing the newest value would leave that slot empty in the store
    while the older value is retired. Only a queued item at replace_similarity_threshold counts (what replace and
    merge need to remove a memory): on the tune half the pending noise with a queued neighbour the model may act
    on is mostly a different fact (46 such candidates on 37 domains, 1 of them that close), so a model that
    wrongly calls such a pair an update stores little noise, while 13 of 14 true new values are that close.
    None (it stays pending) when it is no close new value or consolidation fails."""
    if not found.new_value or found.closest < consolidator.replace_min:
        return None
    try:
        outcome = consolidator.consolidate(text, area, metadata)
    except MemctlError:
        return None
    outcome.notes.insert(0, "the gate was unsure; an earlier conversation queued an older value of this slot")
    return outcome


def _clear_queue(
    consolidator: Consolidator,
    outcome: Outcome,
    transcript: str,
    outdated: set[tuple[str, str]],
    found: QueueCheck | None = None,
) -> Outcome:
    """Retire the queued review items this candidate is a newer value or a restatement of
    (memctl.memorize.queue): a kept candidate (or a pending one `_settle_from_queue` stored) holds their slot;
    a pending one waits in their place. `found`: the queue check already made for this candidate (the model is
    not asked twice)."""
    if outcome.fate == "gated" or (outcome.fate == "pending" and not outcome.ids and not consolidator.dry_run):
        return outcome  # dropped, or (policy drop/keep) nothing queued for it to stand in for
    if found is None:
        found = _queue_check(consolidator, outcome.text, outcome.area, transcript)
    stale = [(i, t) for i, t in zip(found.stale, found.texts, strict=True) if i not in outcome.ids]  # not itself
    if not stale:
        return outcome
    check = QueueCheck([i for i, _ in stale], found.reason, [t for _, t in stale])
    outdated.update((outcome.area, t.casefold()) for t in check.texts)
    outcome.outdated = check.stale if consolidator.dry_run else retire(consolidator, check)
    verb = "would retire" if consolidator.dry_run else "retired"
    outcome.notes.append(f"{verb} {len(check.stale)} queued item(s) of its slot from `memctl review`: {check.reason}")
    return outcome


def _warm_embeddings(store: StoreBase, texts: list[str]) -> None:
    """Embed every candidate in one batch: the gate and consolidation then read them from the cache
    instead of running the model once per candidate (bench/memorize_overhead.py)."""
    if not texts:
        return
    try:
        store.embed(list(dict.fromkeys(texts)))
    except MemctlError:
        pass  # each candidate's own embedding reports the failure where it happens


def _pending_policy(store: StoreBase) -> str:
    """What happens to a candidate in the gate's uncertain band (config `memorize_pending`)."""
    policy = str(store.config["memorize_pending"])
    if policy not in PENDING_POLICIES:
        raise UsageError(
            f"memorize_pending is {policy!r}", hint=f"set memorize_pending to {', '.join(PENDING_POLICIES)}"
        )
    return policy


def _held_back(
    store: StoreBase, verdict: Verdict, area: str, policy: str, metadata: dict[str, Any], dry_run: bool
) -> Outcome:
    """The outcome of a candidate the gate did not keep: dropped, or (policy `review`) stored as pending."""
    notes = [verdict.detail] if verdict.detail else []
    if not verdict.pending or policy == "drop":
        return Outcome(verdict.text, area, "gated", verdict.reason or "", notes=notes)
    pending_id = None
    if not dry_run:
        pending_id = store.add_pending(
            verdict.text, area, {**metadata, "gate_p_noise": verdict.p_noise}, reason=verdict.detail
        )
    outcome = Outcome(verdict.text, area, "pending", "uncertain: waits in `memctl review`", notes=notes)
    if pending_id:
        outcome.ids.append(pending_id)
    return outcome


def memorize_files(
    store: StoreBase,
    paths: Sequence[Path],
    llm: UtilityModel,
    *,
    area: str = "fragments",
    solutions: bool = True,
    dry_run: bool = False,
    recalled: Sequence[str] = (),
    keep_going: bool = False,
    progress: Callable[[int, int], None] | None = None,
    actor: str = "memorize",
) -> MemorizeReport:
    """Memorize each transcript in order into one store.

    keep_going (batch mode): a transcript that cannot be read is reported and skipped; otherwise
    every transcript is read first and a bad one stops the run before anything is written.
    """
    max_chars = int(store.config["memorize_max_history_chars"])
    loaded: list[tuple[Path, Any]] = []
    for path in paths:
        try:
            loaded.append((path, load_transcript(path, max_chars)))
        except MemctlError as exc:
            if not keep_going:
                raise
            loaded.append((path, exc))
    result = MemorizeReport(dry_run)
    for done, (path, item) in enumerate(loaded, start=1):
        if isinstance(item, MemctlError):
            result.transcripts.append(TranscriptReport(str(path), error=item.message))
        else:
            messages, chars, trimmed = item
            report = TranscriptReport(str(path), len(messages), chars, trimmed)
            memorize_messages(
                store,
                messages,
                llm,
                source=str(path),
                area=area,
                solutions=solutions,
                dry_run=dry_run,
                recalled=recalled,
                actor=actor,
                report=report,
            )
            result.transcripts.append(report)
        if progress:
            progress(done, len(loaded))
    return result
