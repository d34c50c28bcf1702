#!/usr/bin/env python3
"""Measure where `forget_threshold` must sit: similarity (1 + cosine) / 2, with the default model
(multilingual-e5-small-q4) and with MiniLM, of
pairs that restate one fact (forget should take them) and of pairs that state the opposite value of
the same slot (forget must keep them: "prefers light mode" must not delete "prefers dark mode").

    python3 scripts/forget_threshold.py          # prints both distributions and the separating cut

The pairs were written for this measurement, not drawn from any tuning corpus. The default in
default_config.yaml is the lowest cut that keeps every opposite, rounded up to 0.01, if that cut
still takes the restatements; otherwise the safe side (keep opposites) wins and the script says so.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# (what the user passes to `forget`, a stored memory with the opposite value of the same slot)
OPPOSITES = [
    ("User prefers light mode", "User prefers dark mode"),
    ("The team deploys to staging on Fridays", "The team deploys to production on Fridays"),
    ("User prefers tabs for indentation", "User prefers spaces for indentation"),
    ("The project uses PostgreSQL", "The project uses MySQL"),
    ("User's favourite editor is Vim", "User's favourite editor is Emacs"),
    ("The API returns JSON", "The API returns XML"),
    ("User lives in Berlin", "User lives in Munich"),
    ("The build runs on Linux", "The build runs on Windows"),
    ("User wants verbose answers", "User wants terse answers"),
    ("The service listens on port 8080", "The service listens on port 9090"),
    ("User drinks coffee in the morning", "User drinks tea in the morning"),
    ("Tests run before every commit", "Tests run after every commit"),
    ("The user is a morning person", "The user is a night person"),
    ("User prefers Python over Go", "User prefers Go over Python"),
    ("The meeting is on Monday", "The meeting is on Thursday"),
    ("User's manager is Alice", "User's manager is Bob"),
    ("Logs are kept for 30 days", "Logs are kept for 90 days"),
    ("User likes cats", "User likes dogs"),
    ("The database backup runs nightly", "The database backup runs weekly"),
    ("User wants replies in English", "User wants replies in German"),
    ("The CI uses GitHub Actions", "The CI uses GitLab CI"),
    ("User is allergic to peanuts", "User is allergic to shellfish"),
]

# (what the user passes to `forget`, a stored memory saying the same thing in other words)
RESTATEMENTS = [
    ("User prefers light mode", "The user likes light mode"),
    ("The team deploys to staging on Fridays", "Every Friday the team deploys to staging"),
    ("User prefers tabs for indentation", "The user prefers indenting with tabs"),
    ("The project uses PostgreSQL", "This project uses a PostgreSQL database"),
    ("User's favourite editor is Vim", "Vim is the user's favourite editor"),
    ("The API returns JSON", "The API responds with JSON"),
    ("User lives in Berlin", "The user lives in Berlin"),
    ("The build runs on Linux", "Builds run on Linux"),
    ("User wants verbose answers", "The user wants detailed, verbose answers"),
    ("The service listens on port 8080", "The service is listening on port 8080"),
    ("User drinks coffee in the morning", "In the morning the user drinks coffee"),
    ("Tests run before every commit", "Before each commit the tests are run"),
    ("The user is a morning person", "User is a morning person"),
    ("User prefers Python over Go", "The user prefers Python to Go"),
    ("The meeting is on Monday", "The meeting takes place on Monday"),
    ("User's manager is Alice", "Alice is the user's manager"),
    ("Logs are kept for 30 days", "Logs are retained for 30 days"),
    ("User likes cats", "The user likes cats"),
    ("The database backup runs nightly", "The database is backed up every night"),
    ("User wants replies in English", "User wants answers in English"),
    ("The CI uses GitHub Actions", "CI runs on GitHub Actions"),
    ("User is allergic to peanuts", "The user has a peanut allergy"),
]


def similarities(pairs: list[tuple[str, str]], model: str | None = None) -> list[float]:
    """(1 + cosine) / 2 of each pair with `model` (None: the default embedding_model), both sides embedded as
    forget embeds them: as stored texts (StoreBase.search_all_above)."""
    import numpy as np

    from memctl.config import load_config
    from memctl.embeddings import make_embedder

    overrides = {
        "embedding_provider": "local",
        "embedding_cache": False,
        **({"embedding_model": model} if model else {}),
    }
    embedder = make_embedder(load_config(None, overrides))
    queries = np.asarray(embedder.embed([q for q, _ in pairs]))
    stored = np.asarray(embedder.embed([m for _, m in pairs]))
    return [float((1 + float(np.dot(a, b))) / 2) for a, b in zip(queries, stored, strict=True)]


def main() -> int:
    from memctl.embeddings import MINILM_MODEL, MULTILINGUAL_MODEL

    for model in (MULTILINGUAL_MODEL, MINILM_MODEL):
        print(f"-- {model}")
        report(similarities(OPPOSITES, model), similarities(RESTATEMENTS, model))
    return 0


def report(opposite: list[float], same: list[float]) -> None:
    print(f"{'kind':<12} {'n':>3} {'min':>6} {'median':>7} {'max':>6}")
    for name, values in (("opposite", opposite), ("restatement", same)):
        ordered = sorted(values)
        print(f"{name:<12} {len(values):>3} {ordered[0]:6.3f} {ordered[len(values) // 2]:7.3f} {ordered[-1]:6.3f}")
    cut = math.floor(max(opposite) * 100 + 1) / 100  # the lowest 0.01 step above every opposite
    for step in sorted({0.75, 0.85, 0.9, 0.95, 0.97, cut}):
        taken, wrong = sum(v >= step for v in same), sum(v >= step for v in opposite)
        mark = "  <- lowest cut that keeps every opposite" if step == cut else ""
        print(f"cut {step:.2f}: takes {taken}/{len(same)} restatements and {wrong}/{len(opposite)} opposites{mark}")
    for label, pairs, values in (("opposite", OPPOSITES, opposite), ("restatement", RESTATEMENTS, same)):
        for (query, memory), value in sorted(zip(pairs, values, strict=True), key=lambda p: -p[1])[:5]:
            print(f"  {label} {value:.3f}  {query!r} ~ {memory!r}")
    if min(same) < cut:
        print("no cut separates them: the default keeps every opposite and misses the restatements below it")


if __name__ == "__main__":
    raise SystemExit(main())
