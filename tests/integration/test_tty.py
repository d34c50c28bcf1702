"""On a terminal, destructive commands ask first; --yes skips the question."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO


def _run_on_tty(args: list[str], answer: str | None, home: Path) -> tuple[int, str]:
    master, slave = pty.openpty()
    env = {**os.environ, "MEMCTL_HOME": str(home), "PYTHONPATH": str(REPO), "TERM": "dumb"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "memctl", *args], stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
    )
    os.close(slave)
    output = b""
    deadline = time.monotonic() + 60
    answered = False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        if answer is not None and not answered and b"[y/N]" in output:
            os.write(master, answer.encode() + b"\n")
            answered = True
        if proc.poll() is not None and not ready:
            break
    proc.wait(timeout=30)
    os.close(master)
    return proc.returncode, output.decode(errors="replace")


def test_delete_asks_on_a_terminal(cli, home: Path):
    mid = cli("save", "precious memory", "--json").json["ids"][0]
    code, out = _run_on_tty(["delete", mid], "n", home)
    assert "Delete 1 memory: " in out and code == 1 and "aborted" in out
    assert cli("show", mid).code == 0
    code, out = _run_on_tty(["delete", mid], "y", home)
    assert code == 0, out
    assert cli("show", mid).code == 3


def test_yes_skips_the_question(cli, home: Path):
    cli("save", "another memory")
    code, out = _run_on_tty(["forget", "another memory", "--yes"], None, home)
    assert code == 0 and "[y/N]" not in out
    assert cli("list", "--json").json["total"] == 0
