"""Grounding and echo: is a candidate supported by what the user or a tool said, or only recalled?

Words are compared as stems for alphabetic scripts and as character bigrams for Han, kana and
Hangul runs (Chinese has no spaces between words, so a whitespace "word" is a whole clause there).
A candidate in one language about a conversation held in another cannot be matched word by word:
then only its names and numbers are checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memctl.text.calendar_words import said_otherwise
from memctl.text.cjk import GROUNDING as CJK_CHARS
from memctl.text.stem import grounding as stem
from memctl.text.stopwords import GROUNDING as _STOPWORDS

if TYPE_CHECKING:
    import numpy as np

    from memctl.memorize.transcripts import Message

CJK_RUN = re.compile(f"[{CJK_CHARS}]+")
_LATIN_WORD = re.compile(f"[^\\W_{CJK_CHARS}]+")

# Words that frame a memory without carrying its content ("User prefers ...").
_FRAME = set(
    """
user user's users assistant agent prefer prefers preferred preference want wants like likes use uses using used
always never should must need needs please keep thing things way lot always also really
""".split()
)
# The same frame in Chinese: bigrams of 用户 (user), 助手 (assistant), 喜欢/偏好 (prefers) ... carry no content.
_FRAME_GRAMS = frozenset("用户 助手 喜欢 偏好 希望 需要 使用 总是 一直 我们 他们 这个 那个 什么 可以 应该 请用".split())


def cjk_share(text: str) -> float:
    """Share of the letters of `text` written in a CJK script."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return 0.0
    return sum(1 for c in letters if CJK_RUN.match(c)) / len(letters)


def cjk_grams(text: str) -> list[str]:
    """Character bigrams of every CJK run (a one-character run counts as itself)."""
    grams: list[str] = []
    for run in CJK_RUN.findall(text):
        grams += [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
    return grams


def content_stems(text: str) -> list[str]:
    """Content units of `text`: stems of its words, and bigrams of its CJK runs (frame words left out)."""
    out: list[str] = []
    for word in _LATIN_WORD.findall(text):
        low = word.lower()
        if low in _STOPWORDS or low in _FRAME or len(low) < 2:
            continue
        out.append(stem(low))
    out += [g for g in cjk_grams(text) if g not in _FRAME_GRAMS and len(g) == 2]
    return list(dict.fromkeys(out))


def key_entities(text: str) -> list[str]:
    """Names and numbers a statement hinges on: capitalised inside the sentence, ALLCAPS, with digits."""
    found: list[str] = []
    for position, word in enumerate(re.findall(f"[^\\W_{CJK_CHARS}][\\w.\\-]*[^\\W_]|[^\\W_{CJK_CHARS}]", text)):
        word = CJK_RUN.split(word)[0]  # "ACK上" -> "ACK": a name glued to Chinese text
        if len(word) < 1 or word.lower() in _STOPWORDS or word.lower() in _FRAME:
            continue
        if any(c.isdigit() for c in word) or (position > 0 and word[0].isupper()):
            found.append(word)
    return list(dict.fromkeys(found))


# Language and nationality words: a conversation held in a language rarely names it.
_IMPLIED = frozenset(
    """english british american german french spanish chinese mandarin cantonese japanese korean
italian portuguese brazilian dutch russian arabic hindi polish swedish norwegian danish finnish turkish greek czech
ukrainian hebrew vietnamese thai indonesian""".split()
)
_NUMBER_WORDS = {
    str(i): w for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())
}
_CJK_DIGITS = "零一二三四五六七八九十"

# An embedder function: texts -> normalised vectors (rows).
EmbedFn = Callable[[list[str]], "np.ndarray"]


