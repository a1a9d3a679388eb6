"""Newer statements first: a wrapper strategy that moves a hit above an older hit saying the same thing.

A knowledge update ("I have three bikes" in March, "I just got a fourth bike" in May) leaves two turns
that both match the question; a ranking by relevance alone puts either first, and an agent reading the
first hit then answers with the stale fact (LongMemEval's knowledge-update questions; freshness, design
doc §9.2). This strategy runs its ``inner`` strategy, then, among the top ``window`` hits, lifts each hit
just above the best-ranked hit that is older (an earlier statement time: ``stated_at``, the record's
``time.created_at``, when what it says was said, not when the record was written) and says the same thing: the
cosine of their two vectors reaches ``same_cosine`` (near-duplicate statements of one fact). Nothing else
moves, so a hit never leaves the top ``window`` and hits that state different things keep their order;
hits without a date or a vector take no part. No model beyond the vectors already stored.

Invariant: the hits are the inner strategy's, permuted within its top ``window`` (the set of the top
``window`` and everything after it unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from synthex_resources.search.strategies.base import SearchStrategy, param
from synthex_resources.search.strategies.hierarchical import DrillDown
from synthex_resources.search.types import SearchBackend, SearchHit, SearchRequest, SearchResults

# Words by which a question asks for the present state of something ("What is my current ...", "How many ...
# now", "... since I started", "my most recent visit"): the questions a newer statement answers and an older
# one answers wrongly. Not "when"/"first": those ask for one event, often not the latest.
PRESENT_CUES = frozenset({"current", "currently", "now", "latest", "recent", "recently", "still", "since"})

# A question by which the asker asks about their own present state without a cue word ("How many bikes do I
# own?", "What brand of BBQ sauce am I obsessed with?", "How many projects have I completed?"): a first-person
# word and a present-tense (or present-perfect) auxiliary, and no past-tense one ("When did I go to Paris?"
# asks for one event). Tokens as ``tokenize`` gives them ("don't" -> "don", "t"; "I'm" -> "i", "m"). "us" is not
# among the first-person words: lower-cased, it is also "US". English only, like PRESENT_CUES; not fitted to
# question ids (docs/benchmarks.md: the counts it opens on both benchmarks' questions).
FIRST_PERSON = frozenset({"i", "my", "me", "mine", "myself", "we", "our", "ours"})
PRESENT_AUXILIARIES = frozenset({"do", "does", "am", "is", "are", "have", "has", "m", "ve", "don", "doesn", "isn",
                                 "aren", "haven", "hasn"})
PAST_AUXILIARIES = frozenset({"did", "was", "were", "had", "didn", "wasn", "weren", "hadn"})


def asks_about_own_present(words: set[str]) -> bool:
    """The question's tokens hold a first-person word and a present auxiliary but no past one."""
    return (not FIRST_PERSON.isdisjoint(words) and not PRESENT_AUXILIARIES.isdisjoint(words)
            and PAST_AUXILIARIES.isdisjoint(words))

if TYPE_CHECKING:  # numpy is imported where a search runs: the registry (loaded by `--help`) needs none
    import numpy as np


def stated_at(hit: SearchHit) -> str:
    """When what ``hit`` says was said: its ``time.created_at`` (a chat turn's session date; §3.4's reserved
    key), "" when it has none. Not ``hit.created_at``, the time the record was written: every record of one
    ingest is written within milliseconds, in the order of the source, so comparing those says nothing of
    which statement is newer and changes from one build to the next."""
    value = hit.meta("time.created_at")
    return value if isinstance(value, str) else ""


