#!/usr/bin/env python3
"""End-to-end memory quality: labelled transcripts replayed through the real memorize pipeline.

    python3 bench/memory_quality.py [--corpus DIR] [--embedder local|fake] [--label NAME] [--json] [--misses]
                                    [--no-gate] [--pairs]

Each series of the corpus (transcripts sharing `series`; a transcript without one is its own series) is
replayed in id order into ONE new store through `memctl.memorize.pipeline.memorize_files`, with a scripted utility
model that does its part perfectly, so every figure is memctl's own decisions (gate, consolidation
safety, recall score):

- extraction returns EVERY labelled statement: `expected_fragments` and `must_not_store` as facts,
  `expected_solutions` as solutions;
- keywords: the statement's names and longest content words;
- consolidation answers like a perfect model: `update` (target: the shown old value, text: the new one)
  when an `updates` pair's old value is among the memories shown for its new value; `skip` when the
  candidate is already stored, or is an old value whose new value is shown; otherwise `keep_separate`.

Figures, one row per run (the corpus schema is in ../shared/eval/transcripts/README.md):
- facts kept: `expected_fragments` and `expected_solutions` stored at the end of their series (values
  superseded by a later update are not counted here, but under updates);
- noise kept out: `must_not_store` items (superseded values excluded) absent at the end;
- updates: `updates` pairs after which only the current value (the end of the chain) is stored;
  "with queue" counts the review queue as held too: the current value stored or waiting for review, and the
  old value neither stored nor waiting (a reviewer is not offered both);
- probes: `recall_probes` (and `series_final_state.probes`) with an answer, whose answer
  `memctl.recall.recall` returns at default settings (a shortened answer is matched to the labelled
  item sharing most words);
- negative probes silent: probes with `should_recall: null` for which recall returns nothing;
- unrelated memories exposed: memories shown to the consolidation model *that it may act on*
  (update) although they are neither the candidate's labelled old/new value nor the same text — the
  memories a wrong `update` from a real model could overwrite (lower is safer).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))  # after PYTHONPATH: `PYTHONPATH=/other/checkout` measures that checkout

from bench._common import table  # noqa: E402

DEFAULT_CORPUS = REPO.parent / "shared" / "eval" / "transcripts"
WORD = re.compile(r"\w+")


def norm(text: str) -> str:
    return " ".join(str(text).split())


def load_series(folder: Path) -> dict[str, list[dict]]:
    """series name -> its transcripts in id order (each with `_path`)."""
    series: dict[str, list[dict]] = defaultdict(list)
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "messages" not in data:
            continue
        data["_path"] = path
        series[data.get("series") or data.get("id") or path.stem].append(data)
    for cases in series.values():
        cases.sort(key=lambda c: str(c.get("id") or c["_path"].stem))
    return dict(series)


# --- the scripted utility model ------------------------------------------------------------------------


class PerfectModel:
    """Completion function for one series: extraction of every label, keywords, perfect consolidation."""

    def __init__(self, cases: list[dict], may_act_all_shown: bool, threshold: float) -> None:
        from memctl.llm import load_prompt

        self.systems = {
            load_prompt(p)[0].strip(): p
            for p in ("memorize_fragments", "memorize_solutions", "memorize_keywords", "consolidate")
        }
        self.facts = [
            [norm(t) for t in (c.get("expected_fragments") or []) + (c.get("must_not_store") or [])] for c in cases
        ]
        self.solutions = [[norm(t) for t in c.get("expected_solutions") or []] for c in cases]
        self.pairs = [(norm(u["old"]), norm(u["new"])) for c in cases for u in c.get("updates") or []]
        self.turn = {"memorize_fragments": 0, "memorize_solutions": 0}
        self.may_act_all_shown = may_act_all_shown  # this memctl shows only memories it may update
        self.threshold = threshold  # otherwise: those at or above consolidation_threshold
        self.exposed = 0  # unrelated memories the model could have updated
        self.shown_pairs = 0
        self.updates_asked = 0

    def split(self, messages: list[dict[str, str]]) -> tuple[str, str]:
        if messages[0]["role"] == "system":
            return self.systems[messages[0]["content"].strip()], messages[-1]["content"]
        content = messages[0]["content"]  # the system prompt folded into the user turn
        for system, name in self.systems.items():
            if content.startswith(system):
                return name, content[len(system) :]
        raise RuntimeError(f"unexpected prompt {content[:80]!r}")

    def __call__(self, messages: list[dict[str, str]]) -> str:
        name, message = self.split(messages)
        if name in self.turn:
            source = self.facts if name == "memorize_fragments" else self.solutions
            items = source[self.turn[name]] if self.turn[name] < len(source) else []
            self.turn[name] += 1
            return json.dumps(items, ensure_ascii=False)
        if name == "memorize_keywords":
            return json.dumps(keywords(message.split(":", 1)[-1]), ensure_ascii=False)
        return json.dumps(self.decide(message), ensure_ascii=False)

    def decide(self, message: str) -> dict:
        candidate = norm(message.split(":\n", 1)[1].split("\n\nMost similar", 1)[0])
        block = message.split("(index. [score] text):", 1)[-1]
        shown = [
            (float(score), norm(text))
            for _, score, text in sorted(
                re.findall(r"^(\d+)\. \[([0-9.]+)\] (.*)$", block, flags=re.MULTILINE), key=lambda m: int(m[0])
            )
        ]
        texts = [t for _, t in shown]
        related = (
            {candidate}
            | {o for o, n in self.pairs if candidate in parts(n)}
            | {p for o, n in self.pairs if o == candidate for p in parts(n)}
        )
        for score, text in shown:
            self.shown_pairs += 1
            if text not in related and (self.may_act_all_shown or score >= self.threshold):
                self.exposed += 1
        for old, new in self.pairs:
            if candidate in parts(new) and old in texts:
                self.updates_asked += 1
                return {
                    "action": "update",
                    "targets": [texts.index(old)],
                    "text": candidate,
                    "reason": "the value changed",
                }
        if candidate in texts:
            return {"action": "skip", "targets": [texts.index(candidate)], "reason": "already stored"}
        for old, new in self.pairs:
            current = [t for t in texts if t in parts(new)]
            if candidate == old and current:
                return {"action": "skip", "targets": [texts.index(current[0])], "reason": "a superseded value"}
        return {"action": "keep_separate", "targets": [], "reason": "a different fact"}


def parts(value: str) -> list[str]:
    """A labelled new value, and the statements it joins with '; ' (extracted one by one)."""
    return [value] + [p.strip() for p in value.split("; ") if p.strip()]


def keywords(text: str) -> list[str]:
    """Names first, then the longest words: what a keyword model would answer."""
    from memctl.memorize.grounding import key_entities

    names = key_entities(text)
    longest = sorted({w for w in WORD.findall(text) if len(w) > 3}, key=lambda w: (-len(w), w))
    return list(dict.fromkeys(names + longest))[:4] or [text[:60]]


# --- scoring ------------------------------------------------------------------------------------------


def words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def closest(want: str, items: list[str]) -> str:
    """The labelled item a (possibly shortened) probe answer names."""
    want = norm(want)
    if want in items or not items:
        return want
    target = words(want)
    return max(items, key=lambda s: len(target & words(s)) / (len(target | words(s)) or 1))


def final_value(value: str, pairs: list[tuple[str, str]]) -> str:
    seen = {value}
    changed = True
    while changed:
        changed = False
        for old, new in pairs:
            if old == value and new not in seen:
                value, changed = new, True
                seen.add(new)
    return value


def score_series(
    store, cases: list[dict], model: PerfectModel, misses: list[str], fates: dict[str, str] | None = None
) -> dict[str, int]:
    from memctl.recall import recall

    stored = {norm(m.text) for m, _ in store.iter_all()}
    waiting = pending_texts(store)  # in review state: not lost, not returned by recall
    pairs = model.pairs
    olds = {o for o, _ in pairs}
    out = defaultdict(int)
    facts = [norm(t) for c in cases for t in (c.get("expected_fragments") or []) + (c.get("expected_solutions") or [])]
    for fact in dict.fromkeys(facts):
        if fact in olds:
            continue
        out["facts"] += 1
        out["facts_kept"] += fact in stored or fact in waiting
        out["facts_pending"] += fact in waiting
        if fact not in stored and fact not in waiting:
            misses.append(f"fact dropped: {fact}")
    for noise in dict.fromkeys(norm(t) for c in cases for t in c.get("must_not_store") or []):
        if noise in olds:
            continue
        out["noise"] += 1
        out["noise_out"] += noise not in stored
        out["noise_pending"] += noise in waiting
        if noise in stored:
            misses.append(f"noise kept: {noise}")
    for old, new in dict.fromkeys(pairs):
        current = final_value(new, pairs)
        out["updates"] += 1
        good = old not in stored and (current in stored or all(p in stored for p in parts(current)[1:]))
        out["updates_ok"] += good
        held = stored | waiting  # the queue too: a reviewer must not be offered the old value beside the new
        queue_ok = old not in held and (current in held or all(p in held for p in parts(current)[1:]))
        out["updates_ok_with_queue"] += queue_ok
        if good and not queue_ok:
            misses.append(f"update left the old value waiting in review: {old!r} -> {current!r}")
        if not good:
            why = "; ".join(
                f"{p[:30]!r}: {(fates or {}).get(p, 'never extracted')}" for p in [old, *parts(current)[1:]]
            )
            misses.append(
                f"update left {'both' if old in stored and current in stored else 'wrong state'}: "
                f"{old!r} -> {current!r} ({why})"
            )
    labelled = list(dict.fromkeys(facts + [n for _, n in pairs]))
    probes = [p for c in cases for p in c.get("recall_probes") or []]
    probes += [p for c in cases for p in (c.get("series_final_state") or {}).get("probes") or []]
    for probe in probes:
        if "should_recall" not in probe:
            continue
        result = recall(store, probe["query"])
        returned = [norm(h.text) for h in result.memories + result.solutions]
        if probe["should_recall"] is None:
            out["negatives"] += 1
            out["negatives_silent"] += not returned
            if returned:
                misses.append(f"negative probe answered: {probe['query']!r} -> {returned[0]!r}")
            continue
        want = final_value(closest(probe["should_recall"], labelled), pairs)
        out["probes"] += 1
        hit = any(p in returned for p in parts(want))
        out["probes_recalled"] += hit
        out["others_in_block"] += sum(1 for r in returned if r not in parts(want))
        if not hit:
            misses.append(f"probe missed: {probe['query']!r} (wants {want[:70]!r})")
    return dict(out)


def pending_texts(store) -> set[str]:
    """Texts waiting in the store's review state (none on a memctl without one)."""
    if not hasattr(store, "pending_items"):
        return set()
    return {norm(item.text) for item in store.pending_items(limit=100_000, offset=0)}


