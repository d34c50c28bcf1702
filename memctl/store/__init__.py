"""The memory store and how to open one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from memctl.config import Config, load_config
from memctl.embeddings import Embedder
from memctl.paths import DEFAULT_SUBDIR, resolve_root, store_dir, validate_subdir
from memctl.store.embedded import EmbeddedStore
from memctl.store.records import AREAS, DeleteResult, HistoryEntry, Hit, Memory

__all__ = ["AREAS", "DeleteResult", "EmbeddedStore", "HistoryEntry", "Hit", "Memory", "open_store",
           "resolve_store_url"]

STORE_ENV = "MEMCTL_STORE"
EMBEDDED = "embedded"


def resolve_store_url(store: str | None = None, overrides: dict[str, Any] | None = None,
                      config: Config | None = None) -> str | None:
    """The PostgreSQL URL to use, or None for the embedded store.

    `store` (--store) beats env MEMCTL_STORE beats config `store_url` (user file or
    MEMCTL_STORE_URL; a store's own config.yaml lives in the embedded folder, so it cannot say).
    """
    from memctl.errors import UsageError

    value = store if store is not None else os.environ.get(STORE_ENV) or None
    source = "--store" if store is not None else STORE_ENV
    if value is None:
        cfg = config if config is not None else load_config(None, overrides)
        value, source = cfg["store_url"], "config store_url"
    if value is None or value == EMBEDDED:
        return None
    if not str(value).startswith(("postgresql://", "postgres://")):
        raise UsageError(f"{source} {_redacted(str(value))!r} is neither a postgresql:// URL nor 'embedded'",
                         hint="e.g. --store postgresql://memctl:PASSWORD@db.example:5432/memctl")
    return str(value)


def _redacted(value: str) -> str:
    return value.split("@", 1)[-1] if "@" in value else value


def open_store(root: str | os.PathLike[str] | None = None, subdir: str = DEFAULT_SUBDIR, *,
               config: Config | None = None, overrides: dict[str, Any] | None = None,
               embedder: Embedder | None = None, actor: str = "api", store: str | None = None) -> Any:
    """Open (creating if needed) the store `<root>/<subdir>`. Use it as a context manager.

    `store` (else env MEMCTL_STORE, else config store_url) names a PostgreSQL database
    (`postgresql://USER:PASSWORD@HOST:PORT/DB`): the store is then the rows of `subdir` there
    (a PostgresStore, same methods); "embedded" or nothing means the folder store.
    """
    root_path = resolve_root(root)
    url = resolve_store_url(store, overrides, config)
    if url is not None:
        from memctl.store.postgres import PostgresStore

        name = validate_subdir(subdir)
        return PostgresStore(url, name, config or load_config(None, overrides), embedder=embedder, actor=actor,
                             cache_dir=Path(root_path) / ".cache" / "embeddings")
    folder = store_dir(root_path, subdir)
    if config is None:
        config = load_config(folder, overrides)
    return EmbeddedStore(folder, config, embedder=embedder, actor=actor,
                         cache_dir=Path(root_path) / ".cache" / "embeddings")
