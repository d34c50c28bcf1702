"""Commands on memories: save, load, forget, delete, show, list, update, history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from memctl.cli.app import app, state
from memctl.cli.inputs import parse_meta, read_text, text_limit, unit_interval
from memctl.cli.render import count, emit, info, memory_table, these
from memctl.errors import EXIT_NO_MATCH, UsageError

if TYPE_CHECKING:
    from memctl.cli.state import State
    from memctl.lifecycle.receipts import Receipt
    from memctl.store.base import StoreBase

AreaOpt = Annotated[str | None, typer.Option("--area", "-a", help="main, fragments or solutions.")]
FilterOpt = Annotated[str | None, typer.Option("--filter", "-f", help="Metadata filter, e.g. \"'db' in tags\".")]
MetaOpt = Annotated[list[str] | None, typer.Option("--meta", "-m", help="key=value (repeatable; JSON values kept).")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show what would change; change nothing.")]
AsOfOpt = Annotated[
    str | None,
    typer.Option(
        "--as-of",
        help="Answer as the store stood then (ISO 8601 date or time): each fact in the version valid at that "
        "moment; facts added later left out. Default: current facts only.",
    ),
]
VerifyOpt = Annotated[
    bool,
    typer.Option(
        "--verify",
        help="Then prove the removed texts cannot be recalled: not in the live rows, the vector and keyword "
        "indexes or the embedding cache (receipt in --json; exit 4 if not proven).",
    ),
]


def receipt_out(st: State, receipt: Receipt | None) -> None:
    """The receipt's one-line summary on stderr; one that does not verify exits 4 (the removal itself happened)."""
    from memctl.errors import EXIT_PARTIAL

    if receipt is None:
        return
    info(st, receipt.summary())
    if not receipt.verified:
        raise typer.Exit(EXIT_PARTIAL)


def _importance(value: float | None) -> float | None:
    from memctl.search.importance import check

    return None if value is None else check(value, "--importance")


ImportanceOpt = Annotated[
    float | None,
    typer.Option("--importance", callback=_importance, help="Metadata `importance` in [0, 1] (1 = a standing rule)."),
]


def _with_importance(metadata: dict, value: float | None) -> dict:
    """--meta importance=... obeys the same rule as --importance; --importance wins."""
    from memctl.search.importance import check_metadata

    check_metadata(metadata)
    return metadata if value is None else {**metadata, "importance": value}


def confirm(ctx: typer.Context, question: str, yes: bool) -> None:
    """Destructive commands ask on a TTY unless --yes; scripts (no TTY) are not prompted."""
    if yes or not state(ctx).interactive or state(ctx).json:
        return
    typer.confirm(question, abort=True, err=True)


@app.command()
def save(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="The memory text; '-' reads stdin, '@FILE' reads a file.")],
    area: Annotated[str, typer.Option("--area", "-a", help="main, fragments or solutions.")] = "main",
    meta: MetaOpt = None,
    importance: ImportanceOpt = None,
    unique: Annotated[
        bool,
        typer.Option("--unique", help="If an identical memory (text, area, metadata) is stored, print its id instead."),
    ] = False,
) -> None:
    """Save one memory and print its id (an identical one is saved again, and said so, unless --unique)."""
    from memctl.lifecycle.jsonl import identity_key

    st = state(ctx)
    metadata = _with_importance(parse_meta(meta), importance)
    with st.open_store(create=True) as store:
        body = read_text(text, limit=text_limit(store))
        key = identity_key(body, area, metadata)
        same = [m.id for m in store.find_exact(body, area) if identity_key(m.text, m.area, m.metadata) == key]
        ids = same[:1] if unique and same else store.add([body], area=area, metadata=[metadata])
    created = not (unique and same)
    if same and created:
        info(st, f"memctl: an identical memory is stored already ({', '.join(same)}); `save --unique` keeps one")
    doc = {"subdir": st.subdir, "area": area, "ids": ids, "created": created, "identical": same}
    emit(st, doc, lambda c: c.print(ids[0]))


