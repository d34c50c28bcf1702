"""scripts/fit_relevance.py's background sentences: drawn reproducibly from the tune half, and what ships."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())  # tests/ or a folder of it
sys.path.insert(0, str(ROOT))

from scripts.fit_relevance import SLOT_MISS, Background, build_background, searched  # noqa: E402

TUNE = ROOT / "eval" / "corpus" / "tune"


def test_shipped_background_is_the_scripts_draw_from_the_tune_half(tmp_path: Path):
    """The background ships with the calibration it was fitted with: the script's draw from the tune domains
    of that fit (the tune half has grown since; both are refitted together), and never a report domain."""
    shipped = json.loads((ROOT / "memctl" / "data" / "relevance" / "background.json").read_text(encoding="utf-8"))
    fitted = {s["domain"] for s in shipped}
    for path in TUNE.glob("*.json"):
        if json.loads(path.read_text(encoding="utf-8"))["domain"] in fitted:
            (tmp_path / path.name).write_bytes(path.read_bytes())
    assert shipped == build_background([tmp_path], 40)
    tune = {json.loads(p.read_text(encoding="utf-8"))["domain"] for p in TUNE.glob("*.json")}
    report = {json.loads(p.read_text(encoding="utf-8"))["domain"] for p in (ROOT / "eval/corpus/report").glob("*.json")}
    assert len(fitted) >= 30 and fitted <= tune and not fitted & report
    assert all(15 <= len(s["text"]) <= 220 for s in shipped)


def test_background_leaves_out_the_domains_a_question_must_not_see():
    class Embedder:
        def embed(self, texts: list[str]) -> np.ndarray:
            return np.eye(len(texts), 4, dtype=np.float32)

    sentences = [{"domain": d, "text": f"sentence {i}"} for i, d in enumerate(["a", "a", "b", "c"])]
    background = Background(Embedder(), sentences)
    assert len(background.without(set())) == 4
    assert len(background.without({"a"})) == 2
    assert len(background.without({"a", "c"})) == 1


def test_the_fit_scores_candidates_as_the_search_shows_them():
    # The cut is chosen on the scores a search shows, so the slot rule's lowering counts there too.
    from memctl.search.relevance import FEATURES, SLOT_MISS_FACTOR, Calibration

    weights = (1.0,) + (0.0,) * (len(FEATURES) - 1)  # the cosine alone
    calibration = Calibration("m", (0.0,) * len(FEATURES), (1.0,) * len(FEATURES), weights, 0.0)
    evidence = dict.fromkeys(FEATURES, 0.0) | {"cosine": 2.0}
    plain = searched(calibration, evidence)
    assert plain == calibration.score(evidence) > 0.8
    assert searched(calibration, evidence | {SLOT_MISS: True}) == plain * SLOT_MISS_FACTOR
