"""Dagster resources (usable from plain Python too): record store, LLM, embedder."""

from synthex_resources.embedder import EmbedderResource, MiniLMOnnxEmbedder, get_embedder
from synthex_resources.llm import LLMResource, OpenAICompleter
from synthex_resources.record_store import RecordStore, RecordStoreResource, open_store
from synthex_resources.search import SearchEngine, SearchResource

__all__ = [
    "EmbedderResource",
    "LLMResource",
    "MiniLMOnnxEmbedder",
    "OpenAICompleter",
    "RecordStore",
    "RecordStoreResource",
    "SearchEngine",
    "SearchResource",
    "get_embedder",
    "open_store",
]