class _Pass:
    ok, pending, reason, detail, p_noise = True, False, None, "", None


def bypass_gate() -> None:
    """--no-gate: every candidate passes the quality gate, so the figures isolate consolidation and recall."""
    import memctl.memorize.pipeline

    if not callable(getattr(memctl.memorize.pipeline, "check", None)):
        raise SystemExit("memory_quality: this memctl's memorize has no `check` gate to bypass")
    memctl.memorize.pipeline.check = lambda *args, **kwargs: _Pass()  # type: ignore[attr-defined]


def run(corpus: Path, embedder: str, misses: list[str]) -> dict:
    import memctl
    from memctl.llm import UtilityModel
    from memctl.memorize.consolidate import Consolidator
    from memctl.memorize.pipeline import memorize_files

    series = load_series(corpus)
    if not series:
        raise SystemExit(f"no transcripts in {corpus}")
    total: dict[str, int] = defaultdict(int)
    exposed = shown = asked = 0
    transcripts = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as home:
        for number, (name, cases) in enumerate(series.items()):
            overrides = {"embedding_provider": embedder, "utility_model": "scripted/perfect"}
            with memctl.open_store(home, f"s{number}", overrides=overrides) as store:
                model = PerfectModel(
                    cases, hasattr(Consolidator, "may_act"), float(store.config["consolidation_threshold"])
                )
                llm = UtilityModel(store.config, completion=model)
                report = memorize_files(store, [c["_path"] for c in cases], llm)
                fates = {norm(o.text): f"{o.fate} ({o.reason[:60]})" for t in report.transcripts for o in t.candidates}
                found: list[str] = []
                for key, value in score_series(store, cases, model, found, fates).items():
                    total[key] += value
                misses += [f"[{name}] {m}" for m in found]
                exposed, shown, asked = exposed + model.exposed, shown + model.shown_pairs, asked + model.updates_asked
            transcripts += len(cases)
    return {
        **total,
        "series": len(series),
        "transcripts": transcripts,
        "unrelated_exposed": exposed,
        "shown": shown,
        "updates_asked": asked,
        "seconds": round(time.perf_counter() - started, 1),
    }


