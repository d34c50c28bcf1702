"""`memctl review`: the queue of pending items (list, approve, reject, resolve by a policy)."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from memctl.cli.app import app, state
from memctl.cli.commands.memories import AreaOpt, DryRunOpt, YesOpt, confirm
from memctl.cli.inputs import read_text, unit_interval
from memctl.cli.render import PlainLines, emit, memory_table, short

review_app = typer.Typer(
    help="The review queue: candidates the gate was unsure of (memorize_pending: review) and memories "
    "agents proposed. Pending items are not searched, listed or recalled until approved.",
    invoke_without_command=True,
    rich_markup_mode=None,
)
app.add_typer(review_app, name="review")


@review_app.callback()
def review(
    ctx: typer.Context,
    kind: Annotated[
        str | None, typer.Option("--kind", help="Only items of this kind: pending, junk, duplicate, conflict, stale.")
    ] = None,
    area: AreaOpt = None,
    source: Annotated[str | None, typer.Option("--source", help="Only items from memorize or mcp.")] = None,
) -> None:
    """On a terminal with no subcommand: work through the queue — pending items, then the latest doctor
    run's findings — with the keyboard (a approve/keep, e edit, r reject, m merge into the other memory,
    x supersede the other memory, s skip, u undo, f filter, q quit). Every action is recorded in history
    with actor `review`; a rejected item comes back with `memctl restore ID`."""
    if ctx.invoked_subcommand is not None:
        return
    from memctl.errors import UsageError

    st = state(ctx)
    if not st.interactive or st.json:
        raise UsageError(
            "`memctl review` with no subcommand is the interactive queue and needs a terminal",
            hint="in scripts use `memctl review list`, `approve`, `reject` or `resolve`",
        )
    from memctl.cli.review_tui import run_review
    from memctl.review.session import ReviewFilter, ReviewSession

    chosen = ReviewFilter(kind, area, source)
    chosen.check()
    with st.open_store(actor="review") as store:
        counts = run_review(ReviewSession(store, chosen), st.subdir)
    done = ", ".join(f"{verb} {n}" for verb, n in counts.items() if n)
    print(f"review: {done or 'no decisions'}", file=sys.stderr)


IdsArg = Annotated[list[str], typer.Argument(metavar="ID...", help="Pending ids (`memctl review list`).")]


@review_app.command("list")
def list_(
    ctx: typer.Context,
    area: AreaOpt = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", min=1, help="Page size [default: 20].")] = None,
    page: Annotated[int, typer.Option("--page", "-p", min=1, help="Page number, 1 = oldest.")] = 1,
    kind: Annotated[
        str | None,
        typer.Option(
            "--kind",
            help="pending (the default), or what the latest `memctl doctor` run found: junk, duplicate, conflict, "
            "stale.",
        ),
    ] = None,
) -> None:
    """List pending items, oldest first: id, area, created, source, why it waits, text. With --kind, the
    latest doctor run's findings of that kind, with the reason each is there."""
    from memctl.review.queue import list_page

    st = state(ctx)
    if kind not in (None, "pending"):
        _list_findings(ctx, str(kind), area, limit, page)
        return
    with st.open_store() as store:
        items, total, size = list_page(store, area=area, limit=limit, page=page)
    doc = {"subdir": st.subdir, "total": total, "page": page, "page_size": size, "items": [i.to_dict() for i in items]}
    emit(
        st, doc, lambda c: c.print(_pending_table(items, f"{total} pending — page {page}/{max(1, -(-total // size))}"))
    )


@review_app.command()
def approve(
    ctx: typer.Context,
    ids: IdsArg,
    text: Annotated[
        str | None, typer.Option("--text", help="Edit, then approve: the new text ('-' stdin, '@FILE'); one ID only.")
    ] = None,
    dry_run: DryRunOpt = False,
) -> None:
    """Make pending items memories (embedded now; same id, area, metadata). All or none: exit 3 naming an
    id that is not pending."""
    from memctl.review.queue import approve as run_approve

    st = state(ctx)
    with st.open_store(actor="review") as store:
        memories = run_approve(
            store, ids, text=read_text(text, limit=st.text_limit()) if text is not None else None, dry_run=dry_run
        )
    title = f"{'would approve' if dry_run else 'approved'} {len(memories)}"
    doc = {"subdir": st.subdir, "dry_run": dry_run, "approved": [m.to_dict() for m in memories]}
    emit(st, doc, lambda c: c.print(memory_table(memories, title=title)))


