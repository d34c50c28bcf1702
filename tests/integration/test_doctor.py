"""`memctl doctor` (docs/doctor.md): figures, the --json contract, kept runs and --trend, recall@k on saved
questions, limits that exit 1, --plot, and the findings `review list --kind` lists — on both backends."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import memctl
from memctl.store import pg_schema, schema

pytestmark = pytest.mark.usefixtures("backend")

PORT_A = "The API server listens on port 8080 in production"
PORT_B = "The API server listens on port 9090 in production"
DARK = "User prefers dark mode in every editor"
DARK_AGAIN = "User prefers dark mode in every editor."
OWNER = "Alice owns the billing service and its alerts"

# The figures document (docs/doctor.md): every key, and the keys of each figure.
TOP_KEYS = {
    "subdir",
    "run",
    "doctor",
    "at",
    "memories",
    "conversation",
    "knowledge",
    "junk",
    "duplicates",
    "conflicts",
    "stale",
    "never_recalled",
    "superseded",
    "pending",
    "recall",
    "details",
    "crossed",
    "plot",
}
FIGURE_KEYS = {
    "junk": {"count", "share", "uncertain", "scored", "model", "worst", "reason"},
    "duplicates": {"groups", "memories", "redundant", "share", "similarity"},
    "conflicts": {"pairs", "memories", "share", "similarity"},
    "stale": {"count", "share", "below", "half_life"},
    "never_recalled": {"count", "share", "days", "tracked", "reason"},
    "superseded": {"count", "reason"},
    "pending": {"count"},
    "recall": {"k", "questions", "found", "unanswerable", "at_k", "mode", "threshold", "reason"},
}


def _save(cli, *texts: str, extra: tuple[str, ...] = ()) -> list[str]:
    ids = []
    for text in texts:
        result = cli("save", text, "--json", *extra)
        assert result.code == 0, result.err
        ids += result.json["ids"]
    return ids


def _doctor(cli, *args: str, code: int = 0) -> dict:
    result = cli("doctor", "--json", *args)
    assert result.code == code, (result.code, result.out, result.err)
    return result.json


def test_report_json_contract(cli, home: Path):
    a, b, c, d, e = _save(cli, PORT_A, PORT_B, DARK, DARK_AGAIN, OWNER)
    with memctl.open_store(home) as store:
        store.add_pending("The user might try Rust next year", "fragments", reason="p(noise) 0.5")
    doc = _doctor(cli)
    assert set(doc) == TOP_KEYS
    for key, keys in FIGURE_KEYS.items():
        assert set(doc[key]) == keys, key
    assert doc["doctor"] == 1 and isinstance(doc["run"], int)
    assert (doc["memories"], doc["conversation"], doc["knowledge"]) == (5, 5, 0)
    # The test suite's gate keeps everything (tests/conftest.py): no model, so junk is unknown, not 0.
    assert doc["junk"]["count"] is None and doc["junk"]["share"] is None and doc["junk"]["reason"]
    assert doc["duplicates"] == {"groups": 1, "memories": 2, "redundant": 1, "share": 0.2, "similarity": 0.95}
    assert doc["conflicts"] == {"pairs": 1, "memories": 2, "share": 0.4, "similarity": 0.9}
    assert doc["details"]["conflicts"][0]["ids"] == [a, b]
    assert doc["details"]["conflicts"][0]["differs"] == [["8080"], ["9090"]]
    assert doc["superseded"] == {"count": 0, "reason": None}
    assert doc["pending"] == {"count": 1}
    assert doc["recall"]["at_k"] is None and doc["recall"]["reason"] == "no --queries file given"
    assert doc["stale"]["count"] == 0 and doc["never_recalled"]["count"] == 0  # all created just now
    assert doc["crossed"] == [] and doc["plot"] is None
    # The human table says the same figures.
    table = cli("doctor")
    assert table.code == 0, table.err
    assert "near-duplicates\t1 groups, 2 memories, 1 redundant (20.0 %)" in table.out
    assert "superseded versions\t0 (kept for --as-of" in table.out


def test_review_list_kinds_show_the_findings(cli, home: Path):
    a, b, c, d, e = _save(cli, PORT_A, PORT_B, DARK, DARK_AGAIN, OWNER)
    before = cli("review", "list", "--kind", "conflict", "--json")
    assert before.code == 0 and before.json["run"] is None and before.json["items"] == []
    assert "no doctor run" in before.err
    run = _doctor(cli)["run"]
    conflicts = cli("review", "list", "--kind", "conflict", "--json").json
    assert conflicts["run"]["run"] == run and conflicts["total"] == 2
    by_id = {i["id"]: i for i in conflicts["items"]}
    assert set(by_id) == {a, b}
    assert by_id[a]["related"] == [b] and by_id[a]["kind"] == "conflict"
    assert "8080 vs 9090" in by_id[a]["reason"] and by_id[a]["text"] == PORT_A
    duplicates = cli("review", "list", "--kind", "duplicate", "--json").json
    assert {i["id"] for i in duplicates["items"]} == {c, d}
    assert all(i["reason"].startswith("near-duplicate of ") for i in duplicates["items"])
    assert cli("review", "list", "--kind", "stale", "--json").json["items"] == []
    # A memory deleted since the run is not listed.
    assert cli("delete", c, "--yes").code == 0
    assert [i["id"] for i in cli("review", "list", "--kind", "duplicate", "--json").json["items"]] == [d]
    plain = cli("review", "list", "--kind", "conflict")
    assert plain.out.splitlines()[0] == "id\tarea\tcreated\tscore\treason\ttext"
    bad = cli("review", "list", "--kind", "bogus")
    assert bad.code == 2 and "unknown kind" in bad.err


def test_review_list_without_kind_is_unchanged(cli, home: Path):
    _save(cli, PORT_A, PORT_B)
    with memctl.open_store(home) as store:
        pid = store.add_pending("The user might try Rust next year", "fragments", reason="p(noise) 0.5")
    _doctor(cli)
    for args in ((), ("--kind", "pending")):
        doc = cli("review", "list", "--json", *args).json
        assert set(doc) == {"subdir", "total", "page", "page_size", "items"}
        assert [i["id"] for i in doc["items"]] == [pid] and doc["items"][0]["reason"] == "p(noise) 0.5"


def test_trend_after_two_runs(cli, tmp_path: Path):
    _save(cli, PORT_A, PORT_B, OWNER)
    first = _doctor(cli)
    _save(cli, DARK, DARK_AGAIN)
    second = _doctor(cli)
    assert second["run"] > first["run"]
    trend = cli("doctor", "--trend", "--json")
    assert trend.code == 0, trend.err
    runs = trend.json["runs"]
    assert [r["run"] for r in runs] == [first["run"], second["run"]]
    assert [r["memories"] for r in runs] == [3, 5]
    assert [r["duplicate_share"] for r in runs] == [0.0, 0.2]
    assert [r["conflict_share"] for r in runs] == [round(2 / 3, 4), 0.4]
    assert runs[0]["at"] == first["at"] and runs[1]["recall_at_k"] is None
    assert [r["run"] for r in cli("doctor", "--trend", "--last", "1", "--json").json["runs"]] == [second["run"]]
    # A fact that changed is kept as a superseded version: counted, and followed by the trend.
    port = cli("list", "--json").json["items"]
    first_port = next(m["id"] for m in port if m["text"] == PORT_A)
    assert cli("update", first_port, "--supersede", "--text", "The API server listens on port 8443").code == 0
    third = _doctor(cli)
    assert third["superseded"] == {"count": 1, "reason": None} and third["memories"] == 5
    runs = cli("doctor", "--trend", "--json").json["runs"]
    assert [r["superseded"] for r in runs] == [0, 0, 1]
    # --trend measures nothing: no fourth run.
    assert len(cli("doctor", "--trend", "--json").json["runs"]) == 3
    plain = cli("doctor", "--trend")
    assert plain.out.splitlines()[0].split("\t")[:3] == ["run", "at", "memories"]
    assert len(plain.out.splitlines()) == 4
    # --no-save measures without keeping a run.
    assert _doctor(cli, "--no-save")["run"] is None
    assert len(cli("doctor", "--trend", "--json").json["runs"]) == 3


def test_trend_chart_draws_each_share():
    from memctl.cli.commands.doctor import trend_chart

    rows = [
        {"run": 1, "at": "2026-01-01T00:00:00+00:00", "junk_share": 0.5, "stale_share": 0.1, "recall_at_k": None},
        {"run": 2, "at": "2026-01-08T00:00:00+00:00", "junk_share": 0.2, "stale_share": 0.3, "recall_at_k": 0.8},
    ]
    chart = trend_chart(rows, 80, 16)
    assert "likely junk" in chart and "stale" in chart and "recall@k" in chart
    assert "near-duplicates" not in chart  # no run measured it
    assert "#1 01-01" in chart and "#2 01-08" in chart
    from memctl.review.doctor_plot import labels

    same_day = [{"run": 3, "at": "2026-01-09T08:00:00+00:00"}, {"run": 4, "at": "2026-01-09T17:30:00+00:00"}]
    assert labels(same_day) == ["#3 01-09 08:00", "#4 01-09 17:30"]


def test_recall_at_k_on_saved_questions(cli, home: Path, tmp_path: Path):
    a, b, c, d, e = _save(cli, PORT_A, PORT_B, DARK, DARK_AGAIN, OWNER)
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        "\n".join(
            json.dumps(q)
            for q in [
                {"question": "who owns the billing service alerts", "id": e},
                {"question": "which editor mode does the user prefer", "text": "prefers DARK  mode"},
                {"question": "who owns the billing service", "expected": e},
                {"question": "what is the capital of Peru", "text": "Lima is the capital of Peru"},
            ]
        )
        + "\n"
    )
    doc = _doctor(cli, "--queries", str(questions), "--k", "3")
    recall = doc["recall"]
    assert (recall["k"], recall["questions"], recall["found"], recall["unanswerable"]) == (3, 4, 3, 1)
    assert recall["at_k"] == 0.75 and recall["mode"] == "hybrid" and recall["threshold"] == 0.7
    assert doc["details"]["missed"] == [
        {"question": "what is the capital of Peru", "expected": "Lima is the capital of Peru", "in_store": False}
    ]
    # The searches of doctor are not recalls: nothing became "recalled".
    with memctl.open_store(home) as store:
        assert all(accessed is None for _, _, accessed in store.iter_rows())
    # YAML: a mapping question -> expected memory.
    yaml_file = tmp_path / "questions.yaml"
    yaml_file.write_text(f"who owns the billing service alerts: {e}\nwhich port does the API server use: '8080'\n")
    assert _doctor(cli, "--queries", str(yaml_file), "--k", "5")["recall"]["found"] == 2
    listed = tmp_path / "list.yml"
    listed.write_text(f"- question: who owns the billing service alerts\n  expected_id: {e}\n")
    assert _doctor(cli, "--queries", str(listed))["recall"]["found"] == 1
    assert cli("doctor", "--trend", "--json").json["runs"][-1]["recall_at_k"] == 1.0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"question": "x"}\n', "exactly one of id, text or expected"),
        ('{"question": "x", "id": "a", "text": "b"}\n', "exactly one of id, text or expected"),
        ('{"question": "x", "id": "a"}\nnot json\n', "line 2: not JSON"),
        ('{"id": "a"}\n', "no question"),
        ("", "holds no questions"),
    ],
)
def test_bad_queries_file_is_a_usage_error(cli, tmp_path: Path, content: str, message: str):
    _save(cli, OWNER)
    path = tmp_path / "q.jsonl"
    path.write_text(content)
    result = cli("doctor", "--queries", str(path))
    assert result.code == 2 and message in result.err and "Traceback" not in result.err
    missing = cli("doctor", "--queries", str(tmp_path / "none.jsonl"))
    assert missing.code == 2 and "no queries file" in missing.err
    assert cli("doctor", "--trend", "--json").json["runs"] == []  # nothing measured, nothing kept


def test_a_figure_over_its_limit_exits_1(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _save(cli, PORT_A, PORT_B, OWNER)
    monkeypatch.setenv("MEMCTL_DOCTOR_LIMITS", "{conflict_share: 0.9}")
    assert _doctor(cli)["crossed"] == []
    monkeypatch.setenv("MEMCTL_DOCTOR_LIMITS", "{conflict_share: 0.5}")
    doc = _doctor(cli, code=1)
    assert doc["crossed"] == [
        {"figure": "conflict_share", "value": round(2 / 3, 4), "limit": 0.5, "key": "doctor_limits.conflict_share"}
    ]
    human = cli("doctor")
    line = "conflict_share 0.6667 is above its limit 0.5 (doctor_limits.conflict_share)"
    assert human.code == 1 and line in human.err
    monkeypatch.setenv("MEMCTL_DOCTOR_LIMITS", "{pending: 0}")
    assert _doctor(cli)["crossed"] == []  # 0 pending, none allowed
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "capital of Peru", "text": "Lima"}) + "\n")
    monkeypatch.setenv("MEMCTL_DOCTOR_LIMITS", "{recall_at_k: 0.5}")
    assert [c["figure"] for c in _doctor(cli, "--queries", str(questions), code=1)["crossed"]] == ["recall_at_k"]
    assert _doctor(cli)["crossed"] == []  # no questions: recall not measured, no limit crossed
    monkeypatch.setenv("MEMCTL_DOCTOR_LIMITS", "{junk_share: 1.5}")
    bad = cli("doctor")
    assert bad.code == 2 and "doctor_limits" in bad.err and "junk_share must be in [0, 1]" in bad.err
    monkeypatch.delenv("MEMCTL_DOCTOR_LIMITS")
    monkeypatch.setenv("MEMCTL_DOCTOR_MAX_CONFLICT_SHARE", "0.5")  # retired: read as doctor_limits.conflict_share
    assert [c["key"] for c in _doctor(cli, code=1)["crossed"]] == ["doctor_limits.conflict_share"]


def test_stale_and_never_recalled(cli, monkeypatch: pytest.MonkeyPatch):
    faint, *_ = _save(cli, "The staging database is rebuilt from the nightly dump", extra=("--importance", "0.05"))
    _save(cli, OWNER, DARK)
    monkeypatch.setenv("MEMCTL_INTERNAL_DOCTOR_NEVER_RECALLED_DAYS", "0")
    doc = _doctor(cli)
    assert (doc["stale"]["count"], doc["stale"]["share"]) == (1, round(1 / 3, 4))
    assert doc["never_recalled"]["count"] == 3 and doc["never_recalled"]["tracked"] is True
    stale = cli("review", "list", "--kind", "stale", "--json").json["items"]
    by_id = {i["id"]: i for i in stale}
    assert set(by_id) >= {faint} and "effective importance 0.05 < 0.1" in by_id[faint]["reason"]
    assert by_id[faint]["score"] == pytest.approx(0.05, abs=1e-3)
    loaded = cli("load", "Alice owns the billing service and its alerts", "--json")
    assert loaded.code == 0
    recalled = {r["id"] for r in loaded.json["results"]}
    assert _doctor(cli)["never_recalled"]["count"] == 3 - len(recalled)
    monkeypatch.setenv("MEMCTL_TRACK_ACCESS", "false")
    untracked = _doctor(cli)["never_recalled"]
    assert untracked["count"] is None and untracked["share"] is None and untracked["tracked"] is False
    assert "track_access is off" in untracked["reason"]
    assert all(
        "never recalled" not in i["reason"] for i in cli("review", "list", "--kind", "stale", "--json").json["items"]
    )


def test_junk_scored_by_the_gate_model(cli, home: Path, monkeypatch: pytest.MonkeyPatch):
    """A form-features gate that calls anything said as "today" noise: those memories are junk, the others
    not; knowledge chunks are not scored."""
    from memctl.memorize import gate_model

    weights = np.zeros(len(gate_model.FEATURES))
    weights[gate_model.FEATURES.index("relative_time")] = 10.0
    stub = gate_model.GateModel(weights, -5.0, 0.3, 0.7, None)
    monkeypatch.setattr(gate_model, "model_for", lambda area, name: stub)
    noisy = _save(cli, "The deploy failed today at noon", "Tests are flaky right now on the CI runner")
    _save(cli, OWNER, DARK)
    _save(cli, "Today the knowledge base says hello", extra=("--meta", "knowledge_source=true"))
    doc = _doctor(cli)
    junk = doc["junk"]
    assert (junk["count"], junk["scored"], junk["uncertain"], junk["share"]) == (2, 4, 0, 0.5)
    assert junk["model"] == "form features" and junk["reason"] is None
    assert {w["id"] for w in junk["worst"]} == set(noisy)
    assert all(w["p_noise"] > 0.99 for w in junk["worst"])
    assert {w["id"] for w in doc["details"]["worst_junk"]} == set(noisy)
    listed = cli("review", "list", "--kind", "junk", "--json").json["items"]
    assert {i["id"] for i in listed} == set(noisy)
    assert all("would drop it today: p(noise) 0.99" in i["reason"] for i in listed)
    # The kept run holds ids and numbers, never a memory's text (purge's promise).
    with memctl.open_store(home) as store:
        kept = json.dumps([r.figures for r in store.doctor_runs()])
    assert "deploy failed" not in kept and "billing" not in kept


def test_plot_writes_a_png(cli, tmp_path: Path):
    pytest.importorskip("matplotlib")
    _save(cli, PORT_A, PORT_B, OWNER)
    _doctor(cli)
    png = tmp_path / "trend.png"
    doc = _doctor(cli, "--plot", str(png))
    assert doc["plot"] == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    again = tmp_path / "again.png"
    trend = cli("doctor", "--trend", "--plot", str(again), "--json")
    assert trend.code == 0 and again.read_bytes()[:4] == b"\x89PNG" and len(trend.json["runs"]) == 2
    bad = cli("doctor", "--trend", "--plot", str(tmp_path / "trend.jpg"))
    assert bad.code == 2 and "PNG" in bad.err


def test_plot_without_matplotlib_names_the_extra(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import sys

    _save(cli, OWNER)
    _doctor(cli)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    result = cli("doctor", "--trend", "--plot", str(tmp_path / "t.png"))
    assert result.code == 1 and "memctl[plot]" in result.err and "Traceback" not in result.err
    assert not (tmp_path / "t.png").exists()


def test_doctor_of_no_store_is_exit_3_and_creates_nothing(cli, home: Path):
    for args in ((), ("--trend",), ("--no-save",)):
        result = cli("doctor", "--json", *args)
        assert result.code == 3 and "no store" in result.json["error"]["message"], args
    assert cli("review", "list", "--kind", "junk").code == 3
    assert not (home / "default").exists() and cli("subdirs", "--json").json["subdirs"] == []


def test_a_store_of_an_older_memctl_gets_the_doctor_tables(cli, home: Path, backend: str, monkeypatch):
    module = pg_schema if backend == "postgres" else schema
    full = list(module.MIGRATIONS)
    assert full[-1][0] == "m010_doctor_runs"
    monkeypatch.setattr(module, "MIGRATIONS", full[:-1])
    with memctl.open_store(home) as store:
        store.add([PORT_A, PORT_B])
    monkeypatch.setattr(module, "MIGRATIONS", full)
    doc = _doctor(cli)
    assert doc["memories"] == 2 and doc["conflicts"]["pairs"] == 1
    assert len(cli("doctor", "--trend", "--json").json["runs"]) == 1


def test_backup_and_restore_keep_the_runs(cli, tmp_path: Path):
    a, b = _save(cli, PORT_A, PORT_B)
    first = _doctor(cli)
    _save(cli, OWNER)
    _doctor(cli)
    assert cli("backup", str(tmp_path / "bk")).code == 0
    restored = cli("-s", "copy", "restore-backup", str(tmp_path / "bk"), "--json")
    assert restored.code == 0, restored.err
    runs = cli("-s", "copy", "doctor", "--trend", "--json").json["runs"]
    assert [r["memories"] for r in runs] == [2, 3] and runs[0]["at"] == first["at"]
    listed = cli("-s", "copy", "review", "list", "--kind", "conflict", "--json").json
    assert {i["id"] for i in listed["items"]} == {a, b} and listed["run"]["run"] == runs[-1]["run"]


@pytest.mark.real_gate
def test_the_shipped_gate_scores_stored_memories(cli):
    """The shipped model on stored memories: session chatter is junk, durable facts are not."""
    facts = _save(cli, OWNER, DARK)
    chatter = _save(cli, "I just ran the tests right now and they passed", "The deploy failed today at noon")
    junk = _doctor(cli)["junk"]
    assert junk["reason"] is None and junk["scored"] == 4 and junk["model"]
    found = {w["id"] for w in junk["worst"]}
    assert found == set(chatter) and not found & set(facts)
    assert junk["share"] == 0.5


def test_mcp_doctor_report_reads_the_kept_runs(home: Path):
    """MCP `doctor_report`: null before the first run, then the latest run's figures and the trend rows."""
    import anyio

    from memctl.review.doctor import run_doctor
    from tests.integration.test_mcp import call, connect

    with memctl.open_store(home) as store:
        store.add([PORT_A, PORT_B, OWNER])
    answers: list[dict] = []

    async def ask() -> None:
        async with connect("stdio") as client:
            answers.append(await call(client, "doctor_report"))
            with memctl.open_store(home) as store:  # a run made meanwhile is seen by the next call
                run_doctor(store)
            answers.append(await call(client, "doctor_report", last=5))

    anyio.run(ask)
    before, after = answers
    assert before["latest"] is None and before["runs"] == []
    latest = after["latest"]
    assert latest["memories"] == 3 and latest["conflicts"]["pairs"] == 1 and latest["doctor"] == 1
    assert [r["run"] for r in after["runs"]] == [latest["run"]] and after["runs"][0]["conflict_share"] == 0.6667


def test_an_empty_store_has_no_shares(cli):
    (mid,) = _save(cli, OWNER)
    assert cli("delete", mid, "--yes").code == 0
    doc = _doctor(cli)
    assert doc["memories"] == 0 and doc["junk"]["scored"] == 0
    shares = [doc[k]["share"] for k in ("duplicates", "conflicts", "stale", "never_recalled")]
    assert shares == [None, None, None, None]
    assert "0 groups, 0 memories, 0 redundant (-)" in cli("doctor").out
