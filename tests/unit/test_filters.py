"""Tests for memctl.store.filters: the safe metadata filter language."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest

from memctl.errors import FilterError, UsageError
from memctl.store.filters import MAX_FILTER_LENGTH, Filter, compile_filter

MAIN_DB = {"area": "main", "tags": ["db", "sql"], "priority": 3, "lang": "en"}

# (expression, record, expected)
VALID_CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("area == 'main'", MAIN_DB, True),
    ("area == 'main'", {"area": "fragments"}, False),
    ("area == 'main' and 'db' in tags", MAIN_DB, True),
    ("area == 'main' and 'db' in tags", {"area": "main", "tags": ["x"]}, False),
    (
        "area == 'main' and 'db' in tags",
        {"area": "main"},
        False,
    ),  # tags missing -> None
    ("area == 'main' and 'db' in tags", {"area": "main", "tags": None}, False),
    ("area == 'main' and 'db' in tags", {"area": "main", "tags": 7}, False),
    ("'db' in tags", {"tags": "db,sql"}, True),  # `in` on a string is a substring test
    ("'db' not in tags", {"tags": ["sql"]}, True),
    ("'db' not in tags", MAIN_DB, False),
    (
        'priority >= 2 or source_file == "a.md"',
        {"priority": 1, "source_file": "a.md"},
        True,
    ),
    (
        'priority >= 2 or source_file == "a.md"',
        {"priority": 1, "source_file": "b.md"},
        False,
    ),
    (
        'priority >= 2 or source_file == "a.md"',
        {"priority": "high"},
        False,
    ),  # str >= int
    ("priority > 2", {"priority": 2.5}, True),
    ("priority > -1", {"priority": 0}, True),
    ("priority in [-1, 0]", {"priority": -1}, True),
    ("1 < priority < 5", {"priority": 3}, True),
    ("1 < priority < 5", {"priority": 5}, False),
    ("1 < priority < 5", {}, False),
    ("not knowledge_source", {}, True),  # missing -> None -> falsy
    ("not knowledge_source", {"knowledge_source": True}, False),
    ("not knowledge_source", {"knowledge_source": False}, True),
    ("knowledge_source == True", {"knowledge_source": True}, True),
    ("knowledge_source", {"knowledge_source": "yes"}, True),
    ("lang in ['en', 'de']", {"lang": "de"}, True),
    ("lang in ('en', 'de')", {"lang": "fr"}, False),
    ("lang not in ['en', 'de']", {"lang": "fr"}, True),
    ("lang == None", {}, True),
    ("lang != None", {"lang": "en"}, True),
    ("missing == None and other != 'x'", {}, True),
    (
        "area != 'fragments' and timestamp > '2026-01-01'",
        {"area": "main", "timestamp": "2026-03-04T10:00:00"},
        True,
    ),
    (
        "area != 'fragments' and timestamp > '2026-01-01'",
        {"area": "main", "timestamp": "2025-12-31"},
        False,
    ),
    ("area != 'fragments' and timestamp > '2026-01-01'", {"area": "main"}, False),
    ("tag == 'café'", {"tag": "café"}, True),
    ("'数据库' in tags", {"tags": ["数据库", "db"]}, True),
    ("'数据库' in tags", {"tags": ["db"]}, False),
    ("tags == ['db', 'sql']", MAIN_DB, True),  # list literal stays a list
    ("tags == ('db', 'sql')", MAIN_DB, False),  # ...and a tuple is not a list
    ("(area == 'main' or area == 'x') and not (priority < 2)", MAIN_DB, True),
    ("  area == 'main'  ", MAIN_DB, True),  # surrounding plain spaces are fine
    (
        "'#' in title",
        {"title": "issue #4"},
        True,
    ),  # `#` inside a literal is not a comment
    ("score >= 0.5 and score <= 1e3", {"score": 0.75}, True),
    ("True", {}, True),
    ("None", {}, False),
]


@pytest.mark.parametrize(("expr", "record", "expected"), VALID_CASES)
def test_valid_filters(expr: str, record: dict[str, Any], expected: bool) -> None:
    flt = compile_filter(expr)
    assert isinstance(flt, Filter)
    assert flt.matches(record) is expected
    # A compiled filter is reusable and gives the same answer again.
    assert flt.matches(record) is expected


def test_source_and_names() -> None:
    expr = " area == 'main' and 'db' in tags or not knowledge_source "
    flt = compile_filter(expr)
    assert flt.source == expr
    assert flt.names == frozenset({"area", "tags", "knowledge_source"})
    assert isinstance(flt.names, frozenset)
    assert compile_filter("1 < 2").names == frozenset()


def test_record_is_any_mapping() -> None:
    from types import MappingProxyType

    flt = compile_filter("area == 'main'")
    assert flt.matches(MappingProxyType({"area": "main"}))


def test_max_length_boundary() -> None:
    ok = "a == '" + "x" * (MAX_FILTER_LENGTH - 7) + "'"
    assert len(ok) == MAX_FILTER_LENGTH
    compile_filter(ok)
    with pytest.raises(FilterError, match="characters long"):
        compile_filter(ok + " ")
    with pytest.raises(FilterError, match="at most 10"):
        compile_filter("area == 'main'", max_length=10)
    compile_filter("a == '" + "x" * 1000 + "'", max_length=2000)


def test_filter_error_is_usage_error() -> None:
    with pytest.raises(UsageError) as info:
        compile_filter("len(tags)")
    assert info.value.exit_code == 2


DEEP_PARENS = "(" * 50 + "area" + ")" * 50
DEEP_NOT = "not " * 50 + "area"
DEEP_BOOL = "(" * 25 + "a" + " and b)" * 25
LONG_LIST = "x in [" + ",".join("1" * 150) + "]"  # fits in 500 characters
# 1 BoolOp + 2 * (Compare + Name + List + 100 items) = 207 nodes, < 500 characters
MANY_NODES = " or ".join(f"{n} in [" + ",".join("1" * 100) + "]" for n in "xy")

# (hostile expression, a word the message must contain)
HOSTILE: list[tuple[str, str]] = [
    ("__import__('os').system('id')", "function calls"),
    ("().__class__.__bases__[0].__subclasses__()", "function calls"),
    ("tags.__class__", "attribute"),
    ("x.y", "attribute"),
    ("a.__dict__", "attribute"),
    ("a[0]", "indexing"),
    ("a[1:2]", "indexing"),
    ("open('/etc/passwd')", "function calls"),
    ("len(tags)", "function calls"),
    ("globals()", "function calls"),
    ("getattr(a, 'b')", "function calls"),
    ("lambda: 1", "lambda"),
    ("[x for x in tags]", "comprehension"),
    ("{x for x in tags}", "comprehension"),
    ("{x: 1 for x in tags}", "comprehension"),
    ("(x for x in y)", "generator"),
    ("{1: 2}", "dict"),
    ("{1, 2}", "set"),
    ("f'{area}'", "f-string"),
    ("(y := 1)", ":="),
    ("1 if a else 2", "conditional"),
    ("a + b", "arithmetic"),
    ("2 ** 999999", "arithmetic"),
    ("'a' * 10**9", "arithmetic"),
    ("~a", "unary"),
    ("+a", "unary"),
    ("-a", "minus"),
    ("-True", "minus"),
    ("__builtins__", "`_`"),
    ("_private == 1", "`_`"),
    ("a__b == 1", "`__`"),
    ("area == 'main' and __debug__", "`_`"),
    ("area == 'main'\n", "U+000A"),
    ("area == 'main'\r\n", "U+000D"),
    ("area == 'main'\x00", "U+0000"),
    ("area\u200b == 'main'", "U+200B"),
    ("area == 'ma\u200bin'", "U+200B"),  # invisible chars are refused even in literals
    ('"\u202e" == area', "U+202E"),  # bidi override, even inside a literal
    ("area\u2028== 'main'", "U+2028"),
    ("area ==\u00a0'main'", "U+00A0"),  # non-breaking space
    ("area ==\u3000'main'", "U+3000"),  # ideographic space
    ("area\t== 'main'", "TAB"),
    ("area == 'main'\x1b[2J", "U+001B"),
    ("ｅｖａｌ('1')", "non-ASCII"),
    ("𝓮𝓿𝓪𝓵", "non-ASCII"),
    ("аrea == 'main'", "non-ASCII"),  # Cyrillic а lookalike
    ("a is None", "`is`"),
    ("a is not None", "`is`"),
    ("*a", "syntax"),
    ("b'x' == a", "bytes"),
    ("a == 1j", "complex"),
    ("...", "`...`"),
    ("await x", "await"),
    ("yield x", "syntax"),
    ("(yield x)", "yield"),
    ("a; b", "`;`"),
    ("import os", "syntax"),
    ("area = 'main'", "`==`"),
    ("x" * 501, "characters long"),
    ("a == '" + "x" * 500 + "'", "characters long"),
    (DEEP_PARENS, "nested"),
    (DEEP_NOT, "nested"),
    (DEEP_BOOL, "nested"),
    (LONG_LIST, "150 items"),
    (MANY_NODES, "too large"),
    ("x in [[1, 2]]", "literal values"),
    ("x in [a, b]", "literal values"),
    ("x in [*a]", "unpacking"),
    ("", "empty"),
    ("   ", "empty"),
    ("\t\n", "empty"),
    ("area == 'main' #comment", "comment"),
    ("area == 'main' # and __import__('os')", "comment"),
    ("area == 'main", "syntax"),
    ("area ==", "syntax"),
    ("area == 'main' and", "syntax"),
    ("a == 1 €", "syntax"),
    ("a == 1 \\", "syntax"),
]


def test_hostile_strings_are_distinct_and_numerous() -> None:
    exprs = [expr for expr, _ in HOSTILE]
    assert len(set(exprs)) == len(exprs)
    assert len(exprs) >= 40


@pytest.mark.parametrize(("expr", "needle"), HOSTILE, ids=[repr(e)[:40] for e, _ in HOSTILE])
def test_hostile_strings_refused_at_compile_time(expr: str, needle: str) -> None:
    with pytest.raises(FilterError) as info:
        compile_filter(expr)
    message = str(info.value)
    assert message.startswith("filter: ")
    assert needle in message
    # Every message says what to do instead (problem; fix).
    assert "; " in message


def test_non_string_filter_refused() -> None:
    with pytest.raises(FilterError):
        compile_filter(None)  # type: ignore[arg-type]
    with pytest.raises(FilterError):
        compile_filter(b"area == 'main'")  # type: ignore[arg-type]


def test_message_quotes_offending_snippet() -> None:
    with pytest.raises(FilterError) as info:
        compile_filter("area == 'main' and len(tags) > 2")
    assert "`len(tags)`" in str(info.value)
    assert "and/or/not" in str(info.value)


def test_invisible_characters_are_not_echoed() -> None:
    with pytest.raises(FilterError) as info:
        compile_filter("area\u202e == 'main'")
    assert "\u202e" not in str(info.value)
    assert "RIGHT-TO-LEFT OVERRIDE" in str(info.value)


def test_escaped_invisible_characters_in_literals_are_allowed() -> None:
    # Written as an escape the character is visible in the source, so it is
    # just a value to compare against.
    flt = compile_filter("title == 'a\\u200bb'")
    assert flt.matches({"title": "a\u200bb"})
    assert not flt.matches({"title": "ab"})


def test_limits_allow_reasonable_filters() -> None:
    compile_filter("x in [" + ", ".join(str(i) for i in range(100)) + "]")
    compile_filter("(" * 10 + "a == 1" + ")" * 10)
    compile_filter(" and ".join(f"a{i} == {i}" for i in range(30)))


def test_size_limits_apply_even_with_a_larger_max_length() -> None:
    big_list = "x in [" + ", ".join(str(i) for i in range(150)) + "]"
    with pytest.raises(FilterError, match="150 items"):
        compile_filter(big_list, max_length=5000)
    many = " or ".join(f"a{i} == {i}" for i in range(70))
    with pytest.raises(FilterError, match="too large"):
        compile_filter(many, max_length=5000)
    with pytest.raises(FilterError, match="nested"):
        compile_filter("(" * 300 + "a" + ")" * 300, max_length=5000)
    with pytest.raises(FilterError, match="nested"):
        compile_filter("not " * 300 + "a", max_length=5000)


JSON_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**80,
    1.5,
    float("nan"),
    float("inf"),
    "",
    "main",
    "db",
    "数据库",
    [],
    ["db"],
    [1, "a", None, [2]],
    {},
    {"db": 1},
    {"nested": {"x": [1, 2]}},
]

ODD_FILTERS = [
    "area == 'main' and 'db' in tags",
    "'db' not in tags",
    "1 < priority < 5",
    "priority >= 2 or source_file == 'a.md'",
    "not knowledge_source",
    "lang in ['en', 'de']",
    "area != 'fragments' and timestamp > '2026-01-01'",
    "tags == ['db']",
    "tags < 3",
    "area in tags",
]


class Unfriendly:
    """A value whose comparisons and truthiness all blow up."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __lt__(self, other: object) -> bool:
        raise RuntimeError("lt")

    def __bool__(self) -> bool:
        raise RuntimeError("bool")

    def __contains__(self, item: object) -> bool:
        raise RuntimeError("contains")

    __hash__ = None  # type: ignore[assignment]


