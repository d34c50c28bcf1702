"""The PostgreSQL + pgvector backend: many agents on many machines share one database.

One database (or one schema of it: `?options=-csearch_path%3Dmemctl,public`) holds every store;
a store is the rows of one `subdir`. Vectors live in a pgvector column with an HNSW index
(inner product) per dimension; keyword search is PostgreSQL full-text search (a generated
tsvector column under a GIN index, ranked by ts_rank_cd) fed into the same fusion as the
embedded store (memctl/store/base.py). Writers use ordinary transactions and row locks — no
store-wide lock — so any number of processes can write at once; ids are unique per subdir by a
constraint. The schema is created and migrated on first use (memctl/store/pg_schema.py).

psycopg and pgvector are imported in this package only, so the embedded path never loads them.

PostgresStore is one linear chain of classes, a module each:
connection.py (_PostgresConnection: connecting, statements, transactions, counts, model record, vector index)
-> rows.py (_PostgresRows: writing, reading, archiving, history, pending, doctor runs)
-> search.py (_PostgresSearch: dense and keyword candidates)
-> store.py (PostgresStore: opening, maintenance, purging, behaviour, knowledge state, interop; database_stores).
"""

from memctl.store.postgres.connection import (
    CONNECT_TIMEOUT,
    COUNT_SLOTS_MAX,
    HNSW_BUILD_MEMORY_MAX_MB,
    HNSW_EF_SEARCH,
    connect,
    redact,
)
from memctl.store.postgres.rows import TOUCH_WAIT
from memctl.store.postgres.search import EXACT_FILTERED_MAX, EXACT_MAX
from memctl.store.postgres.store import PostgresStore, database_stores

__all__ = [
    "CONNECT_TIMEOUT",
    "COUNT_SLOTS_MAX",
    "EXACT_FILTERED_MAX",
    "EXACT_MAX",
    "HNSW_BUILD_MEMORY_MAX_MB",
    "HNSW_EF_SEARCH",
    "TOUCH_WAIT",
    "PostgresStore",
    "connect",
    "database_stores",
    "redact",
]
