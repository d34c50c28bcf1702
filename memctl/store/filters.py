"""A small, safe metadata filter language for memory records.

Filters look like Python boolean expressions over a record's metadata fields::

    area == 'main' and 'db' in tags
    priority >= 2 or source_file == "a.md"
    not knowledge_source
    lang in ['en', 'de']
    1 < priority < 5

Filters come from the command line and from config files, so they are treated
as hostile input. ``compile_filter`` validates an expression once, against an
allow-list of syntax (comparisons, ``and``/``or``/``not``, bare field names and
literal values); everything else is refused with a ``FilterError`` that names
the construct and says what to write instead. Only then is the parsed tree
handed to ``simpleeval``, which evaluates it per record with no functions, no
attribute access and a reduced operator table: two independent layers, so a
gap in one is not enough to escape.

Evaluation never raises: a record whose values do not fit the filter
(``'db' in tags`` with ``tags`` missing, ``priority > 2`` with a string
priority) simply does not match.
"""

from __future__ import annotations

import ast
import io
import keyword
import operator
import threading
import tokenize
import unicodedata
from collections.abc import Mapping
from typing import Any

from simpleeval import SimpleEval

from memctl.errors import FilterError

__all__ = ["MAX_FILTER_LENGTH", "Filter", "compile_filter"]

MAX_FILTER_LENGTH = 500
MAX_DEPTH = 20  # AST nesting and bracket nesting: keeps evaluation recursion shallow
MAX_NODES = 200  # expression nodes: keeps per-record work bounded
MAX_LIST_ITEMS = 100

_FIX_GENERAL = "use comparisons joined by and/or/not, e.g. area == 'main' and 'db' in tags"

# Unicode categories refused anywhere, even inside string literals: control
# and format characters (NUL, newline, zero-width, bidi overrides) can hide or
# reorder what a reader sees; surrogates, private-use and unassigned code
# points have no business in a filter either.
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})

_COMPARE_OPS: dict[type[ast.cmpop], str] = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.In: "in",
    ast.NotIn: "not in",
}


def _contains(item: Any, container: Any) -> bool:
    return item in container


def _not_contains(item: Any, container: Any) -> bool:
    return item not in container


# simpleeval's default table includes arithmetic, bit operations and `is`;
# give it only what the language allows.
_OPERATORS: dict[type, Any] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: _contains,
    ast.NotIn: _not_contains,
    ast.Not: operator.not_,
    ast.USub: operator.neg,
}

# Node types simpleeval may evaluate. List/Tuple literals and negative numbers
# are folded into Constant nodes at compile time, so they are not needed here.
_EVAL_NODES = (ast.Name, ast.Constant, ast.BoolOp, ast.UnaryOp, ast.Compare)

