"""The calibrated relevance of a search result: the estimated probability that the memory answers the query.

A search weighs several kinds of evidence about each candidate: the cosine of the query with the memory,
how far that cosine stands above the other candidates', the share of the query's words the memory
holds, its BM25 score, a query word in its keyword metadata, and where the fusion ranks it. One small
logistic model per embedding model turns that evidence into one number in [0, 1]; its parameters are
fitted on the tune half of the domain-split corpus by scripts/fit_relevance.py and shipped in
memctl/data/relevance/<model>.json. Every weight is kept >= 0, so more evidence never lowers the score.
After the model, one rule: a question for one exact value (a phone number, a price) scores a memory that
holds no value of that shape and does not name it at SLOT_MISS_FACTOR times the model's score.

The cosine alone means different things for different queries: with an English model, any two Chinese
sentences score about 0.6 and a short English question about 0.1 against unrelated text. `cosine_z`
measures the cosine against what the query scores with unrelated sentences: a fixed background sample
from the tune half's conversations (memctl/data/relevance/background.json), embedded once per model and
shipped beside the parameters (<model>.background.npy). The fit uses, for each question, only the
background sentences of other domains, as a search on an unseen domain does.

A model without shipped parameters (or `search_calibration: false`) keeps the plain formula
clamp((1 + cosine) / 2, 0, 1). Memory-vs-memory similarity (consolidation, forget) always uses the
plain formula: it measures closeness, not whether one text answers another.

numpy only at run time.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from memctl.errors import ConfigError
from memctl.text import cjk, stem, stopwords
from memctl.text.segment import has_cjk

if TYPE_CHECKING:
    from memctl.search.answered import Answered

# The evidence, in the order the parameters list their weights. All are "higher = more relevant".
FEATURES = (
    "cosine",  # cosine of the query as asked with the memory
    "cosine_gap",  # cosine minus the best cosine among the candidates (<= 0)
    "cosine_lift",  # cosine minus the mean cosine of the top dense candidates
    "overlap",  # share of the query's content words (CJK: character pairs) found in the memory
    "keyword",  # BM25 / best BM25 of the candidates (0 when the keyword side did not find it)
    "metadata",  # 1 when a query word is one of the memory's keyword metadata values
    "fused",  # the fusion's ranking score / the best one (hybrid), else the mode's own normalised score
    "answer_type",  # 1 when the query asks for a kind of answer (a time, an amount, a person) the memory holds
    "known_words",  # share of the query's keywords found anywhere in the store (same for every candidate)
    "cosine_z",  # the cosine's standing among background sentences: (cosine - their mean) / their spread
    "rare",  # share of the query's rare identifiers (an order number, a surname) the memory holds
    "slot_fit",  # 0 when the query asks for one exact value (a phone number, a price) the memory lacks, else 1
)
_WORD = re.compile(r"\w+", re.UNICODE)
_CJK = re.compile(f"[{cjk.MODEL_FEATURES}]+")
MIN_SPREAD = 0.02  # a floor on the background's spread, so a near-constant model cannot blow cosine_z up


def content_units(text: str) -> set[str]:
    """Words worth matching: stemmed lower-case words without stopwords; CJK runs as character pairs."""
    units: set[str] = set()
    lowered = text.lower()
    for run in _CJK.findall(lowered):
        units.update(run[i : i + 2] for i in range(max(1, len(run) - 1)))
    for word in _WORD.findall(_CJK.sub(" ", lowered)):
        if word in stopwords.ENGLISH or (len(word) == 1 and not word.isdigit()):
            continue
        units.add(stem.relevance(word))
    return units


def overlap(query_units: set[str], memory_text: str) -> float:
    """Share of the query's content units the memory text holds."""
    if not query_units:
        return 0.0
    return len(query_units & content_units(memory_text)) / len(query_units)


