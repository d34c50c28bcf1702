"""Labelled candidates of a transcript folder, for the gate bench and scripts/train_gate.py.

A transcript (the schema of ../shared/eval/transcripts and eval/corpus/{tune,report}) labels what a
perfect extractor would propose: `expected_fragments` are facts, `expected_solutions` solutions, and
`must_not_store` noise, except superseded values (also an `updates[].old`), which were true once:
only consolidation can drop those, so no gate is scored on them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "eval" / "transcripts"
CORPUS = REPO / "eval" / "corpus"


@dataclass(frozen=True)
class Item:
    case: str
    text: str
    label: str  # "fact" | "noise" | "solution"
    language: str
    domain: str

    @property
    def area(self) -> str:
        return "solutions" if self.label == "solution" else "fragments"


def load_cases(folder: Path) -> list[dict]:
    """Every transcript (a JSON object with `messages`) in `folder`, sorted by file name."""
    cases = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise SystemExit(f"{path}: not valid JSON ({exc})") from None
        if isinstance(data, dict) and isinstance(data.get("messages"), list):
            data.setdefault("id", path.stem)
            cases.append(data)
    return cases


def items(case: dict) -> list[Item]:
    superseded = {u.get("old") for u in case.get("updates") or []}
    language = case.get("language") or "en"
    domain = case.get("domain") or case.get("series") or case["id"]
    out = [Item(case["id"], t, "fact", language, domain) for t in case.get("expected_fragments") or []]
    out += [
        Item(case["id"], t, "noise", language, domain) for t in case.get("must_not_store") or [] if t not in superseded
    ]
    out += [Item(case["id"], t, "solution", language, domain) for t in case.get("expected_solutions") or []]
    return out


def all_items(cases: list[dict]) -> list[Item]:
    return [item for case in cases for item in items(case)]
