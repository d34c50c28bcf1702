"""The README's set-up commands work in a fresh venv (runs scripts/check_fresh_install.sh).

Slow (a full install of torch & co.), so it only runs when MEMCTL_TEST_FRESH_INSTALL=1; .ci/run runs the
script itself, in the background beside the suite.
The fresh venv gets the `test` extra only and runs the smoke tests (`-m smoke`): the install is what this
proves; the whole suite runs once, in the developer venv. This test is not a smoke test (no recursion).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())  # tests/ or a folder of it
SCRIPT = REPO / "scripts" / "check_fresh_install.sh"
TIMEOUT_S = 30 * 60  # install + the smoke tests; a loaded 2-core machine needs far more than a quiet one


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.skipif(
    os.environ.get("MEMCTL_TEST_FRESH_INSTALL") != "1",
    reason="set MEMCTL_TEST_FRESH_INSTALL=1 to check the README set-up commands in a fresh venv",
)
def test_readme_setup_commands_work_in_a_fresh_venv() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MEMCTL_TEST_FRESH_INSTALL"}
    proc = subprocess.run(  # noqa: S603 - fixed script path in this repository
        ["bash", str(SCRIPT), "-x", "-q"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    tail = "\n".join(proc.stdout.splitlines()[-60:])
    assert proc.returncode == 0, f"check_fresh_install.sh exited {proc.returncode}:\n{tail}"
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("fresh install OK: install "), f"unexpected final line {last!r}:\n{tail}"
