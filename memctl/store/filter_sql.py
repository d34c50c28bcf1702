"""Metadata filters (memctl/store/filters.py) compiled to SQL, so the database selects the candidates.

The Python evaluator defines what a filter means, and this module reproduces it exactly:

* a field missing from the metadata is None; `id`, `area`, `created_at`, `updated_at` and
  `timestamp` (= created_at) are the row's own columns;
* `and`/`or`/`not` and chained comparisons short-circuit left to right, and the first error on
  the evaluated path (`None < 1`, `1 in 'abc'`, `'x' in 5`) makes the whole filter not match.

So every node compiles to an SQL expression worth 1 (true), 0 (false) or NULL (error), combined
with simple CASEs that keep Python's order (`CASE a WHEN 1 THEN b WHEN 0 THEN 0 END` is `a and b`:
an error in `a` stays an error, a false `a` never looks at `b`). A row matches when the whole
expression is 1. Python equality is kept across types: True == 1 == 1.0, a list literal equals
a JSON array element by element, a tuple equals nothing stored.

Next to the exact expression comes an index-backed *superset* of the matching rows (the
"prefilter"), derived from top-level conjuncts such as `tag == 'x'`, `'db' in tags` or
`lang in ['en', 'de']`, and ranges such as `score >= 99`: on SQLite postings in `meta_terms` (kept by
triggers, schema.py), on PostgreSQL containment (`@>`) on the stored column `meta_index` under a GIN
index and, for ranges, the btree postings of `memctl_meta_ranges` (pg_schema.py m006). The exact
expression then runs on those rows only.

Rows the database cannot judge exactly are marked "suspect" and judged by the Python evaluator:
on SQLite metadata that is not a JSON object the json functions accept (NaN, Infinity) or that
holds a run of 19 digits (an integer past 64 bits), on PostgreSQL metadata holding `\\u0000`
(jsonb refuses it) or `e+` (a float of 1e16 or more, which `numeric` would compare with integers
differently from Python). A construct with no exact SQL form — a comparison of two fields, a list
literal compared by order or tested with `in` against a field, an integer literal beyond 64 bits
on SQLite, a float literal beyond 1e16 — makes `compile_filter_sql` return None, and the caller
evaluates the filter in Python. Never a different answer: tests/integration/test_filter_sql.py checks both
backends against the Python evaluator on generated filters and metadata.
"""

from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from memctl.store.filters import Filter

__all__ = ["COLUMNS", "SqlFilter", "compile_filter_sql"]

# Filter names that read the row's columns (Memory.filter_names) instead of its metadata.
COLUMNS = {
    "id": "id",
    "area": "area",
    "created_at": "created_at",
    "updated_at": "updated_at",
    "timestamp": "created_at",
}

# Python's comparison operators, for folding literal-only comparisons at compile time.
_PY_OPS: dict[type, Any] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_SQL_ORDER = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_FLIP: dict[type, type] = {
    ast.Lt: ast.Gt,
    ast.LtE: ast.GtE,
    ast.Gt: ast.Lt,
    ast.GtE: ast.LtE,
    ast.Eq: ast.Eq,
    ast.NotEq: ast.NotEq,
}
_INT64 = (-(2**63), 2**63 - 1)
_ERROR = "CAST(NULL AS INTEGER)"  # a typed NULL: PostgreSQL reads a bare NULL in `CASE NULL WHEN 1` as text
# Above this a float's shortest repr has an exponent and `numeric` no longer holds its exact value.
_FLOAT_EXACT = 1e16

# Prefilter terms: ("eq", key, value) scalar field equality, ("elem", key, value) an array element,
# ("type", key, kind) the field's JSON kind, ("col", column, value) column equality, ("range", key,
# (op, value)) a scalar field of the value's kind in that range.
Term = tuple[str, str, Any]


class _Unsupported(Exception):
    """This construct has no exact SQL form here: evaluate the filter in Python."""


@dataclass(frozen=True)
class SqlFilter:
    """`where` is 1 for the rows (not suspect) the filter matches; `prefilter` is a superset of
    them in terms an index answers (None: every row is a candidate)."""

    where: str
    params: tuple[Any, ...]
    prefilter: Any  # ("or" | "and", [children]) tree of Terms, or None


