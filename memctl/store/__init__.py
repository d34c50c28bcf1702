"""The memory store and how to open one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from memctl.config import Config, load_config
from memctl.embeddings import Embedder
from memctl.paths import DEFAULT_SUBDIR, resolve_root, store_dir, validate_subdir
from memctl.store.base import StoreBase
from memctl.store.embedded import EmbeddedStore
from memctl.store.records import AREAS, DeleteResult, HistoryEntry, Hit, Memory, StoreList, StoreSummary

__all__ = [
    "AREAS",
    "DeleteResult",
    "EmbeddedStore",
    "HistoryEntry",
    "Hit",
    "Memory",
    "StoreBase",
    "StoreList",
    "StoreSummary",
    "list_stores",
    "open_store",
    "resolve_store_url",
]

STORE_ENV = "MEMCTL_STORE"
EMBEDDED = "embedded"


def resolve_store_url(
    store: str | None = None, overrides: dict[str, Any] | None = None, config: Config | None = None
) -> str | None:
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
        raise UsageError(
            f"{source} {_redacted(str(value))!r} is neither a postgresql:// URL nor 'embedded'",
            hint="e.g. --store postgresql://memctl:PASSWORD@db.example:5432/memctl",
        )
    return str(value)


def _redacted(value: str) -> str:
    return value.split("@", 1)[-1] if "@" in value else value


def open_store(
    root: str | os.PathLike[str] | None = None,
    subdir: str = DEFAULT_SUBDIR,
    *,
    config: Config | None = None,
    overrides: dict[str, Any] | None = None,
    embedder: Embedder | None = None,
    actor: str = "api",
    store: str | None = None,
    create: bool = True,
) -> StoreBase:
    """Open (creating if needed) the store `<root>/<subdir>`. Use it as a context manager.

    `create=False` (read-only commands) raises NotFoundError when there is no store there instead
    of making an empty one. A folder that still has a store's files but lost its database is
    refused either way: an empty store must never silently replace one that was there.

    `store` (else env MEMCTL_STORE, else config store_url) names a PostgreSQL database
    (`postgresql://USER:PASSWORD@HOST:PORT/DB`): the store is then the rows of `subdir` there
    (a PostgresStore, same methods); "embedded" or nothing means the folder store.
    """
    root_path = resolve_root(root)
    url = resolve_store_url(store, overrides, config)
    if url is not None:
        from memctl.store.postgres import PostgresStore

        name = validate_subdir(subdir)
        opened = PostgresStore(
            url,
            name,
            config or load_config(None, overrides),
            embedder=embedder,
            actor=actor,
            cache_dir=Path(root_path) / ".cache" / "embeddings",
        )
        if not create and name not in {known for known, _ in opened.subdirs()}:
            from memctl.errors import NotFoundError

            opened.close()
            raise NotFoundError(
                f"no store {name!r} in the PostgreSQL database",
                hint="check --subdir (`memctl subdirs` lists the stores); `memctl save` creates one",
            )
        return opened
    folder = store_dir(root_path, subdir)
    if config is None:
        config = load_config(folder, overrides)  # a bad store config.yaml is named before anything else
    check_store_folder(root_path, folder, create)
    return EmbeddedStore(
        folder, config, embedder=embedder, actor=actor, cache_dir=Path(root_path) / ".cache" / "embeddings"
    )


def list_stores(
    root: str | os.PathLike[str] | None = None,
    *,
    store: str | None = None,
    overrides: dict[str, Any] | None = None,
    counts: bool = True,
) -> StoreList:
    """Every store of the backend `store` (else env MEMCTL_STORE, else config store_url) names: the
    folder stores under `root`, or the subdirs of the PostgreSQL database, with their memory counts
    (`counts=False`: None for folder stores, which then need not be opened)."""
    url = resolve_store_url(store, overrides)
    if url is not None:
        from memctl.store.postgres import database_stores, redact

        where = redact(url)
        return StoreList(
            where,
            [
                StoreSummary(name, count, f"{where}#{name}")
                for name, count in database_stores(url, load_config(None, overrides))
            ],
        )
    from memctl.paths import list_subdirs
    from memctl.store.embedded import stored_count

    root_path = resolve_root(root)
    return StoreList(
        str(root_path),
        [
            StoreSummary(name, stored_count(root_path / name) if counts else None, str(root_path / name))
            for name in list_subdirs(root_path)
        ],
    )


# Files only a store that once had a database holds (the cache and config.yaml are not enough).
_STORE_TRACES = ("index.faiss", "embedding.json", "knowledge_import.json")


def check_store_folder(root: Path, folder: Path, create: bool) -> None:
    """Refuse a root that is not a folder, a store that lost its database, and (unless `create`) a
    store that does not exist."""
    from memctl.errors import NotFoundError, StoreError, UsageError
    from memctl.paths import STORE_MARKER

    if str(root) == "":
        raise UsageError("--root is empty", hint="name a folder, or leave --root out for the default")
    if root.exists() and not root.is_dir():
        raise UsageError(f"root {str(root)!r} is not a folder", hint="point --root (or MEMCTL_HOME) at a folder")
    database = folder / STORE_MARKER
    if database.exists() and not database.is_file():
        raise StoreError(f"{database} is not a file", hint="move it away; memctl keeps the store's database there")
    if database.is_file():
        return
    traces = [name for name in _STORE_TRACES if (folder / name).exists()]
    if traces:
        raise StoreError(
            f"the store at {folder} has lost its database {STORE_MARKER} (still there: "
            f"{', '.join(traces)}); memctl will not create an empty store in its place",
            hint="restore it with `memctl restore-backup` or from your export (`memctl import`); "
            "to start over, remove the folder",
        )
    if not create:
        raise NotFoundError(
            f"no store at {folder}",
            hint="check --root / --subdir (`memctl subdirs` lists the stores); `memctl save` creates a store",
        )
