"""`memctl doctor`: how healthy is a store. Core only (no typer/rich): the CLI renders what this returns.

Figures (docs/doctor.md documents each, and the JSON contract):

- **junk**: conversation memories the learned gate (memctl.memorize.gate_model, the model `memorize` uses) would drop
  today: P(noise) at or above its drop threshold. Knowledge chunks are not scored (the gate judges statements
  from conversations). Null, with a reason, when no gate model is shipped for this install.
- **duplicates**: groups of memories whose stored vectors are at least `doctor_duplicate_similarity` alike
  ((1 + cosine) / 2) and that hold no differing value; `share` = the memories a group could lose (all but one
  of each group) over all memories.
- **conflicts**: a heuristic for "same subject, different value": a pair at least `doctor_conflict_similarity`
  alike where each text holds a content word the other lacks, and those words are numbers on both sides (8080
  vs 9090) or one or two words swapped in an otherwise shared sentence ("prefers dark mode" / "prefers light
  mode"). It misses conflicts worded apart and flags synonyms ("likes" / "loves"): a list for a person to
  review, not a verdict.
- **stale**: effective importance (metadata `importance` halved every `importance_half_life` days since the
  memory was last returned, else since created: memctl.search.importance) below `doctor_stale_below`.
- **never recalled**: never returned by `load`, `recall`, MCP search or a review approval (the store's
  `accessed_at`, written when `track_access` is on) and created at least `doctor_never_recalled_days` ago.
- **superseded**: superseded versions the store keeps for `--as-of` (archived with op `supersede`); `prune
  --superseded-for` removes old ones.
- **pending**: items waiting in the review queue.
- **recall@k**: with `--queries FILE`, see memctl.review.doctor_queries.

Each run is kept in the store (`doctor_runs`) with its figures — ids and numbers only, never memory text, so
`memctl purge` keeps its promise — and its findings replace the previous run's (`review list --kind`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from memctl.errors import UsageError
from memctl.memorize.importance import tokens as content_tokens
from memctl.review.doctor_queries import Query, recall_at_k
from memctl.search import importance
from memctl.store.doctor_rows import FINDING_KINDS, DoctorRun, Finding
from memctl.store.records import Memory

if TYPE_CHECKING:
    from memctl.store.base import StoreBase

VERSION = 1  # the figures document's version (`doctor` key): a change to its keys raises it
WORST = 10  # ids of the likeliest junk shown
NEIGHBOURS = 20  # similar pairs kept per memory (a store of one text saved 10,000 times stays linear)
BLOCK = 512  # rows of the similarity matrix computed at once
GATE_BATCH = 256
# The figures a limit can be set on (config doctor_limits): (figure, "max" or "min", path into the figures).
LIMITS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("junk_share", "max", ("junk", "share")),
    ("duplicate_share", "max", ("duplicates", "share")),
    ("conflict_share", "max", ("conflicts", "share")),
    ("stale_share", "max", ("stale", "share")),
    ("never_recalled_share", "max", ("never_recalled", "share")),
    ("pending", "max", ("pending", "count")),
    ("recall_at_k", "min", ("recall", "at_k")),
)
# The figures `doctor --trend` follows, by name (a path into each run's figures).
TREND: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("memories", ("memories",)),
    ("junk_share", ("junk", "share")),
    ("duplicate_share", ("duplicates", "share")),
    ("conflict_share", ("conflicts", "share")),
    ("stale_share", ("stale", "share")),
    ("never_recalled_share", ("never_recalled", "share")),
    ("pending", ("pending", "count")),
    ("superseded", ("superseded", "count")),
    ("recall_at_k", ("recall", "at_k")),
)


@dataclass
class Report:
    """One doctor run: `figures` (kept in the store, the JSON contract), `details` (shown, never kept: they
    hold memory and question texts), the findings, and the limits crossed."""

    figures: dict[str, Any]
    details: dict[str, Any]
    findings: list[Finding]
    crossed: list[dict[str, Any]] = field(default_factory=list)
    run: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, **self.figures, "details": self.details, "crossed": self.crossed}


def value(figures: dict[str, Any], path: Sequence[str]) -> Any:
    """The figure at `path` (None when a run did not have it)."""
    node: Any = figures
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def run_doctor(
    store: StoreBase,
    *,
    queries: list[Query] | None = None,
    k: int | None = None,
    now: datetime | None = None,
    save: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """Measure the store, keep the run (unless `save` is False) and return the report. `progress(done, total)`
    follows the gate's scoring, the long part (the gate embeds each memory the cache does not hold)."""
    config = store.config
    now = now or datetime.now(UTC)
    rows = _rows(store)
    memories = [m for m, _, _ in rows]
    total = len(memories)
    knowledge = sum(1 for m in memories if _is_knowledge(m))
    findings: list[Finding] = []
    details: dict[str, Any] = {}

    junk, worst = _junk(store, memories, findings, progress)
    details["worst_junk"] = worst
    duplicates, conflicts, conflict_examples = _similar(
        store,
        memories,
        [v for _, v, _ in rows],
        float(config["doctor_duplicate_similarity"]),
        float(config["doctor_conflict_similarity"]),
        findings,
    )
    details["conflicts"] = conflict_examples
    stale, never = _staleness(config, rows, now, findings)
    figures: dict[str, Any] = {
        "doctor": VERSION,
        "at": now.astimezone(UTC).isoformat(timespec="milliseconds"),
        "memories": total,
        "conversation": total - knowledge,
        "knowledge": knowledge,
        "junk": junk,
        "duplicates": duplicates,
        "conflicts": conflicts,
        "stale": stale,
        "never_recalled": never,
        "superseded": {"count": _superseded(store), "reason": None},
        "pending": {"count": store.count_pending()},
        "recall": _recall(store, queries, int(k or config["doctor_recall_k"]), memories, details),
    }
    report = Report(figures, details, findings, crossed(figures, config))
    if save:
        report.run = store.record_doctor_run(figures["at"], figures, findings)
    return report