Frag = tuple[str, tuple[Any, ...]]


def _join(parts: list[Frag], sep: str) -> Frag:
    return sep.join(p[0] for p in parts), tuple(x for p in parts for x in p[1])


def _case_bool(cond: Frag) -> Frag:
    return f"CASE WHEN {cond[0]} THEN 1 ELSE 0 END", cond[1]


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool) or isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "tuple"


# -- value references: a field of the metadata, or a column ---------------------------------------------
class _Ref:
    """A value the filter reads. Kinds: string, number (JSON numbers and booleans: True == 1), null,
    array, object; a missing field has no kind."""

    def kind_in(self, *kinds: str) -> Frag:
        raise NotImplementedError

    def missing_or_null(self) -> Frag:
        raise NotImplementedError

    def text(self) -> Frag:
        raise NotImplementedError

    def number(self) -> Frag:
        raise NotImplementedError

    def elem(self, i: int) -> _Ref:
        raise _Unsupported("elements of a column")

    def length(self) -> Frag:
        raise _Unsupported("length of a column")

    def non_empty(self) -> Frag:
        raise _Unsupported("a column is never a container")

    def has_elem(self, value: Any) -> Frag:
        raise _Unsupported("elements of a column")

    def has_key(self, key: str) -> Frag:
        raise _Unsupported("keys of a column")


class _Column(_Ref):
    def __init__(self, column: str, dialect: _Dialect) -> None:
        self.column = column
        self.dialect = dialect

    def kind_in(self, *kinds: str) -> Frag:
        return ("1=1" if "string" in kinds else "1=0"), ()

    def missing_or_null(self) -> Frag:
        return "1=0", ()

    def text(self) -> Frag:
        return self.column, ()

    def number(self) -> Frag:  # never used: a column is never of kind number
        raise _Unsupported("a column is not a number")


class _Dialect:
    placeholder = "?"
    max_int: tuple[int, int] | None = _INT64

    def field(self, key: str) -> _Ref:
        raise NotImplementedError

    def number_param(self, value: Any) -> Any:
        if isinstance(value, bool):
            return int(value)
        return value

    def text_order(self, text: str, op: str) -> str:
        return f"{text} {op} {self.placeholder}"

    def contains(self, haystack: str, needle: str) -> str:
        return f"instr({haystack}, {needle}) > 0"


# -- SQLite: json_type / json_extract / json_each on the metadata text ----------------------------------
_SQLITE_KINDS = {
    "string": ("text",),
    "number": ("integer", "real", "true", "false"),
    "null": ("null",),
    "array": ("array",),
    "object": ("object",),
}


class _SqliteField(_Ref):
    def __init__(self, path: str) -> None:
        self.path = path  # a JSON path built from identifier characters and digits only

    def kind_in(self, *kinds: str) -> Frag:
        names = [n for k in kinds for n in _SQLITE_KINDS[k]]
        return f"json_type(metadata, '{self.path}') IN ({', '.join(repr(n) for n in names)})", ()

    def missing_or_null(self) -> Frag:
        return f"coalesce(json_type(metadata, '{self.path}'), 'null') = 'null'", ()

    def text(self) -> Frag:
        return f"json_extract(metadata, '{self.path}')", ()

    number = text  # booleans come out as 1 / 0

    def elem(self, i: int) -> _Ref:
        return _SqliteField(f"{self.path}[{i}]")

    def length(self) -> Frag:
        return f"json_array_length(metadata, '{self.path}')", ()

    def non_empty(self) -> Frag:
        return f"EXISTS (SELECT 1 FROM json_each(metadata, '{self.path}'))", ()

    def has_elem(self, value: Any) -> Frag:
        if value is None:
            cond: Frag = "e.type = 'null'", ()
        elif isinstance(value, str):
            cond = "e.type = 'text' AND e.atom = ?", (value,)
        else:
            cond = "e.type IN ('integer', 'real', 'true', 'false') AND e.atom = ?", (_SQLITE.number_param(value),)
        return f"EXISTS (SELECT 1 FROM json_each(metadata, '{self.path}') AS e WHERE {cond[0]})", cond[1]

    def has_key(self, key: str) -> Frag:
        return f"EXISTS (SELECT 1 FROM json_each(metadata, '{self.path}') AS e WHERE e.key = ?)", (key,)


