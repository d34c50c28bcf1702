"""Filters in SQL (memctl/store/filter_sql.py) answer exactly as the Python evaluator does, on both backends.

The Python evaluator (memctl/store/filters.py) is the oracle. Hypothesis generates filters from the whole
language (every comparison operator, chains, `in` with lists/tuples/strings, `not`/`and`/`or`, bare
names and literals, fields missing from the metadata, columns) — with a fixed seed (derandomize) and
EXAMPLES examples per backend — and each is run over one store of generated metadata (every JSON
type, lists and objects, empty values, True vs 1 vs 1.0, and the rows SQL cannot judge: NaN,
Infinity, integers past 64 bits, floats >= 1e16, strings holding `e+` or `\\u0000`).
"""

from __future__ import annotations

import json
import math
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memctl
from memctl.embeddings import FakeEmbedder
from memctl.store.filter_sql import compile_filter_sql
from memctl.store.filters import compile_filter

EXAMPLES = 1500  # generated filters per backend, from the whole language
INDEXED_EXAMPLES = 1000  # ... and from shapes the index prefilter serves (`f == v and ...`, `'x' in tags`)
RECORDS = 300
KEYS = ["a", "b", "n", "s", "tags", "timestamp"]
NAMES = [*KEYS, "missing", "area", "id", "created_at"]
ALPHABET = "abxé数+e"
# Strings past the 100 characters PostgreSQL's range postings keep of a string (pg_schema.py m006).
LONG = ["p" * 100, "p" * 100 + "a", "p" * 100 + "b", "p" * 99 + "q"]


def _scalar(rng: random.Random, exotic: bool) -> Any:
    choices: list[Any] = [
        None,
        True,
        False,
        0,
        1,
        2,
        -1,
        3,
        0.5,
        1.0,
        -1.5,
        2.0,
        "",
        "a",
        "b",
        "ab",
        "x",
        "é",
        "数据",
        "ba",
        "1",
        "e+1",
        "\\u0000",
        *LONG,
    ]
    if exotic:
        choices += [2**63, 10**20, 1e20, 12345678901234567890, 1e16]
    return rng.choice(choices)


def _value(rng: random.Random, exotic: bool, depth: int = 0) -> Any:
    roll = rng.random()
    if roll < 0.55 or depth > 1:
        return _scalar(rng, exotic)
    if roll < 0.85:
        return [_value(rng, exotic, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(["a", "b", "x", "1", "é"]): _value(rng, exotic, depth + 1) for _ in range(rng.randint(0, 2))}


def _finite(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if not (isinstance(v, float) and not math.isfinite(v))}


def make_metadata(seed: int, *, nan: bool) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(RECORDS):
        meta = {k: _value(rng, exotic=i % 10 == 0) for k in KEYS if rng.random() < 0.6}
        if nan and i % 37 == 0:
            meta["n"] = rng.choice([math.nan, math.inf, -math.inf])
        out.append(meta)
    return out


@pytest.fixture(scope="module", params=["embedded", "postgres"])
def corpus(request: pytest.FixtureRequest) -> Iterator[tuple[Any, list[tuple[str, dict[str, Any]]]]]:
    """(store, [(id, what a filter reads)]) for a store of RECORDS memories with generated metadata."""
    from contextlib import ExitStack

    with ExitStack() as stack:
        url = None
        if request.param == "postgres":
            from tests.pg import pg_schema

            url = stack.enter_context(pg_schema())
        root = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        embedder = FakeEmbedder(8)
        store = stack.enter_context(
            memctl.open_store(
                root, "gen", embedder=embedder, store=url or "embedded", overrides={"embedding_cache": False}
            )
        )
        # PostgreSQL's json type refuses NaN and Infinity (and \u0000): only the embedded store holds them.
        metas = make_metadata(7, nan=request.param == "embedded")
        areas = ["main", "fragments", "solutions"]
        # memctl refuses NaN and Infinity in new metadata; stores written before that may hold them, so
        # those rows are written under the store's feet after a finite insert.
        records = [
            {"id": f"g{i}", "text": f"memory {i}", "area": areas[i % 3], "metadata": _finite(m)}
            for i, m in enumerate(metas)
        ]
        store.insert_records(records, embedder.embed([r["text"] for r in records]), embedder.info)
        legacy = [(json.dumps(m), f"g{i}") for i, m in enumerate(metas) if m != _finite(m)]
        if legacy:
            with store.transaction() as held:
                held.db.executemany("UPDATE memories SET metadata = ? WHERE id = ?", legacy)
        rows = [(m.id, m.filter_names()) for m, _ in store.iter_all()]
        assert len(rows) == RECORDS
        yield store, rows


def _scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 3),
        st.sampled_from([0.5, 1.0, -1.5, 2.0, 1e20]),
        st.text(alphabet=ALPHABET, max_size=3),
    )


