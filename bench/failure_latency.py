"""How long memctl takes to give up, as a fresh process (what cron sees), against the bound it is configured with.

    python bench/failure_latency.py [--runs 3] [--url postgresql://...]

The tests prove these answers deterministically (the exit code, the message, the number of attempts); the
wall time they take lives here, where a loaded machine makes a figure, not a failure:

- PostgreSQL, wrong password: refused at once (no retries), against CONNECT_TIMEOUT.
- PostgreSQL, a host that accepts TCP and never answers (a listener on loopback): CONNECT_TIMEOUT.
- memorize against a utility model that accepts connections and never answers, utility_timeout 2 s and
  utility_retries 1: two tries of 2 s each (4 s), not twice that (litellm's own retries are off).
- import-knowledge into a PostgreSQL store whose import lock another session holds, lock_timeout 1 s.

Without --url (or MEMCTL_TEST_PG_URL) a throwaway server is started with scripts/pg_test_server.sh and
stopped at the end. Figures are medians of --runs fresh processes; "over" is the median minus the bound
(process start, imports and the error path).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import REPO, pg_server_url, python, stop_pg_servers, table  # noqa: E402

TRANSCRIPT = [{"role": "user", "content": "I'm Lena. Our billing service is written in Go."}]


def timed(args: list[str], env: dict[str, str], expect: int) -> float:
    start = time.perf_counter()
    proc = subprocess.run([python(), "-m", "memctl", *args], capture_output=True, text=True, env=env, cwd=REPO)
    seconds = time.perf_counter() - start
    if proc.returncode != expect:
        raise RuntimeError(f"memctl {args} exited {proc.returncode}, not {expect}: {proc.stderr[-500:]}")
    return seconds


def silent_listener() -> socket.socket:
    """Accepts connections (the kernel's backlog) and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--url", default=None)
    args = parser.parse_args()

    import psycopg

    from memctl.store.pg_schema import KNOWLEDGE_LOCK_CLASS
    from memctl.store.postgres import CONNECT_TIMEOUT

    started: list[str] = []
    url = pg_server_url(args.url, started)
    work = Path(tempfile.mkdtemp(prefix="memctl-failure-latency-"))
    (work / "config.yaml").write_text("")
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMCTL_")}
    env = base | {
        "MEMCTL_HOME": str(work / "home"),
        "MEMCTL_CONFIG": str(work / "config.yaml"),
        "MEMCTL_EMBEDDING_PROVIDER": "fake",
        "PYTHONPATH": str(REPO),
    }
    schema = f"memctl_failure_latency_{os.getpid()}"
    rows = []
    try:
        bad = url.replace("://postgres:", "://postgres:not-the-password-", 1)
        wrong = [timed(["--store", bad, "list", "--json"], env, 1) for _ in range(args.runs)]
        rows.append(["PostgreSQL, wrong password", statistics.median(wrong), float(CONNECT_TIMEOUT)])

        listener = silent_listener()
        dead = f"postgresql://memctl:pw@127.0.0.1:{listener.getsockname()[1]}/memctl"
        try:
            hung = [timed(["--store", dead, "list", "--json"], env, 1) for _ in range(args.runs)]
        finally:
            listener.close()
        rows.append(["PostgreSQL, host never answers", statistics.median(hung), float(CONNECT_TIMEOUT)])

        model = silent_listener()
        chat = work / "chat.json"
        chat.write_text(json.dumps(TRANSCRIPT))
        llm_env = env | {
            "MEMCTL_UTILITY_MODEL": "openai/never-answers",
            "MEMCTL_UTILITY_API_BASE": f"http://127.0.0.1:{model.getsockname()[1]}/v1",
            "MEMCTL_UTILITY_API_KEY_ENV": "NEVER_KEY",
            "NEVER_KEY": "sk-none",
            "MEMCTL_UTILITY_TIMEOUT": "2",
            "MEMCTL_INTERNAL_UTILITY_RETRIES": "1",
        }
        try:
            llm = [timed(["memorize", str(chat), "--no-solutions", "--json"], llm_env, 4) for _ in range(args.runs)]
        finally:
            model.close()
        rows.append(["memorize, model never answers (2 tries x 2 s)", statistics.median(llm), 4.0])

        kb = work / "kb"
        kb.mkdir()
        (kb / "a.txt").write_text("a knowledge file")
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"CREATE SCHEMA {schema}")
        options = quote(f"-csearch_path={schema},public", safe="")  # memctl's tables in that schema
        store_url = f"{url}{'&' if '?' in url else '?'}options={options}"
        lock_env = env | {"MEMCTL_STORE": store_url, "MEMCTL_LOCK_TIMEOUT": "1"}
        with psycopg.connect(url, autocommit=True) as holder:
            holder.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (KNOWLEDGE_LOCK_CLASS, "default"))
            locked = [timed(["import-knowledge", str(kb), "--json"], lock_env, 1) for _ in range(args.runs)]
        rows.append(["import-knowledge, import lock held (lock_timeout 1 s)", statistics.median(locked), 1.0])
    finally:
        try:
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        finally:
            stop_pg_servers(started)
    print(
        table(
            f"Giving up, as a fresh process (median of {args.runs})",
            ["case", "seconds", "bound s", "over s"],
            [[name, seconds, bound, seconds - bound] for name, seconds, bound in rows],
        )
    )


if __name__ == "__main__":
    main()
