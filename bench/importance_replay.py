"""Replay transcripts through `memorize` with a scripted utility model and show the importance each kept memory got.

    python bench/importance_replay.py [DIR] [--json]

DIR defaults to ../shared/eval/transcripts. The scripted model answers extraction with the
transcript's own expected_fragments / expected_solutions (what a good model would extract),
keywords with the first words of the text, and consolidation with `update` when the candidate is an
`updates[].new` whose old value is shown, `skip` when the same text is stored, else `keep_separate`.
So the run exercises the real quality gate, consolidation and importance assignment, not a model.
The transcripts of one series go into one store in id order; the others each into a store of their
own. Real packaged embedding model.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SHARED = Path(__file__).resolve().parents[2] / "shared" / "eval" / "transcripts"


class Scripted:
    """Completion function that answers each memorize/consolidate prompt from the transcript's data."""

    def __init__(self) -> None:
        from memctl.llm import load_prompt

        self.kinds = {
            load_prompt(name)[0].strip(): name
            for name in ("memorize_fragments", "memorize_solutions", "memorize_keywords", "consolidate")
        }
        self.case: dict = {}

    def __call__(self, messages: list[dict[str, str]]) -> str:
        kind = self.kinds.get(messages[0]["content"].strip(), "")
        text = messages[-1]["content"]
        if kind == "memorize_fragments":
            return json.dumps(self.case.get("expected_fragments", []))
        if kind == "memorize_solutions":
            return json.dumps(self.case.get("expected_solutions", []))
        if kind == "memorize_keywords":
            return json.dumps(text.split(":", 1)[-1].split()[:3])
        if kind == "consolidate":
            return self.decide(text)
        raise AssertionError(f"unexpected prompt {messages[0]['content'][:60]!r}")

    def decide(self, message: str) -> str:
        candidate = message.split(":\n", 1)[1].split("\n\nMost similar", 1)[0].strip()
        block = message.split("(index. [score] text):", 1)[-1]
        shown = [
            t
            for _, t in sorted(
                re.findall(r"^(\d+)\. \[[0-9.]+\] (.*)$", block, flags=re.MULTILINE), key=lambda item: int(item[0])
            )
        ]
        for change in self.case.get("updates") or []:
            if candidate in change["new"] and change["old"] in shown:
                return json.dumps(
                    {
                        "action": "update",
                        "targets": [shown.index(change["old"])],
                        "text": candidate,
                        "reason": "the value changed",
                    }
                )
        if candidate in shown:
            return json.dumps({"action": "skip", "targets": [shown.index(candidate)], "reason": "already stored"})
        return json.dumps({"action": "keep_separate", "targets": [], "reason": "a different fact"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, nargs="?", default=SHARED)
    parser.add_argument("--json", action="store_true", help="one JSON document instead of a table")
    args = parser.parse_args()
    import memctl
    from memctl.llm import UtilityModel
    from memctl.memorize.pipeline import memorize_files

    files = sorted(args.folder.glob("*.json"))
    cases = [(p, json.loads(p.read_text(encoding="utf-8"))) for p in files]
    cases = [(p, c) for p, c in cases if isinstance(c, dict) and "messages" in c]
    groups: dict[str, list[tuple[Path, dict]]] = defaultdict(list)
    for path, case in cases:
        groups[case.get("series") or path.stem].append((path, case))
    home = Path(tempfile.mkdtemp(prefix="memctl-bench-replay-"))
    rows: list[dict] = []
    scripted = Scripted()
    for number, (series, members) in enumerate(sorted(groups.items())):
        with memctl.open_store(home, f"s{number}", overrides={"consolidation_threshold": 0.3}) as store:
            llm = UtilityModel(store.config, completion=scripted)
            for path, case in members:
                scripted.case = case
                report = memorize_files(store, [path], llm)
                for outcome in report.transcripts[0].candidates:
                    note = next((n for n in outcome.notes if n.startswith("importance ")), "")
                    rows.append(
                        {
                            "transcript": path.stem,
                            "series": series,
                            "area": outcome.area,
                            "fate": outcome.fate,
                            "importance": float(note.split()[1].rstrip(":")) if note else None,
                            "why": note.split(": ", 1)[1] if ": " in note else "",
                            "text": outcome.text,
                        }
                    )
            stored = {m.text: m.metadata.get("importance") for m in store.list(limit=10_000)[0]}
            for row in rows:
                if row["series"] == series:
                    row["stored_importance"] = stored.get(row["text"])
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=1))
        return
    kept = [r for r in rows if r["fate"] != "gated"]
    print(f"{len(kept)} kept candidates of {len(rows)} from {len(cases)} transcripts in {args.folder}")
    print("transcript  area       fate           importance  why -> text")
    for r in rows:
        if r["fate"] == "gated":
            continue
        print(
            f"{r['transcript']:<10}  {r['area']:<9}  {r['fate']:<13}  {r['importance']!s:<10}  "
            f"{r['why']} -> {r['text'][:90]}"
        )
    spread: dict[float, int] = defaultdict(int)
    for r in kept:
        spread[r["importance"]] += 1
    print("importance spread:", dict(sorted(spread.items())))


if __name__ == "__main__":
    main()