@dataclass
class Grounding:
    """What a candidate may be grounded in: the user's and tools' messages, minus recalled memories."""

    evidence: list[str]
    recalled: list[str] = field(default_factory=list)
    # what the assistant said too: solutions are usually worked out by the agent itself
    discussion: list[str] = field(default_factory=list)
    embed: EmbedFn | None = None
    min_overlap: float = 0.3
    similarity: float = 0.8
    echo_similarity: float = 0.9
    _units: set[str] = field(default_factory=set, init=False, repr=False)
    _lower: str = field(default="", init=False, repr=False)
    _user_cjk: bool = field(default=False, init=False, repr=False)
    _has_cjk: bool = field(default=False, init=False, repr=False)
    _all_units: set[str] = field(default_factory=set, init=False, repr=False)
    _vectors: Any = field(default=None, init=False, repr=False)
    _recalled_vectors: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        joined = "\n".join(self.evidence)
        self._lower = joined.lower()
        self._units = _units_of(joined)
        # the user's own language decides whether words can be matched at all (tool output is English)
        self._user_cjk = cjk_share(self.evidence[0] if self.evidence else "") > 0.2 or cjk_share(joined) > 0.2
        self._has_cjk = bool(CJK_RUN.search(joined))
        self._all_units = self._units | _units_of("\n".join(self.discussion))

    @classmethod
    def from_messages(cls, messages: Iterable[Message], recalled: Sequence[str] = (), **options: Any) -> Grounding:
        evidence: list[str] = []
        discussion: list[str] = []
        user_text: list[str] = []
        found_recalled: list[str] = list(recalled)
        for message in messages:
            text, quoted = split_recalled(message.content)
            found_recalled += quoted
            if not text.strip() or message.role == "system":
                continue
            discussion.append(text)
            if message.role == "user":
                user_text.append(text)
            if message.role in ("user", "tool"):
                evidence.append(text)
        if user_text:  # the first evidence item decides the language check
            evidence.insert(0, "\n".join(user_text))
        return cls(evidence, list(dict.fromkeys(found_recalled)), discussion, **options)

    def support(self, text: str) -> tuple[float, list[str]]:
        """(share of content units found in the evidence, key entities missing from it)."""
        units = content_stems(text)
        # "Tuesday" for "Tue", "7pm" for "19:00": found, in another form
        otherwise = {stem(w.lower()) for w in _LATIN_WORD.findall(text) if said_otherwise(w.lower(), self._lower)}
        found = [
            u
            for u in units
            if u in self._units or u in otherwise or (len(u) >= 5 and any(e.startswith(u) for e in self._units))
        ]
        coverage = len(found) / len(units) if units else 1.0
        missing = [e for e in key_entities(text) if not self._mentions(e)]
        return coverage, missing

    def grounds_change(self, text: str, old: str) -> bool:
        """Whether the transcript gives what `text` changes in `old`, a stored memory it would update: its names and
        numbers that `old` lacks (at least one) are all said. A new value is often written out in full, the
        slot's context taken from an earlier conversation ("…胆红素改为每天上午8点半和下午4点各测一次" for "上午那次
        改到8点半"): the context is grounded by the store, the change must be by the transcript."""
        before = {e.lower() for e in key_entities(old)}
        changed = [e for e in key_entities(text) if e.lower() not in before]
        return bool(changed) and all(self._said(e) for e in changed)

    def _said(self, entity: str) -> bool:
        """`_mentions`, a number only as a whole number ("8" in "8点半", not in "18" or "0.8")."""
        if entity.replace(".", "").isdigit():
            return re.search(rf"(?<![\d.]){re.escape(entity)}(?![\d]|\.\d)", self._lower) is not None
        return self._mentions(entity)

    def _mentions(self, entity: str) -> bool:
        low = entity.lower()
        if low in self._lower or stem(low) in self._units or low in _IMPLIED:
            return True
        if low in _NUMBER_WORDS and re.search(rf"\b{_NUMBER_WORDS[low]}\b", self._lower):
            return True  # "3 kids" ~ "three kids"
        if low.isdigit() and len(low) == 1 and _CJK_DIGITS[int(low)] in self._lower:
            return True  # "3 kids" ~ "三个孩子"
        if said_otherwise(low, self._lower):
            return True  # "Tuesday" ~ "Tue", "7pm" ~ "19:00", "2027" ~ "next year"
        return len(low) >= 6 and low[:5] in self._lower  # PostgreSQL ~ Postgres

    def _cross_language(self, text: str) -> bool:
        """Written in another script than the conversation: words cannot be matched, only names."""
        mine = cjk_share(text) > 0.2
        return mine != self._user_cjk and not (mine and self._has_cjk)

    def check(self, text: str, area: str = "fragments") -> tuple[str, str] | None:
        echoed = self.echo_of(text)
        if echoed is not None:
            return "echo", echoed
        if not self.evidence:
            return None
        if area == "solutions":
            return self._check_solution(text)
        coverage, missing = self.support(text)
        if self._cross_language(text):
            missing = [e for e in missing if any(c.isdigit() for c in e) or e.isupper()]
            entities = [e for e in key_entities(text) if any(c.isdigit() for c in e) or e.isupper()]
            if entities and len(missing) > len(entities) / 2:
                return "ungrounded", "not in the transcript: " + ", ".join(missing)
            return None
        entities = key_entities(text)
        # most of its names are not in the transcript, and neither are most of its words: invented
        entity_gap = bool(missing) and len(missing) > len(entities) / 2 and coverage < 0.75
        if coverage >= self.min_overlap and not entity_gap:
            return None
        if not entity_gap and self._similar_to_evidence(text) >= self.similarity:
            return None
        words = ", ".join(missing) if entity_gap else f"{coverage:.0%} of its words found"
        return "ungrounded", words

    def _check_solution(self, text: str) -> tuple[str, str] | None:
        """Know-how is often worked out by the agent: any message of the conversation may support it."""
        if self._cross_language(text):
            return None
        units = content_stems(text)
        found = [u for u in units if u in self._all_units]
        coverage = len(found) / len(units) if units else 1.0
        if coverage >= self.min_overlap or self._similar_to_evidence(text) >= self.similarity:
            return None
        return "ungrounded", f"{coverage:.0%} of its words found in the conversation"

    def _similar_to_evidence(self, text: str) -> float:
        if self.embed is None or not self.evidence:
            return 0.0
        import numpy as np

        if self._vectors is None:
            self._vectors = self.embed(_chunks(self.evidence))
        vector = self.embed([text])[0]
        return float((1.0 + np.max(self._vectors @ vector)) / 2.0)

    def echo_of(self, text: str) -> str | None:
        """The recalled memory `text` restates, if any (by wording, or by embedding when available)."""
        if not self.recalled:
            return None
        mine = set(content_stems(text))
        for memory in self.recalled:
            theirs = set(content_stems(memory))
            if mine and theirs and len(mine & theirs) / len(mine) >= 0.8 and len(mine & theirs) / len(theirs) >= 0.6:
                return memory
        if self.embed is None:
            return None
        import numpy as np

        if self._recalled_vectors is None:
            self._recalled_vectors = self.embed(list(self.recalled))
        scores = (1.0 + self._recalled_vectors @ self.embed([text])[0]) / 2.0
        best = int(np.argmax(scores))
        return self.recalled[best] if scores[best] >= self.echo_similarity else None


