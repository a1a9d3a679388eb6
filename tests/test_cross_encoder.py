"""The offline cross-encoder reranker (issue 35): the packaged model reads the question with each hit, the
order follows its scores, a missing model is one line, and every door gives the same reranked hits."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from synthex.core.errors import BadInputError
from synthex_resources.search.cross_encoder import (
    QUERY_TOKENS,
    CrossEncoderModel,
    CrossEncoderReranker,
    ModelFiles,
    RerankText,
)
from synthex_resources.search.rerankers import Rerankers


@dataclass
class Hit:
    id: str
    content: str
    metadata: dict = field(default_factory=dict)

    def meta(self, dotted: str, default=None):
        node = self.metadata
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node


QUESTION = "What instruments does Melanie play?"
HITS = [Hit("weather", "Caroline: The weather in Paris was lovely this spring."),
        Hit("cat", "Caroline: My cat knocked a glass off the table again."),
        Hit("violin", "Melanie: I've been practising the violin every evening since March."),
        Hit("clarinet", "Melanie: I also picked up the clarinet last year, it is harder than it looks!")]


@pytest.fixture(scope="module")
def model() -> CrossEncoderModel:
    return CrossEncoderModel(threads=1)


def test_the_packaged_model_puts_the_turns_that_answer_first(model):
    reranker = CrossEncoderReranker(model, top_n=4)
    out = reranker(QUESTION, HITS)
    assert {h.id for h in out[:2]} == {"violin", "clarinet"}  # first-stage order had them last
    logits = model.scores(QUESTION, [h.content for h in HITS])
    assert min(logits[2:]) > max(logits[:2]) + 5  # the model separates them by a wide margin, not by noise


def test_hits_past_top_n_keep_their_place_and_a_pair_is_scored_once(model):
    before = model.pairs_scored
    reranker = CrossEncoderReranker(model, top_n=2)
    reordered = list(reversed(HITS))  # clarinet, violin, cat, weather
    out = reranker(QUESTION, reordered)
    assert [h.id for h in out][2:] == ["cat", "weather"]  # only the top 2 are read
    assert model.pairs_scored - before <= 2
    again = model.pairs_scored
    reranker(QUESTION, reordered)
    assert model.pairs_scored == again and model.pairs_cached >= 2  # the same pairs come from the cache


def test_a_blend_keeps_the_first_stage_order_where_the_model_hesitates(model):
    same = [Hit("a", "Melanie plays the violin."), Hit("b", "Melanie plays the violin!")]
    logits = model.scores(QUESTION, [h.content for h in same])
    assert abs(logits[0] - logits[1]) < 1.0
    # a large enough prior on first-stage rank decides between two near-equal scores
    assert [h.id for h in CrossEncoderReranker(model, top_n=2, blend=10.0)(QUESTION, same)] == ["a", "b"]


def test_the_dated_text_puts_the_records_date_before_its_content(model):
    dated = CrossEncoderReranker(model, text=RerankText.DATED)
    hit = Hit("x", "  we moved\nto Lisbon ", {"time": {"created_at": "2023-05-08T13:56:00"}})
    assert dated.document(hit) == "2023-05-08: we moved to Lisbon"
    assert CrossEncoderReranker(model).document(hit) == "we moved to Lisbon"


def test_each_text_choice_reads_its_part_of_a_turn_in_context(model):
    hit = Hit("x", "Caroline: How have you been?\nMelanie: I took up  the violin.",
              {"time": {"created_at": "2023-05-08T13:56:00"},
               "chat": {"author": "Melanie", "previous": "Caroline: How have you been?"}})
    read = {text: CrossEncoderReranker(model, text=text).document(hit) for text in RerankText}
    assert read == {RerankText.CONTENT: "Caroline: How have you been? Melanie: I took up the violin.",
                    RerankText.DATED: "2023-05-08: Caroline: How have you been? Melanie: I took up the violin.",
                    RerankText.TURN: "I took up the violin.",
                    RerankText.SPEAKER: "Melanie: I took up the violin.",
                    RerankText.DATED_SPEAKER: "2023-05-08: Melanie: I took up the violin.",
                    RerankText.PREVIOUS: "Caroline: How have you been? Melanie: I took up the violin."}
    leaf = Hit("z", "Melanie: I took up the violin.", hit.metadata)  # a leaf turn: its previous one is metadata
    assert CrossEncoderReranker(model, text=RerankText.PREVIOUS).document(leaf) == read[RerankText.PREVIOUS]
    bare = Hit("y", "no chat metadata here")  # a record without the parts reads as its content
    assert {CrossEncoderReranker(model, text=t).document(bare) for t in RerankText if "dated" not in t} \
        == {"no chat metadata here"}


def test_a_long_question_and_long_turns_are_cut_by_the_rule_not_refused(model):
    long_question = " ".join(["melanie instruments"] * 200)
    long_turn = "Melanie: violin. " + "filler words " * 2000
    cut = model.pairs_cut
    scores = model.scores(long_question, [long_turn, "short"])
    assert scores.shape == (2,)
    assert model.pairs_cut == cut + 1  # the long turn was cut at max_tokens, and that is counted
    assert len(model._query_tokenizer.encode(model._cut_query(long_question), add_special_tokens=False).ids) \
        <= QUERY_TOKENS


def test_a_missing_model_package_is_one_line_naming_it():
    missing = CrossEncoderModel(ModelFiles("some-model", "no_such_package_synthex", "models"))
    with pytest.raises(BadInputError, match=r"needs the 'no_such_package_synthex' package .*pip install"):
        missing.check()


@pytest.mark.parametrize("args, message", [({"top_n": 1}, "top_n must be 2..200"),
                                           ({"top_n": 500}, "top_n must be 2..200"),
                                           ({"blend": -1.0}, "blend must be >= 0")])
def test_bad_parameters_are_refused_when_built(args, message):
    with pytest.raises(BadInputError, match=message):
        CrossEncoderReranker(CrossEncoderModel(), **args)
    with pytest.raises(BadInputError, match="max_tokens must be 16..512"):
        CrossEncoderModel(max_tokens=4096)


def test_the_registry_keeps_one_model_and_refuses_unknown_names(tmp_path):
    rerankers = Rerankers()
    assert rerankers.names() == ["cross-encoder", "llm"]
    first = rerankers.get("cross-encoder", store=None)  # type: ignore[arg-type]
    assert first is rerankers.get("cross-encoder", store=None) and first.top_n == 20  # type: ignore[arg-type]
    with pytest.raises(BadInputError, match="unknown reranker 'colbert'; expected one of cross-encoder, llm"):
        rerankers.get("colbert", store=None)  # type: ignore[arg-type]
    with pytest.raises(BadInputError, match="--rerank llm needs a real model"):
        rerankers.get("llm", store=None)  # type: ignore[arg-type]


def test_every_door_gives_the_same_reranked_hits(ran_project):
    """``--rerank cross-encoder`` on the session's shared run of the default template (read only): the Python
    API, the CLI, the MCP ``search`` tool and the Dagster ``SearchResource`` return the engine's own ranking
    with that reranker, which is not the first-stage ranking."""
    import anyio
    from conftest import cli, load

    from synthex.surfaces.mcp_server import SyncWorker, build_server
    from synthex_resources.resources import SearchResource
    from synthex_resources.search import SearchEngine

    asked, k = "which programming languages do I use", 4
    pipe = load(ran_project.root)
    try:
        app = pipe.app
        strategy = app.search_strategies.get(app.pipeline.search_mode())
        steps = app.pipeline.search_steps()
        engine = SearchEngine(app.store)
        first_stage = engine.search(asked, steps=steps, scope=app.scope(None), k=k, strategy=strategy)
        direct = engine.search(asked, steps=steps, scope=app.scope(None), k=k,
                               strategy=strategy.with_(reranker=CrossEncoderReranker(
                                   top_n=20, text=RerankText.PREVIOUS, blend=5.0)))
        python_ids = [h.id for h in pipe.search(asked, k=k, rerank="cross-encoder")]
        server = build_server(app, "main", SyncWorker(app, "main"))
        result = anyio.run(server.call_tool, "search", {"query": asked, "k": k, "rerank": "cross-encoder"})
        assert not result.is_error, result.content
        mcp_ids = [h["id"] for h in json.loads(result.content[0].text)["hits"]]
    finally:
        pipe.close()
    cli_ids = [h["id"] for h in json.loads(cli("search", asked, "-k", k, "--rerank", "cross-encoder", "--json",
                                               "--project", ran_project.root).stdout)["hits"]]
    resource = SearchResource(project_dir=str(ran_project.root), rerank="cross-encoder")
    try:
        resource_ids = [h.id for h in resource.search(asked, k=k)]
    finally:
        resource.teardown_after_execution(None)  # type: ignore[arg-type]
    assert len(direct) == k and [h.id for h in direct] != [h.id for h in first_stage]  # the reranker is applied
    assert python_ids == cli_ids == mcp_ids == resource_ids == [h.id for h in direct]


def test_late_interaction_puts_the_turns_that_answer_first_and_encodes_a_text_once():
    from synthex_resources.search.late_interaction import LateInteractionModel

    late = LateInteractionModel(threads=1)
    texts = [h.content for h in HITS]
    scores = late.scores(QUESTION, texts)
    assert min(scores[2:]) > max(scores[:2])
    assert late.texts_encoded == 4
    late.scores("Which city did Caroline visit?", texts)
    assert late.texts_encoded == 4  # a text's token vectors do not depend on the question: kept
    assert [h.id for h in CrossEncoderReranker(late, top_n=4)(QUESTION, HITS)][:2] in (["violin", "clarinet"],
                                                                                       ["clarinet", "violin"])
