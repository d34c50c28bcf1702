"""What the search pipeline needs of a store: the narrow protocol every backend implements.

Rows are addressed by an integer key (`seq`) unique within the backend. The pipeline (memctl/search/
pipeline.py) asks for dense and keyword rankings, document frequencies and rows by key; everything else
(fusion, evidence, the calibrated score, the cut) it computes itself, the same for every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    import numpy as np

    from memctl.config import Config
    from memctl.embeddings import Embedder
    from memctl.search.relevance import Calibration
    from memctl.store.filters import Filter
    from memctl.store.records import Hit


class SearchableStore(Protocol):
    config: Config

    @property
    def embedder(self) -> Embedder: ...

    def calibration(self) -> Calibration | None: ...

    def compile(self, filter: str | Filter | None) -> Filter | None: ...

    def _is_empty(self) -> bool: ...

    def _size(self) -> int: ...

    def _memo(self) -> dict[Any, Any]: ...

    def _search_scope(self) -> AbstractContextManager[None]: ...

    def _check_text(self, text: str) -> str: ...

    def _keywords(self, metadata: dict[str, Any]) -> str: ...

    def _embed_query(self, query: str) -> np.ndarray: ...

    def _start_query_embedding(self, queries: list[str], scan: bool = False) -> Callable[[], list[np.ndarray]]: ...

    def _candidates(self, area: str | None, flt: Filter | None) -> Collection[int] | None: ...

    def _dense_pairs(self, vector: np.ndarray, k: int, only: Collection[int] | None) -> list[tuple[int, float]]: ...

    def _relevance_of(self, keys: list[int], vector: np.ndarray) -> dict[int, float]: ...

    def _keyword_pairs(
        self,
        query: str,
        k: int,
        area: str | None,
        only: Collection[int] | None,
        common_df: int,
        common_text_df: int = 0,
    ) -> list[tuple[int, float]]: ...

    def _rare_tokens(self, tokens: Sequence[str], max_df: int) -> set[str]: ...

    def _common_tokens(self, tokens: Sequence[str], min_df: int) -> set[str]: ...

    def _seq_hits(self, pairs: list[tuple[int, float]]) -> list[tuple[int, Hit]]: ...

    def _seq_meta(self, seqs: list[int]) -> dict[int, tuple[str, dict[str, Any]]]: ...

    def search_vector(
        self,
        vector: np.ndarray,
        *,
        limit: int = 10,
        threshold: float = 0.0,
        area: str | None = None,
        filter: str | Filter | None = None,
    ) -> list[Hit]: ...