@app.command()
def load(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for; '-' reads stdin, '@FILE' reads a file.")],
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            "-t",
            min=0.0,
            max=1.0,
            callback=unit_interval,
            help="Minimum relevance (see README) [config search_threshold; default: the calibration's, and "
            "nothing when the store seems not to answer the question; a value given is taken as asked].",
        ),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=1, help="Most results [config search_limit: 10].")
    ] = None,
    area: AreaOpt = None,
    filter: FilterOpt = None,
    mode: Annotated[
        str | None,
        typer.Option("--mode", help="hybrid (vector + keyword), dense or keyword [config search_mode: hybrid]."),
    ] = None,
    as_of: AsOfOpt = None,
) -> None:
    """Search memories (hybrid vector + keyword by default). Exit 3 when nothing passes the threshold."""
    from memctl.store.validate import utc_iso
    from memctl.store.validity import parse_moment
    from memctl.store.validity import search as search_valid

    st = state(ctx)
    moment = parse_moment(as_of) if as_of is not None else None
    with st.open_store() as store:
        asked = threshold  # None: the default cut, and the store's answered check (memctl/search/answered.py)
        threshold = store.default_threshold() if threshold is None else threshold
        limit = store.config["search_limit"] if limit is None else limit
        mode = mode or store.config["search_mode"]
        hits = search_valid(
            store,
            read_text(query, "query", limit=text_limit(store)),
            limit=limit,
            as_of_moment=moment,
            threshold=asked,
            area=area,
            filter=filter,
            mode=mode,
        )
        if hits and store.config["track_access"]:
            store.touch([h.id for h in hits])  # after the search, one UPDATE (for prune --not-accessed-for)
    doc = {
        "subdir": st.subdir,
        "query": query,
        "mode": mode,
        "threshold": threshold,
        "limit": limit,
        "as_of": utc_iso(moment) if moment is not None else None,
        "count": len(hits),
        "results": [h.to_dict() for h in hits],
    }
    if not hits:
        info(st, "no memories matched")  # a message, not a result: stdout stays empty for scripts
    emit(st, doc, (lambda c: c.print(memory_table(hits, score=True))) if hits else None)
    if not hits:
        raise typer.Exit(EXIT_NO_MATCH)


@app.command()
def forget(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="Delete memories similar to this ('-' stdin, '@FILE').")],
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            "-t",
            min=0.0,
            max=1.0,
            callback=unit_interval,
            help="Minimum similarity (1 + cosine) / 2 to QUERY, not the search relevance "
            "[config forget_threshold: 0.99, close restatements only].",
        ),
    ] = None,
    exact: Annotated[bool, typer.Option("--exact", help="Delete only memories whose text is exactly QUERY.")] = False,
    area: AreaOpt = None,
    filter: FilterOpt = None,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    verify: VerifyOpt = False,
) -> None:
    """Delete every memory similar to QUERY (in batches until none is left). Exit 3 if none matched."""
    from memctl.cli.confirm import asked, decide
    from memctl.store.records import Hit

    st = state(ctx)
    was_asked = asked(ctx, dry_run, yes)
    text = read_text(query, "query", limit=st.text_limit())
    with st.open_store() as store:
        threshold = store.config["forget_threshold"] if threshold is None else threshold
        if exact:
            matches = [Hit(**m.__dict__, score=1.0) for m in store.find_exact(text, area, filter=filter)]
        else:
            matches = store.search_all_above(text, threshold, area=area, filter=filter)
        question = f"Delete {these(len(matches), 'memory')}?" if matches else None
        dry_run = decide(ctx, dry_run, yes, question, preview=_listing(matches, "would delete"))
        if matches and not dry_run:
            batch = int(store.config["forget_batch_size"])
            for start in range(0, len(matches), batch):
                store.delete([m.id for m in matches[start : start + batch]], cascade=False)
        receipt = _receipt(store, "forget", [m.id for m in matches], [m.text for m in matches], verify and not dry_run)
    doc = {
        "subdir": st.subdir,
        "query": text,
        "exact": exact,
        "threshold": threshold,
        "dry_run": dry_run,
        "count": len(matches),
        "deleted": [m.to_dict() for m in matches],
        **({"receipt": receipt.to_dict()} if receipt else {}),
    }
    if not matches:
        info(st, "no memories matched")
        emit(st, doc)
    elif was_asked:  # the list was shown before the question: now only what happened
        emit(st, doc, lambda c: c.print(f"deleted {count(len(matches), 'memory')}"))
    else:
        listing = _listing(matches, "would delete" if dry_run else "deleted")
        emit(st, doc, lambda c: c.print(listing), essential=[m.id for m in matches] if dry_run else None)
    if not matches:
        raise typer.Exit(EXIT_NO_MATCH)
    receipt_out(st, receipt)


def _receipt(store: StoreBase, operation: str, ids: list[str], texts: list[str], wanted: bool) -> Receipt | None:
    from memctl.lifecycle.receipts import hashes_of, verify_removal

    return verify_removal(store, operation, ids, hashes_of(texts)) if wanted and ids else None


def _listing(matches: list, verb: str) -> object:
    return memory_table(matches, score=True, title=f"{verb} {count(len(matches), 'memory')}")


