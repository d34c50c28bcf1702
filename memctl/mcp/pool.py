"""Warm stores for a long-running server: opened once, shared by every call, safe across threads.

Each store (one per subdir) is used by one call at a time (its own lock); the embedding model is
loaded once and shared by every store whose embedding settings agree. Nothing is cached that
another process could change: the embedded store re-syncs its vector index from SQLite's journal
on every search and PostgreSQL reads committed rows, so a `memctl save` from a shell is found by
the next search. A PostgreSQL store that lost its connection is dropped and reopened on next use.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from memctl.errors import LockTimeoutError, ModelMismatchError, NotFoundError, StoreError
from memctl.mcp.access import AccessLog

log = logging.getLogger("memctl.mcp")

EMBEDDING_KEYS = (
    "embedding_provider",
    "embedding_model",
    "embedding_backend",
    "embedding_api_base",
    "embedding_api_key_env",
    "embedding_batch_size",
    "embedding_cache",
)
SERVER_SPIN = False  # a local model's threads sleep between kernels (embed_onnx.OnnxMiniLM._load)
MAX_OPEN_STORES = 32  # least recently used stores beyond this are closed (reopened on demand)


class SharedEmbedder:
    """One embedder used by several stores and threads: calls are serialised (models and the cache
    connection are not meant for concurrent use)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.info = inner.info
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            return self.inner.embed(texts)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """The query side of an embedder that has one (E5: "query: " prefix and centring), as the CLI's
        `load` embeds them; without this method the store fell back to `embed`, the passage side."""
        from memctl.embeddings import embed_queries

        with self._lock:
            return embed_queries(self.inner, texts)

    def warm(self) -> None:
        """Load the model now, past the embedding cache (a cached text would skip it), so the first call is as
        fast as the rest. A batch, not one text: the local ONNX model then loads its full session (weights
        prepacked), which a long-lived process keeps and which embeds each later query about twice as fast
        as the light session a one-shot CLI query loads."""
        model = getattr(self.inner, "inner", self.inner)
        with self._lock:
            model.embed([f"memctl warm-up text {i}" for i in range(16)])

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


class _Slot:
    def __init__(self, store: Any) -> None:
        self.store = store
        self.lock = threading.Lock()
        self.users = 0