# What a question asks for, and how a memory that holds such an answer looks.
_ASKS = {
    "time": re.compile(
        r"\b(when|what time|which day|what day|what date|how often|how soon)\b"
        r"|几点|什么时候|哪天|哪一天|何时|多久一次|星期几|周几",
        re.IGNORECASE,
    ),
    "amount": re.compile(
        r"\b(how (much|many|long|big|large|old|far|fast)|what (percentage|percent|share|rate|size"
        r"|version|number))\b|多少|多大|多长|几个|几台|几年|百分之",
        re.IGNORECASE,
    ),
    "person": re.compile(r"\b(who|whom|whose)\b|谁", re.IGNORECASE),
}
_HOLDS = {
    "time": re.compile(
        r"\d{1,2}[:.]\d{2}|\b\d{1,2}\s?(am|pm)\b|\b(monday|tuesday|wednesday|thursday|friday|saturday"
        r"|sunday|weekday|weekend|daily|weekly|monthly|nightly|every|january|february|march|april|may"
        r"|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sep|sept"
        r"|oct|nov|dec|morning|evening|noon|midnight|deadline|until|before|after)\b|\d{4}-\d{2}"
        r"|[点号日月]|星期|周[一二三四五六日末]|每[天周月年晚]",
        re.IGNORECASE,
    ),
    "amount": re.compile(
        r"\d|\b(one|two|three|four|five|six|seven|eight|nine|ten|twelve|twenty|hundred|thousand"
        r"|million|half|double|twice)\b|[一二三四五六七八九十百千万两半]",
        re.IGNORECASE,
    ),
    # a capitalised word inside a sentence (a name; not "User"), or a word for a person
    "person": re.compile(
        r"(?<![.!?]\s)(?<!^)\b(?!User\b)[A-Z][a-z]+|(?i:\b(professor|prof|dr|supervisor|advisor"
        r"|manager|accountant|colleague|partner|wife|husband|sister|brother|mother|father|lead)\b)"
        r"|老师|教授|导师|同事|经理|会计"
    ),
}


# A question for one exact value: a phone number, an email address, a handle or password, a price. A memory
# that holds no value of that shape and does not name the thing asked for cannot answer it, however close its
# subject ("What's Dave's phone number?" against "Dave leads the club's test team"); one that names it ("Dave's
# number is in the club roster") is about it. Its score is multiplied by SLOT_MISS_FACTOR, and a rare query
# token it holds (the surname) no longer lifts it over the threshold. Measured on the tune half.
SLOT_MISS_FACTOR = 0.5


@dataclass(frozen=True)
class _Slot:
    asks: re.Pattern[str]  # the question asks for this kind of value
    holds: re.Pattern[str]  # the memory holds a value of its shape
    names: re.Pattern[str]  # the memory names the thing asked for


_SLOTS = {
    "phone": _Slot(
        re.compile(
            r"\b(phone|mobile|cell|telephone)\s+(number|no\.?|#)|手机号|电话(号码)?(是|多少)|(电话|手机)是多少", re.I
        ),
        re.compile(r"\d[\d\s().-]{5,}\d"),
        re.compile(r"\b(phone|mobile|cell|tel|telephone|number)\b|电话|手机|号码", re.I),
    ),
    "email": _Slot(
        re.compile(r"\be-?mail( address)?\s*\??\s*$|邮箱(地址)?(是|是多少|是什么)?\s*[？?]?\s*$", re.I),
        re.compile(r"@"),
        re.compile(r"\be-?mail\b|邮箱|邮件", re.I),
    ),
    "handle": _Slot(
        re.compile(
            r"\b(password|passcode|handle|username|user name|pin)\s*\??\s*$|(密码|群号|微信号)(是|是多少|多少)", re.I
        ),
        re.compile(r"@\w|\d{3,}|['\"‘“「『]"),
        re.compile(
            r"\b(password|passcode|passphrase|handle|username|user name|login|pin)\b|密码|账号|用户名|群号|微信号", re.I
        ),
    ),
    "price": _Slot(
        re.compile(
            r"\bhow much\b(?!\s+(time|longer|more time))[^?]{0,50}\b(cost|costs|charge|charges|pay|paid|spend|spent)\b"
            r"|\bwhat('s| is| was| are| were)?\b[^?]{0,40}\b(cost|price|fee|fees|salary|budget|rate|rates)\s*\??\s*$"
            r"|多少钱|(价格|价钱|费用|预算|面值|工资|押金|租金|会费|报名费|月薪|年薪)(是)?多少",
            re.I,
        ),
        # any number: an amount is often written without its currency ("rent is 1,450 a month")
        re.compile(r"\d|\bfree\b|免费|[一二三四五六七八九十百千万两半]\s*(元|块|镑|美元|欧元|刀|万)", re.I),
        re.compile(
            r"\b(cost|costs|price|priced|fee|fees|charge|charges|rate|salary|budget|pay|paid|rent)\b|价|费|钱|预算|工资|租金",
            re.I,
        ),
    ),
}


