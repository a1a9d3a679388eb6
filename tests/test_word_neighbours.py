"""Issue 22, multi-hop: word-neighbour query expansion (search/strategies/hierarchical_expanded.py; drill-down step 6, the
``hierarchical-expanded`` strategy). A list question's evidence names instances of what it asks for
("violin", "guitar" for "instruments") and shares no word with it. Real LanceDB, the real offline MiniLM
embedder, a real run on one tiny hand-made conversation; the scoring itself on hand-made vectors.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import locomo_sessions, write_json
from scipy import sparse
from test_hier import dia, hierarchy_on, hierarchy_pipeline

from synthex.core.scope import BranchScope
from synthex_resources.search.indexes.lexicon import leaf_texts
from synthex_resources.search.indexes.word_index import WordIndex, build_word_index, content_words
from synthex_resources.search.strategies.builtin import HIERARCHICAL_EXPANDED, HIERARCHICAL_SPEAKER
from synthex_resources.search.strategies.hierarchical import DrillDown
from synthex_resources.search.strategies.hierarchical_expanded import (
    MAX_QUERY_WORDS,
    expansion_scores,
    query_words,
)
from synthex_resources.search.strategies.registry import load_search_strategies

# Ann's instruments are named in sessions 1 and 3, never with the word "instrument"; Bob's question to
# her (session 1) is nearer the question by the other legs and takes the second slot without expansion.
MUSIC = {
    "1:00 pm on 8 May, 2023": [("Ann", "I practised the violin for an hour before work today."),
                               ("Bob", "Do you have any plans for the weekend, Ann?"),
                               ("Ann", "I have a dinner with my neighbours on Friday, that is all.")],
    "2:00 pm on 4 June, 2023": [("Bob", "We should have a round of golf some day."),
                                ("Ann", "Sure, I have time for golf with you, Bob.")],
    "3:00 pm on 9 September, 2023": [("Ann", "My new guitar arrived this morning, it sounds lovely."),
                                     ("Bob", "Nice, the weather is good for a walk too.")],
}
QUESTION = "Which instruments does Ann play?"
EVIDENCE = {"D1:1", "D3:1"}


def test_query_words_leave_out_question_words_speakers_and_stopwords():
    assert query_words("What kind of instruments does Ann play?", {"ann", "bob"}) == ["instruments", "play"]
    assert query_words("How many times has Bob mentioned it?", {"ann", "bob"}) == ["times"]
    assert query_words("Who?", set()) == []


def test_a_leaf_scores_its_best_neighbour_per_query_word_times_idf_summed_over_the_words():
    # vocabulary: violin, guitar, golf (unit vectors); query words: instruments (near violin 1.0 and
    # guitar 0.8), sport (near golf only)
    vectors = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]], dtype=np.float32)
    holds = np.array([[1, 0, 0],   # leaf 0: violin
                      [1, 1, 0],   # leaf 1: violin and guitar
                      [0, 1, 0],   # leaf 2: guitar
                      [0, 0, 1],   # leaf 3: golf
                      [0, 0, 0]])  # leaf 4: none of them
    index = WordIndex(["violin", "guitar", "golf"], sparse.csr_matrix(holds.astype(float)), vectors)
    idf = np.log1p(5 / np.array([2, 2, 1]))  # log(1 + leaves / leaves holding the word)
    instruments = np.array([[1.0, 0.0]], dtype=np.float32)
    scores = expansion_scores(index, instruments, similarity=0.5)
    assert scores.tolist() == pytest.approx([idf[0], idf[0], 0.8 * idf[1], 0.0, 0.0])  # the best per leaf
    strict = expansion_scores(index, instruments, similarity=0.9)
    assert strict.tolist() == pytest.approx([idf[0], idf[0], 0.0, 0.0, 0.0])  # guitar (0.8) no longer counts
    sport = np.array([[0.0, 1.0]], dtype=np.float32)
    both = expansion_scores(index, np.vstack([instruments, sport]), similarity=0.7)
    assert both.tolist() == pytest.approx([idf[0], idf[0], 0.8 * idf[1], idf[2], 0.0])  # summed over the words
    assert expansion_scores(index, np.zeros((0, 2), dtype=np.float32), 0.4).tolist() == [0.0] * 5
    itself = np.array([[0.99999994, 0.0]], dtype=np.float32)  # a word's cosine with itself may round below 1
    assert expansion_scores(index, itself, similarity=1.0)[0] > 0


def test_hostile_words_are_bounded():
    long_word = "a" * 10_000
    assert content_words(f"{long_word} violin") == ["violin"]  # longer than the FTS index keeps: no word
    many = " ".join(f"word{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}x" for i in range(500))
    assert len(query_words(many, set())) == MAX_QUERY_WORDS
    index = build_word_index([f"Ann: {long_word} plays the violin", "Bob: golf"],
                             lambda words: np.eye(len(words), 4, dtype=np.float32))
    assert set(index.words) == {"plays", "violin", "golf"}  # neither the long word nor the speaker "ann"


@pytest.fixture(scope="module")
def music(tmp_path_factory):
    with hierarchy_on(tmp_path_factory, "words", MUSIC, "conv-w", "hierarchical-expanded") as pipe:
        yield pipe


def test_the_instances_of_what_a_list_question_asks_for_are_found_where_the_speaker_strategy_misses_them(music):
    without = dia(music.search(QUESTION, mode="hierarchical-speaker", k=2))
    assert without == ["D1:1", "D1:2"]  # Bob's question to Ann takes the second slot
    found = music.search(QUESTION, k=2)  # the search output's mode=: hierarchical-expanded
    assert set(dia(found)) == EVIDENCE
    assert {h.meta("chat.author") for h in found} == {"Ann"}


class CountingEmbedder:
    """The offline embedder, counting the texts it is asked to embed (the word index's cost)."""

    def __init__(self) -> None:
        from synthex_resources.embedder import EmbedderConfig

        self.inner = EmbedderConfig().create()
        self.name, self.dim = self.inner.name, self.inner.dim
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts.extend(texts)
        return self.inner.embed(texts)


VOCABULARY = {"violin", "guitar", "golf", "weather", "neighbours"}  # words of the turns


def test_the_word_index_is_saved_beside_the_table_and_a_write_embeds_only_new_words(tmp_path):
    from synthex import Pipeline
    from synthex_resources.search.indexes.sidecar import sidecar

    data = write_json(tmp_path / "locomo.json", locomo_sessions(MUSIC, "conv-w"))
    first = hierarchy_pipeline("words", tmp_path, data, "hierarchical-expanded")
    assert set(dia(first.search(QUESTION, k=2))) == EVIDENCE
    sidecar(first.app.store).wait()
    assert list(sidecar(first.app.store).folder.glob("words-*.json"))  # saved beside the table
    assert list(sidecar(first.app.store).folder.glob("word-vectors-*.json"))
    first.close()

    def reopened() -> tuple[Pipeline, CountingEmbedder]:
        pipe = hierarchy_pipeline("words", tmp_path, data, "hierarchical-expanded", run=False)
        counting = CountingEmbedder()
        pipe.open(embedder=counting)
        return pipe, counting

    # A new process's view. The first search wrote the turns' vectors back (lazy embedding), so the table
    # moved on after the index was saved: the next process rebuilds it from the texts, but embeds no word
    # of them (the store's word vectors were saved).
    second, counting = reopened()
    assert set(dia(second.search(QUESTION, k=2))) == EVIDENCE
    assert not VOCABULARY & set(counting.texts)
    assert {"instruments", "play"} <= set(counting.texts)  # the query's own words
    cache = second.app.store.search_state.word_indexes
    assert cache.builds == 1
    # Another scope of the same store (two periods of it): its own index, not one word embedded again.
    counting.texts.clear()
    second.search(QUESTION, k=2, periods=["2023-05", "2023-09"])
    assert cache.builds == 2 and not {*VOCABULARY, "instruments", "play"} & set(counting.texts)
    sidecar(second.app.store).wait()
    second.close()
    settled, counting = reopened()  # nothing written since: the saved index is loaded as it is
    assert set(dia(settled.search(QUESTION, k=2))) == EVIDENCE
    assert settled.app.store.search_state.word_indexes.builds == 0
    assert not VOCABULARY & set(counting.texts)

    settled.close()

    grown = {**MUSIC, "4:00 pm on 1 October, 2023": [("Ann", "The cello lessons start next week."),
                                                      ("Bob", "Good luck, see you soon.")]}
    write_json(data, locomo_sessions(grown, "conv-w"))
    third, counting = reopened()
    third.run()
    counting.texts.clear()
    found = dia(third.search(QUESTION, k=4))
    assert "cello" in counting.texts  # the new turn's words are embedded ...
    assert not VOCABULARY & set(counting.texts)  # ... and only those
    assert {"D1:1", "D4:1"} <= set(found[:3]) and "D3:1" in found  # the cello found by its neighbour word
    third.close()


def test_a_reader_extends_its_word_index_by_the_appended_leaves_as_a_full_build_would(tmp_path):
    """A long-lived reader (an MCP server, the UI) sees another writer's appended turns: the word index
    reads and adds only their rows (the scope bookkeeping extends at any size here; by default only
    large scopes do), and equals a fresh build leaf by leaf."""
    from test_leaf_scope import turns, write

    from synthex_resources.record_store import RecordStore
    from synthex_resources.search import SearchEngine
    from synthex_resources.search.indexes.leaf_scope import scope_for
    from synthex_resources.search.indexes.word_index import word_index
    from synthex_resources.search.state import SearchSettings

    store = RecordStore(str(tmp_path / "store"), search=SearchSettings(scope_incremental_from=0))
    write(store, turns("c1", 1, 6, 1))
    engine = SearchEngine(store)
    where = engine.where(["ctx"], BranchScope.own())
    first = word_index(engine, where, scope_for(engine, where))
    cache = store.search_state.word_indexes
    assert (cache.builds, cache.extensions) == (1, 0) and "planned" not in first.words
    write(store, turns("c1", 2, 4, 3, said="yesterday we planned"))
    scope = scope_for(engine, where)
    assert scope.extended_from is not None
    extended = word_index(engine, where, scope)
    assert (cache.builds, cache.extensions) == (1, 1) and "planned" in extended.words
    fresh = build_word_index([t for t, _ in leaf_texts(engine.store.cipher, scope.read, scope.leaf_ids, scope.leaf_steps)],
                             lambda words: np.zeros((len(words), 2), dtype=np.float32))

    def words_by_leaf(index: WordIndex) -> list[set[str]]:
        rows = index.leaf_words.tolil().rows
        return [{index.words[j] for j in row} for row in rows]
    assert words_by_leaf(extended) == words_by_leaf(fresh)
    assert sorted(extended.df.tolist()) == sorted(fresh.df.tolist())

    # A new process after another write: the scope saved beside the table is extended, and so is the word
    # index saved for it (the saved one names that scope as its base), not rebuilt from every text.
    from synthex_resources.search.indexes.sidecar import sidecar

    sidecar(store).wait()
    write(store, turns("c1", 3, 3, 5, said="tomorrow we rehearse"))
    later = RecordStore(str(tmp_path / "store"), search=SearchSettings(scope_incremental_from=0))
    engine = SearchEngine(later)
    scope = scope_for(engine, where)
    assert scope.base_token is not None
    again = word_index(engine, where, scope)
    counts = later.search_state.word_indexes
    assert (counts.builds, counts.extensions) == (0, 1) and "rehearse" in again.words
    fresh = build_word_index([t for t, _ in leaf_texts(engine.store.cipher, scope.read, scope.leaf_ids, scope.leaf_steps)],
                             lambda words: np.zeros((len(words), 2), dtype=np.float32))
    assert words_by_leaf(again) == words_by_leaf(fresh)


def test_the_strategy_is_registered_validated_and_switchable_by_name(music):
    registry = load_search_strategies()
    strategy = registry.get("hierarchical-expanded")
    assert strategy is HIERARCHICAL_EXPANDED and isinstance(strategy, DrillDown)
    assert (strategy.expansion_weight, strategy.expansion_similarity) == (0.5, 0.4)
    assert HIERARCHICAL_SPEAKER.expansion_weight == 0.0  # hierarchical-speaker unchanged
    assert strategy.with_(expansion_weight=0.0).parameters() == HIERARCHICAL_SPEAKER.parameters()
    with pytest.raises(Exception, match="expansion_similarity must be between 0.0 and 1.0"):
        strategy.with_(expansion_similarity=1.5)
    with pytest.raises(Exception, match="expansion_weight must be at least 0"):
        strategy.with_(expansion_weight=-1.0)
    assert music.search_mode() == "hierarchical-expanded"


def test_an_encrypted_store_is_read_in_plaintext_and_nothing_is_saved_beside_it(tmp_path):
    from test_leaf_scope import turns, write

    from synthex_resources.encryption import generate_key
    from synthex_resources.record_store import RecordStore
    from synthex_resources.search import SearchEngine
    from synthex_resources.search.indexes.leaf_scope import scope_for
    from synthex_resources.search.indexes.sidecar import sidecar
    from synthex_resources.search.indexes.word_index import word_index

    store = RecordStore(str(tmp_path / "store"), encryption_key=generate_key())
    write(store, turns("c1", 1, 6, 1))
    engine = SearchEngine(store)
    where = engine.where(["ctx"], BranchScope.own())
    index = word_index(engine, where, scope_for(engine, where))
    assert {"hiking", "lisbon", "chess"} <= set(index.words)  # the turns' words, not ciphertext
    sidecar(store).wait()
    assert sidecar(store).folder is None and not (tmp_path / "store" / "_search").exists()


def test_a_querys_own_words_are_kept_in_a_bounded_lru_and_not_among_the_stores_words():
    from synthex_resources.search.indexes.lru import LRU
    from synthex_resources.search.indexes.word_index import WordVectors

    sent: list[str] = []

    def embed(words: list[str]) -> np.ndarray:
        sent.extend(words)
        return np.ones((len(words), 2), dtype=np.float32) / np.sqrt(2)

    vectors = WordVectors("test")
    vectors.asked = LRU(3)
    vectors.of(["violin", "guitar"], embed)  # a scope's words: kept
    assert vectors.of(["qa", "qb", "qc", "qd", "violin"], embed, asked=True).shape == (5, 2)
    assert sent == ["violin", "guitar", "qa", "qb", "qc", "qd"]  # violin was known
    assert set(vectors.vectors) == {"violin", "guitar"} and len(vectors.asked) == 3
    sent.clear()
    vectors.of(["qd", "qa"], embed, asked=True)
    assert sent == ["qa"]  # qd still kept; qa, the least recently used, was dropped


def test_a_save_of_rows_read_before_a_purge_cleared_the_sidecar_is_dropped(tmp_path):
    """A purge (``Sidecar.clear``) lands while a search builds its word index, after the texts were read
    (the embedder, asked for the vocabulary, runs the clear: a known point): neither the index nor the
    word vectors, which hold the purged words, are written beside the table afterwards."""
    from test_leaf_scope import turns, write

    from synthex_resources.record_store import RecordStore
    from synthex_resources.search import SearchEngine
    from synthex_resources.search.indexes.leaf_scope import scope_for
    from synthex_resources.search.indexes.sidecar import Sidecar, TableState, sidecar
    from synthex_resources.search.indexes.word_index import word_index

    plain = Sidecar(tmp_path / "plain")
    since = plain.generation
    plain.clear()

    def entry() -> tuple[dict, dict]:
        return {}, {"x": np.zeros(3)}
    plain.save("kind", "key", TableState(1, ()), entry, background=False, since=since)
    assert plain.load("kind", "key") is None and not list((tmp_path / "plain").iterdir())  # nothing, no .tmp
    plain.save("kind", "key", TableState(1, ()), entry, background=False, since=plain.generation)
    assert plain.load("kind", "key") is not None  # a save begun after the clear is written
    guard = plain.guard()  # the same through a guard, the way every builder saves
    plain.clear()
    guard.save("kind", "key", TableState(1, ()), entry, background=False)
    assert plain.load("kind", "key") is None

    cleared: list[int] = []

    class PurgingEmbedder(CountingEmbedder):
        def embed(self, texts: list[str]) -> np.ndarray:
            if "lisbon" in texts:  # the vocabulary: the leaves' texts were read
                sidecar(store).clear()
                cleared.append(len(texts))
            return super().embed(texts)

    store = RecordStore(str(tmp_path / "store"), embedder=PurgingEmbedder())
    write(store, turns("c1", 1, 6, 1))
    engine = SearchEngine(store)
    where = engine.where(["ctx"], BranchScope.own())
    index = word_index(engine, where, scope_for(engine, where))
    assert "lisbon" in index.words and cleared  # the clear landed mid-build
    sidecar(store).wait()
    folder = sidecar(store).folder
    assert not list(folder.glob("words-*")) and not list(folder.glob("word-vectors-*"))
    assert not list(folder.glob("*.tmp"))


def test_every_door_gives_the_expanded_modes_hits(ran_project):
    """``--mode hierarchical-expanded`` on the session's shared run of the default template (read only): the
    Python API, the CLI, the MCP ``search`` tool and the Dagster ``SearchResource`` return the engine's own
    ranking for that strategy, which is not the ranking without the expansion."""
    import json

    import anyio
    from conftest import cli, load

    from synthex.surfaces.mcp_server import SyncWorker, build_server
    from synthex_resources.resources import SearchResource
    from synthex_resources.search import SearchEngine

    asked, mode, k = "which programming languages do I use", "hierarchical-expanded", 4
    pipe = load(ran_project.root)
    try:
        app = pipe.app
        engine = SearchEngine(app.store)
        direct = engine.search(asked, steps=["summaries", "monthly"], scope=app.scope(None), k=k,
                               strategy=HIERARCHICAL_EXPANDED)
        unexpanded = engine.search(asked, steps=["summaries", "monthly"], scope=app.scope(None), k=k,
                                   strategy=HIERARCHICAL_SPEAKER)
        python_ids = [h.id for h in pipe.search(asked, k=k, mode=mode)]
        server = build_server(app, "main", SyncWorker(app, "main"))
        result = anyio.run(server.call_tool, "search", {"query": asked, "k": k, "mode": mode})
        assert not result.is_error, result.content
        mcp_ids = [h["id"] for h in json.loads(result.content[0].text)["hits"]]
    finally:
        pipe.close()
    cli_ids = [h["id"] for h in json.loads(cli("search", asked, "-k", k, "--mode", mode, "--json",
                                               "--project", ran_project.root).stdout)["hits"]]
    resource = SearchResource(project_dir=str(ran_project.root))
    try:
        resource_ids = [h.id for h in resource.search(asked, k=k, mode=mode)]
    finally:
        resource.teardown_after_execution(None)  # type: ignore[arg-type]
    assert len(direct) == k and [h.id for h in direct] != [h.id for h in unexpanded]  # the expansion is applied
    assert python_ids == cli_ids == mcp_ids == resource_ids == [h.id for h in direct]