@app.command()
def delete(
    ctx: typer.Context,
    ids: Annotated[list[str], typer.Argument(help="Ids to delete.")],
    no_cascade: Annotated[bool, typer.Option("--no-cascade", help="Keep memories derived from these ids.")] = False,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    verify: VerifyOpt = False,
) -> None:
    """Delete memories by id, and what was derived from them. Exit 3 if no id exists."""
    st = state(ctx)
    if not all(i.strip() for i in ids):
        raise UsageError("an id is empty", hint="pass the ids `memctl list` or `memctl load` print")
    receipt: Receipt | None = None
    with st.open_store() as store:
        plan = store.delete_plan(ids, cascade=not no_cascade)
        if dry_run:
            doc = {"subdir": st.subdir, "dry_run": True, **plan.to_dict()}
        else:
            if plan.deleted:
                confirm(ctx, _delete_line("Delete", plan.to_dict(), missing=False) + "?", yes)
            texts = [m.text for m in store.get(plan.deleted + plan.cascaded)] if verify else []
            result = store.delete(ids, cascade=not no_cascade)
            receipt = _receipt(store, "delete", result.deleted + result.cascaded, texts, verify)
            doc = {
                "subdir": st.subdir,
                "dry_run": False,
                **result.to_dict(),
                **({"receipt": receipt.to_dict()} if receipt else {}),
            }
    emit(
        st,
        doc,
        lambda c: c.print(_delete_line("would delete" if dry_run else "deleted", doc), soft_wrap=True),
        essential=[*map(str, doc["deleted"]), *map(str, doc["cascaded"])] if dry_run else None,
    )
    if not plan.deleted:
        raise typer.Exit(EXIT_NO_MATCH)
    receipt_out(st, receipt)


def _delete_line(verb: str, plan: dict, missing: bool = True) -> str:
    """`deleted 2 memories: a b (+1 derived: c); not found: x`: every id named, so a dry run says which."""
    deleted, cascaded, absent = (list(map(str, plan[key])) for key in ("deleted", "cascaded", "missing"))
    line = f"{verb} {count(len(deleted), 'memory')}" + (f": {' '.join(deleted)}" if deleted else "")
    if cascaded:
        line += f" (+{len(cascaded)} derived: {' '.join(cascaded)})"
    if absent and missing:
        line += f"; not found: {' '.join(absent)}"
    return line


@app.command()
def show(ctx: typer.Context, memory_id: Annotated[str, typer.Argument(metavar="ID")]) -> None:
    """Show one memory with its metadata and the versions it superseded (`update --supersede`); a superseded
    version shows itself, marked so. Exit 3 if the id is neither."""
    from memctl.errors import NotFoundError
    from memctl.store.validity import chain, superseded_version

    st = state(ctx)
    with st.open_store(read_only=True) as store:
        try:
            memory, current = store.get_one(memory_id), True
        except NotFoundError:
            found = superseded_version(store, memory_id)
            if found is None:
                raise
            memory, current = found, False
        versions = chain(store, memory)[1:]
        derived = store.derived_ids([memory_id]) if current else []
    doc = {
        "subdir": st.subdir,
        "memory": memory.to_dict(),
        "current": current,
        "derived": derived,
        "versions": [v.to_dict() for v in versions],
    }
    emit(st, doc, lambda c: _show(c, memory, derived, current, versions))


def _show(
    console: object,
    memory: object,
    derived: list[str],
    current: bool = True,
    versions: tuple[Any, ...] | list[Any] = (),
) -> None:
    """`key: value` lines, the text whole (never cut to a column width). A text of several lines
    continues on lines indented by two spaces, so no line of it can pass for a `key:` line."""
    import json

    from memctl.cli.render import PlainLines

    lines = []
    for key, value in memory.to_dict().items():  # type: ignore[attr-defined]
        shown = json.dumps(value, ensure_ascii=False) if key == "metadata" else str(value)
        first, *rest = shown.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        lines += [f"{key}: {first}", *(f"  {line}" for line in rest)]
    if derived:
        lines.append(f"derived: {' '.join(derived)}")
    if not current:
        lines.append("status: superseded (kept for --as-of; not searched or listed)")
    for version in versions:
        meta = version.metadata
        span = f"{meta.get('valid_from', version.created_at)} .. {meta.get('valid_to', '')}"
        lines.append(f"supersedes: {version.id} ({span}) {_one_line(version.text)}")
    console.print(PlainLines(lines))  # type: ignore[attr-defined]


def _one_line(text: str) -> str:
    return " ".join(text.split())


