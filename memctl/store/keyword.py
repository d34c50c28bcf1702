"""Keyword side of retrieval: SQLite FTS5 (BM25) over memory texts, and rare-token detection.

The FTS5 table uses the Porter + unicode61 tokenizer (query words are split the same way, \\w+
runs, and stemmed by FTS5 itself); common English words are dropped so BM25 ranks on the words
that carry meaning. Chinese, Japanese and Korean text is indexed one character per token and
queried word by word, each word a phrase of its characters (memctl/text/segment.py): the index goes
through the SQL function `memctl_fts_text`, which every connection to a store registers
(`register_functions`).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Sequence

from memctl.text.segment import has_cjk, index_text, phrase, piece_pattern, pieces, words
from memctl.text.stopwords import CJK as CJK_STOPWORDS
from memctl.text.stopwords import ENGLISH as STOPWORDS

_TOKEN = re.compile(r"\w+", re.UNICODE)


def register_functions(db: sqlite3.Connection) -> None:
    """SQL functions the store's schema calls (the keyword index's triggers and source view)."""
    db.create_function("memctl_fts_text", 1, index_text, deterministic=True)


def query_tokens(text: str) -> list[str]:
    """Distinct meaningful tokens of a query, in order (CJK runs segmented into words)."""
    seen: dict[str, None] = {}
    for token in words(text):
        if token in STOPWORDS or token in CJK_STOPWORDS or (len(token) == 1 and token.isascii() and token.isalpha()):
            continue
        seen.setdefault(token, None)
    return list(seen)


def match_expression(tokens: Sequence[str]) -> str | None:
    """An FTS5 MATCH string: any of the tokens (each quoted, so no FTS syntax leaks in; a CJK
    word becomes the phrase of its characters, as the index holds them)."""
    quoted = ['"' + phrase(t).replace('"', '""') + '"' for t in tokens]
    return " OR ".join(quoted) if quoted else None


def doc_freq(
    db: sqlite3.Connection, token: str, text_only: bool = False, cache: dict[tuple[str, bool], int] | None = None
) -> int:
    """Memories containing `token` (as FTS5 tokenises and stems it); in their text only, not in keyword metadata.

    `cache`: counts already made since the store last changed (the caller clears it on a write)."""
    if cache is None:
        return _doc_freq(db, token, text_only)
    found = cache.get((token, text_only))
    if found is None:
        found = cache[(token, text_only)] = _doc_freq(db, token, text_only)
    return found


def _doc_freq(db: sqlite3.Connection, token: str, text_only: bool) -> int:
    expression = match_expression([token])
    if expression is not None and text_only:
        expression = "text : " + expression
    try:
        return int(
            db.execute("SELECT COUNT(*) FROM memories_fts WHERE memories_fts MATCH ?", (expression,)).fetchone()[0]
        )
    except sqlite3.OperationalError:
        return 0


def keyword_search(
    db: sqlite3.Connection,
    query: str,
    k: int,
    area: str | None = None,
    only: Sequence[int] | None = None,
    common_df: int = 0,
    common_text_df: int = 0,
    cache: dict[tuple[str, bool], int] | None = None,
) -> list[tuple[int, float]]:
    """Top-k (seq, bm25 score; higher is better) among memories in `area` / `only`.

    Words found in more than `common_df` memories (when > 50) are left out: in a chat store a
    speaker's name is in half the turns, and BM25 would then rank the shortest such turns first.
    Words found in the text of more than `common_text_df` memories (when > 0) are left out too,
    unless that would leave none (see common_text_words). `cache`: as for doc_freq.
    """
    tokens = query_tokens(query)
    if common_df > 50:
        tokens = [t for t in tokens if doc_freq(db, t, cache=cache) <= common_df]
    if common_text_df > 0:
        tokens = common_text_words(tokens, common_text_df, lambda t: doc_freq(db, t, True, cache))
    expression = match_expression(tokens)
    if expression is None or k <= 0:
        return []
    sql = "SELECT f.rowid, -bm25(memories_fts) AS score FROM memories_fts f"
    args: list[object] = [expression]
    where = ["memories_fts MATCH ?"]
    if area is not None:
        others = other_areas(db, area)
        if others is None:
            return []  # no memory in that area
        if others:  # else the filter would change nothing
            # The area's seqs from its index, not a join on memories: that read each matching row, vector and
            # all (4x slower for a tenth of the store, 15 % for most of it; the same rows in the same order).
            where.append("+f.rowid IN (SELECT seq FROM memories WHERE area = ?)")
            args.append(area)
    if only is not None:
        # `+`: a membership test on each match. A bare `f.rowid IN` lets SQLite look each listed rowid up in
        # the index with the whole MATCH again: a minute for a filter that allows 100k memories.
        where.append("+f.rowid IN (SELECT value FROM json_each(?))")
        args.append("[" + ",".join(str(int(s)) for s in only) + "]")
    sql += " WHERE " + " AND ".join(where) + " ORDER BY score DESC LIMIT ?"
    args.append(k)
    try:
        return [(int(seq), float(score)) for seq, score in db.execute(sql, args)]
    except sqlite3.OperationalError:
        return []  # an expression FTS5 cannot parse finds nothing by keyword; dense still answers


def other_areas(db: sqlite3.Connection, area: str) -> bool | None:
    """Whether the store holds memories outside `area`; None when it holds none in it (two index lookups)."""
    if db.execute("SELECT 1 FROM memories WHERE area = ? LIMIT 1", (area,)).fetchone() is None:
        return None
    found = db.execute(
        "SELECT EXISTS (SELECT 1 FROM memories WHERE area < ?) OR EXISTS (SELECT 1 FROM memories WHERE area > ?)",
        (area, area),
    ).fetchone()
    return bool(found[0])


def common_text_words(tokens: list[str], max_df: int, text_df: Callable[[str], int]) -> list[str]:
    """`tokens` without those found in the text of more than `max_df` memories — all of them if every one is.

    A word in many memory texts ("use", "new" in a store about one project) matches memories at
    random, and dividing by the best BM25 score would give such a match the full keyword share.
    Keyword metadata (a session date, a speaker) is not counted: it is matched as metadata.
    """
    kept = [t for t in tokens if text_df(t) <= max_df]
    return kept or tokens


def rare_tokens(
    db: sqlite3.Connection, tokens: Sequence[str], max_df: int, cache: dict[tuple[str, bool], int] | None = None
) -> set[str]:
    """The tokens that occur in at least one and at most `max_df` memories (`cache`: as for doc_freq)."""
    return {t for t in tokens if 0 < doc_freq(db, t, cache=cache) <= max_df}


def identifier_tokens(text: str) -> list[str]:
    """Query words that name something exactly: with a digit (order numbers, ports, versions) or
    capitalised inside the sentence (surnames, product names). Lower-cased, as FTS5 indexes them."""
    found: dict[str, None] = {}
    for position, (word, cjk) in enumerate(pieces(text)):
        if cjk:
            continue  # no case, and a digit next to CJK is a piece of its own
        lowered = word.lower()
        if lowered in STOPWORDS or len(word) < 2:
            continue
        if any(c.isdigit() for c in word) or (position > 0 and word[0].isupper()) or "_" in word:
            found.setdefault(lowered, None)
    return list(found)


def name_tokens(text: str) -> list[str]:
    """Capitalised query words (names of people, places, products), lower-cased, in order."""
    found: dict[str, None] = {}
    for word, cjk in pieces(text):
        if not cjk and word[0].isupper() and len(word) >= 2 and word.lower() not in STOPWORDS:
            found.setdefault(word.lower(), None)
    return list(found)


_POSSESSIVE = r"(?:['\u2019]s\b)?"


def without_words(text: str, words: set[str]) -> str:
    """`text` without the given (lower-case) words and their possessive 's; `text` itself if nothing is left."""
    if not words:
        return text
    word = piece_pattern().pattern if has_cjk(text) else r"\w+"  # "Alice说" is two words, not one
    kept = re.sub(f"({word}){_POSSESSIVE}", lambda m: "" if m.group(1).lower() in words else m.group(0), text)
    kept = re.sub(r"\s+([,.;:!?])", r"\1", re.sub(r"\s+", " ", kept))
    kept = re.sub(r",([.;:!?])", r"\1", kept).strip(" ,")
    return kept if _TOKEN.search(kept) else text


def word_set(text: str) -> set[str]:
    """Lower-case words of `text`, CJK runs segmented (metadata values compared with query words)."""
    return set(words(text))


def count_tokens(text: str, tokens: set[str]) -> int:
    """How many of `tokens` occur in `text` (a CJK token anywhere in it, as the index finds it)."""
    if not tokens:
        return 0
    lowered = text.lower()
    if not any(t in lowered for t in tokens):
        return 0  # a token is a substring of any text it occurs in: most texts end here, unsegmented
    present = set(_TOKEN.findall(lowered)) | {piece.lower() for piece, cjk in pieces(text) if not cjk}
    return sum(1 for t in tokens if (t in lowered if has_cjk(t) else t in present))
