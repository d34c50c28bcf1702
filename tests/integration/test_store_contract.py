"""The store contract (memctl/store/base.py): both backends implement all of it, with the same signatures,
and memctl.store.BACKENDS is the one place that names them (a backend registered from this file alone
serves the CLI, backup and migrate).

No database is needed: the checks read the classes and the source; the third backend is a folder in tmp.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest

import memctl.store
from memctl.store.base import StoreBase, StoreSpec
from memctl.store.embedded import EmbeddedStore
from memctl.store.postgres import PostgresStore
from memctl.store.records import StoreList, StoreSummary

BACKENDS = list(memctl.store.BACKENDS)  # a new backend is checked here as soon as it is registered
DUNDERS = {"__len__", "__enter__", "__exit__"}
# Public methods only one backend has (what only that backend needs: the FAISS index, listing a database's stores).
ONLY = {
    EmbeddedStore: {"vector_index"},
    PostgresStore: {"subdirs"},
}
# What a backend that keeps no store folder (folder_at None) must provide: restore-backup replaces its rows.
IN_PLACE = ("has_content", "lock_writers", "clear")


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
    assert extra == ONLY.get(backend, set()), "declare a method both backends provide in StoreBase"


def test_a_backend_missing_a_method_cannot_be_made():
    # Every method of EmbeddedStore but `_area_counts` (a primitive of `stats`): the class is still abstract.
    namespace = {name: value for name, value in vars(EmbeddedStore).items() if name != "_area_counts"}
    partial = type("Partial", (StoreBase,), namespace)
    assert partial.__abstractmethods__ == frozenset({"_area_counts"})
    with pytest.raises(TypeError, match="abstract"):
        partial()


def test_every_backend_is_registered_once_with_its_own_schemes():
    assert {EmbeddedStore, PostgresStore} <= set(BACKENDS)
    assert BACKENDS[0] is EmbeddedStore and EmbeddedStore.schemes == ()  # the default: the folder store, no URL
    schemes = [scheme for backend in memctl.store.BACKENDS for scheme in backend.schemes]
    assert len(schemes) == len(set(schemes))
    assert memctl.store.backend_of(None) is EmbeddedStore
    assert memctl.store.backend_of("postgresql://u@h/db") is PostgresStore
    assert memctl.store.backend_of("postgres://u@h/db") is PostgresStore


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda cls: cls.__name__)
def test_a_backend_without_a_store_folder_can_be_replaced_in_place(backend: type):
    swapped = backend.folder_at is not StoreBase.folder_at
    replaced = [name for name in IN_PLACE if getattr(backend, name) is not getattr(StoreBase, name)]
    assert swapped or replaced == list(IN_PLACE), f"{backend.__name__} is restored neither by a swap nor in place"


# Modules above memctl/store that still import a concrete backend, each with why (drop it once fixed).
KNOWN_BACKEND_IMPORTS: dict[str, str] = {}


def _in(module: str, concrete: set[str]) -> bool:
    """`module` is a concrete backend module or one of its submodules (memctl.store.postgres.connection)."""
    return any(module == c or module.startswith(c + ".") for c in concrete)


def _backend_imports(path: Path, concrete: set[str]) -> list[str]:
    """The concrete backend modules `path` imports (import x / from x import y / from memctl.store import x)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if _in(alias.name, concrete)]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if _in(node.module, concrete):
                found.append(node.module)
            elif node.module == "memctl.store":
                found += [f"memctl.store.{a.name}" for a in node.names if f"memctl.store.{a.name}" in concrete]
    return found


def test_the_import_check_sees_every_form_of_import(tmp_path: Path):
    module = tmp_path / "m.py"
    module.write_text(
        "import memctl.store.postgres\nfrom memctl.store.embedded import EmbeddedStore\n"
        "from memctl.store import postgres, open_store\nfrom memctl.store.base import StoreBase\n"
    )
    concrete = {"memctl.store.embedded", "memctl.store.postgres"}
    assert _backend_imports(module, concrete) == [
        "memctl.store.postgres",
        "memctl.store.embedded",
        "memctl.store.postgres",
    ]


