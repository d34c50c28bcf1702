"""The structured results of the MCP tools (their `outputSchema`).

Each mirrors the `--json` document of the CLI command it stands for (README, "JSON output"), so a
script and an agent read the same keys. Reports whose inner shape belongs to another module
(memorize candidates, stats) are typed at the top and open below.
"""

from typing import Any

from pydantic import BaseModel, Field


class MemoryOut(BaseModel):
    id: str
    text: str
    area: str
    created_at: str
    updated_at: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class HitOut(MemoryOut):
    score: float = Field(description="relevance in [0, 1] (README: Score)")


class SaveOut(BaseModel):
    subdir: str
    area: str
    ids: list[str]


class SearchOut(BaseModel):
    subdir: str
    query: str
    mode: str
    threshold: float
    limit: int
    as_of: str | None = Field(default=None, description="the moment asked for (as_of), in UTC; null: current facts")
    count: int
    results: list[HitOut]


class KnowledgeSearchOut(SearchOut):
    filter: str = Field(description="the filter applied: knowledge chunks only, and the caller's filter")


class RecallOut(BaseModel):
    subdir: str
    message: str
    query: str
    memories: list[HitOut]
    solutions: list[HitOut]
    notes: list[str] = Field(description="which utility-model step degraded and how")
    prompt: str = Field(description="the block `memctl recall` prints: paste it into the agent's prompt")


class GetOut(BaseModel):
    subdir: str
    memories: list[MemoryOut]
    missing: list[str]
    derived: dict[str, list[str]] = Field(description="per id, the memories derived from it (consolidation)")


class ListOut(BaseModel):
    subdir: str
    total: int
    page: int
    page_size: int
    items: list[MemoryOut]


class UpdateOut(BaseModel):
    subdir: str
    memory: MemoryOut
    changed: bool = Field(description="false: the memory was already so; nothing was written (no history entry)")
    reembedded: bool


class DeleteOut(BaseModel):
    subdir: str
    dry_run: bool
    deleted: list[str]
    cascaded: list[str]
    missing: list[str]


class ForgetOut(BaseModel):
    subdir: str
    query: str
    exact: bool
    threshold: float
    dry_run: bool = Field(description="true unless the call passed confirm: true; nothing was deleted")
    count: int
    deleted: list[HitOut] = Field(description="what was deleted (dry run: what would be)")


class HistoryEntryOut(BaseModel):
    hid: int
    memory_id: str
    op: str
    actor: str
    at: str
    area: str | None = None
    old_text: str | None = None
    new_text: str | None = None
    old_metadata: dict[str, Any] | None = None
    new_metadata: dict[str, Any] | None = None


class HistoryOut(BaseModel):
    subdir: str
    id: str | None
    entries: list[HistoryEntryOut]


class RestoreOut(BaseModel):
    subdir: str
    restored: list[MemoryOut]
    sources: dict[str, str] = Field(description="per id: archive or history")
    reembedded: list[str]


class MemorizeOut(BaseModel):
    subdir: str
    dry_run: bool
    summary: dict[str, int] = Field(
        description="candidates per fate (gated, merged, replaced, updated, "
        "kept_separate, skipped, inserted), transcripts, failed"
    )
    transcripts: list[dict[str, Any]] = Field(
        description="per transcript: source, messages, notes, counts and every candidate with its fate and reason"
    )


class BehaviourOut(BaseModel):
    subdir: str
    path: str
    action: str
    rules: str
    changed: bool
    default: bool = Field(description="the store has no rules of its own: these are the default rules")


class StatsOut(BaseModel):
    root: str
    stores: list[dict[str, Any]] = Field(
        description="per store: count, areas, knowledge/conversation, oldest, "
        "newest, never_accessed, archived, history, bytes, model"
    )


class DoctorOut(BaseModel):
    subdir: str
    latest: dict[str, Any] | None = Field(
        description="the latest kept `memctl doctor` run: run, at and its figures (docs/doctor.md); null before "
        "the first run"
    )
    runs: list[dict[str, Any]] = Field(
        description="the last runs, oldest first: run, at, memories and the shares followed by `doctor --trend`"
    )
