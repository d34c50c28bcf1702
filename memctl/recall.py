"""Recall: what an agent injects into its prompt before answering a message.

Memories (areas main + fragments) and solutions are searched separately (hybrid retrieval,
`recall_*_max_search` candidates each), optionally narrowed by the utility model
(`post_filter`), cut to `recall_*_max_result`, and rendered with templates from `prompts/`.
Every LLM step degrades safely: a failed query prep searches the raw message; a failed post
filter keeps the results (or drops them with `recall_post_filter_fail_closed`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memctl.llm import LLMError, UtilityModel, load_template, numbered, render
from memctl.memorize.provenance import describe, label
from memctl.memorize.transcripts import Message, as_text
from memctl.search.ranking import rerank
from memctl.store.records import Hit
from memctl.store.validity import search as search_valid

if TYPE_CHECKING:
    from memctl.store.base import StoreBase

MAX_QUERY_CHARS = 500


@dataclass
class RecallResult:
    message: str
    query: str
    memories: list[Hit]
    solutions: list[Hit]
    notes: list[str] = field(default_factory=list)  # what degraded and why

    def to_dict(self) -> dict[str, Any]:
        """Each hit with its provenance: date, source, source_name, group (memctl.memorize.provenance)."""
        return {
            "message": self.message,
            "query": self.query,
            "memories": [h.to_dict() | describe(h) for h in self.memories],
            "solutions": [h.to_dict() | describe(h) for h in self.solutions],
            "notes": self.notes,
        }

    @property
    def empty(self) -> bool:
        return not self.memories and not self.solutions


def recall(
    store: StoreBase,
    message: str,
    history: list[Message] | None = None,
    *,
    llm: UtilityModel | None = None,
    query_prep: bool = False,
    post_filter: bool = False,
    threshold: float | None = None,
    as_of: datetime | None = None,
) -> RecallResult:
    """`as_of`: recall as the store stood then (memctl.store.validity); default: current facts."""
    config = store.config
    notes: list[str] = []
    query = prepare_query(llm, message, history or [], notes) if query_prep and llm else message
    threshold = store.default_threshold("recall") if threshold is None else threshold
    # One search of every area (main, fragments, solutions), as `load` searches and the calibration was fitted:
    # the score's relative evidence (rank in the fusion, gap to the best) is measured against every candidate.
    # Searching solutions alone ranked the best solution first among a few and scored it high even when it
    # answered nothing.
    hits = search_valid(
        store,
        query,
        limit=int(config["recall_memories_max_search"]) + int(config["recall_solutions_max_search"]),
        as_of_moment=as_of,
        threshold=threshold,
    )
    memories = [h for h in hits if h.area != "solutions"]
    solutions = [h for h in hits if h.area == "solutions"]
    memories, solutions = rerank(memories, config), rerank(solutions, config)  # off unless rank_importance_weight
    if post_filter and llm and (memories or solutions):
        memories, solutions = filter_relevant(
            llm, message, memories, solutions, bool(config["recall_post_filter_fail_closed"]), notes
        )
    memories, solutions = block(
        memories[: int(config["recall_memories_max_result"])],
        solutions[: int(config["recall_solutions_max_result"])],
        int(config["recall_max_result"]),
    )
    return RecallResult(message, query, memories, solutions, notes)


def block(memories: list[Hit], solutions: list[Hit], total: int) -> tuple[list[Hit], list[Hit]]:
    """At most `total` of both, the highest relevance first, each list keeping its order: the recall threshold
    is fitted for one ranked list of that length (scripts/fit_relevance.py --limit)."""
    ranked = sorted(memories + solutions, key=lambda hit: -hit.score)[:total]
    kept = {id(hit) for hit in ranked}
    return [h for h in memories if id(h) in kept], [h for h in solutions if id(h) in kept]


def prepare_query(llm: UtilityModel, message: str, history: list[Message], notes: list[str]) -> str:
    """The utility model turns message + recent history into a search query; the raw message on failure."""
    recent = as_text(history[-int(llm.config["recall_history_messages"]) :]) if history else "(none)"
    try:
        reply = llm.ask("recall_query", message=message, history=recent)
    except LLMError as exc:
        notes.append(f"query prep failed, searched the raw message: {exc.message}")
        return message
    lines = [line.strip().strip('"').strip() for line in reply.strip().splitlines() if line.strip()]
    query = lines[0][:MAX_QUERY_CHARS] if lines else ""
    if not query:
        notes.append("query prep returned nothing, searched the raw message")
        return message
    return query


def filter_relevant(
    llm: UtilityModel, message: str, memories: list[Hit], solutions: list[Hit], fail_closed: bool, notes: list[str]
) -> tuple[list[Hit], list[Hit]]:
    """Keep the candidates whose indices the model returns; ignore indices that are not valid."""
    candidates = memories + solutions
    try:
        reply = llm.ask_json(
            "recall_filter", message=message, items=numbered([h.text for h in candidates]), last=len(candidates) - 1
        )
    except LLMError as exc:
        action = "dropped all results (fail-closed)" if fail_closed else "kept all results"
        notes.append(f"post filter failed, {action}: {exc.message}")
        return ([], []) if fail_closed else (memories, solutions)
    if isinstance(reply, dict):
        reply = next((v for v in reply.values() if isinstance(v, list)), None)
    if not isinstance(reply, list):
        action = "dropped all results (fail-closed)" if fail_closed else "kept all results"
        notes.append(f"post filter reply was not a list of indices, {action}")
        return ([], []) if fail_closed else (memories, solutions)
    chosen = {i for i in reply if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(candidates)}
    ignored = len(reply) - len(chosen)
    if ignored:
        notes.append(f"post filter: ignored {ignored} invalid index(es)")
    keep = [i in chosen for i in range(len(candidates))]
    return (
        [h for h, k in zip(memories, keep, strict=False) if k],
        [h for h, k in zip(solutions, keep[len(memories) :], strict=False) if k],
    )


# Block sections in the order an agent reads them: (group, template).
SECTIONS = (("rules", "recall_rules"), ("facts", "recall_memories"), ("solutions", "recall_solutions"))


def render_prompt(result: RecallResult) -> str:
    """The block an agent pastes into its system prompt: standing preferences and rules, facts, then
    solutions (templates recall_rules / recall_memories / recall_solutions), each item with its date
    and source (recall_item), and the closing note (recall_note) when any item is dated."""
    item = load_template("recall_item")
    grouped: dict[str, list[str]] = {group: [] for group, _ in SECTIONS}
    for hit in [*result.memories, *result.solutions]:
        fields = describe(hit)
        grouped[fields["group"]].append(
            render(
                item,
                text=" ".join(hit.text.split()),
                area=hit.area,
                id=hit.id,
                score=f"{hit.score:.2f}",
                created_at=hit.created_at,
                date=fields["date"],
                source=label(fields),
            ).rstrip("\n")
        )
    parts = [
        render(load_template(name), items="\n".join(grouped[group])).strip()
        for group, name in SECTIONS
        if grouped[group]
    ]
    if parts:
        parts.append(load_template("recall_note").strip())
    return "\n\n".join(parts) + ("\n" if parts else "")
