"""Knowledge folders: readers (files to chunks) and sync (incremental import into a store)."""
