"""Helpers shared by the benchmarks: timing, child-process wall time and peak RSS, tables."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PG_SERVER = REPO / "scripts" / "pg_test_server.sh"

# Words of the generated memories of the latency benches (cli_latency.py, mcp_latency.py).
SUBJECTS = [
    "the deploy pipeline",
    "the staging database",
    "the UI theme",
    "the backup job",
    "the API gateway",
    "customer billing",
    "the team standup",
    "the search index",
    "log retention",
    "the mobile app",
]
VERBS = ["uses", "depends on", "moved to", "is configured with", "must avoid", "prefers", "runs on", "is owned by"]
OBJECTS = [
    "PostgreSQL 16",
    "Kubernetes",
    "dark mode",
    "a nightly cron",
    "port 8443",
    "Stripe",
    "Mondays at 9",
    "OpenSearch",
    "30 days",
    "React Native",
    "Terraform",
    "Redis",
    "the acme-logs bucket",
    "Frankfurt",
]


def generated_texts(size: int, seed: int = 1) -> list[str]:
    """`size` short memories ("the backup job runs on Redis (note 7)"), the same for a given seed."""
    import random

    rng = random.Random(seed)
    return [f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} (note {i})" for i in range(size)]


def median_time(fn: Callable[[], object], runs: int = 5, setup: Callable[[], object] | None = None) -> float:
    samples = []
    for _ in range(runs):
        if setup:
            setup()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def run_child(args: Sequence[str], env: dict[str, str] | None = None, stdin: str | None = None) -> tuple[float, float]:
    """Run a process; return (wall seconds, peak RSS in MB) of that process alone."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        list(args),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        cwd=REPO,
    )
    if stdin is not None:
        proc.stdin.write(stdin.encode())  # type: ignore[union-attr]
        proc.stdin.close()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) not in (0, 3):
        raise RuntimeError(f"{args} failed: {err}")
    return wall, usage.ru_maxrss / 1024


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(c) for c in header]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [
        title,
        "  ".join(h.ljust(w) for h, w in zip(cells[0], widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells[1:]]
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def python() -> str:
    return sys.executable


def pg_server_url(url: str | None, started: list[str]) -> str:
    """`url`, else MEMCTL_TEST_PG_URL, else a throwaway server of scripts/pg_test_server.sh, whose folder is
    appended to `started` (stop_pg_servers stops them)."""
    url = url or os.environ.get("MEMCTL_TEST_PG_URL")
    if url:
        return url
    out = subprocess.run(["bash", str(PG_SERVER), "start"], check=True, capture_output=True, text=True).stdout
    values = dict(line.split("=", 1) for line in out.split() if "=" in line)
    started.append(values["MEMCTL_TEST_PG_DIR"])
    return values["MEMCTL_TEST_PG_URL"]


def stop_pg_servers(started: list[str]) -> None:
    """Stop the servers pg_server_url started (by the PID in each folder)."""
    for folder in started:
        subprocess.run(["bash", str(PG_SERVER), "stop", folder], check=False)
