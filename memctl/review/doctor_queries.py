"""The user's own saved questions for `memctl doctor --queries FILE`, and recall@k on them.

A file holds questions, each with the memory that answers it: by id, or by text (a memory whose text
contains that text, compared case- and whitespace-insensitively). JSONL (one object a line) or YAML
(a list of such objects, or a mapping question: expected):

    {"question": "which port does the API use?", "id": "k3x9a2"}
    {"question": "where do we deploy?", "text": "deploy target is prod-eu-1"}
    {"question": "who reviews SQL changes?", "expected": "Dana reviews SQL"}   # an id if one is stored, else text

recall@k is the share of questions whose expected memory is among the first k results of the search
`memctl load` runs (config search_mode and search_threshold): a memory found below the threshold is not
returned to an agent, so it counts as missed. Questions whose expected memory is not in the store at all
are missed too, and counted apart (`unanswerable`) so a stale file is told from a bad search.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memctl.errors import InputFormatError, UsageError

if TYPE_CHECKING:
    from memctl.store.base import StoreBase
    from memctl.store.records import Memory

MAX_FILE_BYTES = 16 * 1024 * 1024
QUESTION_KEYS = ("question", "query")
ID_KEYS = ("id", "expected_id")
TEXT_KEYS = ("text", "expected_text")


@dataclass(frozen=True)
class Query:
    question: str
    expected_id: str | None = None
    expected_text: str | None = None
    expected: str | None = None  # "expected": an id when a memory has it, else a text

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "expected": self.expected_id or self.expected_text or self.expected}


def read_queries(path: Path) -> list[Query]:
    """The questions of a JSONL or YAML file; InputFormatError (exit 2) naming the line or item at fault."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise UsageError(f"{path} is over {MAX_FILE_BYTES // (1024 * 1024)} MiB", hint="split the questions")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"no queries file at {path}", hint="give a JSONL or YAML file of questions") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read queries file {path}: {exc}") from exc
    stripped = text.lstrip()
    if path.suffix.lower() in (".jsonl", ".ndjson") or (
        path.suffix.lower() not in (".yaml", ".yml") and stripped.startswith("{")
    ):
        queries = list(_jsonl(text, path))
    else:
        queries = _yaml(text, path)
    if not queries:
        raise InputFormatError(f"{path} holds no questions", hint='one {"question": ..., "id": ...} per line')
    return queries


def _jsonl(text: str, path: Path) -> Iterable[Query]:
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise InputFormatError(f"{path}, line {number}: not JSON ({exc.args[0]})") from None
        yield _query(item, f"{path}, line {number}")


def _yaml(text: str, path: Path) -> list[Query]:
    import yaml

    from memctl.config import yaml_load

    try:
        data = yaml_load(text)
    except yaml.YAMLError as exc:
        raise InputFormatError(f"{path}: not YAML ({exc})".replace("\n", " ")) from None
    if data is None:
        return []
    if isinstance(data, dict):
        return [_query({"question": q, "expected": e}, f"{path}, question {q!r}") for q, e in data.items()]
    if isinstance(data, list):
        return [_query(item, f"{path}, item {i}") for i, item in enumerate(data, 1)]
    raise InputFormatError(f"{path}: expected a list of questions or a mapping question: expected")


def _query(item: Any, where: str) -> Query:
    if not isinstance(item, dict):
        raise InputFormatError(f"{where}: expected an object with a question and its expected memory")
    question = _field(item, QUESTION_KEYS, where)
    if not question:
        raise InputFormatError(f"{where}: no question", hint='a "question" key holding text')
    found = {
        "id": _field(item, ID_KEYS, where),
        "text": _field(item, TEXT_KEYS, where),
        "expected": _field(item, ("expected",), where),
    }
    given = [k for k, v in found.items() if v]
    if len(given) != 1:
        raise InputFormatError(
            f"{where}: give exactly one of id, text or expected (got {', '.join(given) or 'none'})",
            hint="the memory that answers the question: its id or its text",
        )
    return Query(question, found["id"], found["text"], found["expected"])


def _field(item: dict[str, Any], keys: tuple[str, ...], where: str) -> str | None:
    values = [item[k] for k in keys if k in item and item[k] is not None]
    if not values:
        return None
    value = values[0]
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InputFormatError(f"{where}: {keys[0]} must be text, got {type(value).__name__}")
    return str(value).strip()


def _matches(hit: Memory, expected_id: str | None, wanted: str | None) -> bool:
    if expected_id is not None:
        return hit.id == expected_id
    return bool(wanted) and wanted is not None and wanted in _norm(hit.text)


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


@dataclass
class RecallResult:
    k: int
    questions: int
    found: int
    unanswerable: int  # the expected memory is not in the store
    missed: list[dict[str, Any]]  # question, expected, rank (None: not in the first k)
    mode: str
    threshold: float

    @property
    def at_k(self) -> float:
        return self.found / self.questions if self.questions else 0.0


def recall_at_k(store: StoreBase, queries: list[Query], k: int, memories: list[Memory]) -> RecallResult:
    """Search each question as `load` does (nothing is recorded as accessed) and count the ones whose
    expected memory is among the first k results."""
    if k < 1:
        raise UsageError("--k must be 1 or more")
    ids = {m.id for m in memories}
    texts = [(m.id, _norm(m.text)) for m in memories]
    mode = str(store.config["search_mode"])
    threshold = store.default_threshold()
    found, unanswerable, missed = 0, 0, []
    for query in queries:
        expected_id, expected_text = query.expected_id, query.expected_text
        if query.expected is not None:
            expected_id, expected_text = (query.expected, None) if query.expected in ids else (None, query.expected)
        wanted = _norm(expected_text) if expected_text is not None else None
        if expected_id is not None:
            answerable = expected_id in ids
        else:
            answerable = any(wanted and wanted in text for _, text in texts)
        hits = store.search(query.question, limit=k, mode=mode)  # load's default cut and answered check
        rank = next((i for i, hit in enumerate(hits, 1) if _matches(hit, expected_id, wanted)), None)
        if rank is not None:
            found += 1
            continue
        unanswerable += not answerable
        missed.append({**query.to_dict(), "in_store": answerable})
    return RecallResult(k, len(queries), found, unanswerable, missed, mode, threshold)
