"""A chat line's speaker: taken from "Name: ..." by `add` when the metadata names none (speaker_from_text)."""

from __future__ import annotations

import pytest

from memctl.text.chat_line import speaker_of, with_speaker


@pytest.mark.parametrize(
    ("text", "speaker"),
    [
        ("Caroline: I went to the support group yesterday", "Caroline"),
        ("Mary Ann: see you Friday", "Mary Ann"),
        ("O'Brien: the van is booked", "O'Brien"),
        ("王芳：我昨天去上了陶艺课", "王芳"),
        ("王芳: 好的", "王芳"),
        ("TODO: renew the domain", None),  # capitals only: a label, not a name
        ("User prefers dark mode", None),
        ("Meeting at 12:30 on Friday", None),
        ("Caroline:no space after the colon", None),
        ("注意:", None),  # nothing said after it
        ("See https://example.org", None),
    ],
)
def test_speaker_of(text: str, speaker: str | None):
    assert speaker_of(text) == speaker


def test_with_speaker_keeps_a_given_speaker():
    assert with_speaker("Caroline: hi", {"speaker": "Mel"}) == {"speaker": "Mel"}
    assert with_speaker("Caroline: hi", {"date": "8 May"}) == {"date": "8 May", "speaker": "Caroline"}
    assert with_speaker("no speaker here", {}) == {}


def test_save_records_the_speaker_unless_turned_off(cli, backend, monkeypatch):
    saved = cli("save", "Caroline: I went to the pottery class", "--json").json["ids"][0]
    assert cli("show", saved, "--json").json["memory"]["metadata"] == {"speaker": "Caroline"}
    found = cli("list", "--filter", "speaker == 'Caroline'", "--json").json
    assert [m["id"] for m in found["items"]] == [saved]
    kept = cli("save", "Caroline: the kiln is fixed", "--meta", "speaker=Mel", "--json").json["ids"][0]
    assert cli("show", kept, "--json").json["memory"]["metadata"] == {"speaker": "Mel"}
    monkeypatch.setenv("MEMCTL_SPEAKER_FROM_TEXT", "false")
    plain = cli("save", "Melanie: I painted a lake", "--json").json["ids"][0]
    assert cli("show", plain, "--json").json["memory"]["metadata"] == {}