class StorePool:
    """Stores under one root (or one PostgreSQL database), opened on first use and kept open."""

    def __init__(
        self,
        root: str | None = None,
        store_url: str | None = None,
        overrides: dict[str, Any] | None = None,
        actor: str = "mcp",
    ) -> None:
        from memctl.store import resolve_store_url

        self.root = root
        self.overrides = dict(overrides or {})
        self.url = resolve_store_url(store_url, self.overrides)
        self.store_option = store_url if store_url is not None else (self.url or "embedded")
        self.actor = actor
        self._slots: OrderedDict[str, _Slot] = OrderedDict()
        self._embedders: dict[tuple[Any, ...], SharedEmbedder] = {}
        self._lock = threading.Lock()
        self.access = AccessLog(self.use)  # what searches returned, written after their answers

    # -- opening ---------------------------------------------------------------------------
    def config_for(self, subdir: str) -> Any:
        from memctl.config import load_config
        from memctl.store import store_folder

        # a store kept as a folder may hold its own config.yaml; a store that is rows elsewhere has none
        folder = store_folder(self.root, subdir, store=self.store_option, overrides=self.overrides)
        return load_config(folder, self.overrides)

    def embedder_for(self, config: Any) -> SharedEmbedder:
        from memctl.config.paths import resolve_root
        from memctl.embeddings import make_embedder

        cache = Path(resolve_root(self.root)) / ".cache" / "embeddings"
        key = tuple(repr(config[k]) for k in EMBEDDING_KEYS)
        with self._lock:
            shared = self._embedders.get(key)
            if shared is None:
                shared = SharedEmbedder(
                    make_embedder(config, cache if config["embedding_cache"] else None, spin=SERVER_SPIN)
                )
                self._embedders[key] = shared
            return shared

    def open_new(self, subdir: str, actor: str | None = None, *, create: bool = True) -> Any:
        """A store of its own (not the warm one), sharing the warm embedder: for long calls that must
        not hold up the warm store (memorize waits on the utility model). Like the CLI, only callers
        that add memories `create` a store; the others get NotFoundError ("no store …")."""
        from memctl.store import open_store

        store = open_store(
            self.root,
            subdir,
            config=self.config_for(subdir),
            actor=actor or self.actor,
            store=self.store_option,
            create=create,
        )
        try:
            # the store's model: the one it records where embedding_model is left at its default
            store.share_embedder(self.embedder_for(store.embedding_config()))
        except BaseException:
            store.close()
            raise
        return store

    def _slot(self, subdir: str, create: bool) -> _Slot:
        with self._lock:
            slot = self._slots.get(subdir)
            if slot is not None:
                self._slots.move_to_end(subdir)
                slot.users += 1
                return slot
        store = self.open_new(subdir, create=create)
        with self._lock:
            slot = self._slots.get(subdir)
            if slot is None:
                slot = self._slots[subdir] = _Slot(store)
                store = None
            slot.users += 1
            self._evict()
        if store is not None:  # another thread opened it meanwhile
            store.close()
        return slot

    def _evict(self) -> None:
        for name in list(self._slots):
            if len(self._slots) <= MAX_OPEN_STORES:
                return
            slot = self._slots[name]
            if slot.users == 0:
                del self._slots[name]
                _close_quietly(slot.store)

    @contextmanager
    def use(self, subdir: str, *, create: bool = False) -> Iterator[Any]:
        """The warm store of `subdir`, for this thread alone until the block ends. `create`: a tool that
        adds memories may create the store; the others are told there is none (NotFoundError)."""
        slot = self._slot(subdir, create)
        try:
            with slot.lock:
                yield from self._serving(subdir, slot)
        finally:
            with self._lock:
                slot.users -= 1

    @contextmanager
    def use_now(self, subdir: str) -> Iterator[Any]:
        """`use` without waiting: the store if it is open and no other call holds it, else None (the caller
        then goes the waiting way, on a thread of its own). Never opens a store (that can take long)."""
        with self._lock:
            slot = self._slots.get(subdir)
            if slot is None or not slot.lock.acquire(blocking=False):
                slot = None
            else:
                self._slots.move_to_end(subdir)
                slot.users += 1
        if slot is None:
            yield None
            return
        try:
            yield from self._serving(subdir, slot)
        finally:
            slot.lock.release()
            with self._lock:
                slot.users -= 1

    def _serving(self, subdir: str, slot: _Slot) -> Iterator[Any]:
        try:
            yield slot.store
        except (LockTimeoutError, ModelMismatchError):
            raise
        except StoreError:
            if self.url is not None:  # a lost PostgreSQL connection: reopen on next use
                self._drop(subdir, slot)
            raise

    def _drop(self, subdir: str, slot: _Slot) -> None:
        with self._lock:
            if self._slots.get(subdir) is slot:
                del self._slots[subdir]
        _close_quietly(slot.store)

    # -- life ------------------------------------------------------------------------------
    def warm(self, subdir: str | None) -> None:
        """Load the model and the store's index before the first call; problems are logged, not fatal
        (the tools report them to the client, with the next step)."""
        try:
            if subdir is None:  # no default store: the model at least (the user's configuration)
                from memctl.config import load_config

                self.embedder_for(load_config(None, self.overrides)).warm()
                return
            config = self.config_for(subdir)
            self.embedder_for(config).warm()
            try:
                with self.use(subdir) as store:
                    if len(store):
                        store.search("memctl warm-up", limit=1, threshold=1.0)
            except NotFoundError:
                pass  # no store yet: the first memory_save creates it
        except Exception as exc:  # noqa: BLE001 - the server still starts; each call reports its own error
            log.warning("memctl mcp: warm-up of %r failed: %s", subdir, exc)

    def close(self) -> None:
        self.access.close()
        with self._lock:
            slots = list(self._slots.values())
            self._slots.clear()
            embedders = list(self._embedders.values())
            self._embedders.clear()
        for slot in slots:
            with slot.lock:
                _close_quietly(slot.store)
        for embedder in embedders:
            try:
                embedder.close()
            except Exception:  # noqa: BLE001 - closing at exit: nothing left to report to
                pass


def _close_quietly(store: Any) -> None:
    try:
        store.close()
    except Exception as exc:  # noqa: BLE001 - a store that fails to close loses nothing committed
        log.warning("memctl mcp: closing %s failed: %s", getattr(store, "name", "a store"), exc)
