"""The default template searches at an altitude and drills down (issue 22, part 4): its search output's
``mode="hierarchical"`` is the default of every door (``Pipeline.search``, ``synthex search``, the MCP
``search`` tool, the Dagster ``SearchResource``), the hits are the conversations the drill-down ranks and
each names the summary and monthly reflection it was reached through (``via``); ``--mode hybrid`` still
ranks the summaries and reflections themselves, and naming a step is surface search at that step (issue 32).
And a LoCoMo comparison names the best LLM-free built-in.

The project is the session's shared run of the default template (conftest ``ran_project``); tests only read.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from conftest import PIPELINE_PY, cli, load

from synthex.core.project import render_template

QUERY = "Rust lifetimes in structs"  # one of the 12 conversations is about them
K = 5


@pytest.fixture(scope="module")
def built(ran_project) -> Path:
    """The session's shared run of the default template (conftest ``ran_project``: 12 conversations); read only."""
    return ran_project.root


def ids(hits: list) -> list[str]:
    return [h["id"] if isinstance(h, dict) else h.id for h in hits]


def mcp_search(server, arguments: dict) -> list[dict]:
    """The MCP ``search`` tool called in process: its hits, as the client reads them (the JSON text)."""
    result = anyio.run(server.call_tool, "search", arguments)
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)["hits"]


def test_the_default_template_declares_the_drill_down():
    assert 'mode="hierarchical"' in render_template("x", [("chatgpt", "c.json", "auto")])
    assert 'mode="hierarchical"' in PIPELINE_PY  # the tests' copy of the default template is the template


def test_every_door_searches_the_drill_down_by_default_and_hybrid_still_ranks_the_altitudes(built):
    from synthex.surfaces.mcp_server import SyncWorker, build_server
    from synthex_resources.resources import SearchResource
    from synthex_resources.search.engine import SearchEngine

    pipe = load(built)
    try:
        app = pipe.app
        assert pipe.search_mode() == "hierarchical"
        python_hits = pipe.search(QUERY, k=K)
        # The drill-down's own ranking: the strategy called on the engine over the search output's steps.
        searched = ["summaries", "monthly"]
        engine = SearchEngine(app.store)
        drill = engine.search(QUERY, steps=searched, scope=app.scope(None), k=K,
                              strategy=app.search_strategies.get("hierarchical"))
        hybrid_direct = engine.search(QUERY, steps=searched, scope=app.scope(None), k=K,
                                      strategy=app.search_strategies.get("hybrid"))
        assert ids(python_hits) == ids(drill) and len(python_hits) == K
        # Hits are the conversations (the source step), the best one about the query.
        assert {h.step for h in python_hits} == {"chatgpt"}
        assert python_hits[0].content.startswith("# Rust lifetimes in structs")
        # Each names the records of each searched altitude that stand for it: its own summary (one leaf)
        # and its month's reflection (several), and those really have it as their leaf.
        for hit in python_hits:
            assert [v.step for v in hit.via] == searched
            for via in hit.via:
                record = pipe.get(via.id)
                assert record is not None and hit.id in {leaf.id for leaf in record.leaves()}
            assert hit.via[0].leaves == 1 and hit.via[1].leaves > 1

        mcp_server = build_server(app, "main", SyncWorker(app, "main"))
        tools = anyio.run(mcp_server.list_tools)
        schema = next(t for t in tools if t.name == "search").input_schema["properties"]["mode"]
        # No fixed default in the schema: the default depends on the step (naming one is surface search there);
        # the description names both, and a search with no mode and no step drills down (mcp_hits below).
        assert schema["default"] is None and "default: hierarchical when no step is named" in schema["description"]
        mcp_hits = mcp_search(mcp_server, {"query": QUERY, "k": K})
        mcp_hybrid = mcp_search(mcp_server, {"query": QUERY, "k": K, "mode": "hybrid"})
        hybrid_python = pipe.search(QUERY, k=K, mode="hybrid")
    finally:
        pipe.close()

    cli_hits = json.loads(cli("search", QUERY, "-k", K, "--json", "--project", built).stdout)["hits"]
    cli_hybrid = json.loads(cli("search", QUERY, "-k", K, "--mode", "hybrid", "--json", "--project", built).stdout)["hits"]
    table = cli("search", QUERY, "-k", 2, "--project", built).stdout
    resource = SearchResource(project_dir=str(built))
    try:
        resource_hits = resource.search(QUERY, k=K)
        resource_hybrid = resource.search(QUERY, k=K, mode="hybrid")
    finally:
        resource.teardown_after_execution(None)  # type: ignore[arg-type]

    expected = ids(drill)
    assert ids(cli_hits) == ids(mcp_hits) == ids(resource_hits) == expected
    assert [h["via"] for h in cli_hits] == [[v.to_dict() for v in h.via] for h in python_hits]
    assert [h["via"] for h in mcp_hits] == [h["via"] for h in cli_hits]
    assert [line.split()[0] for line in table.splitlines()[1:]] == ["1.", "via", "2.", "via"]
    assert f"summaries {python_hits[0].via[0].id[:8]}" in table

    # --mode hybrid: the summaries' and reflections' own ranking, on every door, with no via.
    hybrid = ids(hybrid_direct)
    assert ids(hybrid_python) == ids(cli_hybrid) == ids(mcp_hybrid) == ids(resource_hybrid) == hybrid
    assert {h.step for h in hybrid_direct} <= set(searched) and not set(hybrid) & set(expected)
    assert all(h["via"] == [] for h in cli_hybrid) and all("via" not in h for h in mcp_hybrid)