class _SqliteDialect(_Dialect):
    def field(self, key: str) -> _Ref:
        return _SqliteField(f'$."{key}"')

    def number_param(self, value: Any) -> Any:
        value = super().number_param(value)
        if isinstance(value, int) and not _INT64[0] <= value <= _INT64[1]:
            raise _Unsupported("an integer beyond 64 bits")
        return value


_SQLITE = _SqliteDialect()


# -- PostgreSQL: jsonb operators on `j` (metadata::jsonb, NULL for a suspect row) -----------------------
_PG_KINDS = {
    "string": ("string",),
    "number": ("number", "boolean"),
    "null": ("null",),
    "array": ("array",),
    "object": ("object",),
}


class _PgField(_Ref):
    def __init__(self, expr: str) -> None:
        self.expr = expr

    def kind_in(self, *kinds: str) -> Frag:
        names = [n for k in kinds for n in _PG_KINDS[k]]
        return f"jsonb_typeof({self.expr}) IN ({', '.join(repr(n) for n in names)})", ()

    def missing_or_null(self) -> Frag:
        return f"coalesce(jsonb_typeof({self.expr}), 'null') = 'null'", ()

    def text(self) -> Frag:
        return f"({self.expr} #>> '{{}}')", ()

    def number(self) -> Frag:
        e = self.expr
        return (
            f"(CASE jsonb_typeof({e}) WHEN 'number' THEN ({e} #>> '{{}}')::numeric"
            f" WHEN 'boolean' THEN CASE WHEN {e} = 'true'::jsonb THEN 1 ELSE 0 END END)"
        ), ()

    def elem(self, i: int) -> _Ref:
        return _PgField(f"({self.expr} -> {int(i)})")

    def length(self) -> Frag:
        return f"jsonb_array_length({self.expr})", ()

    def non_empty(self) -> Frag:
        return f"{self.expr} NOT IN ('[]'::jsonb, '{{}}'::jsonb)", ()

    def has_elem(self, value: Any) -> Frag:
        # Containment of a one-element array matches an equal primitive element only (not a nested one).
        parts = [f"{self.expr} @> %s::jsonb"] * len(_pg_variants(value))
        return "(" + " OR ".join(parts) + ")", tuple(json.dumps([v]) for v in _pg_variants(value))

    def has_key(self, key: str) -> Frag:
        return f"{self.expr} ? %s", (key,)


def _pg_variants(value: Any) -> list[Any]:
    """The JSON values equal to `value` in Python (True == 1 == 1.0; a float as its exact repr)."""
    if value is None or isinstance(value, str):
        return [value]
    if isinstance(value, bool):
        return [value, int(value)]
    out: list[Any] = [value]  # json.dumps writes a float's repr, which jsonb keeps as an exact numeric
    if value == 1:
        out.append(True)
    elif value == 0:
        out.append(False)
    return out


class _PgDialect(_Dialect):
    placeholder = "%s"
    max_int = None

    def field(self, key: str) -> _Ref:
        # j is meta_index: the metadata as jsonb, except "id" (a filter's `id` reads the column, never j).
        return _PgField(f"(j -> '{key}')")

    def number_param(self, value: Any) -> Any:
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, float):
            return Decimal(repr(value))  # numeric, never float8: `numeric = float8` would round the data
        return value

    def text_order(self, text: str, op: str) -> str:
        return f'{text} COLLATE "C" {op} %s COLLATE "C"'  # code-point order, as Python compares

    def contains(self, haystack: str, needle: str) -> str:
        return f"strpos({haystack}, {needle}) > 0"


_PG = _PgDialect()


