"""Does re-ranking recall by importance and recency help or hurt? Weights off vs on, side by side in one run.

    python bench/importance_ranking.py --corpus DIR [--corpus DIR ...] [--weight W] [--half-life DAYS]
                                       [--grid] [--details]

For each corpus folder (transcript JSON files, schema of ../shared/eval/transcripts plus "domain",
"half", "language") stores are built the way memctl would have filled them over time:
- every memory a transcript should leave (expected_fragments, expected_solutions, updates' new
  values, series_final_state facts/solutions) gets the importance memorize assigns it
  (memctl.memorize.importance.Rater over that transcript's user messages) and a created_at/updated_at spread
  over the past year: each series starts on a (seeded) random day, its transcripts follow in file
  order a few weeks apart, so later values are newer;
- layouts: "series" (one store per series, superseded values removed), "half" (one store with
  every memory of the folder: other domains as distractors), and "history" (one store per series
  that still holds the superseded values, older, next to the values that replaced them: the case
  where recency should put the newer value first).
Each probe (recall_probes, series_final_state probes) goes through memctl.recall.recall at default
settings except the ranking keys. A probe passes if its should_recall text (or the stored memory
sharing most words with it) is in the recall block; a negative probe (should_recall null) passes if
the block is empty (re-ranking never changes that: it only re-orders what passed the threshold).
"newer first" (history layout): among probes whose answer replaced an older value that is also in
the block, the share where the newer one comes first.
Real packaged model, no LLM. Tune --weight/--half-life on the tune half only (--grid prints several).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import table  # noqa: E402

WORD = re.compile(r"\w+")
NOW = datetime(2026, 12, 1, tzinfo=UTC)


@dataclass
class Stored:
    text: str
    area: str
    importance: float
    when: datetime


@dataclass
class Probe:
    query: str
    want: str | None
    replaced: list[str] = field(default_factory=list)  # older values of `want`


@dataclass
class Series:
    name: str
    memories: dict[str, Stored] = field(default_factory=dict)
    superseded: dict[str, Stored] = field(default_factory=dict)
    probes: list[Probe] = field(default_factory=list)
    replaced_by: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # new -> [old]


def words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def closest(want: str, stored: list[str]) -> str:
    if want in stored:
        return want
    target = words(want)
    return max(stored, key=lambda s: len(target & words(s)) / (len(target | words(s)) or 1))


def load_series(folder: Path, seed: int) -> list[Series]:
    from memctl.memorize.importance import Rater

    rng = random.Random(seed)
    files = sorted(folder.glob("*.json"))
    if not files:
        raise SystemExit(f"no transcript JSON files in {folder}")
    by_series: dict[str, Series] = {}
    position: dict[str, int] = defaultdict(int)
    start: dict[str, datetime] = {}
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "messages" not in data:
            continue
        name = data.get("series") or path.stem
        series = by_series.setdefault(name, Series(name))
        start.setdefault(name, NOW - timedelta(days=rng.uniform(120, 365)))
        when = start[name] + timedelta(days=35 * position[name] + rng.uniform(0, 5))
        position[name] += 1
        rater = Rater([m["content"] for m in data["messages"] if m.get("role") == "user"])

        def keep(text: str, area: str, series: Series = series, rater: Rater = rater, when: datetime = when) -> None:
            old = series.memories.get(text)
            if old is None or old.when < when:  # restated later: newer date, this transcript's rating
                series.memories[text] = Stored(text, area, rater.rate(text, area).value, when)

        for text in data.get("expected_fragments", []):
            keep(text, "fragments")
        for text in data.get("expected_solutions", []):
            keep(text, "solutions")
        for update in data.get("updates", []):
            keep(update["new"], "fragments")
            series.replaced_by[update["new"]].append(update["old"])
            if update["old"] in series.memories:
                series.superseded[update["old"]] = series.memories[update["old"]]
        final = data.get("series_final_state") or {}
        for text in final.get("facts", []):
            keep(text, "fragments")
        for text in final.get("solutions", []):
            keep(text, "solutions")
        probes = list(data.get("recall_probes", [])) + list(final.get("probes", []))
        series.probes += [Probe(p["query"], p.get("should_recall")) for p in probes]
        for old in final.get("superseded", []):
            if old in series.memories:
                series.superseded[old] = series.memories[old]
    for series in by_series.values():
        for old in list(series.superseded):
            series.memories.pop(old, None)
        stored = list(series.memories)
        for probe in series.probes:
            if probe.want is not None and stored:
                probe.want = closest(probe.want, stored)
                probe.replaced = [o for o in series.replaced_by.get(probe.want, []) if o in series.superseded]
    return list(by_series.values())


def fill(store, memories: list[Stored]) -> None:
    if not memories:
        return
    vectors = store.embedder.embed([m.text for m in memories])
    records = [
        {
            "text": m.text,
            "area": m.area,
            "created_at": m.when.isoformat(timespec="milliseconds"),
            "updated_at": m.when.isoformat(timespec="milliseconds"),
            "metadata": {"importance": m.importance},
        }
        for m in memories
    ]
    store.insert_records(records, vectors, store.embedder.info, actor="bench", op="import")


@dataclass
class Tally:
    positive: int = 0
    found: int = 0
    negative: int = 0
    silent: int = 0
    pairs: int = 0
    newer_first: int = 0
    misses: list[str] = field(default_factory=list)

    def add(self, probe: Probe, block: list[str]) -> None:
        if probe.want is None:
            self.negative += 1
            self.silent += not block
            return
        self.positive += 1
        self.found += probe.want in block
        if probe.want not in block:
            self.misses.append(f"not recalled: {probe.query[:70]!r} (want {probe.want[:50]!r})")
        older = [o for o in probe.replaced if o in block]
        if probe.want in block and older:
            self.pairs += 1
            self.newer_first += all(block.index(probe.want) < block.index(o) for o in older)

    def row(self) -> list[str]:
        return [
            f"{self.found}/{self.positive} ({pct(self.found, self.positive)})",
            f"{self.silent}/{self.negative} ({pct(self.silent, self.negative)})",
            f"{self.newer_first}/{self.pairs} ({pct(self.newer_first, self.pairs)})" if self.pairs else "-",
        ]


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f} %" if b else "-"


def block(store, query: str) -> list[str]:
    from memctl.recall import recall

    got = recall(store, query)
    return [h.text for h in got.memories] + [h.text for h in got.solutions]


def evaluate(folder: Path, home: Path, settings: dict[str, dict], seed: int, details: bool) -> list[list[object]]:
    import memctl

    all_series = load_series(folder, seed)
    tallies: dict[tuple[str, str], Tally] = {
        (layout, name): Tally() for layout in ("series", "half", "history") for name in settings
    }
    slug = re.sub(r"[^a-z0-9]+", "-", folder.name.lower()).strip("-")[:30] or "corpus"
    for number, series in enumerate(all_series):
        for layout, memories in (
            ("series", list(series.memories.values())),
            ("history", list(series.memories.values()) + list(series.superseded.values())),
        ):
            if layout == "history" and not series.superseded:
                continue
            with memctl.open_store(home, f"{slug}-{layout}-{number}") as store:
                fill(store, memories)
                for name, overrides in settings.items():
                    store.config.values.update(overrides)
                    for probe in series.probes:
                        tallies[layout, name].add(probe, block(store, probe.query))
    with memctl.open_store(home, f"{slug}-half") as store:
        fill(store, [m for s in all_series for m in s.memories.values()])
        for name, overrides in settings.items():
            store.config.values.update(overrides)
            for series in all_series:
                for probe in series.probes:
                    tallies["half", name].add(probe, block(store, probe.query))
    count = sum(len(s.memories) for s in all_series)
    rows = []
    for (layout, name), tally in tallies.items():
        if not tally.positive + tally.negative:
            continue
        where = {
            "series": f"series ({len(all_series)} stores, {count} memories)",
            "half": f"half (1 store, {count} memories)",
            "history": "history (series stores keeping superseded values)",
        }[layout]
        rows.append([folder.name, where, name, *tally.row()])
        if details:
            for miss in tally.misses:
                print(f"[{folder.name}, {layout}, {name}] {miss}", file=sys.stderr)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, action="append", default=[], help="a corpus folder (repeatable)")
    parser.add_argument(
        "--weight",
        type=float,
        default=None,
        help="rank_importance_weight for 'on' (default: the configured one if > 0, else 0.2)",
    )
    parser.add_argument(
        "--half-life", type=float, default=None, help="rank_recency_half_life for 'on' (default: the configured one)"
    )
    parser.add_argument("--grid", action="store_true", help="several weights and half-lives (for the tune half)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the dates spread over the year")
    parser.add_argument("--details", action="store_true", help="list missed probes (stderr)")
    args = parser.parse_args()
    if not args.corpus:
        parser.error("give at least one --corpus DIR")
    import memctl

    home = Path(tempfile.mkdtemp(prefix="memctl-bench-importance-"))
    with memctl.open_store(home, "info") as store:
        configured = {k: store.config[k] for k in ("rank_importance_weight", "rank_recency_half_life")}
        model = store.config["embedding_model"]
    weight = args.weight if args.weight is not None else (configured["rank_importance_weight"] or 0.2)
    half_life = args.half_life if args.half_life is not None else configured["rank_recency_half_life"]
    settings: dict[str, dict] = {"off": {"rank_importance_weight": 0.0}}
    if args.grid:
        for w in (0.1, 0.2, 0.3, 0.5):
            for h in (0.0, 90.0, 365.0):
                settings[f"w={w} hl={h:g}"] = {"rank_importance_weight": w, "rank_recency_half_life": h}
    else:
        settings[f"on (w={weight} hl={half_life:g})"] = {
            "rank_importance_weight": weight,
            "rank_recency_half_life": half_life,
        }
    rows: list[list[object]] = []
    for folder in args.corpus:
        rows += evaluate(folder, home, settings, args.seed, args.details)
    print(
        table(
            f"Recall with the importance/recency re-ranking off and on ({model}, recall defaults otherwise)",
            ["corpus", "stores", "ranking", "recall finds answer", "silent on negatives", "newer first"],
            rows,
        )
    )
    keys = ["corpus", "stores", "ranking", "recall", "silent_on_negatives", "newer_first"]
    print(
        json.dumps(
            {
                "bench": "importance_ranking",
                "model": model,
                "rows": [dict(zip(keys, map(str, row), strict=True)) for row in rows],
            },
            ensure_ascii=False,
        )
    )


if __name__ == "__main__":
    main()
