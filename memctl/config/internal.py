"""Settings memctl reads that are not user configuration: batch sizes, index parameters, and the
thresholds that were fitted on the tune half of the evaluation corpus.

They were config keys until the reference grew to 77 keys; a user set none of them, and a changed
fitted threshold invalidates the figures it was fitted for. Files and MEMCTL_<KEY> variables that
still set one get a warning and are ignored (memctl.config.load_config); programs — benchmarks,
tests, the fitting scripts — may still set them, validated like any key: as `overrides`
(`memctl.open_store(..., overrides={"index_ivf_min_size": 3000})`) or, for the CLI, as
MEMCTL_INTERNAL_<KEY> variables. Not a stable interface.
"""

from __future__ import annotations

from typing import Any

INTERNAL: dict[str, Any] = {
    # -- embeddings, index, batches -----------------------------------------------------------------
    "embedding_batch_size": 64,  # texts embedded per model call
    "index_type": "auto",  # flat (exact) below index_ivf_min_size memories, FAISS IVF from there on
    "index_ivf_min_size": 200_000,
    "index_nprobe": 32,  # IVF lists probed per search: higher is more exact and slower
    "index_checkpoint_every": 2000,  # index journal entries before index.faiss is rewritten
    "import_batch_size": 500,  # records per transaction of `import`
    "forget_batch_size": 100,  # memories deleted per transaction by `forget`
    "list_page_size": 20,  # memories per page of `list` (--limit sets it per call)
    "filter_max_length": 500,  # longest metadata filter expression, in characters
    # -- recall and ranking ---------------------------------------------------------------------------
    "recall_memories_max_search": 12,  # candidates recall searches in main + fragments
    "recall_solutions_max_search": 8,  # candidates recall searches in solutions
    "prune_default_importance": 0.5,  # importance of a memory without a numeric metadata `importance`
    # -- knowledge folders ----------------------------------------------------------------------------
    "knowledge_importance": 0.6,  # importance given to imported knowledge chunks
    # -- utility model calls --------------------------------------------------------------------------
    "utility_retries": 1,  # further tries of a failed call: at most (1 + retries) x utility_timeout
    "utility_temperature": 0.0,  # greedy: the same transcript gives the same candidates
    "utility_max_tokens": 2048,
    "utility_fold_system": "auto",  # system prompt into the first user turn: auto (gemma-like formats), always, never
    "utility_client": "auto",  # the OpenAI SDK for openai/... with utility_api_base, litellm otherwise
    "memorize_max_history_chars": 80_000,  # transcript characters given to extraction (oldest part dropped)
    # -- memorize: fitted on the tune half (bench/memory_quality.py, bench/quality_gate.py) ------------
    # Consolidation may remove (replace/merge) only memories at least this similar to the new one; with
    # memorize_consolidation false, same-area memories at or above it are replaced. (It merges the two
    # thresholds memorize_replace_threshold and replace_similarity_threshold, both 0.9.)
    "replace_similarity_threshold": 0.9,
    "consolidation_threshold": 0.75,  # relevance at which a stored memory is shown to the consolidation call
    "consolidation_keyword_overlap": 0.6,  # shared content-word share that also shows it; above 1: off
    # The fitted update safety (memctl/memorize/same_slot.py) decides instead of the two keys above where the
    # embedding model has one (e5, MiniLM); false: the two keys decide.
    "consolidation_same_slot": True,
    "consolidation_search_limit": 10,  # similar memories considered per candidate (per query)
    "importance_base": 0.5,  # importance memorize starts each kept memory at
    "importance_keep_boost": 0.3,  # added when said as something to keep ("always", 以后都 …)
    "importance_one_off_penalty": 0.2,  # taken away when said as a one-off ("today", 这次 …)
    "memorize_grounding_overlap": 0.3,  # content-word share a candidate must find in user/tool messages
    "memorize_grounding_similarity": 0.8,  # relevance to a user/tool message that grounds it by meaning
    "memorize_echo_similarity": 0.9,  # relevance to a recalled memory at which a candidate is only its echo
    # -- doctor's measures (docs/doctor.md) ---------------------------------------------------------------
    "doctor_duplicate_similarity": 0.95,  # (1 + cosine) / 2 from which two memories are near-duplicates
    "doctor_conflict_similarity": 0.9,  # from which two memories each holding a value the other lacks may conflict
    "doctor_stale_below": 0.1,  # decayed importance below which a memory is stale
    "doctor_never_recalled_days": 30.0,  # age from which a never-returned memory counts as never recalled
    "doctor_recall_k": 5,  # k of recall@k (`doctor --k` sets it per run)
}
