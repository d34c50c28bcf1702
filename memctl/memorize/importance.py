"""Importance assigned when a memory is written (the stored value and its decay: memctl.search.importance).

- `memorize` rates each kept candidate with `Rater`: a base value (`importance_base`, or the utility
  model's own judgement when its extraction reply carries one), raised when the person said the
  thing as something to keep ("always", "never", "from now on", "remember that", "I prefer",
  以后都, 记住, 我喜欢, 不要再 ...), lowered when it was said as a one-off ("today", "this time",
  "for now", 今天, 这次, 暂时 ...). The signal is looked for in the user's sentences that the
  candidate came from (word overlap, CJK character pairs included) and in the candidate's text.
- `save --importance`, `update --importance` set it by hand; knowledge chunks get
  `knowledge_importance`.

Core module: no typer/rich.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memctl.text.cjk import HAN_PAIRS
from memctl.text.stem import plural
from memctl.text.stopwords import IMPORTANCE

# Keep-signals: a person telling the assistant that something holds beyond this conversation.
KEEP_EN = re.compile(
    r"\b(always|never|from now on|going forward|from here on|in (the )?future|remember (that|this)|"
    r"please remember|don'?t forget|keep in mind|every time|whenever|by default|"
    r"i (really )?(prefer|like|love|hate|dislike|want you to|need you to)|i'?d rather|"
    r"do not ever|don'?t ever|never ever|stop (using|doing|sending|calling)|no more|"
    r"make sure (to|you)|must|mustn'?t|rules?|polic(y|ies)|allerg(y|ies|ic))\b",
    re.IGNORECASE,
)
KEEP_ZH = re.compile(
    r"以后.{0,8}都|以后一律|以后请|从现在起|从现在开始|从今以后|今后|记住|记得|别忘了|"
    r"我喜欢|我更喜欢|我偏好|我习惯|我讨厌|我不喜欢|不要再|别再|千万别|千万不要|一律|"
    r"永远|总是|始终|每次|务必|必须|默认|过敏"
)
# The ones that speak about remembering itself: the only ones that count for a solution, whose symptom
# is often told with "never" or "every time" ("the login page never appears").
KEEP_EXPLICIT = re.compile(
    r"\b(from now on|going forward|remember (that|this)|please remember|don'?t forget|"
    r"keep in mind)\b|以后都|以后一律|从现在起|从现在开始|从今以后|记住|记得|别忘了",
    re.IGNORECASE,
)
# The same idea as written by the extraction prompt ("User prefers ...", "... must ...").
KEEP_TEXT = re.compile(
    r"\b(prefers?|likes|dislikes|hates|wants (answers|replies|responses|the assistant)|"
    r"always|never|must|should always|should never|rules?|polic(y|ies)|allerg(y|ies|ic))\b",
    re.IGNORECASE,
)
KEEP_TEXT_ZH = re.compile(
    r"喜欢|偏好|习惯|讨厌|不喜欢|不要|不用|别用|不吃|总是|永远|始终|一律|每次|"
    r"必须|务必|默认|过敏|规则"
)
# One-off: tied to this moment, so less worth keeping even if it passed the quality gate.
ONE_OFF_EN = re.compile(
    r"\b(today|tonight|this (time|morning|afternoon|evening|week)|tomorrow|right now|"
    r"for now|just (this )?once|one-off|one off|temporarily|at the moment|for the moment)\b",
    re.IGNORECASE,
)
ONE_OFF_ZH = re.compile(r"今天|今晚|明天|这次|这一次|本次|暂时|临时|这周|本周|现在先|先这样")

CLAUSE = re.compile(r"[,;:](?=\s)|[，；：、]")
LEAD_IN_WORDS = 3  # a clause this short that carries a keep-signal ("From now on,") lends it to the next one
SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n")  # not inside "3.9" or "v1.2"
LATIN = re.compile(r"[a-z0-9][a-z0-9_+#.\-]*[a-z0-9+#]|[a-z0-9]", re.IGNORECASE)
CJK = re.compile(f"[{HAN_PAIRS}]+")


@dataclass(frozen=True)
class Weights:
    """How much each signal moves the value (config keys importance_*)."""

    base: float = 0.5
    keep: float = 0.3  # a keep-signal in the user's own sentence
    keep_text: float = 0.2  # a keep-signal only in the candidate's wording
    one_off: float = 0.2  # subtracted for a one-off marker
    min_overlap: float = 0.5  # shared words / the smaller word set, for a user clause to be a candidate's source

    @classmethod
    def from_config(cls, config: Any) -> Weights:
        return cls(
            base=float(config["importance_base"]),
            keep=float(config["importance_keep_boost"]),
            keep_text=float(config["importance_keep_boost"]) * 2 / 3,
            one_off=float(config["importance_one_off_penalty"]),
        )


@dataclass
class Rating:
    value: float
    reasons: list[str] = field(default_factory=list)


def tokens(text: str) -> set[str]:
    """Content words: Latin words (no stop words) and the character pairs of CJK runs."""
    found = {plural(w.lower()) for w in LATIN.findall(text) if w.lower() not in IMPORTANCE}
    for run in CJK.findall(CJK_STOP.sub(" ", text)):
        found.update([run] if len(run) == 1 else (run[i : i + 2] for i in range(len(run) - 1)))
    return found


CJK_STOP = re.compile(r"用户的?|我的?|你的?")  # the extraction's "用户" is the user's "我", like "user"/"I"


def sentences(texts: Sequence[str]) -> list[str]:
    return [s.strip() for t in texts for s in SENTENCE.split(t) if s.strip()]


def keep_signal(text: str) -> str | None:
    match = KEEP_EN.search(text) or KEEP_ZH.search(text)
    return match.group(0) if match else None


def one_off_signal(text: str) -> str | None:
    match = ONE_OFF_EN.search(text) or ONE_OFF_ZH.search(text)
    return match.group(0) if match else None


@dataclass(frozen=True)
class Clause:
    text: str
    words: frozenset[str]
    keep: str | None  # its keep-signal, or that of a short lead-in before it ("From now on, ...")
    once: str | None
    explicit: bool = False  # the keep-signal speaks about remembering (KEEP_EXPLICIT)


def clauses(user_texts: Sequence[str]) -> list[Clause]:
    """The user's sentences cut at commas, semicolons and colons: one statement each, so the "always" of
    "we use Django, and I always want Spanish" raises only the memory about Spanish."""
    found: list[Clause] = []
    for sentence in sentences(user_texts):
        question = sentence.rstrip().endswith(("?", "？"))  # "why does it never hit?" asks, it keeps nothing
        parts = [p.strip() for p in CLAUSE.split(sentence) if p.strip()]
        lead: str | None = None
        heading: str | None = None  # "Standing rules: British spelling, sources from 2020 on" covers the list
        for part in parts:
            words = frozenset(tokens(part))
            keep = None if question else keep_signal(part)
            signal = keep or lead or heading
            found.append(
                Clause(part, words, signal, one_off_signal(part), bool(signal and KEEP_EXPLICIT.search(signal)))
            )
            lead = keep if keep and len(words) <= LEAD_IN_WORDS else None
            if keep and _before_colon(sentence, part):
                heading = keep
    return found


def _before_colon(sentence: str, part: str) -> bool:
    end = sentence.find(part) + len(part)
    return sentence[end : end + 1] in (":", "：")


class Rater:
    """Rates the candidates of one conversation: `Rater(user_texts).rate(candidate)`."""

    def __init__(self, user_texts: Sequence[str], weights: Weights | None = None) -> None:
        self.weights = weights or Weights()
        self.sources = [c for c in clauses(user_texts) if len(c.words) >= 2]

    def source_clauses(self, text: str) -> list[Clause]:
        """The user's clauses that say (part of) the candidate: shared content words over the smaller
        of the two word sets at least `min_overlap`."""
        words = tokens(text)
        if not words:
            return []
        return [
            c for c in self.sources if len(words & c.words) / min(len(words), len(c.words)) >= self.weights.min_overlap
        ]

    def rate(self, text: str, area: str = "fragments", model_value: float | None = None) -> Rating:
        """The candidate's importance. For solutions only the user's own words count: "must", "never"
        or "temporary" in a fix describe the fix, not how long to keep it."""
        w = self.weights
        start = w.base if model_value is None else model_value
        rating = Rating(start, ["model judgement" if model_value is not None else "base"])
        said = self.source_clauses(text)
        keep = next((c.keep for c in said if c.keep and (area != "solutions" or c.explicit)), None)
        if keep:
            rating.value += w.keep
            rating.reasons.append(f"keep-signal in the user's words: {keep!r}")
        elif area != "solutions":
            match = KEEP_TEXT.search(text) or KEEP_TEXT_ZH.search(text)
            if match:
                rating.value += w.keep_text
                rating.reasons.append(f"keep-signal in the memory: {match.group(0)!r}")
        once = (None if area == "solutions" else one_off_signal(text)) or next((c.once for c in said if c.once), None)
        if once and not keep:
            rating.value -= w.one_off
            rating.reasons.append(f"one-off: {once!r}")
        rating.value = round(min(1.0, max(0.0, rating.value)), 2)
        return rating