def _literal() -> st.SearchStrategy[Any]:
    scalars = _scalars()
    return st.one_of(scalars, st.lists(scalars, max_size=3), st.lists(scalars, max_size=3).map(tuple))


def _render(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_render(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_render(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


OPS = ["==", "!=", "<", "<=", ">", ">=", "in", "not in"]
name = st.sampled_from(NAMES)
operand = st.one_of(name, _literal().map(_render))
compare = st.builds(lambda a, op, b: f"{a} {op} {b}", operand, st.sampled_from(OPS), operand)
chain = st.builds(
    lambda a, o1, b, o2, c: f"{a} {o1} {b} {o2} {c}", operand, st.sampled_from(OPS), name, st.sampled_from(OPS), operand
)
atom = st.one_of(compare, compare, chain, name, _literal().map(_render))
filters = st.recursive(
    atom,
    lambda inner: st.one_of(
        inner.map(lambda x: f"not ({x})"),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: " and ".join(f"({x})" for x in xs)),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: " or ".join(f"({x})" for x in xs)),
    ),
    max_leaves=6,
)

# Conjunctions led by what the prefilter turns into index terms, so its superset is exercised too.
_field = st.sampled_from([*KEYS, "missing", "area", "id"])
indexable = st.one_of(
    st.builds(lambda n, v: f"{n} == {_render(v)}", _field, _literal()),
    st.builds(lambda v, n: f"{_render(v)} == {n}", _literal(), _field),
    st.builds(lambda v, n: f"{_render(v)} in {n}", _literal(), _field),
    st.builds(lambda n, v: f"{n} in {_render(v)}", _field, st.lists(_scalars(), max_size=3)),
    st.builds(lambda n, o, v: f"{n} {o} {_render(v)}", _field, st.sampled_from(["<", "<=", ">", ">="]), _literal()),
    st.builds(lambda v, o, n: f"{_render(v)} {o} {n}", _literal(), st.sampled_from(["<", "<=", ">", ">="]), _field),
    st.builds(
        lambda n, o, v: f"{n} {o} {_render(v)}", _field, st.sampled_from(["<", "<=", ">", ">="]), st.sampled_from(LONG)
    ),
)
indexed_filters = st.one_of(
    indexable,
    st.builds(lambda a, b: f"{a} and ({b})", indexable, filters),
    st.builds(lambda a, b: f"({b}) and {a}", indexable, filters),
    st.lists(indexable, min_size=2, max_size=3).map(lambda xs: " or ".join(xs)),
    st.builds(lambda a, b, c: f"({a} or {b}) and {c}", indexable, indexable, atom),
)

SETTINGS = {
    "derandomize": True,
    "deadline": None,
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.filter_too_much],
}


def _dialect(store: Any) -> str:
    return "sqlite" if store.__class__.__name__ == "EmbeddedStore" else "postgres"


def test_sql_filters_match_the_python_evaluator(corpus) -> None:
    """Every generated filter selects in SQL exactly what the Python evaluator selects; and the equivalence is
    not vacuous: most of them took the SQL path (counted here, in the same test)."""
    store, rows = corpus
    dialect = _dialect(store)
    compiled = 0

    @settings(max_examples=EXAMPLES, **SETTINGS)
    @given(source=filters)
    def check(source: str) -> None:
        nonlocal compiled
        flt = compile_filter(source)
        expected = {rid for rid, names in rows if flt.matches(names)}
        if compile_filter_sql(flt, dialect) is not None:
            compiled += 1
        assert store.matching_ids(flt) == expected, source
        in_area = {rid for rid, names in rows if names["area"] == "solutions" and flt.matches(names)}
        assert store.matching_ids(flt, area="solutions") == in_area, source

    check()
    assert compiled >= EXAMPLES * 0.6, (dialect, compiled)


def test_index_prefiltered_filters_match_the_python_evaluator(corpus) -> None:
    """The same for filters the index prefilter serves; most of them did take the prefilter."""
    store, rows = corpus
    dialect = _dialect(store)
    prefiltered = 0

    @settings(max_examples=INDEXED_EXAMPLES, **SETTINGS)
    @given(source=indexed_filters)
    def check(source: str) -> None:
        nonlocal prefiltered
        flt = compile_filter(source)
        expected = {rid for rid, names in rows if flt.matches(names)}
        compiled = compile_filter_sql(flt, dialect)
        if compiled is not None and compiled.prefilter is not None:
            prefiltered += 1
        assert store.matching_ids(flt) == expected, source

    check()
    assert prefiltered >= INDEXED_EXAMPLES * 0.4, (dialect, prefiltered)


@pytest.mark.parametrize(
    "source", ["a == b", "[1] in tags", "tags < [1, 2]", "n == 1180591620717411303424", "n < 1e300"]
)
def test_constructs_without_an_exact_sql_form_fall_back_to_python(source: str) -> None:
    assert compile_filter_sql(compile_filter(source), "sqlite") is None


