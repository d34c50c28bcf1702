"""behaviour: default rules, model-merged adjustments (normalised, atomic), reset, edit via $EDITOR.

Every test runs on both backends (`backend`): behaviour.md in the folder, a row of memctl_behaviour in PostgreSQL.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memctl import behaviour
from memctl.llm import LLMError, UtilityModel
from tests.pg import query
from tests.scripted_llm import Router

pytestmark = pytest.mark.usefixtures("backend")


def _llm(store, reply):
    return UtilityModel(store.config, completion=Router(behaviour_merge=reply))


def test_show_defaults_without_a_file(cli):
    assert cli("behaviour", "show").code == 3  # no store yet: said, not created
    cli("save", "a memory, so the store exists")
    doc = cli("behaviour", "show", "--json").json
    assert doc["default"] is True and doc["rules"].startswith("# Behaviour rules")
    assert cli("behaviour").out == doc["rules"]


def test_normalise():
    raw = "```markdown\n# Rules\n\n\n- a  \n- a\n-  b\n\n\n\n- c\n```\n\n"
    assert behaviour.normalise(raw) == "# Rules\n\n- a\n-  b\n\n- c\n"


def test_adjust_merges_normalises_and_writes(store, backend):
    reply = "```\n# Behaviour rules\n\n- Answer in German.\n- Answer in German.\n\n\n\n- Be direct.\n```"
    router = Router(behaviour_merge=reply)
    result = behaviour.adjust(store, "Always answer in German", UtilityModel(store.config, completion=router))
    assert result.changed and result.path == store.behaviour_location
    assert store.read_behaviour() == "# Behaviour rules\n\n- Answer in German.\n\n- Be direct.\n"
    sent = router.calls[0][1]
    assert "Always answer in German" in sent and "Be direct: lead with the answer" in sent  # the default rules
    if backend == "embedded":
        assert result.path == str(store.folder / "behaviour.md")
        assert Path(result.path).read_text() == store.read_behaviour()
        assert not list(store.folder.glob("*.tmp*"))
    else:
        assert result.path.endswith("#default (behaviour rules)")
        assert query("SELECT subdir, rules FROM memctl_behaviour") == [("default", store.read_behaviour())]


@pytest.mark.parametrize("reply", [LLMError("timeout"), "```\n```", "   "])
def test_failed_adjust_changes_nothing(store, reply):
    store.write_behaviour("- keep me\n")
    with pytest.raises(LLMError):
        behaviour.adjust(store, "be brief", _llm(store, reply))
    assert store.read_behaviour() == "- keep me\n"


def test_rules_are_per_subdir(cli):
    import memctl

    cli("-s", "agent1", "save", "y")
    reset = cli("-s", "agent1", "behaviour", "reset", "--json")
    assert reset.code == 0 and reset.json["changed"] is False  # the defaults were in effect already
    with memctl.open_store(None, "agent2") as other:
        other.write_behaviour("- agent two only\n")
    assert cli("-s", "agent2", "behaviour", "show").out == "- agent two only\n"
    assert cli("-s", "agent1", "behaviour", "show", "--json").json["default"] is True  # nothing was written
    cli("-s", "agent3", "save", "x")
    assert cli("-s", "agent3", "behaviour", "show", "--json").json["default"] is True


def test_reset_and_cli_adjust(cli, monkeypatch):
    monkeypatch.setenv("MEMCTL_UTILITY_MODEL", "scripted/test")
    monkeypatch.setattr(UtilityModel, "_litellm", lambda self, messages: "- Reply in haiku.\n")
    doc = cli("behaviour", "adjust", "reply in haiku", "--json").json
    assert doc["rules"] == "- Reply in haiku.\n" and doc["changed"] and doc["default"] is False
    assert cli("behaviour", "show").out == "- Reply in haiku.\n"
    reset = cli("behaviour", "reset", "--json").json
    assert reset["rules"].startswith("# Behaviour rules") and reset["changed"]
    again = cli("behaviour", "reset", "--json").json
    assert again["rules"] == reset["rules"] and again["changed"] is False
    assert cli("behaviour", "adjust", "--json").code == 2  # adjust needs TEXT
    assert cli("behaviour", "explode", "--json").code == 2


def test_edit_runs_editor_without_a_shell(cli, tmp_path: Path, monkeypatch):
    script = tmp_path / "fake editor.py"  # a space in the path: only an argument list survives it
    script.write_text("import sys\np = sys.argv[-1]\nopen(p, 'a').write('\\n\\n\\n- Added by the editor.\\n')\n")
    monkeypatch.setenv("EDITOR", f'{sys.executable} "{script}"')
    monkeypatch.delenv("VISUAL", raising=False)
    doc = cli("behaviour", "edit", "--json").json
    assert doc["rules"].endswith("\n\n- Added by the editor.\n") and "\n\n\n" not in doc["rules"]
    monkeypatch.setenv("EDITOR", f"{sys.executable} -c 'import sys; sys.exit(3)'")
    failed = cli("behaviour", "edit", "--json")
    assert failed.code == 1 and "status 3" in failed.json["error"]["message"]
    assert cli("behaviour", "show", "--json").json["rules"] == doc["rules"]
