"""`memctl doctor --plot FILE`: the trend of the kept runs as a PNG (matplotlib, the optional extra `plot`).

Core only: the figures come from memctl.review.doctor.trend; the terminal chart (plotext) is drawn by the CLI.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from memctl.errors import MemctlError, UsageError

# The shares drawn (all in [0, 1], so one axis reads them all), with their labels and the letter that draws
# each on a terminal (read without colour too).
SHARES: tuple[tuple[str, str, str], ...] = (
    ("junk_share", "likely junk", "J"),
    ("duplicate_share", "near-duplicates", "D"),
    ("conflict_share", "possible conflicts", "C"),
    ("stale_share", "stale", "S"),
    ("never_recalled_share", "never recalled", "N"),
    ("recall_at_k", "recall@k", "R"),
)
LETTERS = {label: letter for _, label, letter in SHARES}


class MissingExtraError(MemctlError):
    """An optional dependency of one feature is not installed."""


def series(rows: list[dict[str, Any]]) -> list[tuple[str, list[int], list[float]]]:
    """(label, run positions, values) of each share some run measured (runs without it are left out)."""
    out = []
    for key, label, _ in SHARES:
        points = [(i, float(r[key])) for i, r in enumerate(rows, 1) if r.get(key) is not None]
        if points:
            out.append((label, [p[0] for p in points], [p[1] for p in points]))
    return out


def labels(rows: list[dict[str, Any]]) -> list[str]:
    """The x labels of the runs: `#run MM-DD`, with the time when two runs share a day."""
    days = [str(r["at"])[5:10] for r in rows]
    if len(set(days)) != len(days):
        days = [str(r["at"])[5:16].replace("T", " ") for r in rows]
    return [f"#{r['run']} {day}" for r, day in zip(rows, days, strict=True)]


def write_png(rows: list[dict[str, Any]], path: Path, title: str = "memctl doctor") -> None:
    """Draw the shares of `rows` (doctor.trend) over the runs into a PNG at `path` (written atomically)."""
    if not rows:
        raise UsageError("no doctor run is kept in this store yet: nothing to plot", hint="run `memctl doctor` first")
    if path.suffix.lower() != ".png":
        raise UsageError(f"--plot writes a PNG: {path} does not end in .png")
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display: a file only
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingExtraError(
            "--plot needs matplotlib, which is not installed",
            hint="pip install 'memctl[plot]' (the terminal chart of `memctl doctor --trend` needs nothing more)",
        ) from None
    from memctl.files import atomic_write_bytes

    figure, axes = plt.subplots(figsize=(9, 4.5), dpi=100)
    try:
        for label, xs, ys in series(rows):
            axes.plot(xs, ys, marker="o", label=label)
        axes.set_ylim(0.0, 1.0)
        axes.set_ylabel("share")
        axes.set_xticks(range(1, len(rows) + 1))
        axes.set_xticklabels(labels(rows), rotation=30, ha="right", fontsize=8)
        axes.set_title(title)
        axes.grid(alpha=0.3)
        axes.legend(loc="upper left", fontsize=8)
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
    finally:
        plt.close(figure)
    try:
        atomic_write_bytes(path, buffer.getvalue())
    except OSError as exc:
        raise MemctlError(f"cannot write {path}: {exc.strerror or exc}", hint="choose a writable place") from exc
