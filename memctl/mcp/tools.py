"""What each MCP tool does, on an open store: the same core calls as the CLI command it mirrors,
returning that command's `--json` document. Validation and errors are the core's (MemctlError
subclasses); the server turns them into tool errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from memctl.errors import UsageError

KNOWLEDGE_FILTER = "knowledge_source == True"
Recorder = Callable[[list[str]], Any]  # notes ids a call returned as accessed


def save(store: Any, subdir: str, text: str, area: str, metadata: dict[str, Any] | None) -> dict[str, Any]:
    ids = store.add([text], area=area, metadata=[metadata or {}])
    return {"subdir": subdir, "area": area, "ids": ids}


def search(
    store: Any,
    subdir: str,
    query: str,
    *,
    limit: int | None,
    threshold: float | None,
    area: str | None,
    filter: Any,
    mode: str | None,
    record: Recorder | None = None,
    as_of: str | None = None,
) -> dict[str, Any]:
    """`memctl load`: defaults from the store's config; returned memories count as accessed (written by
    `record` when given, the server's AccessLog, else at once). `as_of`: as the store stood then."""
    from memctl.store.validate import utc_iso
    from memctl.store.validity import parse_moment
    from memctl.store.validity import search as search_valid

    moment = parse_moment(as_of, "as_of") if as_of is not None else None
    asked = threshold  # None: the default cut, and the store's answered check (memctl/search/answered.py)
    threshold = store.default_threshold() if threshold is None else threshold
    limit = store.config["search_limit"] if limit is None else limit
    mode = mode or store.config["search_mode"]
    hits = search_valid(
        store, query, limit=limit, as_of_moment=moment, threshold=asked, area=area, filter=filter, mode=mode
    )
    _accessed(store, [h.id for h in hits], record)
    return {
        "subdir": subdir,
        "query": query,
        "mode": mode,
        "threshold": threshold,
        "limit": limit,
        "as_of": utc_iso(moment) if moment is not None else None,
        "count": len(hits),
        "results": [h.to_dict() for h in hits],
    }


def _accessed(store: Any, ids: list[str], record: Recorder | None) -> None:
    if ids and store.config["track_access"]:
        (record or store.touch)(ids)


def knowledge_search(
    store: Any,
    subdir: str,
    query: str,
    *,
    limit: int | None,
    threshold: float | None,
    area: str | None,
    filter: str | None,
    mode: str | None,
    record: Recorder | None = None,
) -> dict[str, Any]:
    """`search` over knowledge chunks only (`knowledge_source: true`), the caller's filter checked first
    on its own so its error names its own text."""
    from memctl.store.filters import compile_filter

    combined = KNOWLEDGE_FILTER
    if filter is not None:
        store.compile(filter)  # the caller's filter, validated as the CLI validates it
        combined = f"{KNOWLEDGE_FILTER} and ({filter})"
    flt = compile_filter(combined, max_length=int(store.config["filter_max_length"]) + len(KNOWLEDGE_FILTER) + 7)
    doc = search(
        store, subdir, query, limit=limit, threshold=threshold, area=area, filter=flt, mode=mode, record=record
    )
    return {**doc, "filter": combined}


def recall(
    store: Any,
    subdir: str,
    message: str,
    *,
    history: list[dict[str, str]] | None,
    threshold: float | None,
    query_prep: bool,
    post_filter: bool,
    record: Recorder | None = None,
    as_of: str | None = None,
) -> dict[str, Any]:
    """`memctl recall`: what it returns counts as accessed, as there."""
    from memctl.llm import UtilityModel
    from memctl.recall import recall as run_recall
    from memctl.recall import render_prompt
    from memctl.store.validity import parse_moment

    moment = parse_moment(as_of, "as_of") if as_of is not None else None
    past = messages_of(history, "history") if history else None
    llm = UtilityModel(store.config) if (query_prep or post_filter) else None
    result = run_recall(
        store,
        message,
        past,
        llm=llm,
        query_prep=query_prep,
        post_filter=post_filter,
        threshold=threshold,
        as_of=moment,
    )
    _accessed(store, [h.id for h in [*result.memories, *result.solutions]], record)
    return {"subdir": subdir, **result.to_dict(), "prompt": render_prompt(result)}


def get(store: Any, subdir: str, ids: list[str]) -> dict[str, Any]:
    if not ids or not all(i.strip() for i in ids):
        raise UsageError("an id is empty", hint="pass the ids memory_list or memory_search return")
    found = store.get(ids)
    present = {m.id for m in found}
    return {
        "subdir": subdir,
        "memories": [m.to_dict() for m in found],
        "missing": [i for i in ids if i not in present],
        "derived": {m.id: store.derived_ids([m.id]) for m in found},
    }


def list_(
    store: Any, subdir: str, *, area: str | None, filter: str | None, limit: int | None, page: int
) -> dict[str, Any]:
    size = limit or int(store.config["list_page_size"])
    items, total = store.list(area=area, filter=filter, limit=size, offset=(page - 1) * size)
    return {"subdir": subdir, "total": total, "page": page, "page_size": size, "items": [m.to_dict() for m in items]}


