"""Public alias of ``synthex.core.enrich.steps`` (the path the ``enriched`` template wrote before 0.2)."""

from synthex.core.enrich.steps import record_time, with_enrichment

__all__ = ["record_time", "with_enrichment"]
