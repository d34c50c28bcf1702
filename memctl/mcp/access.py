"""Access times written after the answer, not before it.

A search counts its results as accessed (`accessed_at`, read by `prune --not-accessed-for`). The CLI
writes that at the end of its one search. A server answering many searches would pay one write
transaction inside every call: ~0.3-0.5 ms of a warm `memory_search`, and while a `memctl save` in a
shell holds SQLite's write lock, up to the store's one-second touch wait before the answer leaves.
So the server notes the ids and a background thread writes them a moment later, all of a subdir's at
once, when the store is free. Access times are a soft signal (the store's `touch` is best effort
too): a server killed within that moment loses only the last moment's access times.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from memctl.store.records import now_iso

log = logging.getLogger("memctl.mcp")

FLUSH_DELAY = 0.25  # seconds between the first access noted and the write: a burst of calls is written once
UseStore = Callable[[str], AbstractContextManager[Any]]


class AccessLog:
    """Ids read per subdir, written by `store.touch` on a thread of its own (`flush` at the latest on close)."""

    def __init__(self, use: UseStore, delay: float = FLUSH_DELAY) -> None:
        self._use = use
        self._delay = delay
        self._pending: dict[str, tuple[dict[str, None], str]] = {}  # subdir -> (ids in order, last access)
        self._lock = threading.Lock()
        self._wake = threading.Event()  # set when something is noted
        self._stop = threading.Event()  # set by close
        self._thread: threading.Thread | None = None

    def record(self, subdir: str, ids: Sequence[str]) -> None:
        """Note that `ids` of `subdir` were just returned; written within `delay` seconds."""
        if not ids:
            return
        at = now_iso()
        with self._lock:
            if self._stop.is_set():
                late = True
            else:
                late = False
                seen, _ = self._pending.get(subdir, ({}, at))
                seen.update(dict.fromkeys(ids))
                self._pending[subdir] = (seen, at)
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="memctl-access", daemon=True)
                    self._thread.start()
        if late:  # after close: written at once, as the CLI does
            self._write(subdir, list(ids), at)
        else:
            self._wake.set()

    def flush(self) -> None:
        """Write everything noted so far (on the calling thread)."""
        with self._lock:
            pending, self._pending = self._pending, {}
        for subdir, (ids, at) in pending.items():
            self._write(subdir, list(ids), at)

    def close(self) -> None:
        """Stop the thread and write what is left."""
        with self._lock:
            self._stop.set()
            thread = self._thread
        self._wake.set()
        if thread is not None:
            thread.join()
        self.flush()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._stop.wait(self._delay)  # let the calls of this moment come in (close cuts it short)
            self._wake.clear()  # before taking the batch: an access noted after this wakes the next round
            self.flush()

    def _write(self, subdir: str, ids: list[str], at: str) -> None:
        try:
            with self._use(subdir) as store:
                for start in range(0, len(ids), 900):  # touch writes at most 900 ids per statement
                    store.touch(ids[start : start + 900], at=at)
        except Exception as exc:  # noqa: BLE001 - best effort, like touch itself; the next search notes again
            log.warning("memctl mcp: recording access times in %r failed: %s", subdir, exc)
