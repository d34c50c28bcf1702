"""The one renderer: a stable JSON document under --json, Rich tables otherwise; diagnostics to stderr."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from memctl.cli.state import State


def emit(
    state: State,
    document: dict[str, Any],
    human: Callable[[Any], object] | None = None,
    essential: Iterable[str] | None = None,
) -> None:
    """Print `document` as JSON, or call `human(console)` to draw it for people. Under --quiet only
    the `essential` lines are printed (a dry run's ids: what it would change is its whole answer)."""
    if state.json:
        sys.stdout.write(to_json(document) + "\n")
        sys.stdout.flush()
        return
    if state.quiet:
        for line in essential or ():
            sys.stdout.write(line + "\n")
        return
    if human is not None:
        human(console())


# Characters JSON allows raw inside strings but that many line readers (Python's splitlines, some
# editors and JavaScript before ES2019) take for line ends: escaped, so one document stays one line.
_LINE_BREAKERS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def to_json(document: Any) -> str:
    """Strict JSON on one line: a non-finite float (NaN/Infinity are not JSON) becomes null."""
    try:
        text = json.dumps(document, ensure_ascii=False, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(document), ensure_ascii=False, allow_nan=False)
    return text.translate(_LINE_BREAKERS)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def console(stderr: bool = False) -> Any:
    from rich.console import Console

    # Rich turns colour off itself when the stream is not a TTY or NO_COLOR is set. Soft wrap for a
    # pipe or file: lines are neither wrapped nor cropped at Rich's assumed 80 columns.
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, highlight=False, soft_wrap=not stream.isatty())


def info(state: State, message: str) -> None:
    """A diagnostic line on stderr (silenced by --quiet)."""
    if not state.quiet:
        sys.stderr.write(message + "\n")


def count(number: int, noun: str, plural: str | None = None) -> str:
    """`1 memory`, `2 memories`, `0 entries`: the noun agrees with the number."""
    many = plural or (noun[:-1] + "ies" if noun.endswith("y") else noun + "s")
    return f"{number} {noun if number == 1 else many}"


def these(number: int, noun: str) -> str:
    """What a question points at: `this memory`, `these 2 memories`."""
    return f"this {noun}" if number == 1 else f"these {count(number, noun)}"


def short(text: str, width: int = 100) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


class PlainLines:
    """Lines printed exactly as they are: no wrapping at the console width, no markup, nothing cut."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.segment import Segment

        for line in self.lines:
            yield Segment(line)
            yield Segment.line()


def _cell(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def piped() -> bool:
    """stdout is a pipe or a file: records go out tab-separated, never as a box table."""
    return not sys.stdout.isatty()


def table(
    columns: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    title: str | None = None,
    cut: dict[str, int] | None = None,
    header: bool = True,
) -> Any:
    """Every table the CLI draws: Rich on a terminal (cells of the columns in `cut` shortened to that
    width); into a pipe or file, a header line then one tab-separated record per line, every cell whole
    (tab, newline and backslash escaped) and no title: `cut`, `sort` and `awk` read it as it is."""
    if piped():
        return PlainLines(["\t".join(columns), *("\t".join(_cell(str(c)) for c in row) for row in rows)])
    from rich.table import Table
    from rich.text import Text

    widths = cut or {}
    drawn = Table(title=title, show_header=header, title_justify="left" if not header else "center")
    for column in columns:
        drawn.add_column(column, overflow="fold")
    for row in rows:
        # Text, not str: a memory holding "[red]" is shown as written, not read as Rich markup.
        cells = [short(str(c), widths[n]) if n in widths else str(c) for n, c in zip(columns, row, strict=True)]
        drawn.add_row(*(Text(cell) for cell in cells))
    return drawn


_FRACTION = re.compile(r"(?<=T\d\d:\d\d:\d\d)\.\d+")


def shown_time(value: str | None) -> str:
    """A stored timestamp as tables show it: to the second, with its zone (`2025-03-01T07:00:00+00:00`)."""
    return _FRACTION.sub("", value or "", count=1)


def memory_rows(memories: Iterable[Any], *, score: bool = False) -> PlainLines:
    """Tab-separated records for pipes (`cut`, `sort`, `awk`): a header line, then one memory per line,
    the text whole (tab, newline and backslash escaped as \\t, \\n, \\\\)."""
    lines = ["\t".join(["id", "area", *(["score"] if score else []), "created", "text"])]
    for m in memories:
        cells = [m.id, m.area, *([f"{m.score:.3f}"] if score else []), shown_time(m.created_at), m.text]
        lines.append("\t".join(_cell(str(c)) for c in cells))
    return PlainLines(lines)


def memory_table(memories: Iterable[Any], *, score: bool = False, title: str | None = None) -> Any:
    """A table for people on a terminal; plain tab-separated records when stdout is a pipe or file."""
    if piped():
        return memory_rows(memories, score=score)
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, show_lines=False, expand=False)
    table.add_column("id", no_wrap=True, style="cyan")
    table.add_column("area", no_wrap=True)
    if score:
        table.add_column("score", justify="right", no_wrap=True)
    table.add_column("created", no_wrap=True)
    table.add_column("text", overflow="fold")
    for m in memories:
        row = [m.id, m.area] + ([f"{m.score:.3f}"] if score else []) + [shown_time(m.created_at), short(m.text)]
        table.add_row(*(Text(cell) for cell in row))
    return table


def progress(state: State, total: int | None, description: str, show: bool = True) -> Any:
    """A Rich progress bar on a TTY (stderr); a no-op object otherwise (or when not `show`)."""
    if not show or state.quiet or state.json or not sys.stderr.isatty():
        return _NoProgress()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn(description),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console(stderr=True),
        transient=True,
    )
    bar.start()
    task = bar.add_task(description, total=total)
    return _RichProgress(bar, task)


class _NoProgress:
    def update(self, done: int, total: int | None = None) -> None:
        pass

    def close(self) -> None:
        pass


class _RichProgress:
    def __init__(self, bar: Any, task: Any) -> None:
        self.bar, self.task = bar, task

    def update(self, done: int, total: int | None = None) -> None:
        self.bar.update(self.task, completed=done, total=total)

    def close(self) -> None:
        self.bar.stop()