def slots(query: str) -> frozenset[str]:
    """The exact values a question asks for (phone, email, handle, price); empty for most questions."""
    return frozenset(kind for kind, slot in _SLOTS.items() if slot.asks.search(query))


def lacks(kinds: frozenset[str], memory_text: str) -> bool:
    """Whether the memory neither holds a value of any kind the question asks for nor names that kind
    (False when the question asks for none)."""
    return bool(kinds) and not any(
        _SLOTS[kind].holds.search(memory_text) or _SLOTS[kind].names.search(memory_text) for kind in kinds
    )


def asks(query: str) -> set[str]:
    """The kinds of answer a question asks for: time, amount, person (none for other questions)."""
    return {kind for kind, pattern in _ASKS.items() if pattern.search(query)}


def answer_type(kinds: set[str], memory_text: str) -> float:
    """1.0 when the memory holds an answer of a kind the question asks for."""
    return 1.0 if any(holds(kind, memory_text) for kind in kinds) else 0.0


def holds(kind: str, memory_text: str) -> bool:
    """Whether the memory holds an answer of one kind (a key of answer kinds `asks` returns)."""
    return _HOLDS[kind].search(memory_text) is not None


@dataclass(frozen=True)
class Calibration:
    """A fitted logistic model over FEATURES (standardised with mean/scale)."""

    model: str
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    default_threshold: float | None = None  # load's cut: answers found and never-said questions silent, balanced
    recall_threshold: float | None = None  # the recall block's lower cut (context an agent may ignore)
    # The background sentences' unit vectors (rows), or None: cosine_z is then 0 for every candidate.
    background: Any = field(default=None, compare=False, repr=False)
    # The parameters (mean, scale, weights, bias) for a question holding CJK text, fitted on those questions
    # alone, or None: one set for every question. The evidence means other things there: with an English
    # model the cosine of two Chinese sentences says little, and the character-pair overlap says more.
    cjk: tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...], float] | None = None
    # The question-level model `load` consults at default settings (memctl/search/answered.py), or None.
    answered: Answered | None = None

    def for_query(self, query: str) -> Calibration:
        """The parameters that score the candidates of `query`: the CJK set for a question with CJK text."""
        if self.cjk is None or not has_cjk(query):
            return self
        mean, scale, weights, bias = self.cjk
        return replace(self, mean=mean, scale=scale, weights=weights, bias=bias, cjk=None)

    def standing(self, vector: Any) -> tuple[float, float] | None:
        """(mean, spread) of the query vector's cosines with the background sentences, or None."""
        return standing(self.background, vector)

    def score(self, evidence: dict[str, float]) -> float:
        z = self.bias
        for name, mean, scale, weight in zip(FEATURES, self.mean, self.scale, self.weights, strict=True):
            z += weight * (float(evidence.get(name, mean)) - mean) / scale  # missing: no evidence either way
        return 1.0 / (1.0 + math.exp(-z)) if z > -50 else 0.0

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "model": self.model,
            "features": list(FEATURES),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "weights": list(self.weights),
            "bias": self.bias,
            "default_threshold": self.default_threshold,
            "recall_threshold": self.recall_threshold,
        }
        if self.cjk is not None:
            mean, scale, weights, bias = self.cjk
            doc["cjk"] = {"mean": list(mean), "scale": list(scale), "weights": list(weights), "bias": bias}
        if self.answered is not None:
            doc["answered"] = self.answered.to_dict()
        return doc

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "calibration") -> Calibration:
        """Parameters over FEATURES or a subset of them in the same order (a calibration fitted before a
        feature existed): a feature it does not list weighs 0."""
        try:
            listed = [str(name) for name in data["features"]]
            if listed != [name for name in FEATURES if name in listed]:
                raise ValueError(f"features {listed} are not {list(FEATURES)} or a subset in that order")
            values = [tuple(float(x) for x in data[k]) for k in ("mean", "scale", "weights")]
            if any(len(v) != len(listed) for v in values):
                raise ValueError("mean/scale/weights must have one value per feature")
            if any(s <= 0 for s in values[1]) or any(w < 0 for w in values[2]):
                raise ValueError("scales must be > 0 and weights >= 0")
            named = [dict(zip(listed, v, strict=True)) for v in values]
            fill = (0.0, 1.0, 0.0)  # an unlisted feature: mean 0, scale 1, weight 0
            mean, scale, weights = (tuple(v.get(n, d) for n in FEATURES) for v, d in zip(named, fill, strict=True))
            threshold, recall_threshold = data.get("default_threshold"), data.get("recall_threshold")
            cjk = None
            if data.get("cjk") is not None:  # the same checks, on the CJK questions' parameters
                own = cls.from_dict({**data["cjk"], "model": data["model"], "features": listed}, where)
                cjk = (own.mean, own.scale, own.weights, own.bias)
            answered = None
            if data.get("answered") is not None:
                from memctl.search.answered import Answered

                answered = Answered.from_dict(data["answered"], where)
            return cls(
                str(data["model"]),
                mean,
                scale,
                weights,
                float(data["bias"]),
                None if threshold is None else float(threshold),
                None if recall_threshold is None else float(recall_threshold),
                cjk=cjk,
                answered=answered,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where} is not a valid relevance calibration: {exc}") from exc


