"""Search strategies as a registry (issue 19, items 3 and 4): parameters validated when a strategy is
built, the built-ins' parameters, every door (CLI, MCP, the facade, the Dagster ``SearchResource``,
evals) accepting exactly the registry's names, a toy strategy registered from outside the package and
ranked through a real `synthex search` subprocess, plugins that fail said in one line each, and the LLM
reranker's failures reported to the caller instead of swallowed.

The plugins are modules written into a tmp dir with a tmp ``*.dist-info/entry_points.txt`` declaring
them in the ``synthex.plugins`` group; importlib.metadata finds them once that dir is on the path
(``PYTHONPATH`` of the subprocess, ``sys.path`` in process)."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from conftest import cli, env_without_openai, go_offline, load, write_small_export
from fake_openai import FakeOpenAI

from synthex.core.errors import PipelineDefinitionError
from synthex_resources.llm import OpenAICompleter
from synthex_resources.search.rerank import LLMReranker
from synthex_resources.search.strategies.builtin import (
    BM25,
    CONVERSATIONAL,
    DENSE,
    HIERARCHICAL,
    HIERARCHICAL_EXPANDED,
    HIERARCHICAL_FRESH,
    HIERARCHICAL_FRESH_ASKER,
    HIERARCHICAL_SPEAKER,
    HYBRID,
    HYBRID_EQUAL,
)
from synthex_resources.search.strategies.conversational import LeafSum
from synthex_resources.search.strategies.hybrid import DenseOnly, LexicalOnly, RRFHybrid
from synthex_resources.search.strategies.registry import StrategyRegistry, load_search_strategies
from synthex_resources.search.types import Decompose, Diversify, Fusion, SearchProblem, SearchWarning

BUILTIN = ["bm25", "dense", "hybrid", "hybrid-equal", "conversational", "hierarchical", "hierarchical-speaker",
           "hierarchical-expanded", "hierarchical-fresh", "hierarchical-fresh-asker"]
QUERY = "postgres migrations for the billing service"

TOY = '''
"""A toy search strategy: BM25's candidates, worst first (a ranking no built-in gives)."""
from dataclasses import dataclass
from typing import ClassVar

from synthex_resources.search.strategies.base import param
from synthex_resources.search.strategies.hybrid import RecordFusion
from synthex_resources.search.types import Leg


@dataclass(frozen=True, kw_only=True)
class ReversedBM25(RecordFusion):
    kind: ClassVar[str] = "reversed-bm25"

    pool: int = param(200, low=1, doc="BM25 candidates")

    def candidates(self):
        return {Leg.LEXICAL: self.pool}

    def fuse(self, lists):
        return {rid: -score for rid, score in lists[Leg.LEXICAL]}


def register_search_strategies(registry):
    registry.register("toy", ReversedBM25(name="toy", description="BM25 candidates, worst first"))
'''
BROKEN = "import a_dependency_that_is_not_installed  # noqa\n"  # fails at import
JUNK = '''
def register_search_strategies(registry):
    registry.register("junk", {"not": "a strategy"})  # the registry refuses it: the hook fails