@app.command("list")
def list_(
    ctx: typer.Context,
    area: AreaOpt = None,
    filter: FilterOpt = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", min=1, help="Page size [default: 20].")] = None,
    page: Annotated[int, typer.Option("--page", "-p", min=1, help="Page number, 1 = newest.")] = 1,
) -> None:
    """List memories, newest first, a page at a time."""
    st = state(ctx)
    with st.open_store(read_only=True) as store:
        size = limit or int(store.config["list_page_size"])
        items, total = store.list(area=area, filter=filter, limit=size, offset=(page - 1) * size)
    doc = {"subdir": st.subdir, "total": total, "page": page, "page_size": size, "items": [m.to_dict() for m in items]}
    pages = max(1, -(-total // size))
    emit(st, doc, lambda c: c.print(memory_table(items, title=f"{count(total, 'memory')} — page {page}/{pages}")))


@app.command()
def update(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(metavar="ID")],
    text: Annotated[str | None, typer.Option("--text", help="New text ('-' stdin, '@FILE'); re-embedded.")] = None,
    meta: MetaOpt = None,
    unset: Annotated[list[str] | None, typer.Option("--unset", help="Metadata key to remove (repeatable).")] = None,
    replace_meta: Annotated[bool, typer.Option("--replace-meta", help="Replace metadata instead of merging.")] = False,
    area: AreaOpt = None,
    importance: ImportanceOpt = None,
    supersede: Annotated[
        bool,
        typer.Option(
            "--supersede",
            help="The fact changed: keep the old memory as a superseded version (valid until now, shown by "
            "--as-of and `show`) and save --text as a new memory (a new id) valid from now.",
        ),
    ] = False,
    valid_from: Annotated[
        str | None, typer.Option("--valid-from", help="With --supersede: when the new value became true (ISO 8601).")
    ] = None,
) -> None:
    """Change a memory's text, metadata and/or importance; its history keeps the old version."""
    st = state(ctx)
    if supersede or valid_from is not None:
        _supersede(ctx, memory_id, text, changes=_with_importance(parse_meta(meta), importance), valid_from=valid_from)
        return
    if text is None and not meta and not unset and area is None and not replace_meta and importance is None:
        raise UsageError("nothing to update", hint="pass --text, --meta, --unset, --area or --importance")
    changes = _with_importance(parse_meta(meta), importance)
    with st.open_store() as store:
        before = store.get_one(memory_id)
        new_text = read_text(text, limit=text_limit(store)) if text is not None else None
        wanted = dict(changes) if replace_meta else {**before.metadata, **changes}
        for key in unset or []:
            wanted.pop(key, None)
        changed = new_text not in (None, before.text) or wanted != before.metadata or area not in (None, before.area)
        memory = (
            store.update(
                memory_id, text=new_text, metadata=changes, unset=unset or [], replace_metadata=replace_meta, area=area
            )
            if changed
            else before
        )
    doc = {
        "subdir": st.subdir,
        "memory": memory.to_dict(),
        "changed": changed,
        "reembedded": memory.text != before.text,
    }
    emit(st, doc, lambda c: c.print(f"updated {memory.id}" if changed else f"{memory.id} already so: nothing changed"))


def _supersede(
    ctx: typer.Context, memory_id: str, text: str | None, *, changes: dict[str, Any], valid_from: str | None
) -> None:
    from memctl.store.validity import parse_moment, supersede

    st = state(ctx)
    if text is None:
        raise UsageError("--supersede needs --text: the fact's new value", hint="e.g. --supersede --text 'User ...'")
    moment = parse_moment(valid_from, "--valid-from") if valid_from is not None else None
    with st.open_store() as store:
        memory = supersede(store, [memory_id], read_text(text, limit=text_limit(store)), metadata=changes, at=moment)
    doc = {
        "subdir": st.subdir,
        "memory": memory.to_dict(),
        "changed": True,
        "reembedded": True,
        "superseded": [memory_id],
    }
    emit(
        st,
        doc,
        lambda c: c.print(f"{memory_id} superseded by {memory.id} (valid from {memory.metadata['valid_from']})"),
    )


@app.command()
def history(
    ctx: typer.Context,
    memory_id: Annotated[str | None, typer.Argument(metavar="[ID]", help="One memory's changes.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="Most entries, newest first.")] = 50,
) -> None:
    """Every recorded change (add, update, merge, replace, delete, prune, restore, import), newest first."""
    st = state(ctx)
    with st.open_store(read_only=True) as store:
        entries = store.history(memory_id, limit=limit)
    if memory_id and not entries:
        info(st, f"no history for {memory_id!r}")
    emit(
        st,
        {"subdir": st.subdir, "id": memory_id, "entries": [e.to_dict() for e in entries]},
        lambda c: c.print(_history_table(entries)),
    )
    if memory_id and not entries:
        raise typer.Exit(EXIT_NO_MATCH)


def _history_table(entries: list) -> object:
    from memctl.cli.render import table

    rows = [(e.at[:19], e.memory_id, e.op, e.actor, e.old_text or "", e.new_text or "") for e in entries]
    return table(("at", "id", "op", "actor", "old text", "new text"), rows, cut={"old text": 50, "new text": 50})
