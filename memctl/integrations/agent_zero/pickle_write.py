"""Agent Zero's index.pkl, written by hand: the opcodes FAISS.save_local would emit, so LangChain
is never imported (it is a dev/bench extra only)."""

from __future__ import annotations

import io
import pickle
import struct
from collections.abc import Iterable
from typing import Any

from memctl.integrations.agent_zero.pickle_read import DOCSTORE_GLOBAL, DOCUMENT_GLOBAL


# -- exporting: the pickle, written by hand ---------------------------------------------------------
class _PickleWriter:
    """Protocol-4 opcodes for plain data plus the two LangChain classes (no framing: it is optional)."""

    def __init__(self) -> None:
        self.out = io.BytesIO()
        self.memo: dict[Any, int] = {}
        self.write(pickle.PROTO + bytes([4]))

    def write(self, data: bytes) -> None:
        self.out.write(data)

    def _memoize(self, key: Any) -> None:
        self.memo[key] = len(self.memo)
        self.write(pickle.MEMOIZE)

    def _get(self, key: Any) -> bool:
        index = self.memo.get(key)
        if index is None:
            return False
        self.write(pickle.BINGET + bytes([index]) if index < 256 else pickle.LONG_BINGET + struct.pack("<I", index))
        return True

    def global_(self, module: str, name: str) -> None:
        if self._get(("global", module, name)):
            return
        self.value(module)
        self.value(name)
        self.write(pickle.STACK_GLOBAL)
        self._memoize(("global", module, name))

    def value(self, obj: Any) -> None:
        if obj is None:
            self.write(pickle.NONE)
        elif obj is True or obj is False:
            self.write(pickle.NEWTRUE if obj else pickle.NEWFALSE)
        elif isinstance(obj, int):
            self._int(obj)
        elif isinstance(obj, float):
            self.write(pickle.BINFLOAT + struct.pack(">d", obj))
        elif isinstance(obj, str):
            self._str(obj)
        elif isinstance(obj, dict):
            self.write(pickle.EMPTY_DICT)
            self._batched(list(obj.items()), pickle.SETITEMS, pair=True)
        elif isinstance(obj, list | tuple):
            self.write(pickle.EMPTY_LIST)
            self._batched(list(obj), pickle.APPENDS)
        elif isinstance(obj, set | frozenset):
            self.write(pickle.EMPTY_SET)
            self._batched(sorted(obj), pickle.ADDITEMS)
        else:
            raise TypeError(f"cannot write {type(obj).__name__} into an Agent Zero index.pkl")

    def _int(self, number: int) -> None:
        if 0 <= number < 256:
            self.write(pickle.BININT1 + bytes([number]))
        elif 0 <= number < 65536:
            self.write(pickle.BININT2 + struct.pack("<H", number))
        elif -(2**31) <= number < 2**31:
            self.write(pickle.BININT + struct.pack("<i", number))
        else:
            encoded = number.to_bytes((number.bit_length() + 8) // 8, "little", signed=True)
            head = (
                pickle.LONG1 + bytes([len(encoded)])
                if len(encoded) < 256
                else pickle.LONG4 + struct.pack("<i", len(encoded))
            )
            self.write(head + encoded)

    def _str(self, text: str) -> None:
        if self._get(("str", text)):
            return
        encoded = text.encode("utf-8", "surrogatepass")
        if len(encoded) < 256:
            self.write(pickle.SHORT_BINUNICODE + bytes([len(encoded)]) + encoded)
        elif len(encoded) < 2**32:
            self.write(pickle.BINUNICODE + struct.pack("<I", len(encoded)) + encoded)
        else:
            self.write(pickle.BINUNICODE8 + struct.pack("<Q", len(encoded)) + encoded)
        self._memoize(("str", text))

    def _batched(self, items: list[Any], opcode: bytes, pair: bool = False) -> None:
        for start in range(0, len(items), 1000):  # pickle's own batch size
            self.write(pickle.MARK)
            for item in items[start : start + 1000]:
                if pair:
                    self.value(item[0])
                    self.value(item[1])
                else:
                    self.value(item)
            self.write(opcode)

    def document(self, doc_id: str, text: str, metadata: dict[str, Any]) -> None:
        fields = {"id": doc_id, "metadata": metadata, "page_content": text, "type": "Document"}
        self.global_(*DOCUMENT_GLOBAL)
        self.write(pickle.EMPTY_TUPLE + pickle.NEWOBJ)
        self.write(pickle.EMPTY_DICT + pickle.MARK)
        self.value("__dict__")
        self.value(fields)
        self.value("__pydantic_extra__")
        self.value(None)
        self.value("__pydantic_fields_set__")
        self.value({"id", "metadata", "page_content"})
        self.value("__pydantic_private__")
        self.value(None)
        self.write(pickle.SETITEMS + pickle.BUILD)

    def getvalue(self) -> bytes:
        return self.out.getvalue() + pickle.STOP


def dump_index_pkl(documents: Iterable[tuple[str, str, dict[str, Any]]]) -> bytes:
    """index.pkl for (id, text, A0 metadata) in row order, exactly the shape FAISS.save_local writes."""
    writer = _PickleWriter()
    ids: list[str] = []
    writer.global_(*DOCSTORE_GLOBAL)
    writer.write(pickle.EMPTY_TUPLE + pickle.NEWOBJ)
    writer.write(pickle.EMPTY_DICT + pickle.MARK)
    writer.value("_dict")
    writer.write(pickle.EMPTY_DICT)
    batch = 0
    writer.write(pickle.MARK)
    for doc_id, text, metadata in documents:
        if batch == 1000:
            writer.write(pickle.SETITEMS + pickle.MARK)
            batch = 0
        writer.value(doc_id)
        writer.document(doc_id, text, metadata)
        ids.append(doc_id)
        batch += 1
    writer.write(pickle.SETITEMS)  # the _dict items
    writer.write(pickle.SETITEMS + pickle.BUILD)  # {"_dict": ...} into the docstore
    writer.value(dict(enumerate(ids)))
    writer.write(pickle.TUPLE2)
    return writer.getvalue()
