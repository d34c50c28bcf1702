"""Agent Zero's index.pkl, read without trusting it: a restricted unpickler.

It resolves only the three globals an Agent Zero store uses (LangChain's InMemoryDocstore and
Document, Agent Zero's Memory.Area), each to a small stand-in that keeps plain data; any other
global is refused before it is called. The layout it expects is described in `memctl.integrations.agent_zero.folder`.
"""

from __future__ import annotations

import io
import pickle
import struct
from typing import Any

from memctl.errors import UnsafePickleError

INDEX_PKL = "index.pkl"
DOCSTORE_GLOBAL = ("langchain_community.docstore.in_memory", "InMemoryDocstore")
DOCUMENT_GLOBAL = ("langchain_core.documents.base", "Document")
AREA_GLOBAL = ("python.helpers.memory", "Memory.Area")


# -- reading: the restricted unpickler -------------------------------------------------------------
class _DocstoreState:
    """Stands in for InMemoryDocstore: keeps the `_dict` of its pickled state, runs nothing."""

    docs: Any = None

    def __setstate__(self, state: Any) -> None:
        self.docs = state.get("_dict") if isinstance(state, dict) else None


class _DocumentState:
    """Stands in for a LangChain Document: keeps its fields (pydantic v2 `__dict__`, or a plain dict)."""

    fields: Any = None

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, dict) and isinstance(state.get("__dict__"), dict):
            state = state["__dict__"]
        self.fields = state if isinstance(state, dict) else None


def _area_value(value: Any) -> str:
    """Stands in for `Memory.Area(value)`: the enum's value, a string."""
    if not isinstance(value, str):
        raise pickle.UnpicklingError(f"Memory.Area value must be a string, not {type(value).__name__}")
    return value


_ALLOWED: dict[tuple[str, str], Any] = {
    DOCSTORE_GLOBAL: _DocstoreState,
    DOCUMENT_GLOBAL: _DocumentState,
    AREA_GLOBAL: _area_value,
}


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        allowed = _ALLOWED.get((module, name))
        if allowed is None:
            raise UnsafePickleError(
                f"{INDEX_PKL} refers to {module}.{name}, which is not part of an Agent Zero memory store; "
                "refused before anything in it ran",
                hint="only LangChain's InMemoryDocstore/Document and Agent Zero's Memory.Area are accepted",
            )
        return allowed

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError(f"{INDEX_PKL} uses persistent ids, which an Agent Zero store never does")


def load_index_pkl(data: bytes) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """(docstore dict id -> _DocumentState, row -> id) from index.pkl bytes; refuses anything else."""
    try:
        obj = _RestrictedUnpickler(io.BytesIO(data)).load()
    except UnsafePickleError:
        raise
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
        KeyError,
        OverflowError,
        MemoryError,
        RecursionError,
        UnicodeDecodeError,
        struct.error,
    ) as exc:
        raise UnsafePickleError(
            f"{INDEX_PKL} is truncated or not a pickle ({type(exc).__name__}: {exc})",
            hint="restore the folder from a backup; nothing was imported",
        ) from exc
    if not (
        isinstance(obj, tuple)
        and len(obj) == 2
        and isinstance(obj[0], _DocstoreState)
        and isinstance(obj[0].docs, dict)
        and isinstance(obj[1], dict)
    ):
        raise UnsafePickleError(
            f"{INDEX_PKL} is a pickle, but not LangChain's FAISS docstore (InMemoryDocstore, row -> id)",
            hint="is this an Agent Zero memory folder?",
        )
    return obj[0].docs, obj[1]
