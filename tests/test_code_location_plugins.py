"""The code location loads every plugin's Dagster definitions; a plugin that fails to import or whose
``definitions`` hook raises is left out and reported (a warning line in the code server's log and the
location's metadata), never skipped in silence. The toy plugins are installed from outside the package:
modules in a tmp dir with a ``*.dist-info/entry_points.txt`` in the ``synthex.plugins`` group."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import env_without_openai

from synthex.core.project import load_pipeline

TOY_PLUGIN = '''
from dagster import Definitions, asset


@asset
def toy_plugin_asset() -> int:
    return 1


def definitions(pipeline):
    return Definitions(assets=[toy_plugin_asset])
'''
FAILED = ["plugin 'broken' (broken_defs_plugin) failed to load: ImportError: needs the toy extra",
          "plugin 'raising' (raising_defs_plugin) failed to load: definitions: RuntimeError: the hook broke"]


def install_toy_plugins(site: Path) -> Path:
    """Three plugins as an installed distribution would declare them: one adds an asset, one fails to
    import, one's hook raises."""
    site.mkdir(parents=True)
    (site / "toy_defs_plugin.py").write_text(textwrap.dedent(TOY_PLUGIN))
    (site / "broken_defs_plugin.py").write_text('raise ImportError("needs the toy extra")\n')
    (site / "raising_defs_plugin.py").write_text('def definitions(pipeline):\n    raise RuntimeError("the hook broke")\n')
    dist = site / "toy_defs_plugins-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-defs-plugins\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[synthex.plugins]\ntoy = toy_defs_plugin\nbroken = broken_defs_plugin\n"
                                           "raising = raising_defs_plugin\n")
    return site


def make_project(root: Path) -> Path:
    (root / "notes").mkdir(parents=True)
    (root / "pipeline.py").write_text('from synthex import Pipeline\n\npipeline = Pipeline("toyloc", agent="t")\n'
                                      'pipeline.source("notes", folder="notes")\n')
    return root


def test_dagster_loads_the_location_with_the_good_plugin_and_reports_the_failed_ones(tmp_path):
    site = install_toy_plugins(tmp_path / "site")
    project = make_project(tmp_path / "proj")
    env = env_without_openai() | {"SYNTHEX_PROJECT": str(project),
                                  "PYTHONPATH": os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH"))
                                                                if p)}
    # Dagster's own loader of a code location module (what `dagster dev` / `synthex ui` serve).
    proc = subprocess.run([str(Path(sys.executable).with_name("dagster")), "asset", "list", "-m",
                           "synthex_assets.code_location"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert {"notes", "toy_plugin_asset"} <= set(proc.stdout.split())
    for line in FAILED:
        assert f"synthex: {line}" in proc.stderr


def test_the_failures_are_in_the_location_metadata(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(install_toy_plugins(tmp_path / "site")))
    project = make_project(tmp_path / "proj")
    monkeypatch.setenv("SYNTHEX_PROJECT", str(project))  # importing the module loads its project's location
    from synthex_assets.code_location import PLUGIN_FAILURES_KEY, location_definitions

    defs = location_definitions(load_pipeline(project))
    assert defs.metadata[PLUGIN_FAILURES_KEY].value.splitlines() == FAILED
    assert any(k.to_user_string() == "toy_plugin_asset" for k in defs.resolve_all_asset_keys())
