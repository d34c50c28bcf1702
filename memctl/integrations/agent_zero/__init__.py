"""Agent Zero memory folders: import them without trusting the pickle, export curated stores back.

The package, one job per module (the folder format itself is described in `folder`):

- `pickle_read`: the restricted unpickler for index.pkl (only the three globals Agent Zero uses);
- `folder`: the folder layout, reading it (documents, vectors, embedding.json, timestamps) and the
  `memctl_sync.json` sidecar;
- `importer`: `import-agent-zero` and its `--sync`;
- `pickle_write`: index.pkl written by hand, opcode by opcode (LangChain is never imported);
- `exporter`: `export-agent-zero`, built beside the destination and swapped into place.
"""