def test_matches_never_raises_for_odd_records() -> None:
    filters = [compile_filter(expr) for expr in ODD_FILTERS]
    fields = [
        "area",
        "tags",
        "priority",
        "source_file",
        "knowledge_source",
        "lang",
        "timestamp",
    ]
    for flt in filters:
        for value in [*JSON_VALUES, Unfriendly(), object(), len, threading]:
            # The same value in every field, and in each field alone.
            records: list[Any] = [dict.fromkeys(fields, value)]
            records += [{field: value} for field in fields]
            for record in records:
                assert flt.matches(record) in (True, False)
        for pair in itertools.product(JSON_VALUES, repeat=2):
            record = dict(zip(["area", "tags"], pair, strict=True))
            assert flt.matches(record) in (True, False)
        # Not even a mapping.
        for record in [None, 1, "area", ["area"], Unfriendly()]:
            assert flt.matches(record) is False  # type: ignore[arg-type]


def test_module_values_in_record_do_not_leak() -> None:
    import os

    flt = compile_filter("mod")
    assert flt.matches({"mod": os}) is False  # simpleeval refuses modules -> no match


def test_record_not_retained_after_match() -> None:
    import gc
    import weakref

    class Rec(dict):  # dicts cannot be weak-referenced, subclasses can
        pass

    flt = compile_filter("area == 'main'")
    rec = Rec(area="main")
    ref = weakref.ref(rec)
    assert flt.matches(rec)
    del rec
    gc.collect()
    assert ref() is None


def test_concurrent_matches_are_consistent() -> None:
    flt = compile_filter("n == 1")
    errors: list[str] = []

    def worker(value: int) -> None:
        for _ in range(2000):
            if flt.matches({"n": value}) is not (value == 1):
                errors.append(f"wrong result for {value}")
                return

    threads = [threading.Thread(target=worker, args=(v,)) for v in (0, 1, 0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_no_builtin_eval_or_exec_in_module() -> None:
    import re
    from pathlib import Path

    import memctl.store.filters

    source = Path(memctl.store.filters.__file__).read_text(encoding="utf-8")
    assert not re.search(r"(^|[^.\w])(eval|exec)\(", source)
