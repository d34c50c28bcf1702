"""Shared fixtures: an isolated root, the fake embedder, and an in-process CLI runner.

tests/unit: the fake embedder, in process (their `backend` tests also run on PostgreSQL, marked `postgres`).
tests/integration: PostgreSQL, the real packaged models, LLM servers (scripted; Gemma 3 270M under `real_llm`),
subprocesses, the fresh install. `pytest tests/unit -m "not integration and not postgres"`: no servers, no models.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own root and no user config; the fake embedder unless a test opts out."""
    home = tmp_path / "home"
    monkeypatch.setenv("MEMCTL_HOME", str(home))
    user_config = tmp_path / "no-user-config.yaml"
    user_config.write_text("")  # MEMCTL_CONFIG must name a file: an empty one means no user settings
    monkeypatch.setenv("MEMCTL_CONFIG", str(user_config))
    monkeypatch.setenv("MEMCTL_EMBEDDING_PROVIDER", "fake")
    for name in list(os.environ):
        # MEMCTL_TEST_* are test switches (fresh-install run, CI's PostgreSQL URL), not configuration.
        if (
            name.startswith("MEMCTL_")
            and not name.startswith("MEMCTL_TEST_")
            and name not in {"MEMCTL_HOME", "MEMCTL_CONFIG", "MEMCTL_EMBEDDING_PROVIDER"}
        ):
            monkeypatch.delenv(name)
    return home


@pytest.fixture
def home(isolated_env: Path) -> Path:
    return isolated_env


@pytest.fixture(params=["embedded", "postgres"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, isolated_env: Path):
    """Run the test on both backends: as it is (folder stores under the root), and with MEMCTL_STORE
    pointing at PostgreSQL in a schema of its own, so `cli(...)` and `memctl.open_store(home, subdir)`
    use that database. Request it first (or `pytest.mark.usefixtures("backend")`), before `store`.
    Without a server the PostgreSQL half skips — and fails with CI=true (tests/pg.py)."""
    if request.param == "embedded":
        yield "embedded"
        return
    from tests.pg import pg_schema

    with pg_schema() as url:
        monkeypatch.setenv("MEMCTL_STORE", url)
        yield "postgres"


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """Run `memctl ARGS` in this process; returns Result(code, out, err)."""
    from memctl.cli.main import main

    def run(*args: str, input: str | None = None) -> Result:
        monkeypatch.setattr(sys, "stdin", io.StringIO(input or ""))
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return run


def run_memctl(*args: str, env: dict[str, str] | None = None, input: str | None = None, timeout: float = 300) -> Result:
    """Run memctl as a separate process (what cron and CI do)."""
    proc = subprocess.run(
        [sys.executable, "-m", "memctl", *args],
        capture_output=True,
        text=True,
        input=input,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        cwd=REPO,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def store(home: Path):
    import memctl
    from memctl.embeddings import FakeEmbedder

    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as opened:
        yield opened


def stored_count(cli: Any, *args: str) -> int:
    """How many memories `list` reports; 0 for a store that does not exist (nothing was created)."""
    result = cli("list", "--json", *args)
    if result.code == 3:
        assert "no store" in result.json["error"]["message"], result.err
        return 0
    assert result.code == 0, result.err
    return int(result.json["total"])


@pytest.fixture(autouse=True)
def _gate_keeps_unless_asked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests of the pipeline around the gate see a gate that keeps (the learned model would make their
    hand-written candidates pending or dropped); tests marked `real_gate` get the shipped model."""
    if request.node.get_closest_marker("real_gate") is None:
        from memctl.memorize import gate_model

        monkeypatch.setattr(gate_model, "model_for", lambda area, name: None)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Runs before `-m` selects. The PostgreSQL half of a `backend` test is marked `postgres` (so
    `-m "not postgres"` runs without a server). A smoke test runs on the embedded store only: the fresh venv
    that runs them (scripts/check_fresh_install.sh) installs memctl and the `test` extra, no PostgreSQL driver."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("backend") == "postgres":
            item.own_markers[:] = [m for m in item.own_markers if m.name != "smoke"]
            item.add_marker(pytest.mark.postgres)
