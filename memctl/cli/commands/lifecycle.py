"""Commands for a store's life from cron and CI: prune, restore, purge, backup, restore-backup, stats."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from memctl.cli.app import app, state
from memctl.cli.confirm import asked, decide
from memctl.cli.inputs import unit_interval
from memctl.cli.render import count, emit, info, memory_table, these
from memctl.cli.state import State
from memctl.errors import UsageError

YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do it without asking (needed when there is no terminal).")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show what would go; change nothing.")]
AllSubdirsOpt = Annotated[bool, typer.Option("--all-subdirs", help="Every store under the root.")]


@app.command()
def prune(
    ctx: typer.Context,
    older_than: Annotated[
        str | None, typer.Option("--older-than", help="Created more than this long ago (12h, 30d, 8w).")
    ] = None,
    not_accessed_for: Annotated[
        str | None,
        typer.Option(
            "--not-accessed-for", help="Not returned by `load` for this long (never returned: counted from creation)."
        ),
    ] = None,
    area: Annotated[str | None, typer.Option("--area", "-a", help="Only this area.")] = None,
    min_importance: Annotated[
        float | None,
        typer.Option(
            "--min-importance",
            callback=unit_interval,
            help="Metadata `importance` below this (a memory without one counts as 0.5).",
        ),
    ] = None,
    decayed_below: Annotated[
        float | None,
        typer.Option(
            "--decayed-below",
            callback=unit_interval,
            help="Effective importance below this: `importance` halved every "
            "importance_half_life days since last returned (else "
            "created).",
        ),
    ] = None,
    source: Annotated[
        str | None,
        typer.Option("--source", help="knowledge (knowledge_source: true) or conversation (everything else)."),
    ] = None,
    filter: Annotated[str | None, typer.Option("--filter", "-f", help="Metadata filter expression.")] = None,
    superseded_for: Annotated[
        str | None,
        typer.Option(
            "--superseded-for",
            help="Instead: remove superseded versions (kept for --as-of) that stopped being valid this long ago, "
            "for good. No other criterion with it.",
        ),
    ] = None,
    purge: Annotated[
        bool, typer.Option("--purge", help="Do not archive: gone for good (history keeps the operation, not the text).")
    ] = False,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
) -> None:
    """Remove memories matching every criterion given; they stay restorable (`restore`) unless --purge."""
    from memctl.lifecycle.prune import PruneCriteria, select_for_prune
    from memctl.lifecycle.prune import prune as run_prune

    st = state(ctx)
    was_asked = asked(ctx, dry_run, yes)
    criteria = PruneCriteria(older_than, not_accessed_for, area, min_importance, source, filter, decayed_below)
    if superseded_for is not None:
        if any(v is not None for v in criteria.to_dict().values()) or purge:
            raise UsageError("--superseded-for takes no other criterion (nor --purge: it removes for good)")
        return _prune_superseded(ctx, superseded_for, dry_run, yes)
    with st.open_store(actor="prune") as store:
        chosen = select_for_prune(store, criteria)
        question = f"Prune {these(len(chosen), 'memory')}{' for good' if purge else ''}?"
        preview = memory_table(chosen, title=f"would prune {count(len(chosen), 'memory')}")
        dry_run = decide(ctx, dry_run, yes, question if chosen else None, preview=preview)
        report = run_prune(store, criteria, dry_run=dry_run, purge=purge, selected=chosen)
    title = f"{'would prune' if report.dry_run else 'pruned'} {count(len(report.pruned), 'memory')}"
    emit(
        st,
        {"subdir": st.subdir, **report.to_dict()},
        lambda c: c.print(title if was_asked and report.pruned else memory_table(report.pruned, title=title)),
        essential=[m.id for m in report.pruned] if report.dry_run else None,
    )


@app.command()
def restore(
    ctx: typer.Context,
    ids: Annotated[list[str], typer.Argument(metavar="ID...", help="Ids of deleted, replaced or pruned memories.")],
) -> None:
    """Bring deleted, replaced or pruned memories back (same id, text, area, metadata, created_at)."""
    from memctl.lifecycle.restore import restore as run_restore

    st = state(ctx)
    with st.open_store() as store:
        report = run_restore(store, ids)
    emit(
        st,
        {"subdir": st.subdir, **report.to_dict()},
        lambda c: c.print(memory_table(report.restored, title=f"restored {count(len(report.restored), 'memory')}")),
    )


@app.command()
def purge(
    ctx: typer.Context,
    older_than: Annotated[
        str | None, typer.Option("--older-than", help="History and archived memories older than this (12h, 30d, 8w).")
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="All history and every archived memory.")] = False,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Then prove the purged texts cannot be recalled: not in the live rows, the indexes, the "
            "history, the archive or the embedding cache (receipt in --json; exit 4 if not proven).",
        ),
    ] = False,
) -> None:
    """Remove history and archived memories for good, and compact the store so no trace of their text remains."""
    from memctl.lifecycle.purge import purge as run_purge

    st = state(ctx)
    with st.open_store(actor="purge") as store:
        preview = run_purge(store, older_than=older_than, everything=all_, dry_run=True)
        question = (
            f"Purge {count(preview.history, 'history entry')} and "
            f"{count(preview.archived, 'archived memory')} for good?"
            if preview.history or preview.archived
            else None
        )
        dry_run = decide(ctx, dry_run, yes, question)
        report = preview if dry_run else run_purge(store, older_than=older_than, everything=all_, verify=verify)

    def human(console: Any) -> None:
        verb = "would purge" if report.dry_run else "purged"
        console.print(
            f"{verb} {count(report.history, 'history entry')} and "
            f"{count(report.archived, 'archived memory')}"
            + ("" if report.dry_run else f"; store {report.bytes_before} -> {report.bytes_after} bytes")
        )

    emit(st, {"subdir": st.subdir, **report.to_dict()}, human)
    from memctl.cli.commands.memories import receipt_out

    receipt_out(st, report.receipt)


@app.command()
def backup(
    ctx: typer.Context,
    dest: Annotated[Path, typer.Argument(help="New folder for the backup (a store folder you can open or restore).")],
    force: Annotated[bool, typer.Option("--force", help="Replace DEST if it is not empty.")] = False,
) -> None:
    """Write a consistent snapshot of the store to DEST while other processes may keep writing.

    DEST is a folder store (a PostgreSQL store is written as one) that restore-backup restores into either backend.
    """
    from memctl.lifecycle.backup import backup_subdir

    st = state(ctx)
    report = backup_subdir(st.root, st.subdir, dest, store=st.store, overrides=st.overrides, force=force)
    emit(
        st,
        {"subdir": st.subdir, **report.to_dict()},
        lambda c: c.print(f"backed up {count(report.count, 'memory')} to {report.path} ({report.bytes} bytes)"),
    )


@app.command("restore-backup")
def restore_backup(
    ctx: typer.Context,
    source: Annotated[Path, typer.Argument(help="A folder written by `memctl backup`.")],
    force: Annotated[bool, typer.Option("--force", help="Replace a store that is not empty.")] = False,
) -> None:
    """Replace the store (--subdir) with a backup: checked, copied beside it, then swapped in."""
    from memctl.lifecycle.backup import restore_subdir

    st = state(ctx)
    report = restore_subdir(source, st.root, st.subdir, store=st.store, overrides=st.overrides, force=force)
    if report.kept_old:
        info(st, f"the replaced store was kept at {report.kept_old}; delete it when you no longer need it")
    emit(
        st,
        {"subdir": st.subdir, **report.to_dict()},
        lambda c: c.print(f"restored {count(report.count, 'memory')} into {report.path}"),
    )


@app.command()
def stats(ctx: typer.Context, all_subdirs: AllSubdirsOpt = False) -> None:
    """Counts per area and source, oldest/newest, never accessed, archive, size on disk, model.

    With --all-subdirs a store that cannot be read is named (`failed`) and the others are still
    reported; the exit code is then 4."""
    import sqlite3

    from memctl.config.paths import resolve_root
    from memctl.errors import EXIT_PARTIAL, MemctlError
    from memctl.lifecycle.stats import store_stats

    st = state(ctx)
    root = resolve_root(st.root)
    rows, failed = [], []
    for name in st.subdir_names() if all_subdirs else [st.subdir]:
        try:
            with State(st.root, name, overrides=st.overrides, store=st.store).open_store(read_only=True) as store:
                rows.append(store_stats(store, name))
        except (MemctlError, sqlite3.DatabaseError, OSError) as exc:
            if not all_subdirs:
                raise
            failed.append({"subdir": name, "error": str(exc)})
            info(st, f"memctl: store {name!r} cannot be read: {exc}")
    emit(st, {"root": str(root), "stores": rows, "failed": failed}, lambda c: c.print(_stats_table(rows)))
    if failed:
        raise typer.Exit(EXIT_PARTIAL)


def _stats_table(rows: list[dict[str, Any]]) -> Any:
    """One key/value table per store on a terminal; into a pipe, one `subdir key value` record per row."""
    from rich.console import Group

    from memctl.cli.render import piped, table

    per_store = [(r["subdir"], _stats_rows(r)) for r in rows]
    if piped():
        return table(("subdir", "what", "value"), [(name, *row) for name, lines in per_store for row in lines])
    return Group(*(table(("what", "value"), lines, title=name, header=False) for name, lines in per_store))


def _stats_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    areas = ", ".join(f"{a} {v['count']}" for a, v in r["areas"].items())
    model = f"{r['model']['provider']}:{r['model']['model']} ({r['model']['dimension']}-d)" if r["model"] else "-"
    return [
        ("memories", f"{r['count']} ({areas})"),
        ("knowledge / conversation", f"{r['knowledge']} / {r['conversation']}"),
        ("oldest / newest", f"{_when(r['oldest'])} / {_when(r['newest'])}"),
        ("never accessed", str(r["never_accessed"])),
        ("last access", _when(r["last_accessed"])),
        ("archived (restorable)", str(r["archived"])),
        ("pending review", str(r.get("pending", 0))),
        ("history entries", str(r["history"])),
        ("size on disk", _size(r["bytes"])),
        ("model", model),
        ("path", r["path"]),
    ]


def _when(stamp: str | None) -> str:
    return (stamp or "-")[:19]


def _size(count: int) -> str:
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{count} B"


def _prune_superseded(ctx: typer.Context, superseded_for: str, dry_run: bool, yes: bool) -> None:
    from memctl.lifecycle.durations import parse_duration
    from memctl.store.validity import prune_superseded

    st = state(ctx)
    was_asked = asked(ctx, dry_run, yes)
    age = parse_duration(superseded_for, "--superseded-for")
    with st.open_store(actor="prune") as store:
        chosen = prune_superseded(store, age, dry_run=True)
        question = f"Remove {these(len(chosen), 'superseded version')} for good?"
        preview = memory_table(chosen, title=f"would remove {count(len(chosen), 'superseded version')}")
        dry_run = decide(ctx, dry_run, yes, question if chosen else None, preview=preview)
        pruned = chosen if dry_run else prune_superseded(store, age)
    title = f"{'would remove' if dry_run else 'removed'} {count(len(pruned), 'superseded version')}"
    doc = {
        "subdir": st.subdir,
        "dry_run": dry_run,
        "purged": not dry_run,
        "criteria": {"superseded_for": superseded_for},
        "count": len(pruned),
        "compacted": None,
        "pruned": [m.to_dict() for m in pruned],
    }
    emit(
        st,
        doc,
        lambda c: c.print(title if was_asked and pruned else memory_table(pruned, title=title)),
        essential=[m.id for m in pruned] if dry_run else None,
    )