# Refused node types -> (what it is, how to write it instead).
_REFUSED: dict[type[ast.AST], tuple[str, str]] = {
    ast.Call: ("function calls are not allowed", _FIX_GENERAL),
    ast.Attribute: (
        "attribute access (`.`) is not allowed",
        "refer to metadata fields by bare name, e.g. area == 'main'",
    ),
    ast.Subscript: (
        "indexing and slicing (`[...]` after a value) are not allowed",
        "test membership with `in`, e.g. 'db' in tags",
    ),
    ast.Lambda: ("lambda functions are not allowed", _FIX_GENERAL),
    ast.ListComp: (
        "comprehensions are not allowed",
        "test membership with `in` and a list literal, e.g. lang in ['en', 'de']",
    ),
    ast.SetComp: (
        "comprehensions are not allowed",
        "test membership with `in` and a list literal, e.g. lang in ['en', 'de']",
    ),
    ast.DictComp: (
        "comprehensions are not allowed",
        "test membership with `in` and a list literal, e.g. lang in ['en', 'de']",
    ),
    ast.GeneratorExp: (
        "generator expressions are not allowed",
        "test membership with `in` and a list literal, e.g. lang in ['en', 'de']",
    ),
    ast.JoinedStr: (
        "f-strings are not allowed",
        "use a plain string literal such as 'main'",
    ),
    ast.FormattedValue: (
        "f-strings are not allowed",
        "use a plain string literal such as 'main'",
    ),
    ast.NamedExpr: ("assignment (`:=`) is not allowed", "compare with `==` instead"),
    ast.Starred: ("unpacking with `*` is not allowed", "list the values literally"),
    ast.IfExp: (
        "conditional expressions (`x if cond else y`) are not allowed",
        "combine conditions with and/or",
    ),
    ast.BinOp: (
        "arithmetic and bitwise operators (+ - * / // % ** @ << >> & | ^) are not allowed",
        "compare fields directly to literal values",
    ),
    ast.Dict: (
        "dict literals are not allowed",
        "use a list literal such as ['a', 'b']",
    ),
    ast.Set: ("set literals are not allowed", "use a list literal such as ['a', 'b']"),
    ast.Await: ("`await` is not allowed", _FIX_GENERAL),
    ast.Yield: ("`yield` is not allowed", _FIX_GENERAL),
    ast.YieldFrom: ("`yield from` is not allowed", _FIX_GENERAL),
    ast.Slice: (
        "slices are not allowed",
        "test membership with `in`, e.g. 'db' in tags",
    ),
}


def _refuse(problem: str, fix: str, snippet: str | None = None) -> FilterError:
    where = f" (`{_shorten(snippet)}`)" if snippet else ""
    return FilterError(f"filter: {problem}{where}; {fix}")


def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


_CONTROL_NAMES = {
    "\0": "NUL",
    "\t": "TAB",
    "\n": "LINE FEED / newline",
    "\r": "CARRIAGE RETURN",
    "\x1b": "ESCAPE",
    "\x7f": "DELETE",
}


def _describe_char(ch: str) -> str:
    name = _CONTROL_NAMES.get(ch) or unicodedata.name(ch, "") or unicodedata.category(ch)
    return f"U+{ord(ch):04X} ({name})"


def _check_characters(expr: str) -> None:
    """Refuse invisible, control and non-space whitespace characters anywhere."""
    for pos, ch in enumerate(expr):
        if ch == " ":
            continue
        # Fast path: printable ASCII is always fine here.
        if "!" <= ch <= "~":
            continue
        if ch.isspace() or unicodedata.category(ch) in _BAD_CATEGORIES:
            raise _refuse(
                f"control, whitespace or invisible character {_describe_char(ch)} at position {pos} is not allowed",
                "retype the filter on one line using plain spaces only",
            )


def _syntax_error(text: str) -> FilterError:
    """Parse `text` to obtain Python's own explanation of why it is invalid."""
    try:
        ast.parse(text, mode="eval")
    except SyntaxError as exc:
        detail = exc.msg or "invalid syntax"
        if not detail.startswith("invalid syntax"):
            detail = f"invalid syntax: {detail}"
        col = f" at column {exc.offset}" if exc.offset else ""
        return _refuse(f"{detail}{col}", _FIX_GENERAL)
    except (ValueError, RecursionError, MemoryError):
        pass
    return _refuse("invalid syntax", _FIX_GENERAL)