def newer_first(hits: list[SearchHit], vectors: dict[str, np.ndarray], same_cosine: float, margin: float = 0.0,
                score_ratio: float = 0.0, median_other_times: bool = False) -> list[SearchHit]:
    """``hits`` with each one moved just above the first-ranked older hit (an earlier ``stated_at``) that says the
    same thing: the cosine of their vectors reaches ``same_cosine`` and exceeds by ``margin`` the moving hit's
    median cosine with the other hits (a pair that stands out, not a memory whose texts all look alike), and
    the moving hit's score is at least ``score_ratio`` of the older one's. ``median_other_times``: that median
    leaves out the hits stated at either statement's time (their own sessions' turns, which share their time
    and subject, so they say nothing about whether the pair stands out from the rest). Taken in rank order,
    so of three statements of one fact the newest ends first."""
    import numpy as np

    order = list(hits)
    unit = {hit_id: v / n for hit_id, v in vectors.items() if (n := float(np.linalg.norm(v))) > 0}
    ids = [h.id for h in order if h.id in unit]
    matrix = np.stack([unit[i] for i in ids]) if ids else np.zeros((0, 1))
    cosines = dict(zip(ids, matrix @ matrix.T, strict=True)) if ids else {}
    column = {hit_id: j for j, hit_id in enumerate(ids)}
    when = {h.id: stated_at(h) for h in order}
    for hit in list(order):
        if not when[hit.id] or hit.id not in unit:
            continue
        row = cosines[hit.id]
        at = order.index(hit)
        for above in range(at):
            other = order[above]
            if not (when[other.id] and when[other.id] < when[hit.id] and other.id in unit):
                continue
            others = [row[column[i]] for i in ids if i != hit.id and not (
                median_other_times and when[i] in (when[hit.id], when[other.id]))]
            floor = max(same_cosine, float(np.median(others)) + margin) if others else same_cosine
            if float(row[column[other.id]]) >= floor and hit.score >= score_ratio * other.score:
                order.insert(above, order.pop(at))
                break
    return order


@dataclass(frozen=True, kw_only=True)
class FreshFirst(SearchStrategy):
    """``inner``'s ranking with newer statements of the same thing first (module docstring)."""

    kind: ClassVar[str] = "fresh-first"

    inner: SearchStrategy = param(DrillDown(), doc="the strategy whose ranking is reordered")
    window: int = param(10, low=2, doc="the top hits reordered (none leaves them)")
    same_cosine: float = param(0.6, low=0.0, high=1.0, doc="cosine of two hits' vectors from which they state "
                                                            "the same thing (the newer one then ranks first)")
    margin: float = param(0.0, low=0.0, high=1.0, doc="the pair's cosine also this much above the newer hit's median "
                                                      "cosine with the other top hits")
    score_ratio: float = param(0.0, low=0.0, high=1.0, doc="the newer hit's score at least this share of the older's")
    present_only: bool = param(False, doc="reorder only for a question with a word of PRESENT_CUES (current, now, "
                                          "since...), one asking for the present state")
    median_other_times: bool = param(False, doc="the pair's band is compared with the newer hit's median cosine "
                                                 "with the top hits stated at other times than the pair's")
    own_present: bool = param(False, doc="with present_only, also for a question in which the asker asks about "
                                         "their own present state (a first-person word and a present-tense "
                                         "auxiliary, no past one: asks_about_own_present)")

    @property
    def takes_metadata_filter(self) -> bool:  # type: ignore[override]
        return self.inner.takes_metadata_filter

    @property
    def ranks_searched_records(self) -> bool:  # type: ignore[override]
        return self.inner.ranks_searched_records

    def search(self, engine: SearchBackend, request: SearchRequest) -> SearchResults:
        inner = self.inner if self.reranker is None else replace(self.inner, reranker=self.reranker)
        found = inner.search(engine, request)
        return SearchResults(self.reordered(engine, found, request.query), found.warnings, found.mode)

    def applies_to(self, query: str) -> bool:
        from synthex_resources.search.tokenize import tokenize

        if not self.present_only:
            return True
        words = set(tokenize(query))
        return not PRESENT_CUES.isdisjoint(words) or (self.own_present and asks_about_own_present(words))

    def reordered(self, engine: SearchBackend, hits: list[SearchHit], query: str) -> list[SearchHit]:
        """``hits`` (the inner strategy's for ``query``, best first) with the top ``window`` reordered (vectors read
        from the store), or as they are when the question asks for no present state and ``present_only``."""
        import numpy as np

        if not self.applies_to(query):
            return list(hits)
        top = list(hits[: self.window])
        rows = engine.store.records.rows_by_id([h.id for h in top], ["id", "vector"]) if len(top) > 1 else {}
        vectors = {i: np.asarray(r["vector"], dtype=np.float32) for i, r in rows.items() if r.get("vector") is not None}
        return newer_first(top, vectors, self.same_cosine, self.margin, self.score_ratio,
                           self.median_other_times) + list(hits[self.window:])
