"""scripts/fit_relevance.py's background sentences: drawn reproducibly from the tune half, and what ships."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())  # tests/ or a folder of it
sys.path.insert(0, str(ROOT))

from scripts.fit_relevance import (  # noqa: E402
    Background,
    build_background,
    reliability,
    training_rows,
)

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


def test_training_weighs_questions_as_the_corpus_mixes_them():
    from memctl.search.relevance import FEATURES
    from scripts.fit_relevance import SYNTHETIC

    ev = dict.fromkeys(FEATURES, 0.0)
    answerable = [(f"q{i}", [ev, ev, ev], [1, 0, 0], "a") for i in range(5)] + [("q", [ev], [1], "a")]
    negative = [(f"n{i}", [ev, ev], [0, 0], "b") for i in range(2)]
    synthetic = [(SYNTHETIC + f"s{i}", [ev, ev], [0, 0], "c") for i in range(40)]
    rows, labels, weights = training_rows([answerable + negative, synthetic])
    assert len(rows) == len(labels) == len(weights) == 16 + 4 + 80 and sum(labels) == 6
    assert abs(sum(weights[:16]) - 0.75) < 1e-9  # 6 answerable to 2 never said
    assert abs(sum(weights[16:20]) - 0.125) < 1e-9 and abs(sum(weights[20:]) - 0.125) < 1e-9
    assert abs(weights[15] - 0.75 / 6) < 1e-9  # the one-candidate question carries its whole share


def test_reliability_table_and_expected_calibration_error():
    perfect = [(0.25, 1, 1.0)] + [(0.25, 0, 1.0)] * 3 + [(0.95, 1, 1.0)] * 19 + [(0.95, 0, 1.0)]
    table, ece = reliability(perfect)
    assert ece < 1e-9 and table[2][0] == 4 and abs(table[2][3] - 0.25) < 1e-9
    overconfident = [(0.9, 0, 1.0), (0.9, 1, 1.0)]
    assert abs(reliability(overconfident)[1] - 0.4) < 1e-9


def test_one_memory_store_questions_carry_their_share_and_leave_the_rest_in_proportion():
    from memctl.search.relevance import FEATURES
    from scripts.fit_relevance import SMALL

    ev = dict.fromkeys(FEATURES, 0.0)
    answerable = [(f"q{i}", [ev, ev], [1, 0], "a") for i in range(6)]
    negative = [(f"n{i}", [ev], [0], "a") for i in range(2)]
    small = [(SMALL + "q", [ev], [1], "a"), (SMALL + "q", [ev], [0], "a"), (SMALL + "n", [ev], [0], "a")]
    rows, labels, weights = training_rows([answerable + negative, small], small_share=0.2)
    assert abs(sum(weights[:12]) - 0.75 * 0.8) < 1e-9 and abs(sum(weights[12:14]) - 0.25 * 0.8) < 1e-9
    assert abs(weights[14] - 0.75 * 0.2) < 1e-9 and abs(sum(weights[15:]) - 0.25 * 0.2) < 1e-9


def test_fit_reaches_the_constrained_optimum():
    """The projected Newton fit: a feature that predicts the label gets a positive weight, one that predicts
    it backwards is held at 0 (weights >= 0), and the gradient vanishes on the free weights."""
    import numpy as np

    from memctl.search.relevance import FEATURES, fit

    rng = np.random.default_rng(3)
    x = rng.normal(size=(4000, len(FEATURES)))
    logit = 1.5 * x[:, 0] - 2.0 * x[:, 1] + 0.5
    y = (rng.random(4000) < 1 / (1 + np.exp(-logit))).astype(int)
    c = fit(x.tolist(), y.tolist(), "m", l2=1e-3)
    assert c.weights[0] > 0.5 and c.weights[1] == 0.0
    xs = (x - np.array(c.mean)) / np.array(c.scale)
    p = 1 / (1 + np.exp(-(xs @ np.array(c.weights) + c.bias)))
    grad = xs.T @ (p - y) / len(y) + 1e-3 * np.array(c.weights)
    free = np.array(c.weights) > 0
    assert np.abs(grad[free]).max() < 1e-6 and abs(float((p - y).mean())) < 1e-6
    assert (grad[~free] >= 0).all()  # a weight held at 0 could not lower the loss by rising


def test_the_small_store_threshold_is_the_lowest_reaching_the_silence():
    """small_store_threshold looks only at questions that saw at most SMALL_STORE candidates and whose store
    lacks the answer, and returns the lowest threshold at which the asked share of them get nothing."""
    import math

    from scripts.fit_relevance import QUESTION_FEATURES, SMALL_STORE, Question, small_store_threshold

    def question(candidates: int, kind: str) -> Question:
        features = [0.0] * len(QUESTION_FEATURES)
        features[QUESTION_FEATURES.index("candidates_log")] = math.log1p(candidates)
        return Question(features, kind, True, "d", 1.0, [(0.9, 0)], False)

    questions = [question(3, "negative") for _ in range(10)] + [question(SMALL_STORE + 5, "negative")]
    prob = np.array([i / 10 for i in range(10)] + [0.99])  # 0.0 ... 0.9; the large store's is ignored

    def rates(cut, threshold, mask):
        silent = (prob < threshold)[mask]
        return 0, 0, int(silent.sum()), int(mask.sum())

    assert small_store_threshold(questions, prob, rates, 0.03, 0.8) == 0.71  # 8 of 10 below 0.71, not 0.70
    assert small_store_threshold(questions, prob, rates, 0.03, 0.0) is None


def test_saved_questions_read_back_as_they_were_written():
    """--save-questions writes each held-out question with dataclasses.asdict to JSON; --questions reads it back
    with question_from_dict, equal field by field (the shown pairs as tuples again, the one-store mark kept)."""
    import json
    from dataclasses import asdict

    from scripts.fit_relevance import QUESTION_FEATURES, Question, question_from_dict

    written = [
        Question([0.5] * len(QUESTION_FEATURES), "answerable", False, "d", 0.25, [(0.9, 1), (0.1, 0)], True),
        Question([0.1] * len(QUESTION_FEATURES), "negative", False, "e", 0.5, [(0.2, 0)], False, pooled=True),
    ]
    text = json.dumps({"questions": [asdict(q) for q in written]})
    read = [question_from_dict(doc) for doc in json.loads(text)["questions"]]
    assert read == written
    assert read[0].shown == [(0.9, 1), (0.1, 0)] and read[1].pooled and not read[0].pooled


def test_a_stored_answer_beyond_the_candidates_is_missed_not_never_said(tmp_path: Path):
    """never_said reads the null probes of a folder (a question some probe of its domain answers is not one), and
    question_kind tells the kinds apart: a corpus store's question without its answer among the candidates is
    `negative` only when nothing answers it, else `missed`; a small store's stays `negative` (the store lacks
    it); another series' question is `synthetic`; without the never-said set every such question is negative."""
    from scripts.fit_relevance import SMALL, SYNTHETIC, never_said, question_kind

    transcript = {
        "id": "tune-d-01",
        "series": "tune-d",
        "domain": "d",
        "half": "tune",
        "language": "en",
        "messages": [{"role": "user", "content": "The boiler is serviced by Ana every May."}],
        "expected_fragments": ["The boiler is serviced by Ana every May."],
        "recall_probes": [
            {"query": "Who services the boiler?", "should_recall": "The boiler is serviced by Ana every May."},
            {"query": "What is Ana's phone number?", "should_recall": None},
        ],
    }
    (tmp_path / "d-01.json").write_text(json.dumps(transcript), encoding="utf-8")
    never = never_said([tmp_path])
    assert never == {("d", "What is Ana's phone number?")}
    assert question_kind("Who services the boiler?", [0, 1], "d", never) == "answerable"
    assert question_kind("Who services the boiler?", [0, 0], "d", never) == "missed"
    assert question_kind("What is Ana's phone number?", [0, 0], "d", never) == "negative"
    assert question_kind(SMALL + "Who services the boiler?", [0], "d", never) == "negative"
    assert question_kind(SYNTHETIC + "Who services the boiler?", [0, 0], "d", never) == "synthetic"
    assert question_kind(SMALL + SYNTHETIC + "Who?", [0], "d", never) == "synthetic"
    assert question_kind("Who services the boiler?", [0, 0], "d", None) == "negative"


