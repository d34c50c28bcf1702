"""The slot rule of memctl.search.relevance: a question for one exact value needs a memory that holds one."""

from __future__ import annotations

import pytest

from memctl.search.relevance import lacks, slots


@pytest.mark.parametrize(
    ("question", "kinds"),
    [
        ("What's Priya's phone number?", {"phone"}),
        ("王老师的手机号是多少？", {"phone"}),
        ("What is the landlord's email address?", {"email"}),
        ("导师的邮箱是什么？", {"email"}),
        ("What's the office wifi password?", {"password_or_handle"}),
        ("How much does the annual service cost?", {"price"}),
        ("What's the nursery's monthly fee?", {"price"}),
        ("报名费是多少？", {"price"}),
        ("When is the Octavia's MOT due?", set()),
        ("how long do clients have to pay us?", set()),  # a time, not a price
        ("who is in charge of the warehouse?", set()),
        ("phone has no internet abroad", set()),  # a problem with a phone, not a number
        ("newsletter import can't find the email field", set()),
    ],
)
def test_what_a_question_asks_for(question, kinds):
    expected = {"handle" if k == "password_or_handle" else k for k in kinds}
    assert set(slots(question)) == expected


def test_a_memory_lacks_the_value_only_when_none_of_its_shape_is_there():
    phone = slots("What's Priya's phone number?")
    assert lacks(phone, "Priya is the user's accountant at Ledgerwise")
    assert not lacks(phone, "Priya's mobile is +44 7700 900 123")
    price = slots("How much does the annual service cost?")
    assert lacks(price, "The van is serviced every spring at Mud Dock")
    assert not lacks(price, "The annual service is £180 at Mud Dock")
    assert not lacks(slots("每桌酒席多少钱？"), "婚宴每桌 4588 元，不含酒水")
    assert not lacks(frozenset(), "anything at all")  # a question for no exact value lacks nothing
