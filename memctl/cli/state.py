"""What the global options set up for every command: where the store is and how to print."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memctl.config.paths import DEFAULT_SUBDIR

if TYPE_CHECKING:
    from memctl.store.base import StoreBase


@dataclass
class State:
    root: str | None = None
    subdir: str = DEFAULT_SUBDIR
    json: bool = False
    quiet: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)
    store: str | None = None  # --store: a postgresql:// URL or "embedded" (None: MEMCTL_STORE, config store_url)

    def open_store(self, actor: str = "cli", create: bool = False, read_only: bool = False) -> StoreBase:
        """The store of --root/--subdir. Only commands that add memories pass `create=True`: the
        others say "no store at ..." (exit 3) rather than leave an empty store behind a typo.
        Commands that only read pass `read_only=True`: they create and write nothing."""
        from memctl.store import open_store

        return open_store(
            self.root,
            self.subdir,
            overrides=self.overrides,
            actor=actor,
            store=self.store,
            create=create,
            read_only=read_only,
        )

    def text_limit(self) -> int:
        """config max_text_bytes before a store is open (user config and -c overrides): the bound of a
        '-' or '@file' text argument (0: no limit)."""
        from memctl.config import load_config

        return int(load_config(None, self.overrides).get("max_text_bytes") or 0)

    def subdir_names(self) -> list[str]:
        """Every store: folders under the root, or the subdirs of the PostgreSQL database."""
        from memctl.store import list_stores

        return [s.name for s in list_stores(self.root, store=self.store, overrides=self.overrides, counts=False).stores]

    @property
    def interactive(self) -> bool:
        return sys.stdin.isatty() and sys.stdout.isatty()
