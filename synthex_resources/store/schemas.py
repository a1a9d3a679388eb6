"""The store's tables and their Arrow schemas."""

from __future__ import annotations

import pyarrow as pa

RECORDS, RUNS, RUN_STEPS, LLM_CACHE = "records", "runs", "run_steps", "llm_cache"
HOOK_DELIVERIES = "hook_deliveries"
# A record id is a content address (no branch in it); a row is one branch's copy of a record.
ROW_KEY = ["id", "branch"]
LIGHT_COLUMNS = ["id", "content", "step", "branch", "period", "sources", "materialization_key", "run_id",
                 "created_at", "metadata", "audit"]


# The records table's schema metadata key naming the embedder that wrote its vectors (``Embedder.name``):
# written when the table is created; a store opened with another embedder is refused (RecordStore.embedder).
EMBEDDER_METADATA_KEY = b"synthex:embedder"


def records_schema(dim: int, embedder: str | None = None) -> pa.Schema:
    """The records table's schema; ``embedder``: the name recorded in its metadata (None: none)."""
    metadata = {EMBEDDER_METADATA_KEY: embedder.encode()} if embedder else None
    return pa.schema([
        ("id", pa.string()),
        ("content", pa.string()),
        ("step", pa.string()),
        ("branch", pa.string()),
        ("period", pa.string()),
        ("sources", pa.list_(pa.string())),
        ("materialization_key", pa.string()),
        ("run_id", pa.string()),
        ("created_at", pa.string()),
        ("fingerprint", pa.string()),
        ("metadata", pa.string()),  # JSON: reserved keys of §3.4 and custom.*
        ("audit", pa.string()),  # JSON: prompt_template_hash, rendered_prompt_hash, model, ...
        ("vector", pa.list_(pa.float32(), dim)),
    ], metadata=metadata)


RUNS_SCHEMA = pa.schema([("id", pa.string()), ("pipeline", pa.string()), ("branch", pa.string()),
                         ("status", pa.string()), ("started_at", pa.string()), ("data", pa.string())])
RUN_STEPS_SCHEMA = pa.schema([("id", pa.string()), ("run_id", pa.string()), ("pipeline", pa.string()),
                              ("branch", pa.string()), ("step", pa.string()), ("period", pa.string()),
                              ("recorded_at", pa.string()), ("stats", pa.string())])
CACHE_SCHEMA = pa.schema([("key", pa.string()), ("model", pa.string()), ("response", pa.string()),
                          ("raw", pa.string()), ("tokens_in", pa.int64()), ("tokens_out", pa.int64())])