@review_app.command()
def reject(ctx: typer.Context, ids: IdsArg, dry_run: DryRunOpt = False, yes: YesOpt = False) -> None:
    """Reject pending items: removed from the queue and archived (`memctl restore ID` brings one back as a
    memory). All or none: exit 3 naming an id that is not pending."""
    from memctl.review.queue import reject as run_reject

    st = state(ctx)
    with st.open_store(actor="review") as store:
        items = run_reject(store, ids, dry_run=True)
        if not dry_run:
            confirm(ctx, f"Reject {len(items)} pending items?", yes)
            items = run_reject(store, ids)
    title = f"{'would reject' if dry_run else 'rejected'} {len(items)}"
    doc = {"subdir": st.subdir, "dry_run": dry_run, "rejected": [i.to_dict() for i in items]}
    emit(st, doc, lambda c: c.print(_pending_table(items, title)))


@review_app.command()
def resolve(
    ctx: typer.Context,
    older_than: Annotated[
        str | None,
        typer.Option("--older-than", help="Decide only items waiting at least this long (12h, 7d, 2w); others wait."),
    ] = None,
    max_p_noise: Annotated[
        float | None,
        typer.Option(
            "--max-p-noise",
            callback=unit_interval,
            help="Approve items whose gate p(noise) is at most this (items the gate did not score are not).",
        ),
    ] = None,
    approve_all: Annotated[bool, typer.Option("--approve-all", help="Approve every item decided.")] = False,
    reject_rest: Annotated[
        bool, typer.Option("--reject-rest", help="Reject the items decided that are not approved.")
    ] = False,
    area: AreaOpt = None,
    source: Annotated[str | None, typer.Option("--source", help="Only items from memorize or mcp.")] = None,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
) -> None:
    """Decide the queue by a policy, for cron: e.g. --older-than 7d --max-p-noise 0.5 --reject-rest.

    Without a terminal this is a dry run unless --yes (as prune and forget)."""
    from memctl.cli.confirm import decide
    from memctl.review.queue import ResolvePolicy
    from memctl.review.queue import resolve as run_resolve

    st = state(ctx)
    policy = ResolvePolicy(older_than, max_p_noise, approve_all, reject_rest, area, source)
    policy.check()
    with st.open_store(actor="review") as store:
        preview = run_resolve(store, policy, dry_run=True)
        changes = len(preview.approved) + len(preview.rejected)
        question = f"Approve {len(preview.approved)} and reject {len(preview.rejected)} pending items?"
        dry_run = decide(ctx, dry_run, yes, question if changes else None)
        if dry_run or not changes:
            preview.dry_run = dry_run
            report = preview
        else:
            report = run_resolve(store, policy)
    emit(st, {"subdir": st.subdir, **report.to_dict()}, lambda c: _render_resolve(c, report))


def _list_findings(ctx: typer.Context, kind: str, area: str | None, limit: int | None, page: int) -> None:
    from memctl.cli.commands.doctor import findings_table
    from memctl.cli.render import info
    from memctl.review.doctor import findings_page

    st = state(ctx)
    with st.open_store(read_only=True) as store:
        items, total, size, run = findings_page(store, kind, area=area, limit=limit, page=page)
    if run is None:
        info(st, "memctl: no doctor run is kept in this store yet: run `memctl doctor` first")
    doc = {
        "subdir": st.subdir,
        "kind": kind,
        "run": None if run is None else {"run": run.run, "at": run.at},
        "total": total,
        "page": page,
        "page_size": size,
        "items": [i.to_dict() for i in items],
    }
    title = f"{total} {kind} — page {page}/{max(1, -(-total // size))}"
    emit(st, doc, lambda c: c.print(findings_table(items, title)))


def _render_resolve(console: Any, report: Any) -> None:
    verb = "would " if report.dry_run else ""
    if report.approved:
        console.print(_pending_table(report.approved, f"{verb}approve {len(report.approved)}"))
    if report.rejected:
        console.print(_pending_table(report.rejected, f"{verb}reject {len(report.rejected)}"))
    console.print(
        f"{verb}approve {len(report.approved)}, {verb}reject {len(report.rejected)}; {report.waiting} left waiting"
    )


def _source(item: Any) -> str:
    return ":".join(part for part in (item.source, item.transcript) if part) or "-"


def _pending_table(items: list[Any], title: str) -> Any:
    """Rich table on a terminal; tab-separated lines for pipes (id, area, created, source, reason, text)."""
    if not sys.stdout.isatty():
        lines = ["\t".join(("id", "area", "created", "source", "reason", "text"))]
        for i in items:
            cells = (i.id, i.area, i.created_at[:19], _source(i), i.reason, i.text)
            lines.append("\t".join(_cell(str(c)) for c in cells))
        return PlainLines(lines)
    from rich.table import Table

    table = Table(title=title)
    for column in ("id", "area", "created", "source", "reason", "text"):
        table.add_column(column, overflow="fold", no_wrap=column == "id", style="cyan" if column == "id" else None)
    for i in items:
        table.add_row(i.id, i.area, i.created_at[:19], _source(i), short(i.reason, 40), short(i.text))
    return table


def _cell(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