# -- the compiler -------------------------------------------------------------------------------------
class _Compiler:
    def __init__(self, dialect: _Dialect) -> None:
        self.d = dialect

    # operands
    def ref(self, node: ast.expr) -> _Ref | None:
        if isinstance(node, ast.Name):
            column = COLUMNS.get(node.id)
            return _Column(column, self.d) if column else self.d.field(node.id)
        return None

    def literal(self, value: Any) -> Any:
        if isinstance(value, float) and (not math.isfinite(value) or abs(value) >= _FLOAT_EXACT):
            raise _Unsupported("a float literal beyond 1e16")
        if isinstance(value, list | tuple):
            for item in value:
                self.literal(item)
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and self.d.max_int is not None
            and not self.d.max_int[0] <= value <= self.d.max_int[1]
        ):
            raise _Unsupported("an integer beyond 64 bits")
        return value

    def num(self, value: Any) -> Frag:
        return self.d.placeholder, (self.d.number_param(value),)

    # boolean nodes: SQL worth 1, 0 or NULL (error)
    def node(self, node: ast.expr) -> Frag:
        if isinstance(node, ast.BoolOp):
            return self.chain([self.node(v) for v in node.values], isinstance(node.op, ast.And))
        if isinstance(node, ast.UnaryOp):  # `not` (a leading minus was folded into a Constant)
            inner = self.node(node.operand)
            return f"(CASE {inner[0]} WHEN 1 THEN 0 WHEN 0 THEN 1 END)", inner[1]
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            links = [self.compare(operands[i], op, operands[i + 1]) for i, op in enumerate(node.ops)]
            return self.chain(links, True)
        if isinstance(node, ast.Constant):
            return ("1" if node.value else "0"), ()
        ref = self.ref(node)
        if ref is None:
            raise _Unsupported(type(node).__name__)
        return self.truthy(ref)

    @staticmethod
    def chain(parts: list[Frag], conjunction: bool) -> Frag:
        """Python's `and` (conjunction) / `or` over 1/0/NULL values, left to right."""
        sql, params = parts[-1]
        go_on, stop = ("1", "0") if conjunction else ("0", "1")
        for part in reversed(parts[:-1]):
            sql = f"(CASE {part[0]} WHEN {go_on} THEN {sql} WHEN {stop} THEN {stop} END)"
            params = part[1] + params
        return sql, params

    def truthy(self, ref: _Ref) -> Frag:
        """Python's bool() of the value: '' 0 0.0 False None [] {} and a missing field are false."""
        text = ref.text()
        if isinstance(ref, _Column):
            return _case_bool((f"{text[0]} <> ''", ()))
        number, nonempty = ref.number(), ref.non_empty()
        is_text, is_num, is_container = ref.kind_in("string"), ref.kind_in("number"), ref.kind_in("array", "object")
        return (
            f"(CASE WHEN {is_text[0]} THEN CASE WHEN {text[0]} <> '' THEN 1 ELSE 0 END"
            f" WHEN {is_num[0]} THEN CASE WHEN {number[0]} <> 0 THEN 1 ELSE 0 END"
            f" WHEN {is_container[0]} THEN CASE WHEN {nonempty[0]} THEN 1 ELSE 0 END ELSE 0 END)",
            is_text[1] + text[1] + is_num[1] + number[1] + is_container[1] + nonempty[1],
        )

    def compare(self, left: ast.expr, op: ast.cmpop, right: ast.expr) -> Frag:
        lref, rref = self.ref(left), self.ref(right)
        if lref is None and rref is None:
            return self.constant(_PY_OPS[type(op)], _value(left), _value(right))
        if lref is not None and rref is not None:
            raise _Unsupported("a comparison of two fields")
        if isinstance(op, ast.In | ast.NotIn):
            found = self.member(_value(left), rref) if lref is None else self.within(lref, _value(right))
            if isinstance(op, ast.NotIn):
                return f"(CASE {found[0]} WHEN 1 THEN 0 WHEN 0 THEN 1 END)", found[1]
            return found
        if lref is None:  # literal op field -> field flipped-op literal
            op, lref, literal = _FLIP[type(op)](), rref, _value(left)
        else:
            literal = _value(right)
        assert lref is not None
        literal = self.literal(literal)
        if isinstance(op, ast.Eq):
            return _case_bool(self.equal(lref, literal))
        if isinstance(op, ast.NotEq):
            cond = self.equal(lref, literal)
            return f"CASE WHEN {cond[0]} THEN 0 ELSE 1 END", cond[1]
        return self.order(lref, _SQL_ORDER[type(op)], literal)

    @staticmethod
    def constant(op: Any, left: Any, right: Any) -> Frag:
        try:
            return ("1" if op(left, right) else "0"), ()
        except Exception:  # noqa: BLE001 - an error is the filter's "no match", as in Python
            return _ERROR, ()

    def equal(self, ref: _Ref, value: Any) -> Frag:
        """A condition (never an error) true when the field == value in Python."""
        kind = _kind_of(value)
        if kind == "null":
            return ref.missing_or_null()
        if kind == "string":
            is_text, text = ref.kind_in("string"), ref.text()
            return f"({is_text[0]} AND {text[0]} = {self.d.placeholder})", is_text[1] + text[1] + (value,)
        if kind == "number":
            if isinstance(ref, _Column):
                return "1=0", ()
            is_num, number = ref.kind_in("number"), ref.number()
            param = self.num(value)
            return f"({is_num[0]} AND {number[0]} = {param[0]})", is_num[1] + number[1] + param[1]
        if kind == "tuple":
            return "1=0", ()  # a stored value is never a tuple
        if isinstance(ref, _Column):
            return "1=0", ()
        # A CASE, not AND: PostgreSQL may evaluate AND's operands in any order, and
        # jsonb_array_length raises on a non-array.
        is_array, length = ref.kind_in("array"), ref.length()
        parts: list[Frag] = [(f"{length[0]} = {len(value)}", length[1])]
        parts += [self.equal(ref.elem(i), item) for i, item in enumerate(value)]
        sql, params = _join(parts, " AND ")
        return f"(CASE WHEN {is_array[0]} THEN {sql} ELSE 1=0 END)", is_array[1] + params

    def order(self, ref: _Ref, op: str, value: Any) -> Frag:
        kind = _kind_of(value)
        if kind in ("null", "tuple"):
            return _ERROR, ()  # None < x and list < tuple raise in Python, whatever the field holds
        if kind == "list":
            raise _Unsupported("ordering against a list literal")
        if kind == "string":
            is_text, text = ref.kind_in("string"), ref.text()
            return (
                f"(CASE WHEN {is_text[0]} THEN CASE WHEN {self.d.text_order(text[0], op)} THEN 1 ELSE 0 END END)",
                is_text[1] + text[1] + (value,),
            )
        if isinstance(ref, _Column):
            return _ERROR, ()
        is_num, number = ref.kind_in("number"), ref.number()
        param = self.num(value)
        return (
            f"(CASE WHEN {is_num[0]} THEN CASE WHEN {number[0]} {op} {param[0]} THEN 1 ELSE 0 END END)",
            is_num[1] + number[1] + param[1],
        )

    def member(self, value: Any, ref: _Ref | None) -> Frag:
        """`value in field`."""
        assert ref is not None
        kind = _kind_of(value)
        if kind in ("list", "tuple"):
            raise _Unsupported("a list literal tested with `in` against a field")
        value = self.literal(value)
        is_text, text = ref.kind_in("string"), ref.text()
        if isinstance(ref, _Column):
            if kind != "string":
                return _ERROR, ()
            return _case_bool((self.d.contains(text[0], self.d.placeholder), (value,)))
        is_array, is_object = ref.kind_in("array"), ref.kind_in("object")
        elem = ref.has_elem(value)
        if kind == "string":
            on_text: Frag = (
                f"CASE WHEN {self.d.contains(text[0], self.d.placeholder)} THEN 1 ELSE 0 END",
                text[1] + (value,),
            )
            key = ref.has_key(value)
            on_object: Frag = f"CASE WHEN {key[0]} THEN 1 ELSE 0 END", key[1]
        else:  # `1 in 'abc'` raises; a number or None is never a key of a JSON object
            on_text, on_object = (_ERROR, ()), ("0", ())
        return (
            f"(CASE WHEN {is_text[0]} THEN {on_text[0]} WHEN {is_array[0]} THEN CASE WHEN {elem[0]} THEN 1 ELSE 0"
            f" END WHEN {is_object[0]} THEN {on_object[0]} END)",
            is_text[1] + on_text[1] + is_array[1] + elem[1] + is_object[1] + on_object[1],
        )

    def within(self, ref: _Ref, container: Any) -> Frag:
        """`field in literal`."""
        kind = _kind_of(container)
        if kind in ("list", "tuple"):
            self.literal(container)
            if not container:
                return "0", ()
            sql, params = _join([self.equal(ref, item) for item in container], " OR ")
            return _case_bool((f"({sql})", params))
        if kind == "string":
            is_text, text = ref.kind_in("string"), ref.text()
            found = self.d.contains(self.d.placeholder, text[0])
            return (
                f"(CASE WHEN {is_text[0]} THEN CASE WHEN {found} THEN 1 ELSE 0 END END)",
                is_text[1] + (container,) + text[1],
            )
        return _ERROR, ()  # `x in 5`, `x in None` raise whatever x is

    # -- the prefilter: a superset of the matching rows, in index terms --------------------------------
    def prefilter(self, node: ast.expr) -> Any:
        if isinstance(node, ast.BoolOp):
            children = [self.prefilter(v) for v in node.values]
            if isinstance(node.op, ast.And):
                known = [c for c in children if c is not None]
                # A range usually holds a large share of the store: intersect with it only when nothing
                # more selective (an equality or membership term) is there.
                exact = [c for c in known if not _has_range(c)]
                return ("and", exact or known) if known else None
            return None if any(c is None for c in children) else ("or", children)
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            links = [self.link_prefilter(operands[i], op, operands[i + 1]) for i, op in enumerate(node.ops)]
            known = [c for c in links if c is not None]
            return ("and", known) if known else None
        return None

    def link_prefilter(self, left: ast.expr, op: ast.cmpop, right: ast.expr) -> Any:
        lref, rref = self.ref(left), self.ref(right)
        if (lref is None) == (rref is None):
            return None
        if isinstance(op, ast.Eq):
            name, value = (left, _value(right)) if lref is not None else (right, _value(left))
            return self.equal_terms(name, value)
        if type(op) in _SQL_ORDER:  # a field compared by order is true only for a value of the literal's kind
            ref, key_node, value = (lref, left, _value(right)) if lref is not None else (rref, right, _value(left))
            if isinstance(ref, _Column) or isinstance(value, list):
                return None
            if value is None or isinstance(value, tuple):
                return ("or", [])  # always an error in Python: never true
            if lref is None:
                op = _FLIP[type(op)]()
            return ("range", key_node.id, (_SQL_ORDER[type(op)], value))  # type: ignore[attr-defined]
        if isinstance(op, ast.In) and lref is not None:  # field in [a, b]
            container = _value(right)
            if not isinstance(container, list | tuple):
                return None
            parts = [self.equal_terms(left, item) for item in container]
            return None if any(p is None for p in parts) else ("or", parts)
        if isinstance(op, ast.In) and rref is not None and not isinstance(rref, _Column):  # 'x' in field
            value, key = _value(left), right.id  # type: ignore[attr-defined]
            if isinstance(value, str):
                return ("or", [("elem", key, value), ("type", key, "string"), ("type", key, "object")])
            if isinstance(value, bool | int | float):
                return ("or", [("elem", key, value)])
        return None

    @staticmethod
    def equal_terms(name: ast.expr, value: Any) -> Any:
        key = name.id  # type: ignore[attr-defined]
        column = COLUMNS.get(key)
        if column is not None:
            return ("or", [("col", column, value)] if isinstance(value, str) else [])
        if isinstance(value, str | bool | int | float):
            return ("or", [("eq", key, value)])
        if isinstance(value, tuple):
            return ("or", [])
        return None  # None (a missing field) and list literals: no index term


