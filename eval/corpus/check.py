#!/usr/bin/env python3
"""Validate the domain-split evaluation corpus and print its counts.

Usage: python eval/corpus/check.py [DIR ...]   (default: tune/ and report/ next to this file)

Counts: "noise" is every must_not_store item; "superseded" is the part of it that is the old
value of an update in the same series (the rest is transient noise). "zh" counts statements
containing Chinese characters.

Exit codes: 0 = valid (warnings may be printed), 1 = schema error(s), 2 = bad arguments.
Stdlib only.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROLES = {"user", "assistant", "tool"}
LANGS = {"en", "zh", "mixed"}
HALVES = {"tune", "report"}
LIST_FIELDS = ("expected_fragments", "expected_solutions", "must_not_store")
CJK = re.compile(r"[\u3400-\u9fff]")
WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:+-]*")
CJK_STOP = {"用户", "助手"}
STOP = set(
    "the a an and or of to in on at for with is are was were be by from as it its this that "
    "user user's users has have had not no via into than then any all per".split()
)


def tokens(text: str) -> set[str]:
    """Latin words (>=3 chars, not stopwords) plus CJK character bigrams."""
    out = {w.lower().strip("._:/-+") for w in WORD.findall(text)}
    out = {w for w in out if len(w) >= 3 and w not in STOP}
    cjk = "".join(CJK.findall(text))
    out |= {cjk[i : i + 2] for i in range(len(cjk) - 1)} - CJK_STOP
    return out


def is_chinese(text: str) -> bool:
    return bool(CJK.search(text))


class Checker:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.ids: dict[str, Path] = {}
        self.docs: list[tuple[Path, dict]] = []

    def err(self, path: Path, msg: str) -> None:
        self.errors.append(f"ERROR {path}: {msg}")

    def warn(self, path: Path, msg: str) -> None:
        self.warnings.append(f"warn  {path}: {msg}")

    def load(self, path: Path) -> None:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            self.err(path, f"cannot read JSON: {exc}")
            return
        if not isinstance(doc, dict):
            self.err(path, "top level is not an object")
            return
        self.docs.append((path, doc))

    def check_doc(self, path: Path, d: dict) -> None:
        for key, typ in (
            ("id", str),
            ("series", str),
            ("domain", str),
            ("half", str),
            ("language", str),
            ("messages", list),
        ):
            if not isinstance(d.get(key), typ):
                self.err(path, f"missing or non-{typ.__name__} field {key!r}")
        for key in LIST_FIELDS + ("updates", "recall_probes"):
            if not isinstance(d.get(key), list):
                self.err(path, f"missing or non-list field {key!r}")
        if d.get("acceptable") is not None and not isinstance(d.get("acceptable"), list):
            self.err(path, "'acceptable' must be a list")
        if any(e.startswith(f"ERROR {path}:") for e in self.errors):
            return
        if d["id"] in self.ids:
            self.err(path, f"duplicate id {d['id']!r} (also in {self.ids[d['id']]})")
        self.ids[d["id"]] = path
        if d["id"] != path.stem and not d["id"].endswith(path.stem):
            self.warn(path, f"id {d['id']!r} does not match file name")
        if d["half"] not in HALVES:
            self.err(path, f"half must be one of {sorted(HALVES)}")
        elif path.parent.name in HALVES and path.parent.name != d["half"]:
            self.err(path, f"half {d['half']!r} but file lives in {path.parent.name}/")
        if d["language"] not in LANGS:
            self.err(path, f"language must be one of {sorted(LANGS)}")
        n = len(d["messages"])
        if not 10 <= n <= 25:
            self.warn(path, f"{n} messages (expected 10-25)")
        for i, m in enumerate(d["messages"]):
            if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
                self.err(path, f"message {i}: needs role in {sorted(ROLES)} and string content")
        for key in LIST_FIELDS + ("acceptable",):
            for i, s in enumerate(d.get(key) or []):
                if not isinstance(s, str) or not s.strip():
                    self.err(path, f"{key}[{i}] is not a non-empty string")
        for i, u in enumerate(d["updates"]):
            if not isinstance(u, dict) or not all(isinstance(u.get(k), str) for k in ("old", "new")):
                self.err(path, f"updates[{i}] needs string 'old' and 'new'")
        for i, p in enumerate(d["recall_probes"]):
            if not isinstance(p, dict) or not isinstance(p.get("query"), str):
                self.err(path, f"recall_probes[{i}] needs a string 'query'")
            elif "should_recall" not in p or not (p["should_recall"] is None or isinstance(p["should_recall"], str)):
                self.err(path, f"recall_probes[{i}] needs 'should_recall' (string or null)")
        # must_not_store overlap with expected items is a labelling error
        keep = set(d["expected_fragments"]) | set(d["expected_solutions"])
        for s in d["must_not_store"]:
            if s in keep:
                self.err(path, f"statement is both expected and must_not_store: {s!r}")

    def ground(self, path: Path, d: dict, series_messages: list) -> None:
        """Warn when a labelled statement's words barely occur in the messages.

        A superseded value (an updates.old of the series) is grounded against the whole
        series, since it was stated in an earlier session.
        """

        def text_of(msgs: list) -> str:
            return "\n".join(m.get("content", "") for m in msgs if isinstance(m, dict))

        have = tokens(text_of(d["messages"]))
        have_series = tokens(text_of(series_messages))
        olds = getattr(self, "_olds", {}).get(d.get("series"), set())
        for key in LIST_FIELDS:
            for s in d[key]:
                want = tokens(s)
                if not want:
                    continue
                pool = have_series if s in olds else have
                frac = len(want & pool) / len(want)
                if frac < 0.5:
                    self.warn(path, f"weakly grounded ({frac:.0%}) {key}: {s!r}")

    def ground_all(self) -> None:
        series_msgs: dict[str, list] = defaultdict(list)
        self._olds: dict[str, set] = defaultdict(set)
        for _, d in self.docs:
            series_msgs[d["series"]].extend(d["messages"])
            self._olds[d["series"]] |= {u["old"] for u in d["updates"]}
        for path, d in self.docs:
            self.ground(path, d, series_msgs[d["series"]])

    def check_series(self) -> None:
        series: dict[str, list[tuple[Path, dict]]] = defaultdict(list)
        for path, d in self.docs:
            if isinstance(d.get("series"), str):
                series[d["series"]].append((path, d))
        for name, docs in series.items():
            docs.sort(key=lambda pd: pd[1]["id"])
            expected: set[str] = set()
            nots: set[str] = set()
            for _, d in docs:
                expected |= set(d.get("expected_fragments", [])) | set(d.get("expected_solutions", []))
                nots |= set(d.get("must_not_store", []))
            answers = set(expected)
            for _, d in docs:
                answers |= {u["new"] for u in d.get("updates", []) if isinstance(u, dict) and "new" in u}
            earlier: set[str] = set()
            for path, d in docs:
                for u in d.get("updates", []):
                    if isinstance(u, dict) and u.get("old") not in d.get("must_not_store", []):
                        self.err(path, f"updates.old not in this transcript's must_not_store: {u.get('old')!r}")
                    if isinstance(u, dict) and u.get("old") not in earlier:
                        self.warn(path, f"updates.old is not expected in an earlier transcript: {u.get('old')!r}")
                    if isinstance(u, dict) and u.get("new") not in expected:
                        self.err(path, f"updates.new is not an expected item of series {name}: {u.get('new')!r}")
                for p in d.get("recall_probes", []):
                    sr = p.get("should_recall") if isinstance(p, dict) else None
                    if sr is not None and sr not in answers:
                        self.err(path, f"should_recall is not an expected item / updates.new of series {name}: {sr!r}")
                earlier |= set(d.get("expected_fragments", [])) | set(d.get("expected_solutions", []))
            final = [d for _, d in docs if "series_final_state" in d]
            last_path, last = docs[-1]
            if not final:
                self.warn(last_path, f"series {name}: no series_final_state in its last transcript")
            elif "series_final_state" not in last:
                self.err(last_path, f"series {name}: series_final_state must be in the last transcript")
            else:
                fs = last["series_final_state"]
                for key in ("facts", "solutions", "superseded"):
                    if not isinstance(fs.get(key), list):
                        self.err(last_path, f"series_final_state.{key} must be a list")
                for s in fs.get("facts", []) + fs.get("solutions", []):
                    if s not in answers:
                        self.err(last_path, f"series_final_state fact/solution not an expected item: {s!r}")
                for s in fs.get("superseded", []):
                    if s not in nots:
                        self.err(last_path, f"series_final_state.superseded not in a must_not_store: {s!r}")
                    if s in fs.get("facts", []) + fs.get("solutions", []):
                        self.err(last_path, f"superseded value also listed as current: {s!r}")
                for p in fs.get("probes", []):
                    sr = p.get("should_recall")
                    if sr is not None and sr not in answers:
                        self.err(last_path, f"final probe should_recall not an expected item: {sr!r}")
                    mnr = p.get("must_not_recall")
                    # The brief describes a list; one string is accepted too.
                    for old in [mnr] if isinstance(mnr, str) else mnr or []:
                        if old not in nots:
                            self.err(last_path, f"final probe must_not_recall not in a must_not_store: {old!r}")


def report(docs: list[tuple[Path, dict]]) -> None:
    def blank() -> dict:
        return defaultdict(int)

    by_half: dict[str, dict] = defaultdict(blank)
    by_dom: dict[tuple[str, str], dict] = defaultdict(blank)
    olds: dict[str, set] = defaultdict(set)
    for _, d in docs:
        olds[d.get("series")] |= {u.get("old") for u in d.get("updates", []) if isinstance(u, dict)}
    for _, d in docs:
        for bucket in (by_half[d.get("half", "?")], by_dom[(d.get("half", "?"), d.get("domain", "?"))]):
            bucket["transcripts"] += 1
            for key, label in (
                ("expected_fragments", "fact"),
                ("expected_solutions", "solution"),
                ("must_not_store", "noise"),
            ):
                for s in d.get(key, []):
                    bucket[label] += 1
                    if label == "noise" and s in olds[d.get("series")]:
                        bucket["superseded"] += 1
                    bucket["statements"] += 1
                    if is_chinese(s):
                        bucket["zh"] += 1
            bucket["updates"] += len(d.get("updates", []))
            for p in d.get("recall_probes", []):
                if p.get("should_recall") is None:
                    bucket["negatives"] += 1
                else:
                    bucket["probes"] += 1
                if is_chinese(p.get("query", "")):
                    bucket["zh_probes"] += 1

    cols = (
        "transcripts",
        "statements",
        "fact",
        "solution",
        "noise",
        "superseded",
        "zh",
        "updates",
        "probes",
        "negatives",
        "zh_probes",
    )
    header = (
        f"{'half/domain':<28}" + "".join(f"{c:>11}" for c in cols) + f"{'%fact':>7}{'%sol':>6}{'%noise':>7}{'%zh':>6}"
    )

    def row(name: str, b: dict) -> str:
        st = b["statements"] or 1
        pct = lambda k: f"{100 * b[k] / st:.0f}"  # noqa: E731
        return (
            f"{name:<28}"
            + "".join(f"{b[c]:>11}" for c in cols)
            + f"{pct('fact'):>7}{pct('solution'):>6}{pct('noise'):>7}{pct('zh'):>6}"
        )

    print(header)
    for (half, dom), b in sorted(by_dom.items()):
        print(row(f"{half}/{dom}", b))
    for half, b in sorted(by_half.items()):
        print(row(f"TOTAL {half}", b))


def main(argv: list[str]) -> int:
    here = Path(__file__).resolve().parent
    dirs = [Path(a) for a in argv] or [p for p in (here / "tune", here / "report") if p.is_dir()]
    if not dirs:
        print("usage: check.py [DIR ...]  (no corpus directories found)", file=sys.stderr)
        return 2
    c = Checker()
    for dr in dirs:
        if not dr.is_dir():
            print(f"not a directory: {dr}", file=sys.stderr)
            return 2
        for path in sorted(dr.glob("*.json")):
            c.load(path)
    valid = []
    for path, d in c.docs:
        before = len(c.errors)
        c.check_doc(path, d)
        if len(c.errors) == before:
            valid.append((path, d))
    # cross-file checks run on the files whose own schema is valid
    all_docs, c.docs = c.docs, valid
    c.ground_all()
    c.check_series()
    c.docs = all_docs
    for w in c.warnings:
        print(w)
    for e in c.errors:
        print(e)
    report(valid)
    print(f"{len(c.docs)} files, {len(c.errors)} errors, {len(c.warnings)} warnings")
    return 1 if c.errors else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
        sys.exit(0)
