"""memctl.text.months: the months a question or a date names, each with its year."""

from __future__ import annotations

import pytest

from memctl.text.months import months_named


@pytest.mark.parametrize(
    ("text", "months"),
    [
        ("What did Caroline sign up for in August 2023?", {(2023, 8)}),
        ("12 May 2023", {(2023, 5)}),
        ("1:56 pm on 8 May, 2023", {(2023, 5)}),
        ("May 8th, 2023", {(2023, 5)}),
        ("Sept. 2024 and 2023-05-12", {(2024, 9), (2023, 5)}),
        ("2023年5月，王芳去了哪里？", {(2023, 5)}),
        ("Where may I go in 2023?", set()),  # "may" the verb, and a year alone, name no month
        ("in May", set()),  # a month without its year names one of every year
        ("2023-13-01", set()),
    ],
)
def test_months_named(text: str, months: set[tuple[int, int]]):
    assert months_named(text) == months


def test_a_long_text_is_read_only_in_part():
    assert months_named("x" * 5000 + " May 2023") == set()
