"""The PostgreSQL backend's search: dense (exact scan or HNSW) and keyword (full-text) candidates, document
frequencies and the rows of hits."""

from __future__ import annotations

import builtins
import json
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from memctl.embeddings import embed_queries
from memctl.errors import ModelMismatchError
from memctl.store.filters import Filter
from memctl.store.postgres.rows import _PostgresRows
from memctl.store.records import (
    MEMORY_COLUMNS,
    Hit,
    relevance,
)
from memctl.store.validate import check_area

if TYPE_CHECKING:
    import numpy as np


# Below this many memories in a store (or candidates after a filter), dense search is exact:
# a sequential scan of that many vectors is fast, and exact beats any approximate index.
EXACT_MAX = 10_000
EXACT_FILTERED_MAX = 200_000
_TS_CONFIG = "english"


class _PostgresSearch(_PostgresRows):
    """PostgresStore's search: the candidates StoreBase's retrieval pipeline fuses."""

    # -- searching: the primitives StoreBase builds on -----------------------------------
    def _embed_query(self, query: str) -> np.ndarray:
        self.check_model()
        vector = embed_queries(self.embedder, [query])[0]
        dim = self.dimension()
        if dim is not None and vector.shape[0] != dim:
            raise ModelMismatchError(
                f"embedding dimension {vector.shape[0]} differs from the store's {dim}", hint="run `memctl reindex`"
            )
        return vector

    def _candidates(self, area: str | None, flt: Filter | None) -> Collection[int] | None:
        if area is None and flt is None:
            return None
        if flt is None:
            return [
                r[0]
                for r in self._all(
                    "SELECT seq FROM memctl_memories WHERE subdir = %s AND area = %s",
                    (self.subdir, check_area(area or "")),
                )
            ]
        return [seq for seq, _ in self._filtered(area, flt)]

    def _dense_pairs(
        self, vector: np.ndarray, k: int, only: Collection[int] | None
    ) -> builtins.list[tuple[int, float]]:
        import numpy as np

        dim = self.dimension()
        if dim is None or k <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32)
        # Exact: ordered by the output column, so each vector is detoasted and compared once, not once for
        # `ip` and again for the sort key (half the cost of 1,000 filtered rows). ip DESC = distance ASC.
        if only is not None and len(only) <= EXACT_FILTERED_MAX:
            rows = self._all(
                "SELECT seq, (vector <#> %s) * -1 AS ip FROM memctl_memories"
                " WHERE seq = ANY(%s::bigint[]) AND subdir = %s ORDER BY ip DESC, seq LIMIT %s",
                (query, _seq_array(only), self.subdir, k),
            )
        elif only is None and self._at_most(EXACT_MAX):
            rows = self._all(
                "SELECT seq, (vector <#> %s) * -1 AS ip FROM memctl_memories"
                " WHERE subdir = %s ORDER BY ip DESC, seq LIMIT %s",
                (query, self.subdir, k),
            )
        else:  # the HNSW index of this dimension, with iterative scans so the subdir filter keeps k rows
            self._ensure_vector_index(dim)
            cast = f"vector({int(dim)})"
            extra, args = ("", []) if only is None else (" AND seq = ANY(%s::bigint[])", [_seq_array(only)])
            rows = self._all(
                f"SELECT seq, (vector::{cast} <#> %s::{cast}) * -1 AS ip FROM memctl_memories"
                f" WHERE subdir = %s AND vector_dims(vector) = {int(dim)}{extra}"
                f" ORDER BY vector::{cast} <#> %s::{cast} LIMIT %s",
                (query, self.subdir, *args, query, k),
            )
            rows.sort(key=lambda r: -r[1])
        return [(int(seq), float(ip)) for seq, ip in rows]

    def _keys_of(self, ids: Sequence[str], area: str | None) -> dict[int, str]:
        if not ids:
            return {}
        sql = "SELECT seq, id FROM memctl_memories WHERE subdir = %s AND id = ANY(%s)"
        args: builtins.list[Any] = [self.subdir, list(ids)]
        if area is not None:
            sql, args = sql + " AND area = %s", [*args, check_area(area)]
        return {int(seq): str(i) for seq, i in self._all(sql, tuple(args))}

    def _relevance_of(self, keys: builtins.list[int], vector: np.ndarray) -> dict[int, float]:
        import numpy as np

        if not keys:
            return {}
        rows = self._all(
            "SELECT seq, (vector <#> %s) * -1 FROM memctl_memories WHERE seq = ANY(%s) AND subdir = %s",
            (np.asarray(vector, dtype=np.float32), list(keys), self.subdir),
        )
        return {int(seq): relevance(ip) for seq, ip in rows}

    def _doc_freq(self, token: str, cap: int) -> int:
        """Memories holding `token` (stemmed as the index has it; a CJK word as the phrase of its
        characters), counted up to `cap` + 1 only."""
        from memctl.text.segment import phrase

        return self._capped_count(
            ("df", token),
            cap,
            f"SELECT count(*) FROM (SELECT 1 FROM memctl_memories WHERE subdir = %s"
            f" AND tsv @@ phraseto_tsquery('{_TS_CONFIG}', %s) LIMIT %s) AS s",
            (self.subdir, phrase(token)),
        )

    def _text_doc_freq(self, token: str, cap: int) -> int:
        """Memories holding `token` in their text (not their keyword metadata), counted up to `cap` + 1 only."""
        from memctl.text.segment import phrase

        return self._capped_count(
            ("text df", token),
            cap,
            f"SELECT count(*) FROM (SELECT 1 FROM memctl_memories, phraseto_tsquery('{_TS_CONFIG}', %s) AS q"
            f" WHERE subdir = %s AND tsv @@ q AND to_tsvector('{_TS_CONFIG}', memctl_fts_text(text)) @@ q"
            f" LIMIT %s) AS s",
            (phrase(token), self.subdir),
        )

    def _capped_count(self, key: tuple[str, str], cap: int, sql: str, args: tuple[Any, ...]) -> int:
        """min(count, cap + 1) of `sql` (args, then its LIMIT), kept for the store's generation (a word in every
        memory costs ~13 ms to count to 10,001 at 100k rows, and each hybrid search asks for several): a count
        below its limit is exact for any cap; one that reached it answers every cap below."""
        table = self._df_cache()  # (count, exact) by (kind, token)
        known = table.get(key)
        if known is not None and (known[1] or known[0] >= cap + 1):
            return min(known[0], cap + 1)
        found = int(self._one(sql, (*args, cap + 1))[0])
        table[key] = (found, found <= cap)
        return found

    def _keyword_pairs(
        self,
        query: str,
        k: int,
        area: str | None,
        only: Collection[int] | None,
        common_df: int,
        common_text_df: int = 0,
    ) -> builtins.list[tuple[int, float]]:
        from memctl.store.keyword import common_text_words, query_tokens
        from memctl.text.segment import has_cjk, phrase

        tokens = query_tokens(query)
        if common_df > 50:
            tokens = [t for t in tokens if self._doc_freq(t, common_df) <= common_df]
        if common_text_df > 0:

            def text_df(token: str) -> int:  # in the text of no more memories than hold it at all: often no count
                anywhere = self._doc_freq(token, common_text_df)
                return anywhere if anywhere <= common_text_df else self._text_doc_freq(token, common_text_df)

            tokens = common_text_words(tokens, common_text_df, text_df)
        if not tokens or k <= 0:
            return []
        # websearch_to_tsquery never fails on user text; the tokens are \w+ runs (a CJK word: the
        # quoted phrase of its characters, as the index holds them), joined by OR.
        terms = [f'"{phrase(t)}"' if has_cjk(t) else t for t in tokens]
        sql = (
            f"SELECT seq, ts_rank_cd(tsv, q) AS score FROM memctl_memories,"
            f" websearch_to_tsquery('{_TS_CONFIG}', %s) AS q WHERE subdir = %s AND tsv @@ q"
        )
        args: builtins.list[Any] = [" or ".join(terms), self.subdir]
        if area is not None:
            sql += " AND area = %s"
            args.append(area)
        if only is not None:
            sql += " AND seq = ANY(%s::bigint[])"
            args.append(_seq_array(only))
        rows = self._all(sql + " ORDER BY score DESC, seq LIMIT %s", [*args, k])
        return [(int(seq), float(score)) for seq, score in rows]

    def _rare_tokens(self, tokens: Sequence[str], max_df: int) -> set[str]:
        return {t for t in tokens if 0 < self._doc_freq(t, max_df) <= max_df}

    def _common_tokens(self, tokens: Sequence[str], min_df: int) -> set[str]:
        return {t for t in tokens if self._doc_freq(t, min_df) > min_df}

    def _seq_hits(self, pairs: builtins.list[tuple[int, float]]) -> builtins.list[tuple[int, Hit]]:
        if not pairs:
            return []
        read, found = self._named(
            f"SELECT {MEMORY_COLUMNS} FROM memctl_memories WHERE seq = ANY(%s) AND subdir = %s",
            ([p[0] for p in pairs], self.subdir),
        )
        rows = {read.get(r, "seq"): r for r in found}
        return [(seq, read.hit(rows[seq], round(score, 6))) for seq, score in pairs if seq in rows]

    def _seq_meta(self, seqs: builtins.list[int]) -> dict[int, tuple[str, dict[str, Any]]]:
        """seq -> (area, metadata) without the texts (a search's chat neighbours need no more)."""
        if not seqs:
            return {}
        found: dict[int, tuple[str, dict[str, Any]]] = {}
        for seq, area, metadata in self._all(
            "SELECT seq, area, metadata FROM memctl_memories WHERE seq = ANY(%s) AND subdir = %s",
            ([int(s) for s in seqs], self.subdir),
        ):
            found[int(seq)] = (area, json.loads(metadata) if isinstance(metadata, str) else metadata)
        return found


def _seq_array(seqs: Collection[int]) -> str:
    """Keys as the text of a bigint[]: psycopg's list dumper costs ~3 µs an element (3 ms for a filter's 1,000
    candidates), this ~0.1 µs."""
    return "{" + ",".join(map(str, map(int, seqs))) + "}"
