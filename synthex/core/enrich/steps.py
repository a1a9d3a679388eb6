"""Enrichment as a step: ``fn=`` functions for ``pipeline.transform`` that write a record's index text.

The enriched record is what the lexical and dense legs index (its text plus one line of entities,
resolved dates and topics); its source, the raw record, is what a drill-down shows. Pair it with a
leaf-scoring search (the ``conversational`` recipe, or ``synthex search`` then ``lineage``).
"""

from __future__ import annotations

from synthex.core.enrich import enrichment_text
from synthex.core.record import Record


def record_time(record: Record) -> str | None:
    """When the record was said or written (its source's time), not when it was stored."""
    return record.meta("time.created_at") or record.created_at or None


# The embedder reads about the first 256 tokens of a text: past this size the line goes first, so the
# vector of a long conversation still covers its names and dates.
LONG_RECORD_CHARS = 1000


def with_enrichment(record: Record) -> str:
    """The record's text and, on a line of its own, its entities, resolved dates and topics (after a
    short text, before a long one)."""
    line = enrichment_text(record.content, record_time(record))
    if not line:
        return record.content
    return f"{line}\n{record.content}" if len(record.content) > LONG_RECORD_CHARS else f"{record.content}\n{line}"