def file_name(model: str) -> str:
    """The parameter file of an embedding model: its name with anything but [A-Za-z0-9._-] as '_'."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", model) + ".json"


def background_file(model: str) -> str:
    """The file of a model's background vectors, beside its parameters."""
    return file_name(model)[: -len(".json")] + ".background.npy"


def standing(background: Any, vector: Any) -> tuple[float, float] | None:
    """(mean, spread) of `vector`'s cosines with the rows of `background` (unit vectors), or None."""
    if background is None or len(background) < 2:
        return None
    import numpy as np

    cosines = background @ np.asarray(vector, dtype=np.float32).reshape(-1)
    return float(cosines.mean()), max(float(cosines.std()), MIN_SPREAD)


def z_score(cosine: float, stand: tuple[float, float] | None) -> float:
    """cosine_z: how many spreads the cosine stands above the background's mean (0 without a background)."""
    return 0.0 if stand is None else (cosine - stand[0]) / stand[1]


@lru_cache(maxsize=16)
def shipped(model: str) -> Calibration | None:
    """The calibration shipped for an embedding model name, or None (plain formula)."""
    folder = resources.files("memctl") / "data" / "relevance"
    path = folder / file_name(model)
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    calibration = Calibration.from_dict(data, where=f"memctl/data/relevance/{file_name(model)}")
    vectors = folder / background_file(model)
    if not vectors.is_file():
        return calibration
    import numpy as np

    with vectors.open("rb") as handle:  # a plain array: no pickle
        background = np.load(handle, allow_pickle=False).astype(np.float32)
    return replace(calibration, background=background)


def fit(
    rows: list[list[float]],
    labels: list[int],
    model: str,
    *,
    l2: float = 1e-2,
    steps: int = 100,
    sample_weight: list[float] | None = None,
) -> Calibration:
    """Logistic regression with weights kept >= 0 (memctl.search.logistic), on rows over FEATURES."""
    from memctl.search.logistic import fit_logistic

    if any(len(row) != len(FEATURES) for row in rows) or len(rows) != len(labels) or len(set(labels)) < 2:
        raise ValueError("fit needs rows of len(FEATURES) values and both labels")
    got = fit_logistic(rows, labels, l2=l2, steps=steps, sample_weight=sample_weight)
    return Calibration(model, got.mean, got.scale, got.weights, got.bias)
