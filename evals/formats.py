"""The versions of the benchmark formats' parsers the evals plugin registers (evals/plugin.py
``register_formats``), which an eval workspace's ``IngestMarker`` compares (evals/architectures.py)."""

from __future__ import annotations


def benchmark_parser_versions() -> dict[str, str]:
    """The version of each format ``register_formats`` adds: the source of the module that parses it
    (``module_version``), so an edit of a parser or of the loader beside it (a new metadata field) is a new
    version; an edit elsewhere in the module (a metric) costs one cold re-ingest too: the safe side."""
    from evals.benchmarks.locomo import data as locomo
    from evals.benchmarks.longmemeval import data as longmemeval
    from synthex.core.importers.formats import module_version

    longmemeval_version = module_version(longmemeval)
    return {"locomo-turns": module_version(locomo)} | {
        f"longmemeval-turns-{protocol}": longmemeval_version for protocol in dict.fromkeys(longmemeval.TURN_RECORDS.values())}
