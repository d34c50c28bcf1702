"""Words of Chinese, Japanese and Korean text, for the keyword index and keyword queries.

CJK text has no spaces between words, so a tokenizer that splits on spaces and punctuation (SQLite
FTS5's unicode61, PostgreSQL's default parser) keeps a whole clause as one token and no Chinese
word is ever found. memctl splits the two sides differently, so that they always agree:

- Index side (`index_text`): every CJK character becomes its own token (a space either side).
  Deterministic, dictionary-free and cheap; nothing to import when a memory is written.
- Query side (`words`): a CJK run is cut into words — Chinese into overlapping character pairs,
  or with rjieba (jieba's dictionary) where it is installed (`memctl[multilingual]`; imported only
  when a query holds Han characters), Japanese at script changes (kanji compounds,
  katakana words; short hiragana runs are particles), Korean by the space-separated word minus
  its trailing particle. Each query word is then searched as a phrase of its characters
  (`phrase`), i.e. as an exact substring: "气象站" finds "我在气象站工作" whatever a segmenter
  would have made of the stored sentence.

So the keyword rules that count documents per query word (common words, rare tokens, BM25's
IDF) see words (or pairs), not characters. Pairs find every word of two characters or more; jieba's
words also find one-character words inside a run (猫 in 我的猫叫什么). Keyword Recall@5 on the
Chinese probes of the tune half was the same either way (20/28), and importing rjieba costs a cold
`load` 0.1 s (0.55 s on a busy machine), so it is not part of the core install.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache, lru_cache
from typing import Any

from memctl.text.cjk import FULL as CJK_CLASS
from memctl.text.cjk import HAN, HANGUL, HIRAGANA, KATAKANA

# The lowest code point of any CJK character above: text below it is left to the \\w+ path without
# compiling the CJK patterns (compiling them costs ~6 ms, which a CLI call on English text skips).
_FIRST_CJK = "\u1100"
_WORD = re.compile(r"\w+")


@cache
def _pattern(name: str) -> re.Pattern[str]:
    """The compiled CJK patterns, on first use."""
    return re.compile(
        {
            "char": f"[{CJK_CLASS}]",
            # A query piece: a run of CJK characters, or of other word characters ("用Python写" is three).
            "piece": f"[{CJK_CLASS}]+|[^\\W{CJK_CLASS}]+",
            "script": f"(?P<han>[{HAN}]+)|(?P<hira>[{HIRAGANA}]+)|(?P<kata>[{KATAKANA}]+)|(?P<hangul>[{HANGUL}]+)",
            "kana": f"[{HIRAGANA}{KATAKANA}]",
        }[name]
    )


def piece_pattern() -> re.Pattern[str]:
    """A run of CJK characters, or a run of other word characters."""
    return _pattern("piece")


# Korean particles (josa) that attach to the end of a word, longest first.
_HANGUL_PARTICLES = sorted(
    """
에서는 에게서 으로는 으로서 으로써 까지는 부터는 에서 에게 한테 으로 로서 로써 까지 부터 처럼 보다 마다 이랑 하고 께서
은 는 이 가 을 를 의 에 와 과 도 만 로 랑 께
""".split(),
    key=len,
    reverse=True,
)


def has_cjk(text: str) -> bool:
    """Whether `text` holds a Chinese, Japanese or Korean character."""
    return bool(text) and max(text) >= _FIRST_CJK and _pattern("char").search(text) is not None


def index_text(text: str | None) -> str | None:
    """`text` as the keyword index tokenises it: each CJK character a token of its own."""
    if not text or not has_cjk(text):
        return text
    return _pattern("char").sub(r" \g<0> ", text)


def phrase(word: str) -> str:
    """The index tokens of one query word, space-separated (a phrase when more than one)."""
    return " ".join(index_text(word).split()) if has_cjk(word) else word  # type: ignore[union-attr]


def words(text: str) -> list[str]:
    """Lower-case words of `text` in order: \\w runs, with CJK runs segmented (stopwords kept)."""
    out: list[str] = []
    for piece, cjk in pieces(text):
        if cjk:
            out += cjk_words(piece)
        else:
            out.append(piece.lower())
    return out


def cjk_words(run: str) -> list[str]:
    """Words of one run of CJK characters (see the module docstring for each script)."""
    japanese = _pattern("kana").search(run) is not None
    out: list[str] = []
    for match in _pattern("script").finditer(run):
        part, script = match.group(0), match.lastgroup
        if script == "han":
            out += [part] if japanese else _chinese_words(part)
        elif script == "kata":
            out.append(part)
        elif script == "hira":
            # Kana after a kanji stem is inflection, one or two kana alone a particle; a longer
            # run standing alone is a word written in kana.
            if len(part) > 2 and len(part) == len(run):
                out.append(part)
        else:
            out.append(_strip_particle(part))
    return out


def _chinese_words(run: str) -> list[str]:
    segmenter = _segmenter()
    if segmenter is None:
        if len(run) <= 2:
            return [run]
        return [run[i : i + 2] for i in range(len(run) - 1)]
    return [w for w in segmenter.cut(run) if w.strip()]


@lru_cache(maxsize=1)
def _segmenter() -> Any:
    """rjieba (jieba's dictionary in Rust: ~0.1 s to import, then microseconds per query), or None."""
    try:
        import rjieba
    except ImportError:
        return None
    return rjieba


def _strip_particle(word: str) -> str:
    for particle in _HANGUL_PARTICLES:
        if word.endswith(particle) and len(word) - len(particle) >= 2:  # 회의 (meeting) keeps its 의
            return word[: -len(particle)]
    return word


def pieces(text: str) -> Iterator[tuple[str, bool]]:
    """(piece, is_cjk) for each run of CJK or of other word characters in `text`."""
    if not has_cjk(text):
        yield from ((match.group(0), False) for match in _WORD.finditer(text))
        return
    for match in _pattern("piece").finditer(text):
        piece = match.group(0)
        yield piece, has_cjk(piece)
