#!/usr/bin/env python3
"""Score memctl's quality gate on labelled transcripts, side by side with the gate it replaced and a peer.

    python3 bench/quality_gate.py [--corpus DIR ...] [--embedder local|fake] [--before REV] [--totals] [--json]

DIR: transcript folders (default: the shared transcripts, ../shared/eval/transcripts). Every
`expected_fragments` item should be kept, every `must_not_store` item kept out (superseded values
excluded: only consolidation may drop those), every `expected_solutions` item kept on the solutions path.
Grounding is on for every gate that has it: each candidate is checked against its own transcript.

Side by side in one run:
- memctl: the learned gate (memctl/memorize/gate_model.py) — keep, pending or drop, under the default
  `memorize_pending: review` (an ungrounded candidate waits in the review queue: quality.for_review);
- before: the gate of memctl at REV (default: the last commit before the learned gate, its rules plus
  classifier as shipped), run from that revision's own files (`git archive`) in a subprocess;
- Agent Zero-style strict: keeps a statement only if it has a subject word and a relation word;
- no gate: keeps everything.

Figures: facts kept (kept + pending: nothing lost) and facts dropped; noise kept out of what `load`
returns (dropped + pending); pending share of all candidates; solutions kept. `--totals` prints the
totals only (for the frozen report half: no per-item output to read).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._common import table  # noqa: E402
from bench._gate_corpus import SHARED, Item, all_items, load_cases  # noqa: E402
from memctl.memorize import quality  # noqa: E402
from memctl.memorize.transcripts import parse_transcript  # noqa: E402

BEFORE = "44008b9"  # main before the learned gate (rules + classifier, memorize_gate: both)

# --- the peer: an Agent Zero-style strict gate (our own code) --------------------------------------
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

# The old gate, run inside its own revision's tree: items on stdin, one outcome per line on stdout.
_BEFORE_SCRIPT = r"""
import json, sys
from memctl import quality  # the old revision's layout (a flat package), not this one's
from memctl.transcripts import parse_transcript
cases, kind = json.load(sys.stdin), sys.argv[1]
embed = None
if kind == "local":
    from memctl.config import load_config
    from memctl.embeddings import make_embedder
    embedder = make_embedder(load_config(overrides={"embedding_provider": "local", "embedding_cache": False}))
    embed = quality.learned_gate_embed(embedder.info, embedder.embed)
for case in cases:
    messages = parse_transcript(json.dumps(case["messages"]), case["id"])
    grounding = quality.Grounding.from_messages(messages, embed=embed)
    for text, area in case["items"]:
        v = quality.check(text, area, grounding, embed, rules_too=True)
        print("keep" if v.ok else "drop")
