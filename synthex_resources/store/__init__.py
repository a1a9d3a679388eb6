"""The record store's typed parts (see synthex_resources.record_store)."""
