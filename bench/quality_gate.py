#!/usr/bin/env python3
"""Score memctl's quality gate on labelled transcripts, side by side with the gate it replaced and a peer.

    python3 bench/quality_gate.py [--corpus DIR] [--embedder local|fake|none] [--json]

DIR: the shared transcripts (default, ../shared/eval/transcripts), eval/corpus/tune or
eval/corpus/report. Every `expected_fragments` item should pass the gate, every `must_not_store`
item should fail it except superseded values (also an `updates[].old`: true once, so only
consolidation can drop them), and every `expected_solutions` item should pass the solutions gate.
Grounding is on for every gate that has it: each candidate is checked against its own transcript,
with the chosen embedder as the semantic fallback.

Side by side in one run:
- memctl gate: the rules measured >= 0.97 precise on the tune half (memctl/data/gate.json) + grounding;
- memctl classifier: the learned gate of scripts/train_gate.py (shown when its weights are shipped
  and the embedder is `local`, the model it was trained on);
- main before: the rules as they were on main before (bench/legacy_quality.py) + its grounding;
- Agent Zero-style strict: keeps a statement only if it has a subject word and a relation word;
- no gate: keeps everything.
Then each rule of the memctl gate alone on this corpus (precision, drops), and what it got wrong.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import legacy_quality  # noqa: E402
from bench._common import table  # noqa: E402
from bench._gate_corpus import SHARED, Item, all_items, load_cases, measure_rules  # noqa: E402
from memctl import quality  # noqa: E402
from memctl.transcripts import parse_transcript  # noqa: E402

# A gate: (text, area, transcript messages) -> (kept, why dropped)
Gate = Callable[[str, str, object], tuple[bool, str]]

# --- the peer: an Agent Zero-style strict gate (our own code) --------------------------------------
# It keeps a statement only if it names a subject (the user, a person, the team) and a relation
# (is, has, prefers, uses ...), in English or Chinese.
_SUBJECT = re.compile(
    r"\b(user|user's|users|i|i'm|my|we|our|he|she|they|his|her|their|team|team's|"
    r"company|company's)\b|用户|我|我们|他|她|他们|团队|公司",
    re.IGNORECASE,
)
_RELATION = re.compile(
    r"\b(is|are|am|was|were|has|have|had|prefers?|likes?|loves?|hates?|dislikes?|wants?|needs?|"
    r"uses?|works?|lives?|owns?|runs?|speaks?|knows?)\b"
    r"|是|有|喜欢|偏好|讨厌|想要|需要|使用|用|住在|在|负责|会",
    re.IGNORECASE,
)


def strict_keeps(text: str) -> tuple[bool, str]:
    if not _SUBJECT.search(text):
        return False, "no subject word"
    if not _RELATION.search(text):
        return False, "no relation word"
    return True, ""


def embed_fn(kind: str):
    if kind == "none":
        return None
    from memctl.config import load_config
    from memctl.embeddings import make_embedder

    config = load_config(overrides={"embedding_provider": kind, "embedding_cache": False})
    return make_embedder(config).embed


def score(
    cases: list[dict],
    decide: Callable[[Item, object], tuple[bool, str]],
    grounded: bool,
    make_grounding: Callable[[list], object] | None,
) -> dict:
    counts = {"fact": [0, 0], "noise": [0, 0], "solution": [0, 0]}  # label -> [right, total]
    misses: list[tuple[str, str, str, str]] = []
    for case in cases:
        messages = parse_transcript(json.dumps(case["messages"]), case["id"])
        grounding = make_grounding(messages) if grounded and make_grounding else None
        for item in all_items([case]):
            kept, why = decide(item, grounding)
            right = kept != (item.label == "noise")
            counts[item.label][0] += right
            counts[item.label][1] += 1
            if not right:
                misses.append((item.label, case["id"], item.text, why))
    return {"counts": counts, "misses": misses}


def memctl_decide(item: Item, grounding) -> tuple[bool, str]:
    verdict = quality.check(item.text, item.area, grounding)
    return verdict.ok, f"{verdict.reason}: {verdict.detail}"


def legacy_decide(item: Item, grounding) -> tuple[bool, str]:
    verdict = legacy_quality.check(item.text, item.area, grounding)
    return verdict.ok, f"{verdict.reason}: {verdict.detail}"


def strict_decide(item: Item, grounding) -> tuple[bool, str]:
    return strict_keeps(item.text)


def classifier_decide(embed) -> Callable[[Item, object], tuple[bool, str]]:
    from memctl.gate_classifier import GateClassifier

    model = GateClassifier.load()

    def decide(item: Item, grounding) -> tuple[bool, str]:
        found = model.reason(item.text, item.area, embed)
        if found is None and grounding is not None:
            found = grounding.check(item.text, item.area)
        return found is None, ": ".join(found or ())

    return decide


def both_decide(embed) -> Callable[[Item, object], tuple[bool, str]]:
    """memorize_gate: both — a fragment is dropped when the rules or the classifier drop it."""

    def decide(item: Item, grounding) -> tuple[bool, str]:
        verdict = quality.check(item.text, item.area, grounding, embed, rules_too=True)
        return verdict.ok, ": ".join(x for x in (verdict.reason, verdict.detail) if x)

    return decide


def foreign_facts(cases: list[dict], embed) -> tuple[int, int]:
    """Facts of *other* transcripts (other series) offered as candidates: invented, as far as this one
    knows. Returns (gated as ungrounded, offered)."""
    gated = offered = 0
    for case in cases:
        messages = parse_transcript(json.dumps(case["messages"]), case["id"])
        grounding = quality.Grounding.from_messages(messages, embed=embed)
        for other in cases:
            if other is case or (case.get("series") and other.get("series") == case.get("series")):
                continue
            for text in other.get("expected_fragments") or []:
                offered += 1
                gated += grounding.check(text, "fragments") is not None
    return gated, offered


def pct(pair: list[int]) -> float:
    return round(100.0 * pair[0] / pair[1], 1) if pair[1] else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--corpus",
        "--dir",
        dest="corpus",
        type=Path,
        default=SHARED,
        help="transcript folder: the shared transcripts (default), eval/corpus/tune or eval/corpus/report",
    )
    parser.add_argument(
        "--embedder",
        choices=("local", "fake", "none"),
        default="local",
        help="semantic fallback of grounding and the classifier's input (local = the packaged MiniLM)",
    )
    parser.add_argument("--json", action="store_true", help="only the JSON line")
    parser.add_argument(
        "--show-misses",
        action="store_true",
        help="list what the gate got wrong even on the report half (hidden there by default: "
        "report-half texts must not be read to tune)",
    )
    parser.add_argument("--no-foreign", action="store_true", help="skip the foreign-facts check (slow on big sets)")
    args = parser.parse_args()
    if not args.corpus.is_dir():
        print(f"no such folder: {args.corpus}", file=sys.stderr)
        return 2
    cases = load_cases(args.corpus)
    if not cases:
        print(f"no transcripts in {args.corpus}", file=sys.stderr)
        return 1
    embed = embed_fn(args.embedder)

    def new_grounding(messages):
        return quality.Grounding.from_messages(messages, embed=embed)

    def old_grounding(messages):
        return legacy_quality.Grounding.from_messages(messages, embed=embed)

    gates: list[tuple[str, str, Callable, bool, Callable | None]] = [
        ("memctl gate (tuned rules + grounding)", "gate", memctl_decide, True, new_grounding),
    ]
    from memctl.gate_classifier import GateClassifier

    if args.embedder == "local" and GateClassifier.available():
        gates.append(
            ("memctl classifier (LR + grounding)", "classifier", classifier_decide(embed), True, new_grounding)
        )
        gates.append(("memctl both (rules or classifier drops)", "both", both_decide(embed), True, new_grounding))
    gates += [
        ("main before (rules + grounding)", "main_before", legacy_decide, True, old_grounding),
        ("Agent Zero-style strict (subject + relation)", "strict", strict_decide, False, None),
        ("no gate (keep everything)", "none", lambda item, g: (True, ""), False, None),
    ]
    results: dict[str, dict] = {}
    rows = []
    for title, key, decide, grounded, make in gates:
        start = time.perf_counter()
        result = score(cases, decide, grounded, make)
        result["seconds"] = round(time.perf_counter() - start, 2)
        results[key] = result
        c = result["counts"]
        rows.append(
            [
                title,
                f"{pct(c['fact']):.1f}",
                f"{pct(c['noise']):.1f}",
                f"{pct(c['solution']):.1f}",
                f"{result['seconds']:.1f}",
            ]
        )
    items = all_items(cases)
    languages = sorted({i.language for i in items})
    counts = results["gate"]["counts"]
    per_language = {}
    for language in languages:
        subset = [c for c in cases if (c.get("language") or "en") == language]
        part = score(subset, memctl_decide, True, new_grounding)["counts"]
        per_language[language] = {
            "facts_kept_pct": pct(part["fact"]),
            "noise_out_pct": pct(part["noise"]),
            "solutions_kept_pct": pct(part["solution"]),
            "facts": part["fact"][1],
            "noise": part["noise"][1],
            "solutions": part["solution"][1],
        }
    foreign = (0, 0) if args.no_foreign else foreign_facts(cases, embed)
    measured = measure_rules(items)
    enabled = {area: {r.name for r in quality.enabled_rules(area)} for area in measured}
    if not args.json:
        print(
            table(
                f"quality gate on {len(cases)} transcripts of {args.corpus}: {counts['fact'][1]} facts, "
                f"{counts['noise'][1]} noise items (superseded values excluded), {counts['solution'][1]} "
                f"solutions; embedder {args.embedder}",
                ["gate", "facts kept %", "noise kept out %", "solutions kept %", "seconds"],
                rows,
            )
        )
        print(
            table(
                "memctl gate by language",
                ["language", "facts kept %", "noise kept out %", "solutions kept %", "facts / noise / solutions"],
                [
                    [
                        lang,
                        f"{v['facts_kept_pct']:.1f}",
                        f"{v['noise_out_pct']:.1f}",
                        f"{v['solutions_kept_pct']:.1f}",
                        f"{v['facts']} / {v['noise']} / {v['solutions']}",
                    ]
                    for lang, v in per_language.items()
                ],
            )
        )
        if foreign[1]:
            print(
                f"\nforeign facts (other transcripts' facts offered here) gated as ungrounded: "
                f"{foreign[0]}/{foreign[1]} ({100 * foreign[0] / foreign[1]:.1f} %)"
            )
        rule_rows = [
            [
                area,
                name,
                "yes" if name in enabled[area] else "no",
                "-" if m["precision"] is None else f"{m['precision']:.3f}",
                m["drops"],
                m["false_drops"],
            ]
            for area, rules in measured.items()
            for name, m in rules.items()
            if m["drops"]
        ]
        print(
            table(
                "each rule alone on this corpus (drops = candidates it fires on; precision = share of them "
                "that are noise)",
                ["path", "rule", "enabled", "precision", "drops", "false drops"],
                rule_rows,
            )
        )
        report_half = any(c.get("half") == "report" for c in cases)
        if report_half and not args.show_misses:
            print(f"\n{len(results['gate']['misses'])} misses on the report half (texts not shown: --show-misses)")
        for label, case_id, text, why in [] if report_half and not args.show_misses else results["gate"]["misses"]:
            what = {"fact": "fact dropped", "noise": "noise kept", "solution": "solution dropped"}[label]
            print(f"MISS {what}: [{case_id}] {text} ({why})")
    summary = {
        key: {
            "facts_kept_pct": pct(r["counts"]["fact"]),
            "noise_out_pct": pct(r["counts"]["noise"]),
            "solutions_kept_pct": pct(r["counts"]["solution"]),
        }
        for key, r in results.items()
    }
    print(
        json.dumps(
            {
                "corpus": str(args.corpus),
                "transcripts": len(cases),
                "embedder": args.embedder,
                "facts": counts["fact"][1],
                "noise": counts["noise"][1],
                "solutions": counts["solution"][1],
                # the memctl gate's figures at the top level (the contract of tests/test_quality.py)
                "facts_kept_pct": pct(counts["fact"]),
                "noise_dropped_pct": pct(counts["noise"]),
                "solutions_kept_pct": pct(counts["solution"]),
                "foreign_gated_pct": round(100 * foreign[0] / foreign[1], 1) if foreign[1] else None,
                "gates": summary,
                "by_language": per_language,
                "rules": {
                    area: {name: {k: m[k] for k in ("precision", "drops", "false_drops")} for name, m in rules.items()}
                    for area, rules in measured.items()
                },
            },
            ensure_ascii=False,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