def _has_range(tree: Any) -> bool:
    if tree[0] in ("and", "or"):
        return any(_has_range(child) for child in tree[1])
    return tree[0] == "range"


def _value(node: ast.expr) -> Any:
    return node.value  # type: ignore[attr-defined]


def compile_filter_sql(flt: Filter, dialect: str) -> SqlFilter | None:
    """The filter as SQL for "sqlite" or "postgres"; None when it must be evaluated in Python."""
    compiler = _Compiler(_SQLITE if dialect == "sqlite" else _PG)
    try:
        sql, params = compiler.node(flt.tree)
        prefilter = compiler.prefilter(flt.tree)
    except _Unsupported:
        return None
    return SqlFilter(sql, params, prefilter)


# -- rendering the prefilter ---------------------------------------------------------------------------
SQLITE_SUSPECT = "SELECT seq FROM meta_terms WHERE key = '' AND kind = 'bad'"


def sqlite_prefilter(tree: Any) -> Frag:
    """A compound SELECT of the seqs the prefilter allows (postings in meta_terms, schema.py m006)."""
    op, items = tree[0], tree[1]
    if op in ("or", "and"):
        if not items:
            return "SELECT seq FROM meta_terms WHERE 0", ()
        parts = [_sqlite_part(item) for item in items]
        return _join(parts, " UNION " if op == "or" else " INTERSECT ")
    key, value = items, tree[2]
    if op == "col":
        return f"SELECT seq FROM memories WHERE {key} = ?", (value,)
    if op == "range":  # numbers and booleans ('n', 1/0) sort numerically, strings ('s') by code point
        sign, bound = value
        kind = "s" if isinstance(bound, str) else "n"
        return f"SELECT seq FROM meta_terms WHERE key = ? AND kind = ? AND value {sign} ?", (
            key,
            kind,
            int(bound) if isinstance(bound, bool) else bound,
        )
    if op == "type":  # every string field k (then tested by substring), or every object field k
        return "SELECT seq FROM meta_terms WHERE key = ? AND kind = ?", (key, "s" if value == "string" else "o")
    kind = "e" if op == "elem" else "s" if isinstance(value, str) else "n"
    return "SELECT seq FROM meta_terms WHERE key = ? AND kind = ? AND value = ?", (
        key,
        kind,
        int(value) if isinstance(value, bool) else value,
    )


