"""memctl.text.calendar_words: a month, weekday, clock time, year or date placeholder said in another form."""

from __future__ import annotations

import pytest

from memctl.text.calendar_words import said_otherwise


@pytest.mark.parametrize(
    ("word", "evidence"),
    [
        ("tuesday", "open tue-sat"),
        ("friday", "每周五上午"),
        ("october", "booked mon 26 oct"),
        ("october", "when=2026-10-26t10:00"),
        ("january", "十二月和一月都早收工"),
        ("january", "从明年1月起"),
        ("7pm", "open 11:00-19:00"),
        ("3.45pm", "finish by 15:45"),
        ("11am", "11 am start"),
        ("2027", "从明年1月起改用"),
        ("2027", "the 2026 audit"),
        ("yyyy-mm-dd", ""),
    ],
)
def test_the_same_calendar_word_in_another_form(word, evidence):
    assert said_otherwise(word, evidence)


@pytest.mark.parametrize(
    ("word", "evidence"),
    [
        ("monday", "open tue-sat"),
        ("march", "every month on the 3rd"),
        ("5pm", "5 apples and 17 pears"),
        ("2030", "the 2026 audit"),
        ("2027", "no year given here"),
        ("rex", "my dog rex"),  # not a calendar word: the caller's own check decides
    ],
)
def test_a_calendar_word_the_evidence_does_not_give(word, evidence):
    assert not said_otherwise(word, evidence)