def _rows(store: StoreBase) -> list[tuple[Memory, bytes | None, str | None]]:
    """Each memory with its vector and when it was last returned (None: never), read in one snapshot."""
    with store.snapshot():
        return list(store.iter_rows())


def _superseded(store: StoreBase) -> int:
    """Superseded versions kept for `--as-of` (archived with op `supersede`: memctl.store.validity)."""
    from memctl.store import validity

    return sum(1 for archived in store.iter_archive() if archived.op == validity.OP)


def _is_knowledge(memory: Memory) -> bool:
    return memory.metadata.get("knowledge_source") is True


def _share(count: int, total: int) -> float | None:
    """count / total to 4 places; None (not 0) when there is nothing to count."""
    return round(count / total, 4) if total else None


# -- junk ------------------------------------------------------------------------------------------
def _cached(store: StoreBase, embed: Callable[[list[str]], np.ndarray], opened: list[Any]) -> Any:
    """The gate's embedder behind the store root's embedding cache (content-hash keyed, per model): a second
    run embeds only the memories added since."""
    from memctl.embeddings import CachedEmbedder
    from memctl.memorize import quality

    inner = quality.gate_embedder()
    if store.cache_dir is None or inner is None:
        return embed
    cached = CachedEmbedder(inner, store.cache_dir)
    opened.append(cached)
    return cached.embed


def _score(
    store: StoreBase, memories: list[Memory], cache: list[Any], progress: Callable[[int, int], None] | None
) -> tuple[list[Memory], list[tuple[Memory, float, str]] | None, set[str]]:
    """(the memories scored, (memory, p(noise), outcome) of each or None without a gate model, the models used)."""
    from memctl.memorize import gate_model, quality

    scored = [m for m in memories if not _is_knowledge(m)]
    by_path: dict[str, list[Memory]] = {}
    for m in scored:
        by_path.setdefault("solutions" if m.area == "solutions" else "fragments", []).append(m)
    results: list[tuple[Memory, float, str]] = []
    models: set[str] = set()
    for path, group in by_path.items():
        model = gate_model.model_for(path, quality.GATE_MODEL)
        embed: Callable[[list[str]], np.ndarray] | None = None
        if model is not None and model.embedding_model:
            own = store.embed  # the store's embedder, cached already, when it is the gate's model
            embed, name = quality.gate_embedding(_stored_model(store), own)
            if name is None:  # no gate embedder installed: the form-features model decides
                model = gate_model.model_for(path, None)
            elif embed is not None and embed is not own:
                embed = _cached(store, embed, cache)
        if model is None:
            return scored, None, models
        models.add(model.embedding_model or "form features")
        for start in range(0, len(group), GATE_BATCH):
            batch = group[start : start + GATE_BATCH]
            texts = [" ".join(m.text.split())[: gate_model.MAX_CHARS] for m in batch]
            for m, p in zip(batch, model.p_noise(texts, embed), strict=True):
                results.append((m, float(p), model.outcome(float(p))))
            if progress is not None:
                progress(len(results), len(scored))
    return scored, results, models


