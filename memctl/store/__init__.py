"""The memory store and how to open one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from memctl.config import Config, load_config
from memctl.config.paths import DEFAULT_SUBDIR, resolve_root
from memctl.embeddings import Embedder
from memctl.store.base import StoreBase
from memctl.store.embedded import EmbeddedStore
from memctl.store.interface import StoreSpec
from memctl.store.postgres import PostgresStore
from memctl.store.records import StoreList

__all__ = ["list_stores", "open_store", "resolve_store_url"]

# Every backend, the default (the folder store, no URL scheme) first. A new backend is its module
# and one entry here: the class says which URL schemes it opens and how (StoreBase.open_at & co).
BACKENDS: tuple[type[StoreBase], ...] = (EmbeddedStore, PostgresStore)

STORE_ENV = "MEMCTL_STORE"
EMBEDDED = "embedded"


def _by_scheme() -> dict[str, type[StoreBase]]:
    return {scheme: backend for backend in BACKENDS for scheme in backend.schemes}


def backend_of(url: str | None) -> type[StoreBase]:
    """The backend class that opens `url` (a URL resolve_store_url returned; None: the default)."""
    if url is None:
        return BACKENDS[0]
    return _by_scheme()[url.split("://", 1)[0]]


def is_store_url(value: str | None) -> bool:
    """True when `value` is a URL of a registered backend (`--store`, `migrate --to`)."""
    return bool(value) and "://" in str(value) and str(value).split("://", 1)[0] in _by_scheme()


def url_forms() -> str:
    """The URL forms a store may be named by, for messages ("postgresql://")."""
    return " or ".join(f"{backend.schemes[0]}://" for backend in BACKENDS if backend.schemes)


def resolve_store_url(
    store: str | None = None, overrides: dict[str, Any] | None = None, config: Config | None = None
) -> str | None:
    """The URL of the store's database (a registered backend's scheme), or None for the embedded store.

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
    if not is_store_url(str(value)):
        examples = [backend.url_example for backend in BACKENDS if backend.schemes]
        raise UsageError(
            f"{source} {_redacted(str(value))!r} is neither a {url_forms()} URL nor {EMBEDDED!r}",
            hint="e.g. --store " + " or ".join(examples),
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
    read_only: bool = False,
) -> StoreBase:
    """Open (creating if needed) the store `<root>/<subdir>`. Use it as a context manager.

    `create=False` (read-only commands) raises NotFoundError when there is no store there instead
    of making an empty one. A folder that still has a store's files but lost its database is
    refused either way: an empty store must never silently replace one that was there. A store comes
    into existence with its first commit: opening one and failing before that leaves nothing behind.

    `read_only=True` (implies create=False) opens it so that nothing is created or written: a write
    raises StoreError (the embedded store's connection cannot write; PostgreSQL's session is read-only).

    `store` (else env MEMCTL_STORE, else config store_url) names a PostgreSQL database
    (`postgresql://USER:PASSWORD@HOST:PORT/DB`): the store is then the rows of `subdir` there
    (a PostgresStore, same methods); "embedded" or nothing means the folder store.
    """
    root_path = resolve_root(root)
    url = resolve_store_url(store, overrides, config)
    spec = StoreSpec(url, root_path, subdir, config, overrides, embedder, actor, create and not read_only, read_only)
    return backend_of(url).open_at(spec)


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
    return backend_of(url).stores_at(StoreSpec(url, resolve_root(root), overrides=overrides), counts=counts)


def store_location(
    root: str | os.PathLike[str] | None,
    subdir: str,
    *,
    store: str | None = None,
    overrides: dict[str, Any] | None = None,
    must_exist: bool = False,
) -> str:
    """Where the store `subdir` is, for messages, without opening it (a URL without its password, or
    the folder); `must_exist`: NotFoundError when the backend can tell without connecting that it is not there."""
    url = resolve_store_url(store, overrides)
    spec = StoreSpec(url, resolve_root(root), subdir, overrides=overrides, create=not must_exist)
    return backend_of(url).location_at(spec)


def store_place(
    root: str | os.PathLike[str] | None, *, store: str | None = None, overrides: dict[str, Any] | None = None
) -> str:
    """Where the backend `store` names keeps its stores, for messages: a URL without its password, or
    the root folder; nothing is opened or created."""
    url = resolve_store_url(store, overrides)
    return backend_of(url).where_at(StoreSpec(url, resolve_root(root), overrides=overrides))


def store_folder(
    root: str | os.PathLike[str] | None,
    subdir: str,
    *,
    store: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> Path | None:
    """The folder of the store `subdir` when its backend keeps it as a memctl store folder (backup
    copies it file by file, restore swaps it); None when the store is rows elsewhere."""
    url = resolve_store_url(store, overrides)
    return backend_of(url).folder_at(StoreSpec(url, resolve_root(root), subdir, overrides=overrides))


def open_folder(folder: Path, config: Config) -> StoreBase:
    """The folder store in `folder` (made if empty), without a root's embedding cache: a backup's format."""
    return EmbeddedStore(folder, config)
