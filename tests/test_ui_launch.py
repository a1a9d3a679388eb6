"""`synthex ui` without a browser or a server: the workspace file, the environment and the instance yaml."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from synthex.core.project import render_template
from synthex.surfaces.ui_launch import CODE_LOCATION_MODULE, prepare_ui
from synthex_assets.instance import INSTANCE_YAML, ensure_instance_yaml

# What synthex wrote as dagster.yaml before the first-visit pop-up was switched off (kept verbatim here
# on purpose: projects made then hold exactly this file).
EARLIER_SYNTHEX_YAML = "# Written by synthex: a project-local Dagster instance.\ntelemetry:\n  enabled: false\n"


def workspace_entry(launch) -> dict:
    workspace = Path(launch.args[launch.args.index("-w") + 1])
    loaded = yaml.safe_load(workspace.read_text(encoding="utf-8"))
    assert len(loaded["load_from"]) == 1
    return loaded["load_from"][0]["python_module"]


def test_location_is_named_after_the_pipeline(project):
    launch = prepare_ui(project, 3999)
    home = project.resolve() / ".synthex" / "dagster"

    assert launch.location == "test-memory"
    assert workspace_entry(launch) == {"module_name": CODE_LOCATION_MODULE, "location_name": "test-memory",
                                       "working_directory": str(project)}
    assert launch.args[1:3] == ["-m", "synthex_assets.dev"]  # `dagster dev` with Synthex's daemon
    assert Path(launch.args[launch.args.index("-w") + 1]) == home / "workspace.yaml"
    assert launch.args[launch.args.index("-p") + 1] == "3999"
    assert launch.url == "http://127.0.0.1:3999"
    assert launch.env["SYNTHEX_PROJECT"] == str(project)
    assert launch.env["DAGSTER_HOME"] == str(home)
    assert (home / "dagster.yaml").read_text(encoding="utf-8") == INSTANCE_YAML
    assert launch.notes == []


def test_location_matches_the_origin_of_cli_runs(project):
    """Runs `synthex run` makes carry this origin; the UI files them under the job only if the names agree."""
    from synthex.core.project import load_pipeline
    from synthex_assets.dagster_internals import SINGLETON_REPOSITORY_NAME as REPOSITORY
    from synthex_assets.launcher import remote_job_origin

    launch = prepare_ui(project, 3999)
    origin = remote_job_origin(load_pipeline(project))
    entry = workspace_entry(launch)
    assert origin.repository_origin.code_location_origin.location_name == entry["location_name"]
    assert origin.repository_origin.repository_name == REPOSITORY
    target = origin.repository_origin.code_location_origin.loadable_target_origin
    assert (target.module_name, target.working_directory) == (entry["module_name"], entry["working_directory"])


def test_folder_without_pipeline_shows_the_demo(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    launch = prepare_ui(empty, 3001)

    assert launch.location == "synthex-demo"
    assert workspace_entry(launch) == {"module_name": CODE_LOCATION_MODULE, "location_name": "synthex-demo",
                                       "working_directory": str(empty)}
    assert launch.env["SYNTHEX_PROJECT"] == str(empty)
    assert launch.env["DAGSTER_HOME"] == str(empty / ".synthex" / "dagster")
    assert len(launch.notes) == 1 and "no pipeline.py" in launch.notes[0]


def test_dagster_home_override(project, tmp_path, monkeypatch):
    monkeypatch.setenv("SYNTHEX_DAGSTER_HOME", str(tmp_path / "elsewhere"))
    launch = prepare_ui(project, 3999)
    assert launch.env["DAGSTER_HOME"] == str(tmp_path / "elsewhere")
    assert (tmp_path / "elsewhere" / "workspace.yaml").exists()
    assert (tmp_path / "elsewhere" / "dagster.yaml").exists()


def test_names_and_paths_that_need_quoting_survive_the_yaml(tmp_path, small_export):
    name = "mark's \"memory\" \\ #1: ü"
    root = tmp_path / "it's a \"proj\" #2"
    root.mkdir()
    (root / "pipeline.py").write_text(render_template(name, [("chatgpt", str(small_export), "auto")]),
                                      encoding="utf-8")
    launch = prepare_ui(root, 3999)
    assert launch.location == name
    entry = workspace_entry(launch)
    assert entry["location_name"] == name
    assert entry["working_directory"] == str(root)


def run_with_launch_env(env: dict[str, str], code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def test_only_the_dg_dev_notice_is_hidden(project, monkeypatch):
    monkeypatch.setenv("PYTHONWARNINGS", "default::DeprecationWarning")
    launch = prepare_ui(project, 3999)
    # The decorator `dagster dev` carries, on a function of the same name: the same message at runtime.
    stderr = run_with_launch_env(launch.env, """
        import warnings
        from dagster._annotations import superseded

        @superseded(additional_warn_text="Use 'dg dev' instead.")
        def dev_command():
            pass

        dev_command()
        warnings.warn("a real problem", FutureWarning)
        warnings.warn("the user's own filter still applies", DeprecationWarning)
    """)
    assert "superseded" not in stderr and "dg dev" not in stderr
    assert "FutureWarning: a real problem" in stderr
    assert "DeprecationWarning: the user's own filter still applies" in stderr


def test_without_the_filter_the_notice_would_show(project):
    """The check above can fail: the same code with no filter prints the notice."""
    launch = prepare_ui(project, 3999)
    env = {k: v for k, v in launch.env.items() if k != "PYTHONWARNINGS"}
    stderr = run_with_launch_env(env, """
        from dagster._annotations import superseded

        @superseded(additional_warn_text="Use 'dg dev' instead.")
        def dev_command():
            pass

        dev_command()
    """)
    assert "Function `dev_command` is superseded" in stderr


# -- the instance yaml --------------------------------------------------------------------------------------
def nux_enabled(home: Path) -> bool:
    from dagster import DagsterInstance

    instance = DagsterInstance.from_config(str(home))
    try:
        return instance.nux_enabled
    finally:
        instance.dispose()


def test_new_instance_has_telemetry_and_first_visit_popup_off(tmp_path):
    home = tmp_path / "dagster"
    ensure_instance_yaml(home)
    config = yaml.safe_load((home / "dagster.yaml").read_text(encoding="utf-8"))
    assert config == {"telemetry": {"enabled": False}, "nux": {"enabled": False},  # issue 23: runs start at once
                      "run_coordinator": {"module": "dagster._core.run_coordinator", "class": "DefaultRunCoordinator"},
                      "run_launcher": {"module": "synthex_assets.run_launcher", "class": "WarmRunLauncher"}}
    assert nux_enabled(home) is False


def test_file_written_by_an_earlier_synthex_is_upgraded(tmp_path):
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text(EARLIER_SYNTHEX_YAML, encoding="utf-8")
    assert nux_enabled(home) is True  # what a project made earlier showed: the pop-up

    ensure_instance_yaml(home)
    assert (home / "dagster.yaml").read_text(encoding="utf-8") == INSTANCE_YAML
    assert nux_enabled(home) is False
    ensure_instance_yaml(home)  # stable from then on
    assert (home / "dagster.yaml").read_text(encoding="utf-8") == INSTANCE_YAML


@pytest.mark.parametrize("text", [
    EARLIER_SYNTHEX_YAML + "run_monitoring:\n  enabled: true\n",   # the user added a setting
    EARLIER_SYNTHEX_YAML.replace("false", "true"),                  # the user switched telemetry on
    "telemetry:\n  enabled: false\n",                               # the user's own file
])
def test_user_edited_file_is_left_alone(tmp_path, text):
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text(text, encoding="utf-8")
    ensure_instance_yaml(home)
    assert (home / "dagster.yaml").read_text(encoding="utf-8") == text


def test_prepare_ui_upgrades_an_existing_project(project):
    home = project / ".synthex" / "dagster"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(EARLIER_SYNTHEX_YAML, encoding="utf-8")
    prepare_ui(project, 3999)
    assert nux_enabled(home) is False