def _check_tokens(text: str) -> None:
    """Outside string literals allow only printable ASCII, no comments and
    bounded bracket nesting.

    Python NFKC-normalises identifiers, so ``ｅｖａｌ`` (fullwidth) would parse
    as the name ``eval``; checking the raw source between string tokens is
    the only way to see such lookalikes.
    """
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        raise _syntax_error(text) from None
    if any(tok.type == tokenize.ERRORTOKEN for tok in tokens):
        raise _syntax_error(text)

    depth = 0
    for tok in tokens:
        if tok.type == tokenize.STRING:
            continue  # non-ASCII letters are fine inside literals
        if tok.type == tokenize.COMMENT:
            raise _refuse(
                "comments (`#`) are not allowed",
                "remove the `#...` part (a `#` inside quotes is fine)",
                tok.string,
            )
        for ch in tok.string:
            if not (" " <= ch <= "~"):
                raise _refuse(
                    f"non-ASCII character {_describe_char(ch)} outside a string literal is not allowed",
                    "type field names and operators in plain ASCII; only quoted values may contain other characters",
                    tok.string,
                )
        if tok.type == tokenize.OP:
            # Give the two likeliest statement mistakes a precise message
            # instead of Python's generic "invalid syntax".
            if tok.string == "=":
                raise _refuse("assignment (`=`) is not allowed", "compare with `==`", text)
            if tok.string == ";":
                raise _refuse(
                    "`;` is not allowed (a filter is a single expression)",
                    "join conditions with and/or",
                    text,
                )
            if tok.string in "([{":
                depth += 1
                if depth > MAX_DEPTH:
                    raise _refuse(
                        f"brackets are nested more than {MAX_DEPTH} levels deep",
                        "simplify the expression",
                    )
            elif tok.string in ")]}":
                depth -= 1


