"""memctl.mcp.access: a server's access times, written after the answers, all noted ones kept."""

import threading
import time
from contextlib import contextmanager
from typing import Any

from memctl.mcp.access import AccessLog


class Recording:
    """A stand-in store: what touch was asked to write, per subdir."""

    def __init__(self, fail: str | None = None) -> None:
        self.touched: list[tuple[str, list[str], str | None]] = []
        self.fail = fail
        self.lock = threading.Lock()
        self.subdir = ""

    @contextmanager
    def use(self, subdir: str) -> Any:
        if subdir == self.fail:
            raise RuntimeError("store gone")
        with self.lock:
            self.subdir = subdir
            yield self

    def touch(self, ids: list[str], at: str | None = None) -> int:
        self.touched.append((self.subdir, list(ids), at))
        return len(ids)


def test_a_burst_of_calls_is_written_once_per_subdir_after_the_delay() -> None:
    store = Recording()
    log = AccessLog(store.use, delay=0.2)
    log.record("default", ["a", "b"])
    log.record("default", ["b", "c"])
    log.record("projects/x", ["p"])
    assert store.touched == []  # nothing is written inside the calls
    deadline = time.monotonic() + 5
    while len(store.touched) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    written = {subdir: ids for subdir, ids, _ in store.touched}
    assert written == {"default": ["a", "b", "c"], "projects/x": ["p"]}
    assert all(at for _, _, at in store.touched)  # the time of the access, not of the write
    log.close()


def test_close_writes_what_is_pending_and_later_records_are_written_at_once() -> None:
    store = Recording()
    log = AccessLog(store.use, delay=60.0)  # the thread would wait a minute
    log.record("default", ["a"])
    log.close()  # returns without that minute
    assert [ids for _, ids, _ in store.touched] == [["a"]]
    log.record("default", ["b"])
    assert [ids for _, ids, _ in store.touched] == [["a"], ["b"]]


def test_more_ids_than_one_statement_takes_are_written_in_chunks() -> None:
    store = Recording()
    log = AccessLog(store.use, delay=60.0)
    log.record("default", [f"m{i}" for i in range(2000)])
    log.close()
    assert [len(ids) for _, ids, _ in store.touched] == [900, 900, 200]


def test_a_store_that_fails_is_logged_and_the_others_are_still_written(caplog) -> None:
    store = Recording(fail="gone")
    log = AccessLog(store.use, delay=60.0)
    log.record("gone", ["x"])
    log.record("default", ["a"])
    log.close()
    assert [subdir for subdir, _, _ in store.touched] == ["default"]
    assert "recording access times in 'gone' failed" in caplog.text