def locomo_result(arch: str, any10: float, all10: float) -> dict:
    metrics = {"recall_any@10": any10, "recall_all@10": all10}
    return {"benchmark": "locomo", "architecture": arch, "n_questions": 3, "metrics": {"turn": metrics, "session": metrics},
            "by_category": {"multi-hop": {"n": 3, "recall_any@10": any10}}}


def test_a_comparison_marks_its_best_and_names_the_best_llm_free_builtin():
    from evals.architectures import BUILTIN
    from evals.benchmarks.locomo.benchmark import LoCoMo
    from evals.commands import benchmark_command
    from evals.report import BEST_LLM_FREE, category_table, comparison_notes, table

    assert BEST_LLM_FREE["locomo"] in BUILTIN
    results = [locomo_result("raw-hybrid", 0.65, 0.58), locomo_result("conversational", 0.86, 0.77)]
    turn = table(results).splitlines()
    assert turn[2].startswith("| raw-hybrid | 3 | 0.0000 | 0.0000 | 0.6500 |")
    assert "| **0.8600** |" in turn[3] and "| **0.7700** |" in turn[3] and "**" not in turn[2]  # equal columns unmarked
    assert "| **0.860** |" in category_table(results)
    assert "**" not in table(results[:1])  # one row: nothing to mark
    assert comparison_notes(results).splitlines() == [
        "best here: turn recall_any@10 conversational 0.8600; turn recall_all@10 conversational 0.7700",
        "best LLM-free built-in on locomo (docs/benchmarks.md): hierarchical-expanded, not in this "
        "comparison; add it: --compare raw-hybrid,conversational,hierarchical-expanded"]
    both = [*results, locomo_result("hierarchical-expanded", 0.89, 0.80)]
    assert comparison_notes(both).splitlines()[1].endswith("hierarchical-expanded, in this comparison")
    assert comparison_notes([results[0] | {"benchmark": "longmemeval"}]) == ""  # no named best there
    help_text = " ".join(cli("eval", "locomo", "--help").stdout.split())
    assert "hierarchical-expanded (the best LLM-free)" in help_text
    assert benchmark_command(LoCoMo).name == "locomo"


SURFACE_QUERY = "Rust"  # the design's own example (§4.6, §6.2): pipeline.search("Rust", step="monthly")