def _junk(
    store: StoreBase,
    memories: list[Memory],
    findings: list[Finding],
    progress: Callable[[int, int], None] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(figure, the worst ids with their p(noise) and text): conversation memories the gate would drop."""
    cache: list[Any] = []  # the embedding caches opened, closed however scoring ends
    try:
        scored, results, models = _score(store, memories, cache, progress)
    finally:
        for opened in cache:
            opened.close()
    if results is None:
        unavailable = "no learned gate model is shipped with this install (memctl/data/gate_model.json)"
        missing: dict[str, Any] = {"count": None, "share": None, "uncertain": None, "scored": 0, "model": None}
        return {**missing, "worst": [], "reason": unavailable}, []
    junk = sorted(((m, p) for m, p, outcome in results if outcome == "drop"), key=lambda mp: (-mp[1], mp[0].id))
    for m, p in junk:
        findings.append(Finding("junk", m.id, f"the learned gate would drop it today: p(noise) {p:.2f}", round(p, 4)))
    figure: dict[str, Any] = {
        "count": len(junk),
        "share": _share(len(junk), len(scored)),
        "uncertain": sum(1 for _, _, outcome in results if outcome == "pending"),
        "scored": len(scored),
        "model": ", ".join(sorted(models)) or None,
        "worst": [{"id": m.id, "p_noise": round(p, 4)} for m, p in junk[:WORST]],
        "reason": None,
    }
    return figure, [{"id": m.id, "p_noise": round(p, 4), "text": m.text} for m, p in junk[:WORST]]


def _stored_model(store: StoreBase) -> Any:
    from memctl.embeddings import ModelInfo

    info = store.model_info()
    return ModelInfo(info["provider"], info["model"]) if info else None


# -- near-duplicates and conflicts -------------------------------------------------------------------
_DIGIT = re.compile(r"\d")


@lru_cache(maxsize=65536)
def _content(text: str) -> frozenset[str]:
    """A text's content words (memctl.memorize.importance.tokens), once per text (a memory meets up to NEIGHBOURS
    pairs)."""
    return frozenset(content_tokens(text))


def value_difference(a: str, b: str) -> tuple[list[str], list[str]] | None:
    """The content words each of two similar texts holds and the other lacks, when they look like two values
    of one subject: numbers on both sides, or at most two words swapped in a shared sentence of two words or
    more. None when one text says everything the other does (a near-duplicate) or they differ more widely."""
    ta, tb = _content(a), _content(b)
    only_a, only_b = ta - tb, tb - ta
    if not only_a or not only_b:
        return None
    numbers = any(_DIGIT.search(t) for t in only_a) and any(_DIGIT.search(t) for t in only_b)
    swapped = len(only_a) <= 2 and len(only_b) <= 2 and len(ta & tb) >= 2
    return (sorted(only_a), sorted(only_b)) if numbers or swapped else None


def _pairs(vectors: np.ndarray, floor: float) -> list[tuple[int, int, float]]:
    """(i, j, cosine) with i < j and cosine >= floor, at most NEIGHBOURS a row, by blocks of rows."""
    pairs: list[tuple[int, int, float]] = []
    n = len(vectors)
    for start in range(0, n, BLOCK):
        sims = vectors[start : start + BLOCK] @ vectors.T
        for offset, row in enumerate(sims):
            i = start + offset
            row[: i + 1] = -2.0  # each pair once, no self-pair
            hits = np.flatnonzero(row >= floor)
            if len(hits) > NEIGHBOURS:
                hits = hits[np.argsort(-row[hits], kind="stable")[:NEIGHBOURS]]
            pairs.extend((i, int(j), float(row[j])) for j in hits)
    return pairs


def _matrix(store: StoreBase, vectors: list[bytes | None]) -> np.ndarray:
    info = store.model_info()
    dim = int(info["dimension"]) if info else 0
    if not vectors or not dim:
        return np.zeros((0, max(dim, 1)), dtype=np.float32)
    matrix = np.vstack([np.frombuffer(v or b"", dtype=np.float32).reshape(1, -1) for v in vectors])
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def _similar(
    store: StoreBase,
    memories: list[Memory],
    vectors: list[bytes | None],
    duplicate_at: float,
    conflict_at: float,
    findings: list[Finding],
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """(duplicates figure, conflicts figure, conflict pairs with their differing words) from the pairs of
    memories whose relevance (1 + cosine) / 2 reaches the lower of the two settings."""
    floor = 2.0 * min(duplicate_at, conflict_at) - 1.0
    parent = list(range(len(memories)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    best: dict[int, float] = {}
    conflicts: dict[int, list[tuple[int, float]]] = {}
    examples: list[dict[str, Any]] = []
    for i, j, cosine in _pairs(_matrix(store, vectors), floor):
        a, b = memories[i], memories[j]
        if _same_file(a, b):
            continue  # chunks of one knowledge file: its own overlap, not a store problem
        similarity = min(1.0, (1.0 + cosine) / 2.0)
        differ = value_difference(a.text, b.text) if similarity >= conflict_at else None
        if differ is not None:
            conflicts.setdefault(i, []).append((j, similarity))
            conflicts.setdefault(j, []).append((i, similarity))
            examples.append({"ids": [a.id, b.id], "similarity": round(similarity, 4), "differs": list(differ)})
        elif similarity >= duplicate_at:
            parent[root(i)] = root(j)
            best[i] = max(best.get(i, 0.0), similarity)
            best[j] = max(best.get(j, 0.0), similarity)
    groups: dict[int, list[int]] = {}
    for i in best:
        groups.setdefault(root(i), []).append(i)
    members = sorted((sorted(g) for g in groups.values()), key=lambda g: g[0])
    for group in members:
        ids = [memories[i].id for i in group]
        for i in group:
            others = [x for x in ids if x != memories[i].id]
            reason = f"near-duplicate of {', '.join(others)} (similarity {best[i]:.2f})"
            findings.append(Finding("duplicate", memories[i].id, reason, round(best[i], 4), others))
    for i, partners in sorted(conflicts.items()):
        partners.sort(key=lambda p: -p[1])
        others = [memories[j].id for j, _ in partners]
        top = partners[0][1]
        reason = f"may conflict with {', '.join(others)} (similarity {top:.2f}; each holds a value the other lacks)"
        findings.append(Finding("conflict", memories[i].id, reason, round(top, 4), others))
    total = len(memories)
    redundant = sum(len(g) - 1 for g in members)
    duplicates = {
        "groups": len(members),
        "memories": sum(len(g) for g in members),
        "redundant": redundant,
        "share": _share(redundant, total),
        "similarity": duplicate_at,
    }
    figure = {
        "pairs": len(examples),
        "memories": len(conflicts),
        "share": _share(len(conflicts), total),
        "similarity": conflict_at,
    }
    return duplicates, figure, examples


def _same_file(a: Memory, b: Memory) -> bool:
    source = a.metadata.get("source_path")
    return _is_knowledge(a) and _is_knowledge(b) and source is not None and source == b.metadata.get("source_path")


# -- stale, never recalled -------------------------------------------------------------------------
def _staleness(
    config: Any, rows: list[tuple[Memory, Any, str | None]], now: datetime, findings: list[Finding]
) -> tuple[dict[str, Any], dict[str, Any]]:
    below = float(config["doctor_stale_below"])
    half_life = float(config["importance_half_life"])
    default = float(config["prune_default_importance"])
    days = float(config["doctor_never_recalled_days"])
    tracked = bool(config["track_access"])
    stale_count = never_count = 0
    for memory, _, accessed in rows:
        reasons = []
        level = importance.effective(
            importance.of(memory.metadata, default), accessed or memory.created_at, now, half_life
        )
        if level is not None and level < below:
            stale_count += 1
            since = "last recalled" if accessed else "created"
            reasons.append(
                f"effective importance {level:.2f} < {below:g} ({since} {(accessed or memory.created_at)[:10]})"
            )
        age = importance.age_days(memory.created_at, now)
        if tracked and accessed is None and age is not None and age >= days:
            never_count += 1
            reasons.append(f"never recalled in the {age:.0f} days since it was created")
        if reasons:
            findings.append(Finding("stale", memory.id, "; ".join(reasons), None if level is None else round(level, 4)))
    total = len(rows)
    stale = {"count": stale_count, "share": _share(stale_count, total), "below": below, "half_life": half_life}
    never: dict[str, Any] = {"count": never_count, "share": _share(never_count, total), "days": days}
    if not tracked:  # nothing records a recall: every old memory would look never recalled
        never.update(count=None, share=None)
    reason = None if tracked else "track_access is off: recalls are not recorded"
    return stale, {**never, "tracked": tracked, "reason": reason}


# -- recall@k ----------------------------------------------------------------------------------------
def _recall(
    store: StoreBase, queries: list[Query] | None, k: int, memories: list[Memory], details: dict[str, Any]
) -> dict[str, Any]:
    if not queries:
        return {
            "k": k,
            "questions": 0,
            "found": 0,
            "unanswerable": 0,
            "at_k": None,
            "mode": None,
            "threshold": None,
            "reason": "no --queries file given",
        }
    result = recall_at_k(store, queries, k, memories)
    details["missed"] = result.missed
    return {
        "k": k,
        "questions": result.questions,
        "found": result.found,
        "unanswerable": result.unanswerable,
        "at_k": round(result.at_k, 4),
        "mode": result.mode,
        "threshold": result.threshold,
        "reason": None,
    }


# -- limits ------------------------------------------------------------------------------------------
def crossed(figures: dict[str, Any], config: Any) -> list[dict[str, Any]]:
    """The figures past their limit in config doctor_limits (a figure it does not name has none; a figure
    that could not be measured crosses nothing)."""
    out = []
    limits = config["doctor_limits"] or {}
    for name, side, path in LIMITS:
        limit, found = limits.get(name), value(figures, path)
        if limit is None or found is None:
            continue
        if (side == "max" and found > limit) or (side == "min" and found < limit):
            out.append({"figure": name, "value": found, "limit": limit, "key": f"doctor_limits.{name}"})
    return out


# -- trend and findings ---------------------------------------------------------------------------
def trend(store: StoreBase, last: int | None = None) -> list[dict[str, Any]]:
    """The kept runs, oldest first, each as {"run", "at", figure: value} for the TREND figures."""
    if last is not None and last < 1:
        raise UsageError("--last must be 1 or more")
    return [_trend_row(r) for r in store.doctor_runs(last)]


def _trend_row(run: DoctorRun) -> dict[str, Any]:
    return {"run": run.run, "at": run.at, **{name: value(run.figures, path) for name, path in TREND}}


@dataclass
class FindingItem:
    """A finding of the latest run with the memory as it is now (reason completed from the current texts)."""

    finding: Finding
    memory: Memory

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.memory.to_dict(),
            "kind": self.finding.kind,
            "reason": self.finding.reason,
            "score": self.finding.score,
            "related": self.finding.related,
        }


def findings_page(
    store: StoreBase, kind: str, *, area: str | None = None, limit: int | None = None, page: int = 1
) -> tuple[list[FindingItem], int, int, DoctorRun | None]:
    """(one page of the latest run's findings of `kind` whose memory still exists, how many in all, the
    page size, the run they come from or None before the first run)."""
    if kind not in FINDING_KINDS:
        raise UsageError(f"unknown kind {kind!r}", hint=f"use one of: pending, {', '.join(FINDING_KINDS)}")
    if page < 1:
        raise UsageError("page must be 1 or more")
    size = int(limit or store.config["list_page_size"])
    found = store.doctor_findings(kind)
    present = {m.id: m for m in store.get(list(dict.fromkeys(f.memory_id for f in found)))}
    if area is not None:
        present = {i: m for i, m in present.items() if m.area == area}
    live = [f for f in found if f.memory_id in present]
    chosen = live[(page - 1) * size : page * size]
    items = []
    others = {m.id: m for m in store.get([x for f in chosen if f.kind == "conflict" for x in f.related])}
    for f in chosen:
        memory = present[f.memory_id]
        if f.kind == "conflict":
            f = _with_values(f, memory, others)
        items.append(FindingItem(f, memory))
    runs = store.doctor_runs(1)
    return items, len(live), size, runs[0] if runs else None


def _with_values(finding: Finding, memory: Memory, others: dict[str, Memory]) -> Finding:
    """A conflict's reason with the differing words of the texts as they are now (never kept in the store)."""
    parts = []
    for other_id in finding.related:
        other = others.get(other_id)
        differ = value_difference(memory.text, other.text) if other is not None else None
        if differ is not None:
            parts.append(f"{other_id}: {' '.join(differ[0])} vs {' '.join(differ[1])}")
    if not parts:
        return finding
    return Finding(
        finding.kind,
        finding.memory_id,
        f"{finding.reason} — {'; '.join(parts)}",
        finding.score,
        finding.related,
        finding.run,
    )
