"""`memctl demo`: memctl's main job, end to end, on example data shipped in the package, with no LLM.

On the embedded store (a fresh temporary root unless one is given): import a knowledge folder, save
a few memories, recall a question into the block an agent injects into its prompt, then back the
store up and verify the backup (every file against the manifest's sha256, and the same question
answered from the backup with the same memories). Each step is reported to `on_step` as it ends, so
the CLI can print it then; the whole run is one `DemoReport`.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memctl.errors import StoreError, UsageError

if TYPE_CHECKING:
    from memctl.knowledge.sync import KnowledgeReport
    from memctl.lifecycle.backup import BackupReport
    from memctl.recall import RecallResult
    from memctl.store.base import StoreBase
    from memctl.store.records import Memory

# The example knowledge folder (a small web shop's notes; files in solutions/ go to area solutions).
KNOWLEDGE_DIR = Path(__file__).resolve().parent / "data" / "demo" / "knowledge"

# What an agent would have learned in conversations: (text, area, metadata).
MEMORIES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("User prefers short answers with a code example in Python", "main", {"importance": 0.9}),
    ("The staging database listens on port 5433, not the default 5432", "fragments", {"tags": ["ops"]}),
    (
        "Problem: the payment tests hang in CI. Solution: set STRIPE_MOCK=1 so the payment client is stubbed",
        "solutions",
        {"tags": ["ci"]},
    ),
)

QUESTION = "When do deploys go out, and which port does the staging database use?"

ACTOR = "demo"
STEPS = ("store", "knowledge", "save", "recall", "backup")


@dataclass
class Verified:
    files: int  # files of the backup checked against their sha256 in backup.json
    count: int  # memories the backup holds, opened as a store
    same_recall: bool  # the question recalls the same memories from the backup

    def to_dict(self) -> dict[str, Any]:
        return {"files": self.files, "count": self.count, "same_recall": self.same_recall}


@dataclass
class DemoReport:
    root: Path
    subdir: str
    path: Path  # the store's folder
    temporary: bool  # the root is a temporary folder the demo made
    question: str = QUESTION
    model: dict[str, Any] | None = None  # {provider, model, dimension} of the stored vectors
    knowledge: KnowledgeReport | None = None
    saved: list[Memory] = field(default_factory=list)
    recall: RecallResult | None = None
    prompt: str = ""
    backup: BackupReport | None = None
    verified: Verified | None = None
    removed: bool = False  # the temporary root was removed at the end

    def to_dict(self) -> dict[str, Any]:
        knowledge = self.knowledge
        return {
            "root": str(self.root),
            "subdir": self.subdir,
            "path": str(self.path),
            "temporary": self.temporary,
            "removed": self.removed,
            "model": self.model,
            "knowledge": None
            if knowledge is None
            else {
                "folder": str(KNOWLEDGE_DIR),
                "files": len(knowledge.files),
                "chunks": knowledge.added,
                "embedded": knowledge.embedded,
                "areas": _areas(knowledge),
            },
            "saved": [m.to_dict() for m in self.saved],
            "recall": None
            if self.recall is None
            else {
                "question": self.question,
                "memories": self.recall.to_dict()["memories"],
                "solutions": self.recall.to_dict()["solutions"],
                "prompt": self.prompt,
            },
            "backup": None
            if self.backup is None
            else {
                "path": self.backup.path,
                "count": self.backup.count,
                "bytes": self.backup.bytes,
                "files": self.backup.files,
                "verified": self.verified.to_dict() if self.verified else None,
            },
        }


def _areas(report: KnowledgeReport) -> dict[str, int]:
    areas: dict[str, int] = {}
    for f in report.files:
        areas[f.area] = areas.get(f.area, 0) + f.chunks
    return dict(sorted(areas.items()))


def run_demo(
    root: str | Path | None = None,
    subdir: str = "default",
    *,
    overrides: dict[str, Any] | None = None,
    remove: bool = False,
    on_step: Callable[[str, DemoReport], None] | None = None,
) -> DemoReport:
    """Run the demo into `<root>/<subdir>` (root None: a new temporary folder, kept unless `remove`).

    The store folder must not exist yet, nor the backup folder beside it: the demo never writes into
    a store that holds anything."""
    from memctl.config.paths import store_dir

    temporary = root is None
    root_path = Path(tempfile.mkdtemp(prefix="memctl-demo-")) if root is None else Path(root).expanduser()
    folder = store_dir(root_path.absolute(), subdir)
    report = DemoReport(root_path.absolute(), subdir, folder, temporary)
    dest = folder.parent / f"{folder.name}-backup"
    if not temporary:
        _check_unused(folder, "store folder")
        _check_unused(dest, "backup folder")
    step = on_step or (lambda name, report: None)
    try:
        _run(report, dest, overrides, step)
    finally:
        if temporary and remove:
            shutil.rmtree(root_path, ignore_errors=True)
            report.removed = True
    return report


def _check_unused(path: Path, what: str) -> None:
    if path.exists() or path.is_symlink():
        raise UsageError(
            f"the demo's {what} {path} already exists; the demo only writes a new store",
            hint="leave out --root (the demo then uses a temporary folder), or pass another --root or --subdir",
        )


def _run(
    report: DemoReport, dest: Path, overrides: dict[str, Any] | None, step: Callable[[str, DemoReport], None]
) -> None:
    from memctl.store import open_store

    with open_store(report.root, report.subdir, overrides=overrides, actor=ACTOR, store="embedded") as store:
        step("store", report)
        report.knowledge = _import_knowledge(store)
        step("knowledge", report)
        report.saved = _save(store)
        report.model = store.model_info()
        step("save", report)
        report.recall, report.prompt = _recall(store)
        step("recall", report)
    report.backup, report.verified = _backup(report, dest, overrides)
    step("backup", report)


def _import_knowledge(store: StoreBase) -> KnowledgeReport:
    from memctl.knowledge.sync import import_knowledge, resolve_folders

    if not KNOWLEDGE_DIR.is_dir():
        raise StoreError(f"the demo's example data is missing from the installed package ({KNOWLEDGE_DIR})")
    report = import_knowledge(store, resolve_folders(store.config, [KNOWLEDGE_DIR]))
    if report.failed or not report.added:
        failed = "; ".join(f"{f.path}: {f.error}" for f in report.failed) or "no chunk was imported"
        raise StoreError(f"the demo could not import its example knowledge ({failed})")
    return report


def _save(store: StoreBase) -> list[Memory]:
    ids: list[str] = []
    for text, area, metadata in MEMORIES:
        ids += store.add([text], area=area, metadata=[{**metadata, "source": "memctl demo"}])
    return store.get(ids)


def _recall(store: StoreBase) -> tuple[RecallResult, str]:
    from memctl.recall import recall, render_prompt

    result = recall(store, QUESTION)
    if result.empty:
        raise StoreError(
            "the demo recalled nothing for its question: the embedding model answers differently than expected",
            hint="`memctl config show` names the embedding model in use",
        )
    return result, render_prompt(result)


def _backup(report: DemoReport, dest: Path, overrides: dict[str, Any] | None) -> tuple[BackupReport, Verified]:
    from memctl.lifecycle.backup import backup_store, verify_backup
    from memctl.recall import recall
    from memctl.store import open_store

    made = backup_store(report.path, dest, subdir=report.subdir)
    manifest = verify_backup(dest)
    with open_store(dest.parent, dest.name, overrides=overrides, actor=ACTOR, store="embedded", read_only=True) as copy:
        count = len(copy)
        again = recall(copy, QUESTION)
    assert report.recall is not None
    same = _ids(again) == _ids(report.recall)
    if count != made.count or not same:
        raise StoreError(
            f"the demo's backup at {dest} does not match the store ({count} of {made.count} memories, "
            f"same recall: {same})"
        )
    return made, Verified(files=len(manifest["files"]), count=count, same_recall=same)


def _ids(result: RecallResult) -> list[str]:
    return [h.id for h in [*result.memories, *result.solutions]]
