"""`memctl doctor`: the health report of a store (docs/doctor.md), its trend, and its findings' table."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from memctl.cli.app import app, state
from memctl.cli.render import emit, piped, progress, short, table

EXIT_LIMIT = 1  # a figure crossed its configured limit (docs/doctor.md)


@app.command()
def doctor(
    ctx: typer.Context,
    queries: Annotated[
        Path | None,
        typer.Option(
            "--queries",
            dir_okay=False,
            help="Your saved questions (JSONL or YAML: question and the expected memory's id or text): recall@k.",
        ),
    ] = None,
    k: Annotated[int | None, typer.Option("--k", min=1, help="k of recall@k [default: 5].")] = None,
    trend: Annotated[
        bool, typer.Option("--trend", help="Show the kept runs over time (a chart on a terminal); measure nothing.")
    ] = False,
    last: Annotated[
        int | None, typer.Option("--last", min=1, help="With --trend or --plot: only the last N runs.")
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", dir_okay=False, help="Write the trend as a PNG (needs the `plot` extra: matplotlib)."),
    ] = None,
    no_save: Annotated[
        bool, typer.Option("--no-save", help="Measure without keeping the run (its findings are not kept either).")
    ] = False,
) -> None:
    """How healthy is this store: likely junk, near-duplicates, conflicts, stale and never-recalled shares,
    pending reviews, recall@k on your questions. Each run is kept (--trend). Exit 1 when a figure crosses
    its limit in config doctor_limits."""
    from memctl.review.doctor import run_doctor
    from memctl.review.doctor import trend as runs_of
    from memctl.review.doctor_plot import write_png
    from memctl.review.doctor_queries import read_queries

    st = state(ctx)
    if trend:
        with st.open_store(read_only=True) as store:
            rows = runs_of(store, last)
        if plot is not None:
            write_png(rows, plot, f"memctl doctor — {st.subdir}")
        doc = {"subdir": st.subdir, "runs": rows, "plot": str(plot) if plot else None}
        emit(st, doc, lambda c: _render_trend(c, rows))
        return
    asked = read_queries(queries) if queries is not None else None
    with st.open_store(actor="doctor", read_only=no_save) as store:
        bar = progress(st, None, "doctor: scoring memories")
        try:
            report = run_doctor(store, queries=asked, k=k, save=not no_save, progress=bar.update)
        finally:
            bar.close()
        rows = runs_of(store, last) if plot is not None else []
    if plot is not None:
        write_png(rows, plot, f"memctl doctor — {st.subdir}")
    doc = {"subdir": st.subdir, **report.to_dict(), "plot": str(plot) if plot else None}
    emit(st, doc, lambda c: _render_report(c, report))
    if report.crossed:
        if not st.json:
            for c in report.crossed:
                side = "below" if c["figure"] == "recall_at_k" else "above"
                sys.stderr.write(f"memctl: {c['figure']} {c['value']} is {side} its limit {c['limit']} ({c['key']})\n")
        raise typer.Exit(EXIT_LIMIT)


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f} %"


def _superseded(figure: dict[str, Any]) -> str:
    if figure["count"] is None:
        return f"- ({figure['reason']})"
    return f"{figure['count']} (kept for --as-of; prune --superseded-for D removes old ones)"


def _report_rows(f: dict[str, Any]) -> list[tuple[str, str]]:
    junk, dup, con = f["junk"], f["duplicates"], f["conflicts"]
    stale, never, recall = f["stale"], f["never_recalled"], f["recall"]
    if junk["count"] is None:
        junk_text = f"unavailable: {junk['reason']}"
    else:
        junk_text = f"{junk['count']} ({_pct(junk['share'])} of {junk['scored']} scored; {junk['uncertain']} uncertain)"
    if recall["at_k"] is None:
        recall_text = f"- ({recall['reason']})"
    else:
        recall_text = f"{recall['found']}/{recall['questions']} ({_pct(recall['at_k'])})"
        if recall["unanswerable"]:
            recall_text += f"; {recall['unanswerable']} expected memories not in the store"
    return [
        ("memories", f"{f['memories']} ({f['conversation']} conversation, {f['knowledge']} knowledge)"),
        ("likely junk", junk_text),
        (
            "near-duplicates",
            f"{dup['groups']} groups, {dup['memories']} memories, {dup['redundant']} redundant ({_pct(dup['share'])})",
        ),
        ("possible conflicts", f"{con['pairs']} pairs, {con['memories']} memories ({_pct(con['share'])})"),
        ("stale", f"{stale['count']} ({_pct(stale['share'])}; effective importance < {stale['below']:g})"),
        (
            "never recalled",
            f"{never['count']} ({_pct(never['share'])}; created {never['days']:g}+ days ago)"
            if never["tracked"]
            else f"- ({never['reason']})",
        ),
        ("superseded versions", _superseded(f["superseded"])),
        ("pending review", str(f["pending"]["count"])),
        (f"recall@{recall['k']}", recall_text),
    ]


def _render_report(console: Any, report: Any) -> None:
    from rich.console import Group

    rows = _report_rows(report.figures)
    run = f"run {report.run}" if report.run is not None else "not kept (--no-save)"
    parts: list[Any] = [table(("figure", "value"), rows, title=f"doctor — {run}, {report.figures['at'][:19]}")]
    if piped():
        console.print(parts[0])
        return
    worst = report.details.get("worst_junk") or []
    if worst:
        parts.append(
            table(
                ("id", "p(noise)", "text"),
                [(w["id"], f"{w['p_noise']:.2f}", w["text"]) for w in worst],
                title="likeliest junk",
                cut={"text": 90},
            )
        )
    missed = report.details.get("missed") or []
    if missed:
        parts.append(
            table(
                ("question", "expected", "in store"),
                [(m["question"], m["expected"], "yes" if m["in_store"] else "no") for m in missed],
                title="questions missed",
                cut={"question": 60, "expected": 40},
            )
        )
    if report.findings:
        parts.append("see them: memctl review list --kind junk|duplicate|conflict|stale")
    console.print(Group(*parts))


TREND_COLUMNS = (
    ("run", "run"),
    ("at", "at"),
    ("memories", "memories"),
    ("junk_share", "junk"),
    ("duplicate_share", "dup"),
    ("conflict_share", "conflict"),
    ("stale_share", "stale"),
    ("never_recalled_share", "never rec."),
    ("pending", "pending"),
    ("superseded", "superseded"),
    ("recall_at_k", "recall@k"),
)


def _trend_cell(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key == "at":
        return str(value)[:19]
    if key.endswith("_share") or key == "recall_at_k":
        return _pct(float(value))
    return str(value)


def _render_trend(console: Any, rows: list[dict[str, Any]]) -> None:
    if not rows:
        sys.stderr.write("memctl: no doctor run is kept in this store yet (run `memctl doctor`)\n")
        return
    cells = [[_trend_cell(key, r.get(key)) for key, _ in TREND_COLUMNS] for r in rows]
    if piped():
        console.print(table([key for key, _ in TREND_COLUMNS], cells))
        return
    console.print(table([label for _, label in TREND_COLUMNS], cells, title="doctor runs"))
    width = max(40, min(console.width, 120))
    sys.stdout.write(trend_chart(rows, width, 18) + "\n")


def trend_chart(rows: list[dict[str, Any]], width: int = 80, height: int = 18) -> str:
    """The shares over the runs, drawn with plotext for a terminal, one letter per share (J, D, C, S, N, R:
    readable without colour; colour off under NO_COLOR or into a pipe), the key below."""
    import os

    import plotext

    from memctl.review.doctor_plot import LETTERS, labels, series

    figure = plotext.figure
    figure.clear()
    figure.plot_size(width, height)
    drawn = series(rows)
    for label, xs, ys in drawn:
        signal = figure.signal(xs, ys, marker=LETTERS[label])
        signal.label(label)
        signal.lines(True)
        figure.draw(signal)
    figure.legend(False)  # plotext's box hides the lines behind it: the key goes below
    figure.ruler("y").lim(0, 1)
    figure.ruler("x").ticks(list(range(1, len(rows) + 1)), labels(rows))
    figure.title("doctor: shares per run")
    chart = str(figure.build().string(colorless=bool(os.environ.get("NO_COLOR")) or not sys.stdout.isatty()))
    key = "   ".join(f"{LETTERS[label]} {label}" for label, _, _ in drawn)
    return f"{chart}\n{key}"


def findings_table(items: list[Any], title: str) -> Any:
    """`review list --kind`: id, area, created, score, why it is there, text."""
    from memctl.cli.render import shown_time

    rows = [
        (
            i.memory.id,
            i.memory.area,
            shown_time(i.memory.created_at),
            "-" if i.finding.score is None else f"{i.finding.score:.2f}",
            i.finding.reason,
            i.memory.text if piped() else short(i.memory.text),
        )
        for i in items
    ]
    return table(("id", "area", "created", "score", "reason", "text"), rows, title=title, cut={"reason": 60})
