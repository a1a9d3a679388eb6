"""What search keeps per table version, one module per structure, on one base (``versioned.py``):
the dense matrix and its IVF index (``dense_index``, ``ann``), BM25 over persisted postings (``postings``)
or, for an encrypted store, in memory (``memory_lexical``; both score with ``bm25``), the leaf-sum
bookkeeping per scope (``leaf_scope``, with ``id_lookup``), and what they are saved in beside the table
(``sidecar``). The store's instances are the named attributes of its ``SearchState`` (search/state.py)."""
