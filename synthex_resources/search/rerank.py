"""An LLM reranker for a search strategy's ``reranker`` (``strategy.with_(reranker=...)``): one model
call per query.

The other implementation of the same interface is the offline cross-encoder (search/cross_encoder.py); both
are named in search/rerankers.py. This one is a model behind the LLM resource: the top ``top_n`` hits are
listed numbered (short excerpts) and the model replies with the numbers in order of relevance.

The reply is parsed leniently (``[3]``, ``3.``, ``#3``, "3, 1, 2"; dates, times and out-of-range
numbers are ignored; repeats count once). Hits the reply names come first, in its order; the other
top hits keep their order after them; hits past ``top_n`` follow unchanged. Wall time per call goes to
``stats.latencies``. The prompt gives no example order: a small model copies it.

A reply that names no hit, or a failed call, leaves the order as it was (the search still answers, as
it would without ``--rerank``) and is said, never swallowed: ``rerank`` returns a ``SearchWarning``
naming the problem (the search passes it on: ``SearchResults.warnings``, which ``synthex search``
prints and the MCP tool returns), it is logged on the ``synthex.search`` logger and counted in
``stats.failures``.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from synthex.core.llm import Completer
from synthex.core.redact import redact
from synthex_resources.search.types import Reranked, Reranker, SearchProblem, SearchWarning, log

RERANK_PROMPT = """Rank the excerpts by how well they answer the question.

Question: {query}

Excerpts:
{excerpts}

Reply with the numbers of the excerpts only, most relevant first, separated by commas."""

# A number standing on its own: not part of a date (2023-05-08), a time (1:56), a decimal or a word.
_NUMBER = re.compile(r"(?<![\w:./-])(\d{1,3})(?![\w:/]|[.-]\d)")


@dataclass
class RerankStats:
    calls: int = 0
    failures: int = 0  # replies that named no listed hit, or calls that raised: the order was kept
    latencies: list[float] = field(default_factory=list)  # seconds per model call
    replies: list[str] = field(default_factory=list)  # the model's replies, in call order (for inspection)

    def to_dict(self) -> dict[str, Any]:
        lat = sorted(self.latencies)

        def pct(p: float) -> float | None:
            return round(lat[min(len(lat) - 1, int(p * len(lat)))], 3) if lat else None

        return {"calls": self.calls, "failures": self.failures, "p50_s": pct(0.5), "p95_s": pct(0.95),
                "mean_s": round(sum(lat) / len(lat), 3) if lat else None}


def excerpt(text: str, chars: int) -> str:
    """One line of at most ``chars`` characters (cut at a word)."""
    flat = " ".join(text.split())
    if len(flat) <= chars:
        return flat
    cut = flat[:chars].rsplit(" ", 1)[0]
    return (cut or flat[:chars]) + " ..."


def parse_order(reply: str, n: int) -> list[int]:
    """The 0-based indexes of ``n`` listed items that ``reply`` names, in the order it names them."""
    out: list[int] = []
    for match in _NUMBER.finditer(reply):
        i = int(match.group(1))
        if 1 <= i <= n and i - 1 not in out:
            out.append(i - 1)
    return out


class LLMReranker(Reranker):
    """Reorders the top ``top_n`` hits with one model call: ``rerank(query, hits)`` (the hits and a
    warning when it could not), or ``reranker(query, hits) -> hits``."""

    name = "llm"

    def __init__(self, completer: Completer, model: str | None = None, top_n: int = 20,
                 excerpt_chars: int = 160, temperature: float = 0.0, prompt: str = RERANK_PROMPT) -> None:
        self.completer = completer
        self.model = model
        self.top_n = top_n
        self.excerpt_chars = excerpt_chars
        self.temperature = temperature
        self.template = prompt
        self.stats = RerankStats()
        self._lock = threading.Lock()

    def prompt(self, query: str, hits: Sequence[Any]) -> str:
        lines = "\n".join(f"[{i}] {excerpt(h.content, self.excerpt_chars)}" for i, h in enumerate(hits, 1))
        return self.template.format(query=query.strip(), excerpts=lines)

    def order(self, query: str, hits: Sequence[Any]) -> list[int] | None:
        """The model's order of ``hits`` (0-based, every hit once), or None when it gave none."""
        order, _warning = self._order(query, hits)
        return order

    def _order(self, query: str, hits: Sequence[Any]) -> tuple[list[int] | None, SearchWarning | None]:
        start = time.perf_counter()
        reply = ""
        warning = None
        try:
            [completion] = self.completer.complete_many([self.prompt(query, hits)], self.model, self.temperature)
            reply = completion.text
            named = parse_order(reply, len(hits))
            if not named:
                warning = SearchWarning(SearchProblem.RERANK_UNUSABLE_REPLY, self.name,
                                        f"reply: {excerpt(reply, 80)!r}")
        except Exception as exc:  # the search answers in first-stage order, and says why (below)
            named = []
            message = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            warning = SearchWarning(SearchProblem.RERANK_CALL_FAILED, self.name, redact(message))
        elapsed = time.perf_counter() - start
        with self._lock:
            self.stats.calls += 1
            self.stats.latencies.append(elapsed)
            self.stats.replies.append(reply)
            if not named:
                self.stats.failures += 1
        if warning is not None:
            log.warning("%s", warning)
        if not named:
            return None, warning
        return named + [i for i in range(len(hits)) if i not in named], None

    def rerank(self, query: str, hits: Sequence[Any]) -> Reranked:
        head, tail = list(hits[: self.top_n]), list(hits[self.top_n:])
        if len(head) < 2:
            return Reranked(list(hits))
        order, warning = self._order(query, head)
        if order is None:
            return Reranked(list(hits), warning)
        return Reranked([head[i] for i in order] + tail)

    def __call__(self, query: str, hits: list[Any]) -> list[Any]:
        return self.rerank(query, hits).hits
