"""Recall probes as a user meets them: does `recall` / `load` at default settings return the stored answer,
and stay silent when nothing stored answers? Current scoring vs the new one, side by side in one run.

    python bench/recall_probes.py --corpus DIR [--corpus DIR ...] [--regression DIR] [--details]

For each corpus folder (transcript JSON files, schema of ../shared/eval/transcripts plus "domain",
"half", "language"), two kinds of store:
- series: one store per series (a transcript without a series is its own), holding the series' stored
  memories: its expected_fragments (area fragments), expected_solutions (area solutions) and the
  updates' new values, without the values an update or a series' final state supersedes;
- half: one store holding every memory of the folder (other domains as distractors).
Each probe goes through the real search path at default config: `recall` (memctl.recall.recall, the
block an agent gets: one search of memories and solutions, at most recall_max_result) and `load` (store.search
with search_limit, search_threshold, search_mode). A probe passes if its should_recall text (or, when
the probe shortens it, the stored memory sharing most words with it) is among the results; a negative
probe (should_recall null) passes if nothing comes back.
"plain" = the scoring before calibration (plain (1 + cosine) / 2, threshold 0.7); "new" = the defaults (the
shipped calibration and its threshold). "beside" = non-answers in the recall block beside a found answer, on
average.
With a shipped calibration it also prints, per corpus, the reliability table and expected calibration error of
the top 5 results of every probe on the series stores (each probe weighing 1): is a score of 0.7 right 7 times
in 10 on these domains.
The shared transcripts (--regression, default ../shared/eval/transcripts) are a regression set.
Real packaged model (all-MiniLM-L6-v2 unless configured otherwise), no LLM.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import table  # noqa: E402
from scripts.corpus import Probe, configured, fill, load_series  # noqa: E402
from scripts.fit_relevance import reliability  # noqa: E402

SHOWN = 5  # the results per question the reliability table counts (as in scripts/fit_relevance.py)

# The settings before calibration (config overrides, search tuning changes); "new" is the shipped defaults.
CURRENT: tuple[dict[str, object], dict[str, object]] = ({"search_threshold": 0.7}, {"calibrated": False})


def answers(store, query: str) -> tuple[list[str], list[str]]:
    """(recall block texts, load texts) at the store's current config."""
    from memctl.recall import recall

    got = recall(store, query)
    config = store.config
    loaded = store.search(query, limit=int(config["search_limit"]), mode=config["search_mode"])
    return [h.text for h in got.memories + got.solutions], [h.text for h in loaded]


@dataclass
class Tally:
    positive: int = 0
    negative: int = 0
    recall_found: int = 0
    load_found: int = 0
    recall_silent: int = 0
    load_silent: int = 0
    beside: int = 0
    misses: list[str] = field(default_factory=list)

    def add(self, probe: Probe, recalled: list[str], loaded: list[str]) -> None:
        if probe.want is None:
            self.negative += 1
            self.recall_silent += not recalled
            self.load_silent += not loaded
            if recalled or loaded:
                self.misses.append(f"negative not silent: {probe.query[:70]!r} -> {(recalled or loaded)[0][:60]!r}")
            return
        self.positive += 1
        self.recall_found += probe.want in recalled
        self.beside += (len(recalled) - 1) if probe.want in recalled else 0
        self.load_found += probe.want in loaded
        if probe.want not in recalled:
            self.misses.append(f"not recalled: {probe.query[:70]!r} (want {probe.want[:50]!r})")

    def row(self) -> list[object]:
        return [
            f"{self.recall_found}/{self.positive} ({pct(self.recall_found, self.positive)})",
            f"{self.load_found}/{self.positive} ({pct(self.load_found, self.positive)})",
            f"{self.recall_silent}/{self.negative} ({pct(self.recall_silent, self.negative)})",
            f"{self.load_silent}/{self.negative} ({pct(self.load_silent, self.negative)})",
            f"{self.beside / self.recall_found:.2f}" if self.recall_found else "-",
        ]


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f} %" if b else "-"


SETTINGS: dict[str, tuple[dict[str, object], dict[str, object]]] = {"plain": CURRENT, "new": ({}, {})}


@contextmanager
def setting(store, name: str):
    """The store under one of SETTINGS: its config overrides and its own search tuning."""
    from memctl.search.tuning import TUNING, tune

    overrides, tuning = SETTINGS[name]
    with configured(store, overrides):
        tune(store, **tuning)
        try:
            yield
        finally:
            store.search_tuning = TUNING