def test_prefilter_terms_of_indexable_shapes() -> None:
    compiled = compile_filter_sql(compile_filter("project == 'p7' and 'db' in tags and score > 2"), "postgres")
    assert compiled is not None
    assert compiled.prefilter == (
        "and",
        [
            ("and", [("or", [("eq", "project", "p7")])]),
            ("and", [("or", [("elem", "tags", "db"), ("type", "tags", "string"), ("type", "tags", "object")])]),
        ],
    )
    ranged = compile_filter_sql(compile_filter("score > 2 and 1 <= n"), "sqlite")
    assert ranged is not None
    assert ranged.prefilter == ("and", [("and", [("range", "score", (">", 2))]), ("and", [("range", "n", (">=", 1))])])
    assert compile_filter_sql(compile_filter("not project == 'p7'"), "sqlite").prefilter is None


def test_list_prune_and_search_select_through_the_database(backend, home: Path) -> None:
    """`list --filter`, `prune --filter` and filtered searches share the SQL path, suspect rows included."""
    from memctl.lifecycle.prune import PruneCriteria, select_for_prune

    metas = [
        {"tags": ["db"], "n": 1},
        {"tags": "db,sql", "n": 2},
        {"tags": ["x"], "n": True},
        {"n": 10**20},
        {"tags": ["db"], "n": 1e17},
        {},
    ]
    with memctl.open_store(home, "paths") as store:
        ids = store.add([f"memory {i}" for i in range(len(metas))], metadata=metas)
        if backend == "embedded":  # a NaN written by an older memctl (new metadata refuses it)
            ids += store.add(["memory nan"], metadata=[{"tags": ["db"]}])
            with store.transaction() as held:
                held.db.execute(
                    "UPDATE memories SET metadata = ? WHERE id = ?",
                    (json.dumps({"tags": ["db"], "n": math.nan}), ids[-1]),
                )
        for source in ["'db' in tags", "n == 1", "n > 5", "not n"]:
            flt = compile_filter(source)
            want = [m.id for m, _ in store.iter_all() if flt.matches(m.filter_names())]
            page, total = store.list(filter=source, limit=100)
            assert total == len(want) and {m.id for m in page} == set(want), source
            pruned = select_for_prune(store, PruneCriteria(filter=source))
            assert {m.id for m in pruned} == set(want), source
            hits = store.search("memory", limit=100, threshold=0.0, filter=source, mode="dense")
            assert {h.id for h in hits} == set(want), source
        assert set(ids) >= set(want)


def test_range_filters_follow_updates_and_deletes(backend, home: Path) -> None:
    """Range terms are answered from postings (SQLite meta_terms, PostgreSQL memctl_meta_ranges) that follow
    every write: after an update, a metadata replacement, a move between areas and a delete, `list`,
    `prune`, a filtered search and forget's paths (`search_all_above`, `find_exact`) still agree with the
    Python evaluator."""
    from memctl.lifecycle.prune import PruneCriteria, select_for_prune

    long = "d" * 100
    metas = [
        {"score": 1, "due": "2025-01"},
        {"score": 5.5, "due": "2026-03"},
        {"score": True, "due": long + "b"},
        {"score": "7", "due": long},
        {"score": [9]},
        {"score": 10**20, "due": long + "a"},
    ]
    sources = [
        "score >= 5",
        "score < 2",
        "1 <= score <= 1",
        "score > 1e3",
        "due >= '2026'",
        "due < '2026-03'",
        f"due > '{long}'",
        f"due >= '{long}a'",
        f"due < '{long}b'",
        "score > 1 and due > '2025'",
    ]

    def check(store: Any, step: str) -> None:
        for source in sources:
            flt = compile_filter(source)
            want = {m.id for m, _ in store.iter_all() if flt.matches(m.filter_names())}
            assert store.matching_ids(flt) == want, (step, source)
            page, total = store.list(filter=source, limit=100)
            assert total == len(want) and {m.id for m in page} == want, (step, source)
            assert {m.id for m in select_for_prune(store, PruneCriteria(filter=source))} == want, (step, source)
            hits = store.search_all_above("memory", 0.0, filter=source)
            assert {h.id for h in hits} == want, (step, source)
            exact = {m.id for m in store.find_exact("memory 1", None, filter=source)}
            assert exact == want & {m.id for m, _ in store.iter_all() if m.text == "memory 1"}, (step, source)

    with memctl.open_store(home, "ranges") as store:
        ids = store.add([f"memory {i}" for i in range(len(metas))], metadata=metas)
        check(store, "added")
        store.update(ids[0], metadata={"score": 8})
        store.update(ids[1], metadata={"due": "2024-12"}, replace_metadata=True)
        store.update(ids[2], area="solutions", unset=["due"])
        store.update(ids[3], text="memory 1")
        check(store, "updated")
        store.delete([ids[0], ids[5]])
        check(store, "deleted")
        assert compile_filter_sql(compile_filter("score >= 5"), "postgres").prefilter is not None