def update_safety(corpus: Path, embedder: str, as_json: bool) -> int:
    """--pairs: how well the update safety separates labelled update pairs (old value, new statement) from
    every other pair of statements of the same series (what a wrong `update` could overwrite), for a grid
    of vector thresholds, with and without the keyword route. How consolidation_threshold and
    consolidation_keyword_overlap were chosen (on the tune half only)."""
    import itertools

    from memctl.config import load_config
    from memctl.embeddings import make_embedder
    from memctl.memorize.consolidate import keyword_evidence

    embed = make_embedder(load_config(overrides={"embedding_provider": embedder})).embed
    positives, negatives = [], []
    for cases in load_series(corpus).values():
        pairs = [(norm(u["old"]), norm(u["new"])) for c in cases for u in c.get("updates") or []]
        true = {(o, p) for o, n in pairs for p in (parts(n)[1:] if len(parts(n)) > 2 else [n])}
        texts = list(
            dict.fromkeys(
                [norm(t) for c in cases for t in (c.get("expected_fragments") or []) + (c.get("must_not_store") or [])]
                + [x for pair in true for x in pair]
            )
        )
        vectors = embed(texts)
        at = {t: i for i, t in enumerate(texts)}
        for a, b in itertools.combinations(texts, 2):
            relevance = (1.0 + float(vectors[at[a]] @ vectors[at[b]])) / 2.0
            shared, share = keyword_evidence(a, b)
            bucket = positives if (a, b) in true or (b, a) in true else negatives
            bucket.append((relevance, shared, share))
    rows = []
    for threshold in (0.7, 0.75, 0.8, 0.85, 0.9):
        for overlap in (None, 0.5, 0.6, 0.7):

            def acts(p: tuple[float, int, float], t: float = threshold, o: float | None = overlap) -> bool:
                return p[0] >= t or (o is not None and p[1] >= 2 and p[2] >= o)

            rows.append(
                [threshold, "off" if overlap is None else overlap, sum(map(acts, positives)), sum(map(acts, negatives))]
            )
    if as_json:
        print(
            json.dumps(
                {
                    "corpus": str(corpus),
                    "update_pairs": len(positives),
                    "other_pairs": len(negatives),
                    "grid": [
                        dict(zip(("threshold", "keyword_overlap", "pairs_kept", "others_exposed"), r, strict=True))
                        for r in rows
                    ],
                }
            )
        )
    else:
        print(
            table(
                f"update safety on {corpus}: {len(positives)} labelled update pairs, {len(negatives)} other "
                f"pairs of statements in the same series",
                [
                    "consolidation_threshold",
                    "consolidation_keyword_overlap",
                    "update pairs it may update",
                    "other pairs it may update",
                ],
                rows,
            )
        )
    return 0


