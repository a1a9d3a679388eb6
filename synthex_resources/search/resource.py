"""SearchResource: DAG-aware search as a Dagster resource (or plain Python: ``SearchResource(uri=...)``)."""

from __future__ import annotations

from typing import Any

from dagster import ConfigurableResource

from synthex_resources.record_store import open_store
from synthex_resources.search.engine import SearchEngine, SearchHit
from synthex_resources.search.recipes import RECIPES, SearchConfig


class SearchResource(ConfigurableResource):
    uri: str
    default_steps: list[str] = []
    mode: str = "hybrid"
    k: int = 10

    def engine(self) -> SearchEngine:
        return SearchEngine(open_store(self.uri))

    def search(self, query: str, step: str | list[str] | None = None, branch: str = "main", k: int | None = None,
               mode: str | None = None, exact: bool = False, periods: list[str] | None = None,
               metadata: dict[str, Any] | None = None, config: SearchConfig | None = None) -> list[SearchHit]:
        steps = [step] if isinstance(step, str) else (list(step) if step else list(self.default_steps) or None)
        chosen = config or RECIPES[mode or self.mode]
        return self.engine().search(query, steps=steps, branch=branch, k=k or self.k, config=chosen,
                                    periods=periods, metadata=metadata, exact=exact)
