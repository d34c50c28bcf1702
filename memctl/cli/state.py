"""What the global options set up for every command: where the store is and how to print."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from memctl.paths import DEFAULT_SUBDIR


@dataclass
class State:
    root: str | None = None
    subdir: str = DEFAULT_SUBDIR
    json: bool = False
    quiet: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)

    def open_store(self, actor: str = "cli") -> Any:
        from memctl.store import open_store

        return open_store(self.root, self.subdir, overrides=self.overrides, actor=actor)

    @property
    def interactive(self) -> bool:
        return sys.stdin.isatty() and sys.stdout.isatty()