def update(
    store: Any,
    subdir: str,
    memory_id: str,
    *,
    text: str | None,
    metadata: dict[str, Any] | None,
    unset: list[str] | None,
    replace_metadata: bool,
    area: str | None,
) -> dict[str, Any]:
    if text is None and not metadata and not unset and area is None and not replace_metadata:
        raise UsageError("nothing to update", hint="pass text, metadata, unset or area")
    before = store.get_one(memory_id)
    changes = dict(metadata or {})
    wanted = dict(changes) if replace_metadata else {**before.metadata, **changes}
    for key in unset or []:
        wanted.pop(key, None)
    changed = text not in (None, before.text) or wanted != before.metadata or area not in (None, before.area)
    memory = (
        store.update(
            memory_id, text=text, metadata=changes, unset=unset or [], replace_metadata=replace_metadata, area=area
        )
        if changed
        else before
    )
    return {"subdir": subdir, "memory": memory.to_dict(), "changed": changed, "reembedded": memory.text != before.text}


def delete(store: Any, subdir: str, ids: list[str], *, cascade: bool, dry_run: bool) -> dict[str, Any]:
    if not ids or not all(i.strip() for i in ids):
        raise UsageError("an id is empty", hint="pass the ids memory_list or memory_search return")
    present = {m.id for m in store.get(ids)}
    if dry_run:
        cascaded = [i for i in store.derived_ids(sorted(present)) if i not in present] if cascade else []
        return {
            "subdir": subdir,
            "dry_run": True,
            "deleted": [i for i in ids if i in present],
            "cascaded": cascaded,
            "missing": [i for i in ids if i not in present],
        }
    return {"subdir": subdir, "dry_run": False, **store.delete(ids, cascade=cascade).to_dict()}


def forget(
    store: Any,
    subdir: str,
    query: str,
    *,
    threshold: float | None,
    exact: bool,
    area: str | None,
    filter: str | None,
    confirm: bool,
) -> dict[str, Any]:
    """`memctl forget`; a dry run unless `confirm` (an agent must look before it deletes)."""
    from memctl.store.records import Hit

    threshold = store.config["forget_threshold"] if threshold is None else threshold
    if exact:
        flt = store.compile(filter)
        matches = [Hit(**m.__dict__, score=1.0) for m in store.find_exact(query, area)]
        matches = [m for m in matches if flt is None or flt.matches(m.filter_names())]
    else:
        matches = store.search_all_above(query, threshold, area=area, filter=filter)
    if matches and confirm:
        batch = int(store.config["forget_batch_size"])
        for start in range(0, len(matches), batch):
            store.delete([m.id for m in matches[start : start + batch]], cascade=False)
    return {
        "subdir": subdir,
        "query": query,
        "exact": exact,
        "threshold": threshold,
        "dry_run": not confirm,
        "count": len(matches),
        "deleted": [m.to_dict() for m in matches],
    }


def history(store: Any, subdir: str, memory_id: str | None, limit: int) -> dict[str, Any]:
    entries = store.history(memory_id, limit=limit)
    return {"subdir": subdir, "id": memory_id, "entries": [e.to_dict() for e in entries]}


def restore(store: Any, subdir: str, ids: list[str]) -> dict[str, Any]:
    from memctl.lifecycle.restore import restore as run_restore

    return {"subdir": subdir, **run_restore(store, ids).to_dict()}


def memorize(
    store: Any,
    subdir: str,
    *,
    transcript: str | None,
    messages: list[dict[str, str]] | None,
    area: str,
    solutions: bool,
    dry_run: bool,
    recalled: list[str] | None,
) -> dict[str, Any]:
    """One conversation through extraction, the quality gate and consolidation (`memctl memorize`)."""
    from memctl.llm import UtilityModel
    from memctl.memorize.pipeline import MemorizeReport, memorize_messages

    if (transcript is None) == (messages is None):
        raise UsageError(
            "memorize needs exactly one of transcript or messages",
            hint='messages: [{"role": "user", "content": "…"}, …], or transcript: "User: …"',
        )
    llm = UtilityModel(store.config)  # no utility model: a clear error before anything is read
    parsed = messages_of(messages, "messages") if messages is not None else _parse(transcript or "", "transcript")
    report = memorize_messages(
        store,
        parsed,
        llm,
        source="mcp",
        area=area,
        solutions=solutions,
        dry_run=dry_run,
        recalled=list(recalled or []),
        actor="mcp",
    )
    return {"subdir": subdir, **MemorizeReport(dry_run, [report]).to_dict()}


def behaviour(store: Any, subdir: str) -> dict[str, Any]:
    from memctl import behaviour as rules

    return {"subdir": subdir, **rules.show(store).to_dict()}


def stats(store: Any, subdir: str, root: str) -> dict[str, Any]:
    from memctl.lifecycle.stats import store_stats

    return {"root": root, "stores": [store_stats(store, subdir)]}


def doctor_report(store: Any, subdir: str, last: int) -> dict[str, Any]:
    """The latest kept doctor run and the trend of the last runs (measures nothing: `memctl doctor` does)."""
    from memctl.review.doctor import trend

    runs = store.doctor_runs(1)
    return {"subdir": subdir, "latest": runs[0].to_dict() if runs else None, "runs": trend(store, last)}


def messages_of(items: list[dict[str, str]] | None, what: str) -> list[Any]:
    """Chat messages from a client, read by the transcript reader (same roles and checks as a file)."""
    return _parse(json.dumps(items or [], ensure_ascii=False), what)


def _parse(raw: str, what: str) -> list[Any]:
    from memctl.memorize.transcripts import parse_transcript

    return parse_transcript(raw, what)
