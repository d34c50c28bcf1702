"""Agent Zero memory folders: import them without trusting the pickle, export curated stores back.

The package, one job per module (the folder format itself is described in `folder`):

- `pickle_read`: the restricted unpickler for index.pkl (only the three globals Agent Zero uses);
- `folder`: the folder layout, reading it (documents, vectors, embedding.json, timestamps) and the
  `memctl_sync.json` sidecar;
- `importer`: `import-agent-zero` and its `--sync`;
- `pickle_write`: index.pkl written by hand, opcode by opcode (LangChain is never imported);
- `exporter`: `export-agent-zero`, built beside the destination and swapped into place.

Every name is re-exported here: `from memctl.agent_zero import ...` works as before the split.
"""

from __future__ import annotations

from memctl.agent_zero.exporter import (
    AgentZeroExportReport,
    a0_metadata,
    check_destination,
    export_agent_zero,
)
from memctl.agent_zero.folder import (
    A0_AREA_KEY,
    A0_COLUMN_KEYS,
    A0_KEY,
    A0_TIME_FORMAT,
    EMBEDDING_JSON,
    INDEX_FAISS,
    KNOWLEDGE_IMPORT,
    SHA_SIDECAR,
    SYNC_FILE,
    SYNC_VERSION,
    AgentZeroDocument,
    AgentZeroFolder,
    Notes,
    a0_embedding,
    a0_time_to_iso,
    document_hash,
    folder_state,
    iso_to_a0_time,
    model_matches,
    parse_timezone,
    read_agent_zero,
    sync_base,
    write_sync_base,
)
from memctl.agent_zero.importer import (
    AgentZeroImportReport,
    AgentZeroSyncReport,
    import_agent_zero,
    sync_agent_zero,
)
from memctl.agent_zero.pickle_read import (
    AREA_GLOBAL,
    DOCSTORE_GLOBAL,
    DOCUMENT_GLOBAL,
    INDEX_PKL,
    load_index_pkl,
)
from memctl.agent_zero.pickle_write import dump_index_pkl

__all__ = [
    "A0_AREA_KEY",
    "A0_COLUMN_KEYS",
    "A0_KEY",
    "A0_TIME_FORMAT",
    "AREA_GLOBAL",
    "DOCSTORE_GLOBAL",
    "DOCUMENT_GLOBAL",
    "EMBEDDING_JSON",
    "INDEX_FAISS",
    "INDEX_PKL",
    "KNOWLEDGE_IMPORT",
    "SHA_SIDECAR",
    "SYNC_FILE",
    "SYNC_VERSION",
    "AgentZeroDocument",
    "AgentZeroExportReport",
    "AgentZeroFolder",
    "AgentZeroImportReport",
    "AgentZeroSyncReport",
    "Notes",
    "a0_embedding",
    "a0_metadata",
    "a0_time_to_iso",
    "check_destination",
    "document_hash",
    "dump_index_pkl",
    "export_agent_zero",
    "folder_state",
    "import_agent_zero",
    "iso_to_a0_time",
    "load_index_pkl",
    "model_matches",
    "parse_timezone",
    "read_agent_zero",
    "sync_agent_zero",
    "sync_base",
    "write_sync_base",
]
