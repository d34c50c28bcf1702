"""Temporal validity: a fact that changes is superseded, not lost.

Superseding memory A with a new text makes a new memory B (a new id) and moves A to the archive with op
`supersede` — where every removed memory goes, on both backends — so search, list, load, recall,
consolidation and Agent Zero export see only current facts without a check of their own. The chain lives
in reserved metadata keys, written in the stored UTC form:

- on B: `valid_from` (when it became true) and `supersedes` (the ids it replaced, a list);
- on the archived A: `valid_from` (its own, else its created_at), `valid_to` (= B's valid_from) and
  `superseded_by` (B's id).

`--as-of MOMENT` maps each current hit to the version of its chain that was valid then (a hit created
after MOMENT with no earlier version is left out); the score stays the current version's (the subject is
the same, only the value differs). A memory deleted, rather than superseded, is gone from every answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from memctl.errors import UsageError
from memctl.store.records import ArchivedMemory, Hit, Memory, now_iso
from memctl.store.validate import check_metadata, check_text_size, parse_timestamp, utc_iso

if TYPE_CHECKING:
    from memctl.store.base import StoreBase

OP = "supersede"
VALID_FROM, VALID_TO = "valid_from", "valid_to"
SUPERSEDES, SUPERSEDED_BY = "supersedes", "superseded_by"
RESERVED = (VALID_FROM, VALID_TO, SUPERSEDES, SUPERSEDED_BY)
MAX_CHAIN = 1000  # versions walked back from one memory (a chain is never longer unless it loops)


def parse_moment(value: str, option: str = "--as-of") -> datetime:
    """An ISO 8601 date or timestamp (a date alone: 00:00 UTC of that day; naive: UTC)."""
    return parse_timestamp(value, option)


def valid_from(memory: Memory) -> str:
    return str(memory.metadata.get(VALID_FROM) or memory.created_at)


def supersede(
    store: StoreBase,
    old_ids: Sequence[str],
    text: str,
    *,
    metadata: Mapping[str, Any] | None = None,
    actor: str | None = None,
    at: datetime | None = None,
) -> Memory:
    """Replace the facts `old_ids` by `text` in one transaction: a new memory valid from `at` (now), in the
    first old memory's area, with its metadata (plus `metadata`); the old ones archived, valid until then."""
    ids = list(dict.fromkeys(old_ids))
    if not ids:
        raise UsageError("nothing to supersede: no id given")
    olds = [store.get_one(i) for i in ids]
    stamp = utc_iso(at) if at is not None else now_iso()
    for old in olds:
        if valid_from(old) > stamp:
            raise UsageError(f"{old.id} is valid only from {valid_from(old)}: it cannot end at {stamp}")
    if not text.strip():
        raise UsageError("the new text is empty", hint="give the fact's current value")
    check_text_size(text, int(store.config.get("max_text_bytes") or 0))
    base = {k: v for k, v in olds[0].metadata.items() if k not in RESERVED}
    meta = {**base, **check_metadata(metadata), VALID_FROM: stamp, SUPERSEDES: ids}
    vectors = store.embed([text])  # before the lock: the model does not hold writers back
    with store.transaction():
        for old in olds:  # it may have changed or gone while we embedded
            if store.get([old.id]) != [old]:
                raise UsageError(f"{old.id} changed while it was being superseded", hint="run the command again")
        new_id = store.insert_records(
            [{"text": text, "area": olds[0].area, "metadata": meta}], vectors, store.embedder.info, actor=actor
        )[0]
        end_validity(store, ids, new_id, stamp, actor=actor)
    return store.get_one(new_id)


def end_validity(store: StoreBase, old_ids: Sequence[str], new_id: str, stamp: str, *, actor: str | None) -> None:
    """Inside a transaction: archive `old_ids` (op supersede) with `valid_to` = `stamp` and a link to `new_id`."""
    store.delete(old_ids, cascade=False, actor=actor, op=OP)
    kept = [store.archived(i) for i in old_ids]
    rows = [_ended(a, new_id, stamp) for a in kept if a is not None]
    store.unarchive([r.memory.id for r in rows])
    store.put_archive(rows)


