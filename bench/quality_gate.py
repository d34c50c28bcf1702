#!/usr/bin/env python3
"""Score memctl's quality gate on the eval transcripts (../shared/eval/transcripts/).

    python3 bench/quality_gate.py [--embedder local|fake|none] [--dir PATH] [--json]

Every `expected_fragments` item should pass the gate and every `must_not_store` item should fail
it, except superseded values (also an `updates[].old`: true once, so only consolidation can drop
them). Grounding is on: each candidate is checked against its own transcript (the user's and the
tools' messages), with the configured embedder as the semantic fallback. Side by side: keeping
everything (no gate), and the form rules alone (no grounding). `expected_solutions` are scored
against the lighter solution gate as a third figure; the fourth offers each transcript the facts
of every other (unrelated) transcript, which it never mentions, and counts those gated `ungrounded`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._common import table  # noqa: E402
from memctl.quality import Grounding, check  # noqa: E402
from memctl.transcripts import parse_transcript  # noqa: E402

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared/eval/transcripts"


def load_cases(folder: Path) -> list[dict]:
    cases = []
    for path in sorted(folder.glob("t*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        data["_path"] = path
        cases.append(data)
    return cases


def embed_fn(kind: str):
    if kind == "none":
        return None
    from memctl.config import load_config
    from memctl.embeddings import make_embedder

    config = load_config(overrides={"embedding_provider": kind, "embedding_cache": False})
    embedder = make_embedder(config)
    return embedder.embed


def score(cases: list[dict], embed, grounded: bool) -> dict:
    kept, dropped, sol_kept = [], [], []
    missed_keep, missed_drop, missed_sol = [], [], []
    for case in cases:
        messages = parse_transcript(json.dumps(case["messages"]), case["id"])
        grounding = Grounding.from_messages(messages, embed=embed) if grounded else None
        superseded = {u["old"] for u in case.get("updates") or []}
        for text in case.get("expected_fragments") or []:
            verdict = check(text, "fragments", grounding)
            kept.append(verdict.ok)
            if not verdict.ok:
                missed_keep.append((case["id"], text, f"{verdict.reason}: {verdict.detail}"))
        for text in case.get("must_not_store") or []:
            if text in superseded:
                continue
            verdict = check(text, "fragments", grounding)
            dropped.append(not verdict.ok)
            if verdict.ok:
                missed_drop.append((case["id"], text, "passed"))
        for text in case.get("expected_solutions") or []:
            verdict = check(text, "solutions", grounding)
            sol_kept.append(verdict.ok)
            if not verdict.ok:
                missed_sol.append((case["id"], text, f"{verdict.reason}: {verdict.detail}"))
    foreign = foreign_facts(cases, embed) if grounded else (0, 0)
    return {"facts_kept": sum(kept), "facts": len(kept), "noise_dropped": sum(dropped), "noise": len(dropped),
            "foreign_gated": foreign[0], "foreign": foreign[1],
            "solutions_kept": sum(sol_kept), "solutions": len(sol_kept),
            "missed_facts": missed_keep, "missed_noise": missed_drop, "missed_solutions": missed_sol}


def foreign_facts(cases: list[dict], embed) -> tuple[int, int]:
    """Facts of *other* transcripts (other series) offered as candidates: invented, as far as this one
    knows. Returns (gated as ungrounded, offered)."""
    gated = offered = 0
    for case in cases:
        messages = parse_transcript(json.dumps(case["messages"]), case["id"])
        grounding = Grounding.from_messages(messages, embed=embed)
        for other in cases:
            if other is case or (case.get("series") and other.get("series") == case.get("series")):
                continue
            for text in other.get("expected_fragments") or []:
                offered += 1
                gated += check(text, "fragments", grounding).reason == "ungrounded"
    return gated, offered


def pct(a: int, b: int) -> float:
    return 100.0 * a / b if b else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--embedder", choices=("local", "fake", "none"), default="local",
                        help="semantic fallback of grounding (local = the packaged MiniLM)")
    parser.add_argument("--json", action="store_true", help="only the JSON line")
    args = parser.parse_args()
    cases = load_cases(args.dir)
    if not cases:
        print(f"no transcripts in {args.dir}", file=sys.stderr)
        return 1
    embed = embed_fn(args.embedder)
    start = time.perf_counter()
    gated = score(cases, embed, grounded=True)
    seconds = time.perf_counter() - start
    rules_only = score(cases, None, grounded=False)
    facts, noise = gated["facts"], gated["noise"]
    rows = [
        ["memctl gate (rules + grounding)", f"{pct(gated['facts_kept'], facts):.1f}",
         f"{pct(gated['noise_dropped'], noise):.1f}", f"{pct(gated['solutions_kept'], gated['solutions']):.1f}",
         f"{pct(gated['foreign_gated'], gated['foreign']):.1f}"],
        ["memctl rules only (no transcript)", f"{pct(rules_only['facts_kept'], facts):.1f}",
         f"{pct(rules_only['noise_dropped'], noise):.1f}",
         f"{pct(rules_only['solutions_kept'], rules_only['solutions']):.1f}", "0.0"],
        ["peer: no gate (keep everything)", "100.0", "0.0", "100.0", "0.0"],
    ]
    if not args.json:
        print(table(f"quality gate on {len(cases)} transcripts: {facts} facts, {noise} noise items "
                    f"(superseded values excluded), {gated['solutions']} solutions; embedder {args.embedder}",
                    ["gate", "facts kept %", "noise dropped %", "solutions kept %", "foreign facts gated %"],
                    rows))
        print(f"\ngate time with grounding: {seconds:.2f} s")
        for title, key in (("facts dropped", "missed_facts"), ("noise kept", "missed_noise"),
                           ("solutions dropped", "missed_solutions")):
            for tid, text, why in gated[key]:
                print(f"MISS {title}: [{tid}] {text} ({why})")
    print(json.dumps({"facts_kept_pct": round(pct(gated["facts_kept"], facts), 1),
                      "noise_dropped_pct": round(pct(gated["noise_dropped"], noise), 1),
                      "solutions_kept_pct": round(pct(gated["solutions_kept"], gated["solutions"]), 1),
                      "foreign_gated_pct": round(pct(gated["foreign_gated"], gated["foreign"]), 1),
                      "facts": facts, "noise": noise, "embedder": args.embedder,
                      "rules_only": {"facts_kept_pct": round(pct(rules_only["facts_kept"], facts), 1),
                                     "noise_dropped_pct": round(pct(rules_only["noise_dropped"], noise), 1)}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
