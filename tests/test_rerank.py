"""The LLM reranker (one model call per query, lenient parse, safe fallback) and the enrichment prompt."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from fake_openai import FakeOpenAI

from synthex.core.llm import OfflineExtractiveCompleter
from synthex.core.prompts import anticipate_questions
from synthex.core.record import Record
from synthex_resources.llm import OpenAICompleter
from synthex_resources.search.rerank import LLMReranker, parse_order


@dataclass
class Hit:
    id: str
    content: str


HITS = [Hit(f"h{i}", f"excerpt number {i} about topic {i}") for i in range(1, 7)]


def ids(hits):
    return [h.id for h in hits]


def completer(fake: FakeOpenAI) -> OpenAICompleter:
    return OpenAICompleter("fake-model", fake.base_url, "key", max_retries=0, timeout=5)


def test_reorders_as_the_model_says_and_keeps_the_unmentioned_hits():
    with FakeOpenAI(answer=lambda prompt: "The most relevant are [4], then 2.") as fake:
        reranker = LLMReranker(completer(fake), top_n=5)
        out = reranker("what about topic 4?", HITS)
        assert fake.calls == 1  # one call per query
        prompt = fake.prompts[0]
    assert ids(out) == ["h4", "h2", "h1", "h3", "h5", "h6"]  # named first; the rest (and past top_n) in order
    assert "Question: what about topic 4?" in prompt
    assert "[5] excerpt number 5" in prompt and "[6]" not in prompt  # only the top_n are listed
    assert reranker.stats.calls == 1 and reranker.stats.failures == 0 and len(reranker.stats.latencies) == 1


@pytest.mark.parametrize("reply", ["I cannot rank these.", "", "2023-05-08 at 1:56 pm", "7, 9, 0"])
def test_garbage_keeps_the_original_order_and_is_counted(reply):
    with FakeOpenAI(answer=lambda prompt: reply) as fake:
        reranker = LLMReranker(completer(fake), top_n=6)
        out = reranker("q", HITS)
    assert ids(out) == ids(HITS)
    assert reranker.stats.failures == 1


def test_a_failed_call_keeps_the_original_order():
    with FakeOpenAI(fail_first=10, fail_status=500) as fake:
        reranker = LLMReranker(completer(fake), top_n=6)
        out = reranker("q", list(reversed(HITS)))
    assert ids(out) == ids(list(reversed(HITS)))
    assert reranker.stats.failures == 1


def test_parse_is_lenient_but_ignores_dates_times_repeats_and_out_of_range():
    assert parse_order("3, 1, 3, 2", 5) == [2, 0, 1]
    assert parse_order("#2 then (5). 1.", 5) == [1, 4, 0]
    assert parse_order("On 2023-05-08 at 1:56, item 4", 5) == [3]
    assert parse_order("12, 6, 0", 5) == []


def test_enrichment_prompt_renders_and_the_stand_in_echoes_no_instruction():
    turn = Record(id="t1", content="Caroline: I went to a LGBTQ support group yesterday and it was so powerful. "
                                   "The stories of the other members made me want to help people too.",
                  step="turns", metadata={"time": {"created_at": "2023-05-08T13:56:00"}})
    prompt = anticipate_questions(turn)
    assert turn.content in prompt and "2023-05-08" in prompt
    [out] = OfflineExtractiveCompleter().complete_many([prompt], None, 0.0)
    assert out.text.strip()
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", out.text) if s.strip()]
    assert sentences and all(s in turn.content for s in sentences)  # whole sentences of the record only
    for instruction in ("Read this message", "Write one sentence", "three short questions", "everyday words",
                        "Gist and questions", "## Message", "Date:"):
        assert instruction not in out.text


def _chat_records() -> list[Record]:
    out = []
    for i, topic in enumerate(["hiking at the lake", "a zebra finch", "sourdough bread", "the lake cabin",
                               "a chess game", "lake swimming"]):
        rid = f"t{i}"
        out.append(Record(id=rid, content=f"We talked about {topic}.", step="turns", materialization_key=rid,
                          metadata={"chat": {"conversation_id": "c", "session_id": "s1", "author": "Ann"},
                                    "time": {"created_at": f"2023-05-01T10:0{i}:00Z"}}))
    return out


@pytest.mark.parametrize("recipe", ["hybrid", "conversational"])
def test_the_engine_applies_the_recipes_reranker_in_every_fusion(tmp_path, recipe):
    """The reranker is part of the recipe: the leaf-sum (conversational) path honours it as the rrf path
    does, over its own candidate pool, so the facade, MCP and evals get the same ranking."""
    from synthex_resources.record_store import RecordStore
    from synthex_resources.search import SearchEngine, load_search_strategies

    strategies = load_search_strategies()

    store = RecordStore(str(tmp_path / "store"))
    store.records.upsert(_chat_records())
    engine = SearchEngine(store)
    plain = engine.search("lake", steps=["turns"], k=3, strategy=strategies.get(recipe))
    assert len(plain) == 3
    with FakeOpenAI(answer=lambda prompt: "3") as fake:  # the third excerpt listed is the best
        reranker = LLMReranker(completer(fake), top_n=4)
        reranked = engine.search("lake", steps=["turns"], k=3, strategy=strategies.get(recipe).with_(reranker=reranker))
        listed = re.findall(r"\[(\d+)\] ([^\n]*)", fake.prompts[0])
    assert fake.calls == 1 and len(listed) == 4  # the reranker saw its own pool of 4, not the top k = 3
    pool = engine.search("lake", steps=["turns"], k=4, strategy=strategies.get(recipe))
    assert [h.id for h in reranked] == [pool[2].id, pool[0].id, pool[1].id]
