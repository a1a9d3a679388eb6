"""Dagster resources (usable from plain Python too): record store, LLM, embedder."""

from synthex_resources.embedder import EmbedderResource, MiniLMOnnxEmbedder, get_embedder
from synthex_resources.llm import LLMResource, OpenAICompleter
from synthex_resources.record_store import RecordStore, RecordStoreResource, open_store

__all__ = [
    "EmbedderResource",
    "LLMResource",
    "MiniLMOnnxEmbedder",
    "OpenAICompleter",
    "RecordStore",
    "RecordStoreResource",
    "get_embedder",
    "open_store",
]