def test_nothing_above_the_store_imports_a_backend_module():
    package = Path(memctl.store.__file__).resolve().parent.parent
    concrete = {backend.__module__ for backend in memctl.store.BACKENDS}
    # a backend split into a subpackage (memctl/store/postgres/store.py) is imported through the package too
    concrete |= {
        module.rsplit(".", 1)[0] for module in concrete if module.startswith("memctl.store.") and module.count(".") > 2
    }
    assert {"memctl.store.embedded", "memctl.store.postgres"} <= concrete
    offenders = {}
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package.parent).as_posix()
        if relative.startswith("memctl/store/"):
            continue
        imports = _backend_imports(path, concrete)
        if imports and relative not in KNOWN_BACKEND_IMPORTS:
            offenders[relative] = imports
    assert offenders == {}, "go through memctl.store (open_store, store_folder, store_location, ...)"
    for known in KNOWN_BACKEND_IMPORTS:  # an exception that is no longer needed goes
        assert _backend_imports(package.parent / known, concrete), f"{known} no longer imports a backend"


# -- a third backend, registered from this file only --------------------------------------------
class FolderRows(EmbeddedStore):
    """`rows:///DIR`: each store a folder store in DIR, but backed up and restored row by row (as a
    database backend is), so every path a third backend takes runs."""

    schemes = ("rows",)
    url_example = "rows:///var/lib/memctl"

    @staticmethod
    def _base(spec: StoreSpec) -> Path:
        assert spec.url is not None and spec.url.startswith("rows://")
        return Path(spec.url.removeprefix("rows://"))

    @classmethod
    def open_at(cls, spec: StoreSpec) -> FolderRows:
        from memctl.config import load_config
        from memctl.errors import NotFoundError

        folder = cls._base(spec) / spec.subdir
        if not spec.create and not folder.is_dir():
            raise NotFoundError(f"no store {spec.subdir!r} at {spec.url}")
        config = spec.config or load_config(None, spec.overrides)
        return cls(folder, config, embedder=spec.embedder, actor=spec.actor)

    @classmethod
    def stores_at(cls, spec: StoreSpec, *, counts: bool = True) -> StoreList:
        base = cls._base(spec)
        names = sorted(p.name for p in base.iterdir()) if base.is_dir() else []
        return StoreList(str(spec.url), [StoreSummary(name, None, f"{spec.url}#{name}") for name in names])

    @classmethod
    def location_at(cls, spec: StoreSpec) -> str:
        return f"{spec.url}#{spec.subdir}"

    @classmethod
    def folder_at(cls, spec: StoreSpec) -> Path | None:
        return None

    @property
    def location(self) -> str:
        return f"rows://{self.folder.parent}#{self.folder.name}"

    def has_content(self) -> bool:
        return len(self) > 0 or bool(self.history(limit=1))

    def lock_writers(self) -> None:
        pass  # the transaction holds the folder store's write lock already

    def clear(self) -> None:
        with self._write() as db:
            for table in ("links", "history", "archive", "memories"):
                db.execute(f"DELETE FROM {table}")


@pytest.fixture
def third(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    monkeypatch.setattr(memctl.store, "BACKENDS", (*memctl.store.BACKENDS, FolderRows))
    return f"rows://{tmp_path / 'rows'}"


def test_a_registered_backend_serves_the_cli(third: str, cli: Any):
    assert cli("--store", third, "save", "the build uses ninja").code == 0
    assert cli("--store", third, "--subdir", "other", "save", "tea at four").code == 0
    found = cli("--store", third, "load", "--json", "ninja build", "--threshold", "0").json
    assert [hit["text"] for hit in found["results"]][:1] == ["the build uses ninja"]
    assert [s["name"] for s in cli("--store", third, "subdirs", "--json").json["subdirs"]] == ["default", "other"]
    bad = cli("--store", "nosuch://x", "list")
    assert bad.code == 2 and "postgresql://" in bad.err and "rows://" in bad.err


def test_a_registered_backend_backs_up_restores_and_migrates_row_by_row(third: str, cli: Any, tmp_path: Path):
    assert cli("--store", third, "save", "--area", "solutions", "rotate the keys monthly").code == 0
    backup = tmp_path / "backup"
    done = cli("--store", third, "backup", str(backup), "--json")
    assert done.code == 0, done.err
    assert done.json["count"] == 1 and (backup / "backup.json").is_file()
    restored = cli("--store", third, "--subdir", "copy", "restore-backup", str(backup), "--json")
    assert restored.code == 0, restored.err
    assert restored.json["path"] == f"{third}#copy" and restored.json["count"] == 1
    moved = cli("--store", third, "migrate", "--to", "embedded", "--json")
    assert moved.code == 0, moved.err
    assert moved.json["from"] == f"{third}#default" and moved.json["count"] == 1
    texts = [m["text"] for m in cli("list", "--json").json["items"]]
    assert texts == ["rotate the keys monthly"]
    back = cli("migrate", "--to", third, "--to-subdir", "again", "--json")
    assert back.code == 0 and back.json["to"] == f"{third}#again", back.err