def test_the_large_store_threshold_is_the_lowest_reaching_the_silence_in_fine_steps():
    """lowest_silent_threshold walks up in steps of 0.0025 (a large store's threshold lies near 1, where a step
    of 0.01 is coarse) and returns the first at which the asked share of the masked questions get nothing."""
    from scripts.fit_relevance import lowest_silent_threshold

    prob = np.array([0.95, 0.96, 0.97, 0.975, 0.99, 0.2])
    mask = np.array([True] * 5 + [False])

    def rates(cut, threshold, chosen):
        return 0, 0, int((prob < threshold)[chosen].sum()), int(chosen.sum())

    assert lowest_silent_threshold(mask, rates, 0.03, 0.8) == 0.9775  # 4 of 5 below it, not at 0.975
    assert lowest_silent_threshold(mask, rates, 0.03, 0.0) is None
    assert lowest_silent_threshold(np.zeros(6, bool), rates, 0.03, 0.8) is None


def test_store_sizes_are_the_median_series_and_the_whole_folder(tmp_path: Path):
    """store_sizes counts the stored memories of the named domains' series: the median series, and the sum."""
    from scripts.fit_relevance import store_sizes

    for domain, facts in (("a", 2), ("b", 4), ("c", 9)):
        transcript = {
            "id": f"tune-{domain}-01",
            "series": f"tune-{domain}",
            "domain": domain,
            "half": "tune",
            "language": "en",
            "messages": [{"role": "user", "content": "x"}],
            "expected_fragments": [f"Fact {i} of {domain}." for i in range(facts)],
        }
        (tmp_path / f"{domain}-01.json").write_text(json.dumps(transcript), encoding="utf-8")
    assert store_sizes([tmp_path], {"a", "b"}) == (3, 6)
    assert store_sizes([tmp_path], {"a", "b", "c"}) == (4, 15)
