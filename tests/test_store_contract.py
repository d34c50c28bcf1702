"""The store contract (memctl/store/base.py): both backends implement all of it, with the same signatures.

No database is needed: the checks read the classes.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from memctl.store.base import StoreBase
from memctl.store.embedded import EmbeddedStore
from memctl.store.postgres import PostgresStore

BACKENDS = [EmbeddedStore, PostgresStore]
DUNDERS = {"__len__", "__enter__", "__exit__"}
# Public methods only one backend has (what only that backend needs: the FAISS index, replacing a
# database store in place, listing a database's stores).
ONLY = {
    EmbeddedStore: {"vector_index"},
    PostgresStore: {"subdirs", "lock_writers", "has_content", "clear"},
}


FORWARDER = [
    ("self", inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty),
    ("args", inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.empty),
    ("kwargs", inspect.Parameter.VAR_KEYWORD, inspect.Parameter.empty),
]


def _public(cls: type) -> set[str]:
    """The public methods and properties `cls` itself defines or inherits (not plain attributes)."""
    names = set()
    for name in dir(cls):
        if name.startswith("_") and name not in DUNDERS:
            continue
        attr = inspect.getattr_static(cls, name)
        if isinstance(attr, property | staticmethod | classmethod) or inspect.isfunction(attr):
            names.add(name)
    return names


def _parameters(attr: Any) -> list[tuple[str, Any, Any]]:
    """(name, kind, default) of each parameter: the call shape, annotations left aside (a backend may narrow
    a return type, e.g. `transaction` yields the backend's own class)."""
    function = attr.__func__ if isinstance(attr, staticmethod | classmethod) else attr
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


def test_the_contract_declares_every_public_method_with_a_docstring():
    contract = _public(StoreBase)
    assert {
        "list",
        "find_exact",
        "derived_ids",
        "reindex",
        "integrity_check",
        "vector_count",
        "stats",
        "delete",
        "update",
        "insert_records",
        "search",
        "location",
    } <= contract
    for name in sorted(contract - DUNDERS):
        attr = inspect.getattr_static(StoreBase, name)
        target = attr.fget if isinstance(attr, property) else attr
        doc = inspect.getdoc(target) or ""
        assert doc.strip(), f"StoreBase.{name} has no docstring"


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda cls: cls.__name__)
def test_a_backend_leaves_no_abstract_method(backend: type):
    assert inspect.isabstract(StoreBase)
    assert not inspect.isabstract(backend), f"{backend.__name__} misses {sorted(backend.__abstractmethods__)}"


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda cls: cls.__name__)
def test_a_backend_keeps_the_signature_of_every_contract_method(backend: type):
    for name in sorted(_public(StoreBase)):
        declared = inspect.getattr_static(StoreBase, name)
        provided = inspect.getattr_static(backend, name)
        if isinstance(declared, property):
            assert isinstance(provided, property), f"{backend.__name__}.{name} must be a property"
            continue
        assert not isinstance(provided, property), f"{backend.__name__}.{name} must be a method"
        if _parameters(provided) == FORWARDER:  # wraps the base method and passes every argument on
            continue
        assert _parameters(provided) == _parameters(declared), f"{backend.__name__}.{name} differs from the contract"


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda cls: cls.__name__)
def test_every_public_method_of_a_backend_is_in_the_contract(backend: type):
    extra = _public(backend) - _public(StoreBase)
    assert extra == ONLY[backend], "declare a method both backends provide in StoreBase"


def test_a_backend_missing_a_method_cannot_be_made():
    # Every method of EmbeddedStore but `_area_counts` (a primitive of `stats`): the class is still abstract.
    namespace = {name: value for name, value in vars(EmbeddedStore).items() if name != "_area_counts"}
    partial = type("Partial", (StoreBase,), namespace)
    assert partial.__abstractmethods__ == frozenset({"_area_counts"})
    with pytest.raises(TypeError, match="abstract"):
        partial()
