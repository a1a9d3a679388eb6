"""Public alias of ``synthex.core.enrich``: LLM-free enrichment for a project's pipeline.py (the paths
``synthex.enrich`` and ``synthex.enrich.steps`` that earlier templates wrote keep working)."""

from synthex.core.enrich import (
    ResolvedDate,
    enrichment_text,
    entities,
    format_date,
    noun_phrases,
    parse_anchor,
    resolve_dates,
)
from synthex.core.enrich.steps import with_enrichment

__all__ = ["ResolvedDate", "enrichment_text", "entities", "format_date", "noun_phrases", "parse_anchor",
           "resolve_dates", "with_enrichment"]
