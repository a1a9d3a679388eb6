"""The benchmark data formats the evals plugin registers (evals/plugin.py ``register_formats``) and the versions of
their parsers, which an eval workspace's ``IngestMarker`` compares (evals/architectures.py): one table, so a format
added here is registered and version-checked alike."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

    from synthex.core.importers.formats import FormatParser


def benchmark_formats() -> dict[str, tuple[FormatParser, ModuleType]]:
    """Each benchmark format: its parser and the module that parses it. ``locomo-turns`` (one record per LoCoMo
    dialogue turn) and ``longmemeval-turns-<protocol>`` (one per LongMemEval haystack turn, official or
    any-session; the mempalace protocol reads the official ones)."""
    from evals.benchmarks.locomo import data as locomo
    from evals.benchmarks.longmemeval import data as longmemeval

    formats: dict[str, tuple[FormatParser, ModuleType]] = {
        "locomo-turns": (lambda path, _intake: locomo.parse_turns(path), locomo)}
    for protocol in dict.fromkeys(longmemeval.TURN_RECORDS.values()):
        formats[f"longmemeval-turns-{protocol}"] = (longmemeval.turn_items(protocol), longmemeval)
    return formats


def benchmark_parser_versions() -> dict[str, str]:
    """The version of each benchmark format's parser: the source of the module that parses it (``module_version``),
    so an edit of a parser or of the loader beside it (a new metadata field) is a new version; an edit elsewhere
    in the module (a metric) costs one cold re-ingest too: the safe side."""
    from synthex.core.importers.formats import module_version

    modules = {name: module for name, (_, module) in benchmark_formats().items()}
    versions = {module.__name__: module_version(module) for module in modules.values()}  # each module read once
    return {name: versions[module.__name__] for name, module in modules.items()}