def pct(a: int, b: int) -> str:
    return f"{a}/{b} ({100.0 * a / b:.0f} %)" if b else "-"


def git_label() -> str:
    """branch@commit of the checkout whose memctl is measured (not necessarily this file's)."""
    import memctl

    checkout = Path(memctl.__file__).resolve().parents[1]
    try:
        branch = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "--abbrev-ref", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        commit = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        return f"{branch}@{commit}"
    except (OSError, subprocess.CalledProcessError):
        return "memctl"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="folder of labelled transcripts")
    parser.add_argument(
        "--embedder",
        choices=("local", "fake"),
        default="local",
        help="local = the default model, multilingual-e5-small (what users get); fake = deterministic test embedder",
    )
    parser.add_argument("--label", default=None, help="row name (default: git branch@commit)")
    parser.add_argument("--json", action="store_true", help="only the JSON document")
    parser.add_argument("--misses", action="store_true", help="list every miss (stderr)")
    parser.add_argument("--totals", action="store_true", help="totals only, no misses (the frozen report half)")
    parser.add_argument(
        "--pairs",
        action="store_true",
        help="instead: the update-safety grid (labelled update pairs vs other same-series pairs)",
    )
    parser.add_argument(
        "--no-gate",
        action="store_true",
        help="let every candidate pass the quality gate (isolates consolidation and recall)",
    )
    args = parser.parse_args()
    if not args.corpus.is_dir():
        print(f"memory_quality: no corpus folder {args.corpus}", file=sys.stderr)
        return 2
    if args.pairs:
        return update_safety(args.corpus, args.embedder, args.json)
    if args.no_gate:
        bypass_gate()
    misses: list[str] = []
    figures = run(args.corpus, args.embedder, misses)
    label = (args.label or git_label()) + (" (no gate)" if args.no_gate else "")
    doc = {"label": label, "corpus": str(args.corpus), "embedder": args.embedder, **figures}
    if not args.totals:
        doc["misses"] = misses
    if args.misses and not args.totals:
        for miss in misses:
            print(miss, file=sys.stderr)
    if args.json:
        print(json.dumps(doc, ensure_ascii=False))
        return 0
    f = figures
    print(
        table(
            f"memory quality: {f['transcripts']} transcripts in {f['series']} series from {args.corpus} "
            f"(scripted perfect utility model, embedder {args.embedder}, {f['seconds']} s)",
            [
                "run",
                "facts kept",
                "noise kept out",
                "updates: only current value",
                "updates, with queue",
                "probes recalled",
                "negative probes silent",
                "others in block (mean)",
                "facts pending",
                "unrelated memories exposed to update",
            ],
            [
                [
                    label,
                    pct(f.get("facts_kept", 0), f.get("facts", 0)),
                    pct(f.get("noise_out", 0), f.get("noise", 0)),
                    pct(f.get("updates_ok", 0), f.get("updates", 0)),
                    pct(f.get("updates_ok_with_queue", 0), f.get("updates", 0)),
                    pct(f.get("probes_recalled", 0), f.get("probes", 0)),
                    pct(f.get("negatives_silent", 0), f.get("negatives", 0)),
                    f"{f.get('others_in_block', 0) / max(1, f.get('probes', 0)):.2f}",
                    pct(f.get("facts_pending", 0), f.get("facts", 0)),
                    f"{f['unrelated_exposed']} of {f['shown']} shown",
                ]
            ],
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
