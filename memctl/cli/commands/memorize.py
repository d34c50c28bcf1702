"""The LLM curation commands: memorize, consolidate, behaviour."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from memctl.cli.app import app, state
from memctl.cli.commands.memories import AreaOpt, DryRunOpt
from memctl.cli.inputs import read_text, text_limit
from memctl.cli.render import emit, info, progress, short
from memctl.errors import EXIT_PARTIAL, UsageError

BEHAVIOUR_ACTIONS = ("show", "adjust", "reset", "edit")


@app.command()
def memorize(
    ctx: typer.Context,
    transcripts: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="[TRANSCRIPT]...",
            help="Conversation files (JSON, JSONL or 'User:/Assistant:' text).",
            dir_okay=False,
        ),
    ] = None,
    batch: Annotated[
        str | None,
        typer.Option(
            "--batch",
            help="A folder or glob of transcripts, memorized in "
            "name order into one store (unreadable ones are reported).",
        ),
    ] = None,
    dry_run: DryRunOpt = False,
    no_solutions: Annotated[bool, typer.Option("--no-solutions", help="Extract facts only, no solutions.")] = False,
    area: Annotated[
        str, typer.Option("--area", "-a", help="Area for extracted facts (solutions always go to 'solutions').")
    ] = "fragments",
    recalled: Annotated[
        Path | None,
        typer.Option(
            "--recalled",
            dir_okay=False,
            help="Memories recalled into the "
            "conversation (recall's block or JSON): restating them is an "
            "echo, not a new memory.",
        ),
    ] = None,
) -> None:
    """Extract durable facts and solutions from transcripts, gate them, and consolidate them into the store.

    Needs utility_model. Exit 4 when a transcript could not be read (--batch) or the model gave no usable
    extraction for it (the table and --json count it under `failed`).
    """
    from memctl.llm import UtilityModel
    from memctl.memorize.grounding import parse_recalled
    from memctl.memorize.pipeline import memorize_files, resolve_batch

    st = state(ctx)
    paths = list(transcripts or []) + (resolve_batch(batch) if batch else [])
    if not paths:
        raise UsageError("give TRANSCRIPT files or --batch DIR|GLOB", hint="memctl memorize chat.json")
    remembered = parse_recalled(read_text(f"@{recalled}", "--recalled", limit=st.text_limit())) if recalled else []
    with st.open_store(actor="memorize", create=True) as store:
        llm = UtilityModel(store.config)
        bar = progress(st, len(paths), "memorize")
        try:
            report = memorize_files(
                store,
                paths,
                llm,
                area=area,
                solutions=not no_solutions,
                dry_run=dry_run,
                recalled=remembered,
                keep_going=batch is not None,
                progress=bar.update,
            )
        finally:
            bar.close()
    for transcript in report.transcripts:  # people see these in the tables; scripts get them on stderr
        for note in transcript.notes if st.json else []:
            info(st, f"memctl: {Path(transcript.source).name}: {note}")
        if transcript.error:
            info(st, f"memctl: skipped {transcript.source}: {transcript.error}")
    emit(st, {"subdir": st.subdir, **report.to_dict()}, lambda c: _render_memorize(c, report))
    if report.failed:
        raise typer.Exit(EXIT_PARTIAL)


def _fate_label(fate: str, dry_run: bool) -> str:
    return f"would be {fate.replace('_', ' ')}" if dry_run and fate != "gated" else fate.replace("_", " ")


_CANDIDATE_COLUMNS = ("area", "fate", "why", "ids", "text")


def _candidate_row(c: Any, dry_run: bool) -> tuple[str, ...]:
    why = c.reason + (f" ({c.notes[0]})" if c.fate in ("gated", "pending") and c.notes else "")
    ids = ", ".join(c.ids + [f"-{i}" for i in c.removed])
    text = c.text if not c.result_text else f"{c.text} => {c.result_text}"
    return (c.area, _fate_label(c.fate, dry_run), why, ids, text)


def _render_memorize(console: Any, report: Any) -> None:
    """A table per transcript on a terminal; into a pipe one tab-separated record per candidate (a
    `transcript` column first) on stdout, and the notes and totals as messages on stderr."""
    from memctl.cli.render import piped, table

    say = (lambda line: sys.stderr.write(line + "\n")) if piped() else console.print
    if piped():
        rows = [(t.source, *_candidate_row(c, report.dry_run)) for t in report.transcripts for c in t.candidates]
        console.print(table(("transcript", *_CANDIDATE_COLUMNS), rows))
        if report.dry_run:
            say("dry run: nothing was written")
    for transcript in report.transcripts:
        title = ("dry run: " if report.dry_run else "") + f"{transcript.source}"
        if transcript.error:
            say(f"{title}: not read ({transcript.error})")
            continue
        if not piped():
            rows = [_candidate_row(c, report.dry_run) for c in transcript.candidates]
            heading = f"{title} ({transcript.messages} messages" + (", trimmed" if transcript.trimmed else "") + ")"
            console.print(table(_CANDIDATE_COLUMNS, rows, title=heading, cut={"why": 80, "text": 140}))
        if transcript.extraction_failed:
            say(f"extraction failed: {', '.join(transcript.extraction_failed)} (see the notes)")
        elif not transcript.candidates:
            say("no candidates extracted")
        for note in transcript.notes:
            say(f"note: {note}")
    counts = {k: v for k, v in report.summary().items() if v and k not in ("transcripts",)}
    say(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in counts.items()) or "nothing extracted")
    if counts.get("pending") and not report.dry_run:
        say("pending candidates wait in the review queue: `memctl review list`")


@app.command()
def consolidate(
    ctx: typer.Context,
    area: AreaOpt = None,
    dry_run: DryRunOpt = False,
) -> None:
    """Consolidate similar memories already stored (near-duplicate groups first). Needs utility_model."""
    from memctl.llm import UtilityModel
    from memctl.memorize.store_consolidation import consolidate_store

    st = state(ctx)
    with st.open_store(actor="consolidate") as store:
        llm = UtilityModel(store.config)
        bar = progress(st, None, "consolidate")
        try:
            report = consolidate_store(store, llm, area=area, dry_run=dry_run, progress=bar.update)
        finally:
            bar.close()
    emit(st, {"subdir": st.subdir, **report.to_dict()}, lambda c: _render_consolidate(c, report))


def _render_consolidate(console: Any, report: Any) -> None:
    from memctl.cli.render import piped, table

    say = (lambda line: sys.stderr.write(line + "\n")) if piped() else console.print
    if not report.groups:
        say("no similar memories to consolidate")
        return
    rows = []
    for g in report.groups:
        width = 10**6 if piped() else 60
        members = "\n".join(f"{m.id} {m.score:.2f} {short(m.text, width)}" for m in g.members)
        result = ", ".join(g.ids) + (f": {g.result_text}" if g.result_text else "")
        rows.append((g.area, _fate_label(g.fate, report.dry_run), g.reason, members, result))
    title = ("dry run: " if report.dry_run else "") + "consolidation"
    cut = {"why": 80, "result": 80}
    console.print(table(("area", "fate", "why", "members", "result"), rows, title=title, cut=cut))
    say(", ".join(f"{k}: {v}" for k, v in report.summary().items()))


@app.command()
def behaviour(
    ctx: typer.Context,
    action: Annotated[str, typer.Argument(help="show, adjust, reset or edit.")] = "show",
    text: Annotated[str | None, typer.Argument(help="adjust: the change to make ('-' stdin, '@FILE').")] = None,
) -> None:
    """The sub-store's behaviour rules (behaviour.md): show, adjust "TEXT" (utility model), reset, edit ($EDITOR)."""
    from memctl import behaviour as rules

    st = state(ctx)
    if action not in BEHAVIOUR_ACTIONS:
        raise UsageError(f"behaviour action must be one of {', '.join(BEHAVIOUR_ACTIONS)}, not {action!r}")
    if (text is not None) != (action == "adjust"):
        raise UsageError(
            "only `behaviour adjust` takes TEXT" if text is not None else "adjust needs TEXT",
            hint='memctl behaviour adjust "Always answer in German"',
        )
    with st.open_store(create=action != "show", read_only=action == "show") as store:
        if action == "adjust":
            from memctl.llm import UtilityModel

            result = rules.adjust(
                store, read_text(text or "", "adjustment", limit=text_limit(store)), UtilityModel(store.config)
            )
        elif action == "reset":
            result = rules.reset(store)
        elif action == "edit":
            result = rules.edit(store)
        else:
            result = rules.show(store)
    if action != "show":
        info(st, f"memctl: {result.path} " + ("updated" if result.changed else "unchanged"))
    emit(st, {"subdir": st.subdir, **result.to_dict()}, lambda _: sys.stdout.write(result.rules))
