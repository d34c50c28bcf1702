"""The memory store and how to open one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from memctl.config import Config, load_config
from memctl.embeddings import Embedder
from memctl.paths import DEFAULT_SUBDIR, resolve_root, store_dir
from memctl.store.embedded import EmbeddedStore
from memctl.store.records import AREAS, DeleteResult, HistoryEntry, Hit, Memory

__all__ = ["AREAS", "DeleteResult", "EmbeddedStore", "HistoryEntry", "Hit", "Memory", "open_store"]


def open_store(root: str | os.PathLike[str] | None = None, subdir: str = DEFAULT_SUBDIR, *,
               config: Config | None = None, overrides: dict[str, Any] | None = None,
               embedder: Embedder | None = None, actor: str = "api") -> EmbeddedStore:
    """Open (creating if needed) the store `<root>/<subdir>`. Use it as a context manager."""
    root_path = resolve_root(root)
    folder = store_dir(root_path, subdir)
    if config is None:
        config = load_config(folder, overrides)
    return EmbeddedStore(folder, config, embedder=embedder, actor=actor,
                         cache_dir=Path(root_path) / ".cache" / "embeddings")