def _units_of(text: str) -> set[str]:
    units = {stem(w) for w in _LATIN_WORD.findall(text)}
    return units | set(cjk_grams(text))


def _chunks(texts: Sequence[str], size: int = 400, limit: int = 400) -> list[str]:
    """Evidence split into embeddable pieces (lines, then fixed windows), at most `limit` of them."""
    out: list[str] = []
    for text in texts:
        for line in text.splitlines():
            line = line.strip()
            while line:
                out.append(line[:size])
                line = line[size:]
    return out[-limit:] or [""]


# --- recalled blocks ----------------------------------------------------------------------------------


def recall_headings() -> list[str]:
    """The headings `memctl recall` renders (from prompts/recall_*.md), so echoes can be spotted."""
    from memctl.llm import load_template

    headings = []
    for name in ("recall_rules", "recall_memories", "recall_solutions"):
        try:
            first = load_template(name).strip().splitlines()[0]
        except Exception:  # noqa: BLE001 - a missing template only weakens echo detection
            continue
        if first.startswith("#"):
            headings.append(first.strip())
    return headings


def split_recalled(text: str) -> tuple[str, list[str]]:
    """(text without recalled blocks, the memories those blocks listed)."""
    from memctl.memorize.provenance import strip_label

    headings = recall_headings()
    if not headings or not any(h in text for h in headings):
        return text, []
    kept: list[str] = []
    quoted: list[str] = []
    inside = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in headings:
            inside = True
            continue
        if inside and stripped.startswith("#"):
            inside = False
        if inside:
            if stripped.startswith(("- ", "* ")):
                quoted.append(strip_label(stripped[2:].strip()))  # without "[date, source]"
                continue
            if not stripped:
                continue
            if quoted and line.startswith((" ", "\t")):
                quoted[-1] += " " + stripped
                continue
            inside = False
        kept.append(line)
    return "\n".join(kept), quoted


def parse_recalled(raw: str) -> list[str]:
    """Memories from a `--recalled` file: recall's prompt block, its JSON, or one memory per line."""
    import json

    text = raw.strip()
    if not text:
        return []
    if text[0] in "[{":
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            items = [i for key in ("memories", "solutions", "results") for i in data.get(key) or []]
            return [str(i.get("text", "")) for i in items if isinstance(i, dict) and i.get("text")]
        if isinstance(data, list):
            return [str(i.get("text", i)) if isinstance(i, dict) else str(i) for i in data if i]
    _, quoted = split_recalled(text)
    if quoted:
        return quoted
    return [
        line.strip().lstrip("-* ").strip()
        for line in text.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