def evaluate(folder: Path, home: Path, label: str, details: bool, unrelated_too: bool) -> list[list[object]]:
    import memctl

    all_series = load_series(folder)
    tallies = {(layout, name): Tally() for layout in ("series", "half") for name in SETTINGS}
    unrelated = {name: [0, 0] for name in SETTINGS}  # [recall silent, asked]
    shown: list[tuple[float, int, float]] = []  # (score, answers, weight) of the top SHOWN of every probe
    by_language = {(lang, name): Tally() for lang in ("en", "zh", "mixed") for name in SETTINGS}
    slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:40]
    for number, series in enumerate(all_series):
        with memctl.open_store(home, f"{slug}-s{number}") as store:
            fill(store, series.memories)
            for name in SETTINGS:
                with setting(store, name):
                    for probe in series.probes:
                        recalled, loaded = answers(store, probe.query)
                        tallies["series", name].add(probe, recalled, loaded)
                        by_language.setdefault((probe.language, name), Tally()).add(probe, recalled, loaded)
                        if name == "new" and store.calibration() is not None:
                            top = store.search(probe.query, limit=SHOWN, threshold=0.0)
                            shown += [(h.score, int(h.text == probe.want), 1.0 / len(top)) for h in top]
                    if unrelated_too:  # another domain's questions: nothing here answers them
                        for other in all_series:
                            for probe in other.probes if other is not series else []:
                                unrelated[name][0] += not answers(store, probe.query)[0]
                                unrelated[name][1] += 1
    with memctl.open_store(home, f"{slug}-half") as store:
        memories: dict[str, str] = {}
        for series in all_series:
            memories.update(series.memories)
        fill(store, memories)
        for name in SETTINGS:
            with setting(store, name):
                for series in all_series:
                    for probe in series.probes:
                        tallies["half", name].add(probe, *answers(store, probe.query))
    n_memories = sum(len(s.memories) for s in all_series)
    rows = []
    for (layout, name), tally in tallies.items():
        rows.append(
            [
                label,
                f"{layout} ({len(all_series)} stores, {n_memories} memories)"
                if layout == "series"
                else f"half (1 store, {n_memories} memories)",
                name,
                *tally.row(),
            ]
        )
        if details and name == "new":
            for miss in tally.misses:
                print(f"[{label}, {layout}] {miss}", file=sys.stderr)
    for name, (silent, asked) in unrelated.items():
        if asked:
            rows.append(
                [
                    label,
                    "series, other series' probes (unrelated)",
                    name,
                    "",
                    "",
                    f"{silent}/{asked} ({pct(silent, asked)})",
                    "",
                    "",
                ]
            )
    for (lang, name), tally in by_language.items():
        if tally.positive + tally.negative and lang != "en":
            rows.append([label, f"series, language {lang} only", name, *tally.row()])
    if shown:  # is the score what it claims on these domains: each probe's top results, each probe weighing 1
        bands, ece = reliability(shown)
        print(f"{label}: expected calibration error {ece:.3f} (series stores, top {SHOWN} per probe); bands:")
        for band, (n, _, mean, share) in enumerate(bands):
            if n:
                low, high = band / 10, (band + 1) / 10
                print(f"  [{low:.1f}, {high:.1f}) {n:6d} results, mean score {mean:.3f}, answer {share:.3f}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, action="append", default=[], help="a corpus folder (repeatable)")
    parser.add_argument(
        "--regression",
        type=Path,
        default=Path(__file__).resolve().parents[2] / "shared/eval/transcripts",
        help="the shared transcripts (regression set); '-' to skip",
    )
    parser.add_argument(
        "--unrelated",
        action="store_true",
        help="also ask each series' store every other series' probes (recall should stay silent)",
    )
    parser.add_argument("--details", action="store_true", help="list the probes the new scoring fails (stderr)")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="memctl-bench-probes-"))
    rows: list[list[object]] = []
    for folder in args.corpus:
        rows += evaluate(folder, home, folder.name or str(folder), args.details, args.unrelated)
    if str(args.regression) != "-" and args.regression.is_dir():
        rows += evaluate(args.regression, home, "shared transcripts", args.details, args.unrelated)
    import memctl

    with memctl.open_store(home, "info") as store:
        model = store.config["embedding_model"]
        calibration = store.calibration()
        threshold = store.default_threshold()
    scoring = "calibrated" if calibration else "plain (1 + cos) / 2, no calibration shipped for this model"
    print(
        table(
            f"Recall probes at default settings ({model}; new = {scoring}, threshold {threshold}; "
            "plain = (1 + cos) / 2 at 0.7)",
            [
                "corpus",
                "stores",
                "scoring",
                "recall finds answer",
                "load finds answer",
                "recall silent on neg.",
                "load silent on neg.",
                "beside",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
