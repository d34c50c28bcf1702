"""Corpus readers shared by the fitting scripts and the benchmarks (not shipped in the package).

A corpus folder holds transcript JSON files (schema of ../shared/eval/transcripts plus "domain", "half",
"language"). `load_series` reads the stored memories and probes per series (bench/recall_probes.py,
scripts/fit_relevance.py); `load_half` the items and probes of a whole half (bench/multilingual.py,
scripts/fit_e5_centering.py); `read_writers` who wrote each tune domain (scripts/fit_gate.py,
scripts/fit_relevance.py: folds by writer).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

WORD = re.compile(r"\w+")


@dataclass
class Probe:
    query: str
    want: str | None  # the stored text that answers it; None = nothing should come back
    language: str = "en"


@dataclass
class Series:
    name: str
    memories: dict[str, str] = field(default_factory=dict)  # text -> area
    probes: list[Probe] = field(default_factory=list)


def words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def closest(want: str, stored: list[str]) -> str:
    """`want` itself if stored, else the stored text sharing most words with it (Jaccard)."""
    if want in stored:
        return want
    target = words(want)
    return max(stored, key=lambda s: len(target & words(s)) / (len(target | words(s)) or 1))


def load_series(folder: Path) -> list[Series]:
    """The corpus folder's series with their stored memories and probes (probe answers resolved)."""
    files = sorted(folder.glob("*.json"))
    if not files:
        raise SystemExit(f"no transcript JSON files in {folder}")
    by_series: dict[str, Series] = {}
    superseded: dict[str, set[str]] = defaultdict(set)
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "messages" not in data:
            continue
        name = data.get("series") or f"{path.stem}"
        series = by_series.setdefault(name, Series(name))
        language = data.get("language", "en")
        series.memories.update({t: "fragments" for t in data.get("expected_fragments", [])})
        series.memories.update({t: "solutions" for t in data.get("expected_solutions", [])})
        for update in data.get("updates", []):
            series.memories.setdefault(update["new"], "fragments")
            superseded[name].add(update["old"])
        probes = list(data.get("recall_probes", []))
        final = data.get("series_final_state") or {}
        series.memories.update({t: "fragments" for t in final.get("facts", [])})
        series.memories.update({t: "solutions" for t in final.get("solutions", [])})
        superseded[name].update(final.get("superseded", []))
        probes += final.get("probes", [])
        series.probes += [Probe(p["query"], p.get("should_recall"), p.get("language", language)) for p in probes]
    for name, series in by_series.items():
        for old in superseded[name]:
            series.memories.pop(old, None)
        stored = list(series.memories)
        for probe in series.probes:
            if probe.want is not None and stored:
                probe.want = closest(probe.want, stored)
    return list(by_series.values())  # a series with nothing stored still has (negative) probes


class configured:
    """Config overrides on an open store for the duration of a with-block."""

    def __init__(self, store, overrides: dict) -> None:
        self.store, self.overrides, self.saved = store, overrides, {}

    def __enter__(self):
        self.saved = {k: self.store.config.values[k] for k in self.overrides}
        self.store.config.values.update(self.overrides)

    def __exit__(self, *exc: object) -> None:
        self.store.config.values.update(self.saved)


def fill(store, memories: dict[str, str]) -> None:
    for area in ("fragments", "solutions"):
        texts = [t for t, a in memories.items() if a == area]
        if texts:
            store.add(texts, area=area)


CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def _grams(text: str) -> set[str]:
    """Latin words and CJK character pairs: enough to tell which stored item a probe names."""
    lowered = text.lower()
    grams = set(re.findall(r"[a-z0-9]+", lowered))
    for run in re.findall("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+", lowered):
        grams.update(run[i : i + 2] for i in range(max(1, len(run) - 1)))
    return grams


def load_half(folder: Path) -> tuple[list[str], list[tuple[str, str | None, str]]]:
    """(items to store, probes as (query, answer item or None, language))."""
    data = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]
    finals = {d["series_final_state"]["series"]: d["series_final_state"] for d in data if d.get("series_final_state")}
    items: dict[str, None] = {}
    superseded: set[str] = set()
    raw: list[tuple[str, str | None]] = []
    for d in data:
        final = finals.get(d.get("series"))
        if final:
            items.update(dict.fromkeys(final.get("facts", []) + final.get("solutions", [])))
            superseded.update(final.get("superseded", []))
        else:
            items.update(dict.fromkeys(d.get("expected_fragments", []) + d.get("expected_solutions", [])))
        superseded.update(u["old"] for u in d.get("updates", []))
        raw += [(p["query"], p.get("should_recall")) for p in d.get("recall_probes", [])]
        if d.get("series_final_state"):
            raw += [(p["query"], p.get("should_recall")) for p in d["series_final_state"].get("probes", [])]
    stored = list(items)
    probes = []
    for query, want in dict.fromkeys(raw):
        language = "zh" if CJK.search(query) else "en"
        if want is None:
            probes.append((query, None, language))
            continue
        if want in superseded and want not in items:
            continue
        answer = want if want in items else _closest(want, stored)
        if answer is not None:
            probes.append((query, answer, language))
    return stored, probes


def _closest(want: str, stored: list[str]) -> str | None:
    target = _grams(want)
    best = max(stored, key=lambda s: len(target & _grams(s)) / (len(target | _grams(s)) or 1))
    overlap = len(target & _grams(best)) / (len(target) or 1)
    return best if overlap >= 0.5 else None


def read_writers(path: Path) -> dict[str, str]:
    """domain -> writer, from eval/corpus/writers.json ({} when it is missing)."""
    if not path.is_file():
        return {}
    doc = json.loads(path.read_text(encoding="utf-8"))
    return {domain: writer for writer, domains in doc.items() if writer != "about" for domain in domains}
