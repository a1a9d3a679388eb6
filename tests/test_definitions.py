"""The Dagster code location: every step an asset with the right deps, partitions and resources."""

import importlib
import sys

from conftest import load
from dagster import AssetKey, Definitions

from synthex_assets import build_definitions


def test_definitions_from_a_pipeline(project):
    pipe = load(project)
    defs = build_definitions(pipe)
    Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert keys == {"chatgpt", "transcripts", "summaries", "monthly", "world_model"}
    node = graph.get(AssetKey("world_model"))
    assert node.parent_keys == {AssetKey("monthly")}
    assert node.code_version == f"world-model@{pipe.steps['world-model'].version_hash()[:10]}"  # readable (item 8)
    assert node.partitions_def.partition_dimension_names == ["branch", "period"]
    assert node.metadata["synthex/step"] == "world-model"
    assert set(defs.resources) >= {"store", "llm", "search"}


def test_code_location_loads_the_project_or_the_demo(project, tmp_path, monkeypatch):
    monkeypatch.setenv("SYNTHEX_PROJECT", str(project))
    sys.modules.pop("synthex_assets.code_location", None)
    module = importlib.import_module("synthex_assets.code_location")
    assert module.defs.resolve_asset_graph().get(AssetKey("summaries")) is not None
    monkeypatch.setenv("SYNTHEX_PROJECT", str(tmp_path / "empty"))
    module = importlib.reload(module)
    assert module.defs.resolve_asset_graph().get(AssetKey("world_model")) is not None  # the bundled demo
