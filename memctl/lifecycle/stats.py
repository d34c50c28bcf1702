"""Store statistics for `memctl stats`."""

from __future__ import annotations

from typing import Any

from memctl.store.base import StoreBase


def store_stats(store: StoreBase, subdir: str) -> dict[str, Any]:
    """Counts per area and source, timestamps, access, archive and history sizes, model, bytes.

    `path` is the folder, or the PostgreSQL URL (no password) and subdir; `bytes` the folder's files
    or the subdir's rows."""
    return {**store.stats(), "subdir": subdir}