def _sqlite_part(tree: Any) -> Frag:
    sql, params = sqlite_prefilter(tree)
    return (f"SELECT seq FROM ({sql})" if tree[0] in ("or", "and") else sql), params


# PostgreSQL: metadata jsonb cannot hold (\u0000) or that `numeric` compares differently from Python
# (a float written with an exponent, 1e16 and up): memctl_meta() (pg_schema.py m005_filter_meta) stores
# {"id": {"": "suspect"}} as their meta_index (no other row's "id" holds a key ""), and the Python
# evaluator judges them.
PG_SUSPECT_TERM = """meta_index @> '{"id": {"": "suspect"}}'"""
# memctl_meta_ranges.str holds a string field's first PG_RANGE_PREFIX characters (pg_schema.py m006).
PG_RANGE_PREFIX = 100
_NON_STRICT = {"<": "<=", "<=": "<=", ">": ">=", ">=": ">="}


def pg_prefilter(tree: Any, subdir: str) -> Frag:
    """A condition on meta_index (memctl_meta(metadata), pg_schema.py) a GIN index answers, on seq from the
    range postings' btree, and on columns under their btrees."""
    op, items = tree[0], tree[1]
    if op in ("or", "and"):
        if not items:
            return "FALSE", ()
        sql, params = _join([pg_prefilter(item, subdir) for item in items], " OR " if op == "or" else " AND ")
        return f"({sql})", params
    key, value = items, tree[2]
    if op == "col":
        return f"{key} = %s", (value,)
    if op == "range":
        sign, bound = value
        return _pg_range(key, sign, bound, subdir)
    docs: list[dict[str, Any]]
    if op == "type":
        docs = [{"id": {key: value}}]
    elif op == "eq":
        docs = [{key: v} for v in _pg_variants(value)]
    else:
        docs = [{key: [v]} for v in _pg_variants(value)]
    sql = " OR ".join(["meta_index @> %s::jsonb"] * len(docs))
    return f"({sql})", tuple(json.dumps(d) for d in docs)


def _pg_range(key: str, sign: str, bound: Any, subdir: str) -> Frag:
    """The seqs whose field `key` is a scalar of the bound's kind in range (a superset: strings compare by
    their stored prefix). Truncating both sides to n characters keeps a non-strict order (s >= b implies
    s[:n] >= b[:n]); a strict one only holds for a bound shorter than n."""
    if isinstance(bound, str):
        column = "str"
        if len(bound) >= PG_RANGE_PREFIX:
            sign, bound = _NON_STRICT[sign], bound[:PG_RANGE_PREFIX]
    else:
        column, bound = "num", _PG.number_param(bound)
    # ARRAY(...) is run once, and `seq = ANY` is an index condition on the primary key, inside a BitmapOr too.
    return (
        f"seq = ANY(ARRAY(SELECT seq FROM memctl_meta_ranges WHERE subdir = %s AND key = %s AND {column} {sign} %s))",
        (subdir, key, bound),
    )
