"""Issue 21 "Speed": the embedding cache that lives across eval runs (``evals.shared_embedder``). A second
eval in a fresh work dir embeds nothing (counted on the embedder object, not timed); a corrupted cache file
is one warning line and recomputed; the figures and per-question hits are the same with and without it
(the first run, its cache empty, computes every vector from the model as a run without a cache does)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import go_offline, write_json
from test_evalloop import locomo_small

from evals.architectures import resolve
from evals.benchmarks import EMBEDDING_CACHE, evaluate
from evals.benchmarks.locomo.benchmark import LoCoMo
from evals.scorecard import SPEEDUP
from evals.shared_embedder import EmbeddingCache, MemoEmbedder
from synthex_resources.embedder import MiniLMOnnxEmbedder


def figures(results: list[dict]) -> list[dict]:
    """What must not depend on the cache: every metric and each question's ranked turns and sessions (the
    scorecard's run times are wall-clock, and the incremental speedup with them; so is ``wall_s``)."""
    out = []
    for result in results:
        kept = {k: v for k, v in result.items() if k not in ("scorecard", "wall_s")}
        kept["scorecard"] = {name: e for name, e in result["scorecard"].items() if name != SPEEDUP}
        out.append(json.loads(json.dumps(kept, sort_keys=True)))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same eval (``conversational``, one LoCoMo-format conversation) twice, each in a fresh work dir
    (new stores): first with an empty disk cache (every vector from the model, as with no cache), then with
    the cache the first filled. Returns (results by run, model texts embedded by run, warnings by run, the
    cache, the model)."""
    base = tmp_path_factory.mktemp("locomo-eval")
    data = write_json(base / "locomo_small.json", locomo_small())
    model = MiniLMOnnxEmbedder()  # loaded once; each run has its own memo over it
    cache_dir = base / EMBEDDING_CACHE
    results, computed, warnings = {}, {}, {}
    with pytest.MonkeyPatch.context() as mp:  # module fixtures run before the autouse offline_env
        go_offline(mp)
        for name in ("cold", "warm"):
            lines: list[str] = []
            memo = MemoEmbedder.with_disk_cache(cache_dir, warn=lines.append, inner=model)
            results[name] = evaluate(LoCoMo(), data, resolve(["conversational"], None), base / "work" / name,
                                     limit=1, log=lambda _line: None, embedder=memo)
            computed[name], warnings[name] = memo.computed, lines
    return results, computed, warnings, EmbeddingCache(cache_dir, model.name, model.dim), model


def test_a_second_eval_in_a_fresh_work_dir_embeds_nothing(runs):
    results, computed, warnings, cache, _ = runs
    # the turns, the turns with their context and the questions: the model was used for every one of them
    assert computed["cold"] > 10
    assert computed["warm"] == 0  # a new store, every vector from the cache file
    assert warnings["cold"] == warnings["warm"] == []
    stored = cache.load()
    assert stored.problems == () and len(stored.vectors) == computed["cold"]


def test_the_figures_and_per_question_hits_are_the_same_with_and_without_the_cache(runs):
    results = runs[0]
    questions = results["cold"][0]["questions"]
    assert questions and all(q["hits"] for q in questions)  # something was ranked, so equality means something
    assert figures(results["warm"]) == figures(results["cold"])
    assert results["cold"][0]["embedder"] == runs[4].name  # a result says which model embedded it


def test_a_corrupted_cache_file_is_one_warning_and_recomputed(runs, tmp_path):
    cache, model = runs[3], runs[4]
    cache_dir = tmp_path / EMBEDDING_CACHE
    cache_dir.mkdir()
    [shard] = cache.shards()  # one workspace, one save: one shard
    copy = EmbeddingCache(cache_dir, model.name, model.dim)
    copy.path.mkdir()
    broken = copy.path / shard.name
    broken.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])  # a half-written shard
    lines: list[str] = []
    memo = MemoEmbedder.with_disk_cache(cache_dir, warn=lines.append, inner=model)
    texts = ["I went to the support group yesterday.", "What did Caroline research?"]
    vectors = memo.embed(texts)
    [line] = lines
    assert line.startswith(f"warning: embedding cache {broken}: unreadable (") and "recomputed" in line
    assert memo.computed == 2  # nothing served from the broken file
    assert np.array_equal(vectors, model.embed(texts))
    memo.save()
    assert not broken.exists()  # the broken shard is gone, what was recomputed is in a new one
    fixed = EmbeddingCache(cache_dir, model.name, model.dim).load()
    assert fixed.problems == () and len(fixed.vectors) == 2


def test_an_altered_cache_file_fails_its_checksum_and_the_bound_keeps_the_recent(tmp_path):
    cache = EmbeddingCache(tmp_path, "model/x", 4, max_bytes=3 * (4 * 4 + 32))  # room for three vectors
    vectors = {bytes([i]) * 32: np.full(4, i, dtype=np.float32) for i in range(5)}
    cache.save(dict(list(vectors.items())[:2]))
    cache.save(vectors)  # writes the three new ones as a second shard, then compacts to the newest three
    [shard] = cache.shards()
    loaded = cache.load()
    assert loaded.problems == () and list(loaded.vectors) == list(vectors)[2:]  # the oldest two dropped
    assert all(np.array_equal(loaded.vectors[k], vectors[k]) for k in loaded.vectors)
    with np.load(shard) as data:  # one vector changed, the file otherwise well-formed (the zip CRC passes)
        keys, matrix, checksum = data["keys"], data["vectors"].copy(), data["checksum"]
    matrix[0, 0] += 1.0
    np.savez(shard, keys=keys, vectors=matrix, checksum=checksum)
    altered = cache.load()
    assert altered.problems == (f"{shard}: checksum mismatch (the file was altered or partly written)",)
    assert altered.vectors == {}
    other = EmbeddingCache(tmp_path, "model_x", 4)  # slugs alike, another model: another folder
    assert other.path != cache.path and other.load().vectors == {}