'''


def write_plugin(root: Path, dist: str, module: str, source: str) -> None:
    """``module`` in ``root``, declared by a ``dist`` distribution as entry point ``dist`` of synthex.plugins."""
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    info = root / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[synthex.plugins]\n{dist} = {module}\n")


@pytest.fixture(scope="module")
def plugins(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("plugins")
    write_plugin(root, "toy-search", "toy_search_plugin", TOY)
    write_plugin(root, "broken-search", "broken_search_plugin", BROKEN)
    write_plugin(root, "junk-search", "junk_search_plugin", JUNK)
    return root


@pytest.fixture(scope="module")
def raw_project(tmp_path_factory) -> Path:
    """`synthex init p --template raw --from <small export>` and `synthex run`, once for the module."""
    base = tmp_path_factory.mktemp("raw")
    export = write_small_export(base / "exports" / "conversations.json")
    with pytest.MonkeyPatch.context() as mp:  # module fixtures run before the autouse offline_env
        go_offline(mp)
        cli("init", "p", "--template", "raw", "--from", str(export), cwd=base)
        cli("run", "--project", str(base / "p"))
    return base / "p"


# -- strategies: one class per fusion, parameters validated when built ------------------------------
def test_the_builtins_are_registered_with_todays_parameters():
    registry = load_search_strategies()
    assert registry.names()[: len(BUILTIN)] == BUILTIN
    assert [registry.get(n) for n in BUILTIN] == [BM25, DENSE, HYBRID, HYBRID_EQUAL, CONVERSATIONAL, HIERARCHICAL,
                                                   HIERARCHICAL_SPEAKER, HIERARCHICAL_EXPANDED, HIERARCHICAL_FRESH,
                                                   HIERARCHICAL_FRESH_ASKER]
    assert isinstance(BM25, LexicalOnly) and BM25.parameters() == {"dedup_cosine": None, "lexical_pool": 50}
    assert isinstance(DENSE, DenseOnly) and DENSE.parameters() == {"dedup_cosine": None, "dense_pool": 50}
    assert isinstance(HYBRID, RRFHybrid) and HYBRID.parameters() == {
        "dedup_cosine": 0.95, "lexical_pool": 50, "dense_pool": 50, "rrf_k": 10, "lexical_weight": 1.0,
        "dense_weight": 0.5}
    assert HYBRID_EQUAL.parameters() == HYBRID.parameters() | {"rrf_k": 60, "dense_weight": 1.0}
    assert isinstance(CONVERSATIONAL, LeafSum) and CONVERSATIONAL.parameters() == {
        "lexical": True, "dense": True, "lexical_pool": 200, "lexical_weight": 1.0, "dense_weight": 0.5,
        "leaf_dense_weight": 0.5, "neighbour_weight": 0.4, "date_weight": 1.0, "drop_participants": True,
        "relative_dates": True, "decompose": Decompose.NONE, "decompose_weight": 0.5, "entity_weight": 0.15,
        "ppr_weight": 0.0, "expand_seeds": 5, "ppr_restart": 0.5, "rare_df": 5, "diversify": Diversify.NONE,
        "diversify_pool": 3, "mmr_lambda": 0.7, "session_penalty": 0.3}
    assert [s.fusion for s in (BM25, DENSE, HYBRID, CONVERSATIONAL)] == [
        Fusion.SINGLE, Fusion.SINGLE, Fusion.RRF, Fusion.LEAF_SUM]
    assert not CONVERSATIONAL.takes_metadata_filter and HYBRID.takes_metadata_filter


@pytest.mark.parametrize(("changes", "problem"), [
    ({"mmr_lambda": 1.5}, "mmr_lambda must be between 0.0 and 1.0 (got 1.5)"),
    ({"lexical_pool": 0}, "lexical_pool must be at least 1 (got 0)"),
    ({"expand_seeds": 2.5}, "expand_seeds must be int (got float 2.5)"),
    ({"drop_participants": "yes"}, "drop_participants must be bool (got str 'yes')"),
    ({"diversify": "random"}, "diversify must be one of 'none', 'mmr', 'session' (got 'random')"),
    ({"rrf_k": 10}, "no parameter 'rrf_k'"),  # a parameter of another fusion: refused, not ignored
])
def test_a_bad_parameter_is_one_line_naming_the_strategy_and_the_problem(changes, problem):
    with pytest.raises(PipelineDefinitionError) as err:
        CONVERSATIONAL.with_(**changes)
    assert "\n" not in str(err.value)
    assert str(err.value).startswith("search strategy 'conversational' (LeafSum): ") and problem in str(err.value)


def test_options_are_enums_and_a_variant_is_validated_like_the_original():
    variant = CONVERSATIONAL.with_(decompose="max", diversify="session")
    assert variant.decompose is Decompose.MAX and variant.diversify is Diversify.SESSION
    assert variant.name == "conversational" and CONVERSATIONAL.decompose is Decompose.NONE  # frozen
    with pytest.raises(PipelineDefinitionError, match="dedup_cosine must be between -1.0 and 1.0"):
        RRFHybrid(name="x", dedup_cosine=2.0)
    with pytest.raises(PipelineDefinitionError, match=re.escape("reranker must be Reranker | None (got function")):
        HYBRID.with_(reranker=lambda query, hits: hits)


def test_the_registry_refuses_a_non_strategy_and_a_name_that_is_not_the_strategys():
    registry = StrategyRegistry()
    with pytest.raises(PipelineDefinitionError, match="expected a SearchStrategy instance, got dict"):
        registry.register("junk", {"not": "a strategy"})  # type: ignore[arg-type]
    with pytest.raises(PipelineDefinitionError, match="the strategy is named 'bm25'"):
        registry.register("keywords", BM25)
    registry.register("bm25", BM25)
    with pytest.raises(PipelineDefinitionError, match="unknown search strategy 'nope'; expected one of bm25"):
        registry.get("nope")


# -- every door lists the registry -------------------------------------------------------------------
def test_cli_mcp_facade_resource_and_evals_accept_exactly_the_registrys_names(raw_project, plugins, monkeypatch):
    from evals.architectures import resolve
    from synthex.surfaces.mcp_server import SyncWorker, build_server
    from synthex_resources.resources import SearchResource

    monkeypatch.syspath_prepend(str(plugins))  # the toy plugin is installed for this test's process
    registry = load_search_strategies()
    names = registry.names()
    assert names == [*BUILTIN, "toy"]
    assert sorted(f.plugin for f in registry.failures) == ["broken-search", "junk-search"]

    # CLI: the help lists them; each is accepted; another name is refused in one line naming them.
    help_text = cli("search", "--help").stdout
    assert "--mode [" + "|".join(names) + "]" in help_text
    assert "toy: BM25 candidates, worst first" in " ".join(help_text.split())
    for name in names:
        out = cli("search", QUERY, "--mode", name, "--json", "--project", str(raw_project))
        assert json.loads(out.stdout)["hits"], name
    refused = cli("search", QUERY, "--mode", "nope", "--project", str(raw_project), check=False)
    [line] = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and line.startswith("error: ") and all(repr(n) in line for n in names)

    # The facade (the Python API's door).
    pipe = load(raw_project)
    app = pipe.app
    try:
        assert app.search_strategies.names() == names
        for name in names:
            assert app.search(QUERY, mode=name), name
        with pytest.raises(PipelineDefinitionError, match=f"unknown search mode 'nope'; expected one of {', '.join(names)}$"):
            app.search(QUERY, mode="nope")

        # MCP: the search tool's input schema enumerates them; a call with each answers.
        server = build_server(app, "main", SyncWorker(app, "main"))
        tools = anyio.run(server.list_tools)
        mode = next(t for t in tools if t.name == "search").input_schema["properties"]["mode"]
        assert mode["enum"] == names
        assert all(f"{n}:" in mode["description"] for n in names)
        for name in names:
            anyio.run(server.call_tool, "search", {"query": QUERY, "mode": name})
    finally:
        pipe.close()

    # The Dagster resource.
    resource = SearchResource(project_dir=str(raw_project))
    assert resource.strategies().names() == names
    assert resource.search(QUERY, mode="hybrid-equal") and resource.search(QUERY, mode="toy")
    with pytest.raises(PipelineDefinitionError, match=f"unknown search mode 'nope'; expected one of {', '.join(names)}$"):
        resource.search(QUERY, mode="nope")  # the same line as every other door

    # Evals: `branch@mode` and `raw-<mode>` name any strategy of the registry.
    assert [a.mode for a in resolve(["main@toy", "main@hybrid-equal", "raw-hybrid-equal"], raw_project)] == [
        "toy", "hybrid-equal", "hybrid-equal"]
    with pytest.raises(ValueError, match="unknown search recipe 'nope'; recipes: " + ", ".join(names)):
        resolve(["main@nope"], raw_project)


def test_a_toy_strategy_from_a_plugin_ranks_through_synthex_search(raw_project, plugins):
    """The real door: `synthex search --mode toy` in a subprocess whose PYTHONPATH holds the plugin dir."""
    env = env_without_openai()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(plugins), env.get("PYTHONPATH", "")) if p)

    def search(mode: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "synthex.surfaces.cli", "search", QUERY, "--mode", mode, "-k", "200",
                               "--json", "--project", str(raw_project)], capture_output=True, text=True,
                              env=env, timeout=300)

    bm25, toy = search("bm25"), search("toy")
    assert bm25.returncode == 0 and toy.returncode == 0, bm25.stderr + toy.stderr
    by_bm25 = {h["id"]: h["score"] for h in json.loads(bm25.stdout)["hits"]}
    ranked = json.loads(toy.stdout)["hits"]
    assert len(by_bm25) >= 3 and len(set(by_bm25.values())) >= 3  # a ranking to reverse
    # The toy's ranking: the same candidates, each scored minus its BM25 score, so worst BM25 first.
    assert {h["id"] for h in ranked} == set(by_bm25)
    assert all(h["score"] == pytest.approx(-by_bm25[h["id"]], abs=1e-6) for h in ranked)
    assert [by_bm25[h["id"]] for h in ranked] == sorted(by_bm25.values())
    assert ranked[0]["id"] == min(by_bm25, key=by_bm25.get) != max(by_bm25, key=by_bm25.get)

    # The two plugins that failed are said once each, in one line naming them; nothing else is printed.
    for proc in (bm25, toy):
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 2, proc.stderr
        [broken] = [line for line in lines if "'broken-search'" in line]
        [junk] = [line for line in lines if "'junk-search'" in line]
        assert broken.startswith("warning: plugin 'broken-search' (broken_search_plugin) failed to load: "
                                 "ModuleNotFoundError")
        assert junk.startswith("warning: plugin 'junk-search' (junk_search_plugin) failed to load: "
                               "register_search_strategies: PipelineDefinitionError")


# -- the LLM reranker's failures reach the caller ----------------------------------------------------
def test_a_failed_rerank_call_keeps_the_order_and_says_why(caplog):
    hits = [type("Hit", (), {"id": f"h{i}", "content": f"excerpt {i}"})() for i in range(4)]
    with FakeOpenAI(fail_first=10, fail_status=400) as fake:
        reranker = LLMReranker(OpenAICompleter("fake-model", fake.base_url, "key", max_retries=0, timeout=5))
        with caplog.at_level(logging.WARNING, logger="synthex.search"):
            out = reranker.rerank("q", hits)
    assert out.hits == hits
    assert out.warning is not None and out.warning.problem is SearchProblem.RERANK_CALL_FAILED
    assert str(out.warning).startswith("reranker 'llm' kept the first-stage order: its model call failed (")
    assert "BadRequestError" in str(out.warning) and "\n" not in str(out.warning)
    assert [r.getMessage() for r in caplog.records if r.name == "synthex.search"] == [str(out.warning)]

    with FakeOpenAI(answer=lambda prompt: "none of these") as fake:
        reranker = LLMReranker(OpenAICompleter("fake-model", fake.base_url, "key", max_retries=0, timeout=5))
        out = reranker.rerank("q", hits)
    assert out.hits == hits and out.warning == SearchWarning(SearchProblem.RERANK_UNUSABLE_REPLY, "llm",
                                                             "reply: 'none of these'")


def test_search_with_a_failing_reranker_answers_in_first_stage_order_with_a_warning(raw_project, monkeypatch):
    """Through the facade and `synthex search --rerank llm`: the hits of the search without a reranker,
    and the warning on the results, on stderr and in --json."""
    pipe = load(raw_project)
    try:
        plain = [h.id for h in pipe.search(QUERY, k=5)]
        with FakeOpenAI(fail_first=100, fail_status=400) as fake:
            monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-that-must-not-leak-0123456789")
            results = pipe.app.search(QUERY, k=5, rerank="llm")
            out = cli("search", QUERY, "-k", "5", "--rerank", "llm", "--json", "--project", str(raw_project))
            assert fake.calls == 2  # one per search: both reached the model
    finally:
        pipe.close()
    assert [h.id for h in results] == plain and len(plain) == 5
    [warning] = results.warnings
    assert warning.problem is SearchProblem.RERANK_CALL_FAILED and "sk-test-key" not in str(warning)
    payload = json.loads(out.stdout)
    assert [h["id"] for h in payload["hits"]] == plain and payload["warnings"] == [str(warning)]
    assert out.stderr.strip().splitlines() == [f"warning: {warning}"]


def test_the_cli_bounds_rerank_top_n_by_the_rerankers_own_limit(tmp_path):
    # The CLI, MCP and Python doors share one bound (rerankers.TOP_N_MAX): one over it is refused by
    # click before any project is opened, naming the option; the bound itself is what --help shows.
    from synthex_resources.search.rerankers import TOP_N_MAX

    refused = cli("search", "x", "--rerank", "cross-encoder", "--rerank-top-n", str(TOP_N_MAX + 1),
                  "--project", str(tmp_path), check=False)
    assert refused.returncode == 2
    assert "--rerank-top-n" in refused.stderr and str(TOP_N_MAX + 1) in refused.stderr
    assert f"x<={TOP_N_MAX}" in cli("search", "--help").stdout.replace("\n", " ").replace("  ", "")
