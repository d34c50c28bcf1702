"""A store's life: JSONL export/import (jsonl), prune, restore, purge, stats, backup, migrate, receipts.

Core only (no typer/rich): the CLI's lifecycle commands call one function each.
"""