def _ended(archived: ArchivedMemory, new_id: str, stamp: str) -> ArchivedMemory:
    memory = archived.memory
    meta = {**memory.metadata, VALID_FROM: valid_from(memory), VALID_TO: stamp, SUPERSEDED_BY: new_id}
    return replace(archived, memory=replace(memory, metadata=meta))


def predecessors(memory: Memory) -> list[str]:
    value = memory.metadata.get(SUPERSEDES)
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, list) else []


def superseded_version(store: StoreBase, memory_id: str) -> Memory | None:
    """The archived version `memory_id` if it was superseded (not deleted, pruned or rejected)."""
    archived = store.archived(memory_id)
    return archived.memory if archived is not None and archived.op == OP else None


def versions_at(store: StoreBase, memory: Memory, moment: datetime) -> list[Memory]:
    """The versions of `memory`'s chain that were valid at `moment` (itself, or older ones; none if the
    fact did not exist yet)."""
    found: list[Memory] = []
    stack, seen = [memory], set[str]()
    while stack and len(seen) < MAX_CHAIN:
        current = stack.pop()
        if current.id in seen:
            continue
        seen.add(current.id)
        if parse_timestamp(valid_from(current)) <= moment:
            found.append(current)
            continue
        stack.extend(v for v in (superseded_version(store, i) for i in predecessors(current)) if v is not None)
    return found


def as_of(store: StoreBase, hits: Sequence[Hit], moment: datetime, limit: int | None = None) -> list[Hit]:
    """`hits` (current memories, best first) as the store stood at `moment`: each replaced by the version
    valid then, with the current version's score; those that did not exist then are left out."""
    out: list[Hit] = []
    for hit in hits:
        for version in versions_at(store, hit, moment):
            out.append(Hit(**{**version.to_dict(), "score": hit.score}))
    return out[:limit] if limit is not None else out


def chain(store: StoreBase, memory: Memory) -> list[Memory]:
    """`memory` and the versions it superseded, newest first (what `show` prints)."""
    versions: list[Memory] = []
    stack, seen = [memory], set[str]()
    while stack and len(seen) < MAX_CHAIN:
        current = stack.pop(0)
        if current.id in seen:
            continue
        seen.add(current.id)
        versions.append(current)
        stack.extend(v for v in (superseded_version(store, i) for i in predecessors(current)) if v is not None)
    return versions


def search(
    store: StoreBase, query: str, *, limit: int, as_of_moment: datetime | None = None, **options: Any
) -> list[Hit]:
    """`store.search`, or with `as_of_moment` its hits as the store stood then (twice the limit is searched:
    facts created since then drop out)."""
    if as_of_moment is None:
        return store.search(query, limit=limit, **options)
    return as_of(store, store.search(query, limit=2 * limit, **options), as_of_moment, limit)


def prune_superseded(
    store: StoreBase, older_than: timedelta, *, dry_run: bool = False, now: datetime | None = None
) -> list[Memory]:
    """Superseded versions that stopped being valid more than `older_than` ago, oldest first; removed from the
    archive for good unless `dry_run` (`--as-of` before then finds the fact missing; history keeps the
    supersede entry until `purge`)."""
    cutoff = (now or datetime.now(UTC)) - older_than
    chosen = sorted(
        (
            a.memory
            for a in store.iter_archive()
            if a.op == OP and _ended_before(a.memory.metadata.get(VALID_TO), cutoff)
        ),
        key=lambda m: str(m.metadata.get(VALID_TO)),
    )
    if chosen and not dry_run:
        with store.transaction():
            store.unarchive([m.id for m in chosen])
    return chosen


def _ended_before(value: Any, cutoff: datetime) -> bool:
    try:
        return parse_timestamp(value) < cutoff
    except UsageError:
        return False  # an unreadable end is never old enough