class _Validator:
    """Walks the parsed tree, allowing only the filter language's constructs."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.nodes = 0
        self.names: set[str] = set()

    def snippet(self, node: ast.AST) -> str | None:
        return ast.get_source_segment(self.text, node)

    def refuse(self, node: ast.AST, problem: str, fix: str) -> FilterError:
        return _refuse(problem, fix, self.snippet(node))

    def count(self, node: ast.AST, depth: int) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _refuse(
                f"expression is too large (more than {MAX_NODES} parts)",
                "split it into simpler filters",
            )
        if depth > MAX_DEPTH:
            raise _refuse(
                f"expression is nested more than {MAX_DEPTH} levels deep",
                "simplify the expression",
            )

    def expr(self, node: ast.AST, depth: int) -> None:
        self.count(node, depth)
        if isinstance(node, ast.BoolOp):
            # And/Or are the only BoolOp operators Python has.
            for value in node.values:
                self.expr(value, depth + 1)
        elif isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                self.expr(node.operand, depth + 1)
            elif isinstance(node.op, ast.USub):
                self.negative_number(node, depth)
            else:
                raise self.refuse(
                    node,
                    "unary operators other than `not` and a leading minus are not allowed",
                    _FIX_GENERAL,
                )
        elif isinstance(node, ast.Compare):
            for op in node.ops:
                if type(op) not in _COMPARE_OPS:
                    if isinstance(op, (ast.Is, ast.IsNot)):
                        raise self.refuse(
                            node,
                            "`is` / `is not` are not allowed",
                            "use == None or != None",
                        )
                    raise self.refuse(node, "this comparison is not allowed", _FIX_GENERAL)
            self.expr(node.left, depth + 1)
            for comparator in node.comparators:
                self.expr(comparator, depth + 1)
        elif isinstance(node, ast.Name):
            self.name(node)
        elif isinstance(node, ast.Constant):
            self.constant(node)
        elif isinstance(node, (ast.List, ast.Tuple)):
            self.sequence(node, depth)
        else:
            problem, fix = _REFUSED.get(
                type(node),
                (f"`{type(node).__name__}` expressions are not allowed", _FIX_GENERAL),
            )
            raise self.refuse(node, problem, fix)

    def name(self, node: ast.Name) -> None:
        ident = node.id
        if not isinstance(node.ctx, ast.Load):
            raise self.refuse(node, "assigning to a name is not allowed", "compare with `==`")
        if ident.startswith("_") or "__" in ident:
            raise self.refuse(
                node,
                "names starting with `_` or containing `__` are not allowed",
                "metadata field names start with a letter, e.g. area, tags, priority",
            )
        if not (ident.isascii() and ident.isidentifier()):
            raise self.refuse(node, "field names must be plain ASCII identifiers", _FIX_GENERAL)
        # True/False/None parse as Constant; a Name spelled like a keyword can
        # only come from a trick, so refuse it outright.
        if keyword.iskeyword(ident) or ident in {"True", "False", "None"}:
            raise self.refuse(node, f"`{ident}` cannot be used as a field name", _FIX_GENERAL)
        self.names.add(ident)

    def constant(self, node: ast.Constant) -> None:
        value = node.value
        if value is None or isinstance(value, (str, int, float)):
            # bool is a subclass of int. complex is not, and is refused below.
            return
        if isinstance(value, bytes):
            raise self.refuse(node, "bytes literals are not allowed", "use a plain string like 'x'")
        if value is Ellipsis:
            raise self.refuse(node, "`...` is not allowed", _FIX_GENERAL)
        raise self.refuse(
            node,
            f"{type(value).__name__} literals are not allowed",
            "use strings, integers, floats, True, False or None",
        )

    def negative_number(self, node: ast.UnaryOp, depth: int) -> None:
        operand = node.operand
        if (
            isinstance(operand, ast.Constant)
            and isinstance(operand.value, (int, float))
            and not isinstance(operand.value, bool)
        ):
            self.count(operand, depth + 1)
            return
        raise self.refuse(
            node,
            "unary minus is only allowed on number literals, e.g. -1",
            _FIX_GENERAL,
        )

    def sequence(self, node: ast.List | ast.Tuple, depth: int) -> None:
        if len(node.elts) > MAX_LIST_ITEMS:
            raise _refuse(
                f"list literal has {len(node.elts)} items (at most {MAX_LIST_ITEMS} allowed)",
                "shorten the list or split the filter",
            )
        for item in node.elts:
            if isinstance(item, ast.Constant):
                self.count(item, depth + 1)
                self.constant(item)
            elif isinstance(item, ast.UnaryOp) and isinstance(item.op, ast.USub):
                self.count(item, depth + 1)
                self.negative_number(item, depth + 1)
            elif isinstance(item, ast.Starred):
                raise self.refuse(
                    item,
                    "unpacking with `*` is not allowed",
                    "list the values literally",
                )
            else:
                raise self.refuse(
                    item,
                    "list items must be literal values (strings, numbers, True, False, None)",
                    "compare fields separately and join with and/or",
                )


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.UnaryOp):  # validated: USub on a number
        return -node.operand.value  # type: ignore[attr-defined]
    return node.value  # type: ignore[attr-defined]


def _fold(node: ast.expr) -> ast.expr:
    """Turn validated list/tuple literals and negative numbers into Constants.

    Done once at compile time so per-record evaluation does not rebuild a
    list item by item. The list/tuple type is kept so that ``tags == ['a']``
    behaves as in Python (a list never equals a tuple).
    """
    # A Constant holding a list is not something ast.parse produces, but
    # simpleeval only reads `.value`; the tree never reaches compile().
    if isinstance(node, ast.List):
        items = [_literal(item) for item in node.elts]
        return ast.Constant(value=items)  # type: ignore[arg-type]
    if isinstance(node, ast.Tuple):
        return ast.Constant(value=tuple(_literal(item) for item in node.elts))  # type: ignore[arg-type]
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.USub):
            return ast.Constant(value=_literal(node))
        return ast.UnaryOp(op=node.op, operand=_fold(node.operand))
    if isinstance(node, ast.BoolOp):
        return ast.BoolOp(op=node.op, values=[_fold(v) for v in node.values])
    if isinstance(node, ast.Compare):
        operands = [_fold(node.left), *(_fold(c) for c in node.comparators)]
        if any(isinstance(o, ast.Name) and o.id in TIME_NAMES for o in operands):
            operands = [_instant_literal(o) for o in operands]
        return ast.Compare(left=operands[0], ops=node.ops, comparators=operands[1:])
    return node  # Name or Constant


# Names that read a stored timestamp (UTC ISO 8601: memctl/store/validate.py).
TIME_NAMES = frozenset({"created_at", "updated_at", "timestamp"})


def _instant_literal(node: ast.expr) -> ast.expr:
    """A string literal compared with a timestamp column, in the stored form when it names an instant with an
    offset (`'2025-03-01T12:00:00+05:00'` is 07:00 UTC), so the text comparison compares instants. Dates and
    naive times are left as written: they compare as UTC prefixes."""
    if not isinstance(node, ast.Constant):
        return node
    value = node.value
    if isinstance(value, str):
        return ast.Constant(value=_instant(value))
    if isinstance(value, list | tuple):
        items = [_instant(v) if isinstance(v, str) else v for v in value]
        return ast.Constant(value=type(value)(items))  # type: ignore[arg-type]
    return node


def _instant(text: str) -> str:
    from datetime import datetime

    from memctl.store.validate import utc_iso

    try:
        stamp = datetime.fromisoformat(text)
        return utc_iso(stamp) if stamp.tzinfo is not None else text
    except (ValueError, OverflowError):
        return text


class _RecordNames:
    """Name lookup for simpleeval: a field missing from the record is None."""

    __slots__ = ("record",)

    def __init__(self) -> None:
        self.record: Mapping[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        return self.record.get(key)


class Filter:
    """A validated filter expression; build one with :func:`compile_filter`."""

    __slots__ = ("_evaluator", "_lock", "_lookup", "_tree", "names", "source")

    source: str
    names: frozenset[str]

    def __init__(self, source: str, names: frozenset[str], tree: ast.expr) -> None:
        self.source = source
        self.names = names
        self._tree = tree
        self._lookup = _RecordNames()
        evaluator = SimpleEval(operators=dict(_OPERATORS), functions={}, names=self._lookup)
        # Second line of defence: simpleeval may only evaluate allowed nodes.
        evaluator.nodes = {t: h for t, h in evaluator.nodes.items() if t in _EVAL_NODES}
        self._evaluator = evaluator
        # One evaluator is reused per call (constructing one costs more than
        # evaluating); the lock keeps concurrent callers from swapping records.
        self._lock = threading.Lock()

    @property
    def tree(self) -> ast.expr:
        """The validated, folded expression (list literals and negative numbers are Constants);
        memctl/store/filter_sql.py compiles it to SQL."""
        return self._tree

    def matches(self, record: Mapping[str, Any]) -> bool:
        """True if `record` satisfies the filter; False if it does not or
        if evaluating it against this record fails (wrong types, etc.)."""
        with self._lock:
            self._lookup.record = record
            try:
                return bool(self._evaluator.eval(self.source, previously_parsed=self._tree))
            except Exception:  # noqa: BLE001
                # Any failure (TypeError for None/str/int mismatches, hostile
                # __eq__ in a value, a non-mapping record) means "no match".
                return False
            finally:
                self._lookup.record = {}  # don't keep the record alive

    def __repr__(self) -> str:
        return f"Filter({self.source!r})"


def compile_filter(expr: str, *, max_length: int = MAX_FILTER_LENGTH) -> Filter:
    """Validate `expr` and return a reusable :class:`Filter`.

    Raises FilterError naming the problem and the fix for anything outside
    the filter language.
    """
    if not isinstance(expr, str):
        raise FilterError(f"filter: expected a string, got {type(expr).__name__}")
    if not expr.strip():
        raise _refuse("the filter is empty", "give an expression such as area == 'main'")
    if len(expr) > max_length:
        raise _refuse(
            f"the filter is {len(expr)} characters long (at most {max_length} allowed)",
            "shorten it, e.g. by using `in` with a list",
        )
    _check_characters(expr)
    # Only plain spaces remain as whitespace; Python rejects leading
    # indentation, so strip them for parsing (`source` keeps the original).
    text = expr.strip(" ")
    _check_tokens(text)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise _syntax_error(text) from None
    except (ValueError, RecursionError, MemoryError):
        raise _refuse("the filter could not be parsed", _FIX_GENERAL) from None

    validator = _Validator(text)
    validator.expr(tree.body, 1)
    return Filter(expr, frozenset(validator.names), _fold(tree.body))