def test_a_named_step_is_surface_search_at_that_step_on_every_door(built):
    """Issue 32, item 1: naming a step is surface search at that step (its own records ranked, drill down with
    ``sources()`` / ``leaves()``), although the template's search output drills down (``mode="hierarchical"``);
    the same ids on every door. A mode named with a step is that strategy over that step: the drill-down
    scores the step's records and returns the conversations they stand for, each ``via`` that step."""
    from synthex.surfaces.mcp_server import SyncWorker, build_server
    from synthex_resources.resources import SearchResource
    from synthex_resources.search.engine import SearchEngine

    pipe = load(built)
    try:
        app = pipe.app
        engine = SearchEngine(app.store)
        surfaced: dict[str, list[str]] = {}
        # A fold's state is made from its period's input and the state before it.
        for step, below in (("monthly", {"summaries"}), ("world-model", {"monthly", "world-model"})):
            hits = pipe.search(SURFACE_QUERY, step=step, k=K)
            own = engine.search(SURFACE_QUERY, steps=[step], scope=app.scope(None), k=K,
                                strategy=app.search_strategies.get("hybrid"))
            assert hits and ids(hits) == ids(own), f"step={step!r} is not that step's own ranking"
            assert {h.step for h in hits} == {step} and all(not h.via for h in hits)
            for hit in hits:  # drill down from the altitude: the sources one step below, the leaves at the bottom
                assert hit.sources() and {s.step for s in hit.sources()} <= below
                assert hit.leaves() and {leaf.step for leaf in hit.leaves()} == {"chatgpt"}
            assert hits.mode == "hybrid"
            surfaced[step] = ids(hits)
        both = pipe.search(SURFACE_QUERY, step=["summaries", "monthly"], k=K)  # several named steps: theirs too
        assert both and {h.step for h in both} <= {"summaries", "monthly"} and both.mode == "hybrid"

        # A mode named with the step: the drill-down from that step (what the evals ask), hits via its records.
        drilled = pipe.search(SURFACE_QUERY, step="monthly", k=K, mode="hierarchical")
        assert ids(drilled) == ids(engine.search(SURFACE_QUERY, steps=["monthly"], scope=app.scope(None), k=K,
                                                 strategy=app.search_strategies.get("hierarchical")))
        assert drilled and {h.step for h in drilled} == {"chatgpt"} and drilled.mode == "hierarchical"
        assert all([v.step for v in h.via] == ["monthly"] for h in drilled)

        mcp_server = build_server(app, "main", SyncWorker(app, "main"))
        mcp = {step: anyio.run(mcp_server.call_tool, "search", {"query": SURFACE_QUERY, "step": step, "k": K})
               for step in surfaced}
        mcp_drilled = mcp_search(mcp_server, {"query": SURFACE_QUERY, "step": "monthly", "k": K,
                                              "mode": "hierarchical"})
    finally:
        pipe.close()
    for step, expected in surfaced.items():
        answer = json.loads(mcp[step].content[0].text)
        assert not mcp[step].is_error and ids(answer["hits"]) == expected and answer["mode"] == "hybrid"
        cli_answer = json.loads(cli("search", SURFACE_QUERY, "--step", step, "-k", K, "--json",
                                    "--project", built).stdout)
        assert ids(cli_answer["hits"]) == expected and cli_answer["mode"] == "hybrid"
    assert ids(mcp_drilled) == ids(drilled)
    cli_drilled = json.loads(cli("search", SURFACE_QUERY, "--step", "monthly", "--mode", "hierarchical", "-k", K,
                                 "--json", "--project", built).stdout)
    assert ids(cli_drilled["hits"]) == ids(drilled) and cli_drilled["mode"] == "hierarchical"
    # The resource's own mode= is a default like the search output's: a named step still surfaces there.
    for resource in (SearchResource(project_dir=str(built)), SearchResource(project_dir=str(built), mode="hierarchical")):
        try:
            for step, expected in surfaced.items():
                assert ids(resource.search(SURFACE_QUERY, step=step, k=K)) == expected
            assert ids(resource.search(SURFACE_QUERY, step="monthly", k=K, mode="hierarchical")) == ids(drilled)
        finally:
            resource.teardown_after_execution(None)  # type: ignore[arg-type]