"""


def embedder(kind: str):
    from memctl.config import load_config
    from memctl.embeddings import make_embedder

    return make_embedder(load_config(overrides={"embedding_provider": kind, "embedding_cache": False}))


def memctl_outcomes(cases: list[dict], kind: str) -> list[str]:
    model = embedder(kind)
    embed, name = quality.gate_embedding(model.info, model.embed)
    out = []
    for case in cases:
        messages = parse_transcript(json.dumps(case["messages"]), case["id"])
        grounding = quality.Grounding.from_messages(messages, embed=model.embed)
        for item in all_items([case]):
            verdict = quality.for_review(quality.check(item.text, item.area, grounding, embed, name))
            out.append("keep" if verdict.ok else "pending" if verdict.pending else "drop")
    return out


def before_outcomes(cases: list[dict], kind: str, rev: str) -> list[str] | None:
    """The old gate's outcomes, or None when `rev` is not in this checkout's history."""
    try:
        archive = subprocess.run(  # noqa: S603 - fixed git arguments
            ["git", "archive", rev, "memctl", "default_config.yaml", "prompts"],
            cwd=REPO,
            capture_output=True,
            check=True,
            timeout=120,
        ).stdout
    except (subprocess.CalledProcessError, OSError):
        return None
    payload = [
        {"id": c["id"], "messages": c["messages"], "items": [(i.text, i.area) for i in all_items([c])]} for c in cases
    ]
    with tempfile.TemporaryDirectory() as tree:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
        env = {**os.environ, "PYTHONPATH": tree}
        proc = subprocess.run(  # noqa: S603 - our own script, run by this interpreter
            [sys.executable, "-c", _BEFORE_SCRIPT, kind],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=env,
            cwd=tree,
            timeout=3600,
            check=False,
        )
    if proc.returncode != 0:
        raise SystemExit(f"the gate at {rev} failed:\n{proc.stderr[-2000:]}")
    return proc.stdout.split()


def strict_outcomes(cases: list[dict]) -> list[str]:
    return [
        "keep" if _SUBJECT.search(i.text) and _RELATION.search(i.text) else "drop"
        for c in cases
        for i in all_items([c])
    ]


def figures(items: list[Item], outcomes: list[str]) -> dict[str, float | int]:
    by: Counter[tuple[str, str]] = Counter((i.label, o) for i, o in zip(items, outcomes, strict=True))

    def share(label: str, *kinds: str) -> float:
        total = sum(by[(label, k)] for k in ("keep", "pending", "drop"))
        return round(100.0 * sum(by[(label, k)] for k in kinds) / total, 1) if total else 0.0

    return {
        "facts": sum(by[("fact", k)] for k in ("keep", "pending", "drop")),
        "noise": sum(by[("noise", k)] for k in ("keep", "pending", "drop")),
        "solutions": sum(by[("solution", k)] for k in ("keep", "pending", "drop")),
        "facts_kept_pct": share("fact", "keep", "pending"),
        "facts_dropped_pct": share("fact", "drop"),
        "noise_kept_out_pct": share("noise", "pending", "drop"),
        "pending_pct": round(100.0 * sum(o == "pending" for o in outcomes) / max(1, len(outcomes)), 1),
        "solutions_kept_pct": share("solution", "keep", "pending"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, nargs="+", default=[SHARED])
    parser.add_argument("--embedder", choices=("local", "fake"), default="local")
    parser.add_argument(
        "--before", default=BEFORE, help="the revision whose gate is shown beside (default %(default)s)"
    )
    parser.add_argument("--totals", action="store_true", help="totals only (the frozen report half)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cases = [case for folder in args.corpus for case in load_cases(folder)]
    if not cases:
        print(f"no transcripts in {args.corpus}", file=sys.stderr)
        return 1
    items = all_items(cases)
    gates: dict[str, list[str]] = {"memctl": memctl_outcomes(cases, args.embedder)}
    before = before_outcomes(cases, args.embedder, args.before)
    if before is not None:
        gates[f"before ({args.before})"] = before
    gates["Agent Zero-style strict"] = strict_outcomes(cases)
    gates["no gate"] = ["keep"] * len(items)
    result = {name: figures(items, outcomes) for name, outcomes in gates.items()}
    if args.json:
        print(json.dumps({"corpus": [str(c) for c in args.corpus], "embedder": args.embedder, "gates": result}))
        return 0
    cols = ["facts_kept_pct", "facts_dropped_pct", "noise_kept_out_pct", "pending_pct", "solutions_kept_pct"]
    first = next(iter(result.values()))
    title = f"{len(cases)} transcripts: {first['facts']} facts, {first['noise']} noise, {first['solutions']} solutions"
    print(table(title, ["gate", *cols], [[name, *(f[c] for c in cols)] for name, f in result.items()]))
    if not args.totals:
        misses = [
            (i.label, o, i.text)
            for i, o in zip(items, gates["memctl"], strict=True)
            if (o == "keep") == (i.label == "noise") and o != "pending"
        ]
        for label, outcome, text in misses[:60]:
            print(f"  {label:8} {outcome:7} {text[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
