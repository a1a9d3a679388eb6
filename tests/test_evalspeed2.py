"""Issue 21 "Speed": the embedding cache that lives across eval runs (``evals.shared_embedder``). A second
eval in a fresh work dir embeds nothing (counted on the embedder object, not timed); a corrupted cache file
is one warning line and recomputed; the figures and per-question hits are the same with and without it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import go_offline, write_json
from test_evalloop import locomo_small

from evals.architectures import resolve
from evals.benchmarks import EMBEDDING_CACHE, evaluate
from evals.locomo_eval import LoCoMo
from evals.scorecard import SPEEDUP
from evals.shared_embedder import EmbeddingCache, MemoEmbedder
from synthex_resources.embedder import MiniLMOnnxEmbedder


def figures(results: list[dict]) -> list[dict]:
    """What must not depend on the cache: every metric and each question's ranked turns and sessions (the
    scorecard's run times are wall-clock, and the incremental speedup with them)."""
    out = []
    for result in results:
        kept = {k: v for k, v in result.items() if k != "scorecard"}
        kept["scorecard"] = {name: e for name, e in result["scorecard"].items() if name != SPEEDUP}
        out.append(json.loads(json.dumps(kept, sort_keys=True)))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same eval (``conversational``, one LoCoMo-format conversation) four times, each in a fresh work
    dir: with no disk cache, with an empty cache, with that cache filled, and after the cache file was
    truncated. Returns (results by run, model texts embedded by run, warnings by run, the cache)."""
    base = tmp_path_factory.mktemp("evalspeed2")
    data = write_json(base / "locomo_small.json", locomo_small())
    model = MiniLMOnnxEmbedder()  # loaded once; each run has its own memo over it
    cache_dir = base / EMBEDDING_CACHE
    results, computed, warnings = {}, {}, {}
    with pytest.MonkeyPatch.context() as mp:  # module fixtures run before the autouse offline_env
        go_offline(mp)

        def run(name: str, cache: bool) -> None:
            lines: list[str] = []
            memo = MemoEmbedder.with_disk_cache(cache_dir if cache else None, warn=lines.append, inner=model)
            results[name] = evaluate(LoCoMo(), data, resolve(["conversational"], None), base / "work" / name,
                                     limit=1, log=lambda _line: None, embedder=memo)
            computed[name], warnings[name] = memo.computed, lines

        run("no-cache", cache=False)
        run("cold", cache=True)
        run("warm", cache=True)
        [cache_file] = cache_dir.iterdir()
        cache_file.write_bytes(cache_file.read_bytes()[: cache_file.stat().st_size // 2])  # a half-written file
        run("corrupted", cache=True)
    return results, computed, warnings, EmbeddingCache(cache_dir, model.name, model.dim)


def test_a_second_eval_in_a_fresh_work_dir_embeds_nothing(runs):
    results, computed, warnings, cache = runs
    assert computed["no-cache"] > 50  # the turns, the turns in context and the questions: the model was used
    assert computed["cold"] == computed["no-cache"]
    assert computed["warm"] == 0  # a new store, every vector from the cache file
    assert warnings["cold"] == warnings["warm"] == []
    stored = cache.load()
    assert stored.problem is None and len(stored.vectors) == computed["cold"]


def test_a_corrupted_cache_file_is_one_warning_and_recomputed(runs):
    results, computed, warnings, cache = runs
    [line] = warnings["corrupted"]
    assert line.startswith(f"warning: embedding cache {cache.path}: unreadable (") and "recomputed" in line
    assert computed["corrupted"] == computed["cold"]  # nothing served from the broken file
    assert cache.load().problem is None  # rewritten whole after the workspace


def test_the_figures_and_per_question_hits_are_the_same_with_and_without_the_cache(runs):
    results = runs[0]
    questions = results["no-cache"][0]["questions"]
    assert questions and all(q["hits"] for q in questions)  # something was ranked, so equality means something
    expected = figures(results["no-cache"])
    for name in ("cold", "warm", "corrupted"):
        assert figures(results[name]) == expected, name


def test_an_altered_cache_file_fails_its_checksum_and_the_bound_keeps_the_recent(tmp_path):
    cache = EmbeddingCache(tmp_path, "model/x", 4, max_bytes=3 * (4 * 4 + 32))  # room for three vectors
    vectors = {bytes([i]) * 32: np.full(4, i, dtype=np.float32) for i in range(5)}
    cache.save(vectors)
    loaded = cache.load()
    assert loaded.problem is None and list(loaded.vectors) == list(vectors)[2:]  # the oldest two dropped
    assert all(np.array_equal(loaded.vectors[k], vectors[k]) for k in loaded.vectors)
    raw = bytearray(cache.path.read_bytes())
    at = raw.index(np.full(4, 3, dtype=np.float32).tobytes())  # one vector's bytes, changed in place
    raw[at] ^= 0xFF
    cache.path.write_bytes(bytes(raw))
    assert cache.load().problem == "checksum mismatch (the file was altered or partly written)"
    assert cache.load().vectors == {}
    other = EmbeddingCache(tmp_path, "model_x", 4)  # slugs alike, another model: another file
    assert other.path != cache.path and other.load().vectors == {}
