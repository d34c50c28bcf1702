"""The embedded store: one folder with memories.sqlite (truth), index.faiss (derived), embedding.json.

EmbeddedStore is built in four layers, one module each, every one over the one before:
database.py (opening, locking, the write transaction), rows.py (the tables' SQL), search.py (the vector
index and the search primitives) and store.py (finding stores, maintenance, the archive, behaviour,
knowledge state, whole-store copies)."""

from memctl.store.embedded.store import EmbeddedStore, _hashes_in_folder_stores, check_store_folder, stored_count

__all__ = ["EmbeddedStore", "_hashes_in_folder_stores", "check_store_folder", "stored_count"]
