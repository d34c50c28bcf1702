"""2 MiB pages for the flat index's vectors, on Linux.

A flat scan reads every vector once per query, so it is bound by memory, and on 4 KiB pages by the TLB
too: FAISS's buffer as `read_index` leaves it (4 KiB pages) scanned 8-12 % slower than a fresh copy of
the same vectors that numpy had placed on huge pages (bench/README.md, "Embedded vs PostgreSQL", third
round). MADV_COLLAPSE (Linux 6.1) moves a range onto huge pages at once; it copies the range, ~40 ms
for 100k 384-d vectors, so `VectorIndex.scan` (stores of SCAN_MIN vectors and more) asks for it only from a
handle's second scan of a buffer on (a one-shot CLI search never pays it). Elsewhere, and on older
kernels, nothing happens.
"""

from __future__ import annotations

import ctypes
import sys
from functools import cache
from typing import Any

HUGE_PAGE = 2 << 20
MADV_HUGEPAGE = 14
MADV_COLLAPSE = 25


@cache
def _madvise() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return madvise


def collapse(address: int, size: int) -> bool:
    """Back the whole 2 MiB pages inside [address, address + size) with huge pages now, and let later page
    faults there use them too; False when the system cannot (not Linux, an old kernel, THP off)."""
    madvise = _madvise()
    start = -(-address // HUGE_PAGE) * HUGE_PAGE
    end = (address + size) // HUGE_PAGE * HUGE_PAGE
    if madvise is None or end <= start:
        return False
    madvise(start, end - start, MADV_HUGEPAGE)
    return int(madvise(start, end - start, MADV_COLLAPSE)) == 0
