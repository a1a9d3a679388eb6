"""The core: the pipeline definition, records, step kinds, source kinds, importers, enrichment, PII, the
plugin registries. Pure Python: no Dagster, no LanceDB, no PyArrow (import-linter checks it). Everything
above (storage and search, the Dagster adapter, the application, the surfaces) builds on it."""
