"""What `synthex ui` starts: `dagster dev` (with Synthex's daemon, `synthex_assets.dev`) on a workspace file naming the
code location after the project.

The workspace file lives in the project's Dagster home (``.synthex/dagster/workspace.yaml``) and points
at ``synthex_assets.code_location`` with SYNTHEX_PROJECT set, so the UI shows one location named after
the pipeline, holding its steps and every installed plugin's assets (the evals).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from synthex.core.project import PIPELINE_FILE, demo_pipeline, load_pipeline
from synthex_assets.naming import CODE_LOCATION_MODULE

DEV_MODULE = "synthex_assets.dev"  # `dagster dev` with Synthex's daemon (no Dagster import here: `synthex ui` starts fast)

# `dagster dev` warns (a SupersessionWarning, a FutureWarning) "Function `dev_command` is superseded and
# its usage is discouraged. Use 'dg dev' instead." A Synthex user chose neither command: this filter drops
# that one message (matched from its start) and leaves every other warning visible.
DEV_SUPERSEDED_FILTER = "ignore:Function `dev_command` is superseded:FutureWarning"


@dataclass
class UILaunch:
    location: str
    url: str
    args: list[str]
    env: dict[str, str]
    notes: list[str] = field(default_factory=list)


def _yaml_str(value: str) -> str:
    # A JSON string is a valid YAML double-quoted scalar (quotes, backslashes, Windows paths survive).
    return json.dumps(value, ensure_ascii=False)


def workspace_yaml(location: str, project: Path) -> str:
    return (
        "# Written by `synthex ui`: one code location, named after the project's pipeline.\n"
        "load_from:\n"
        "  - python_module:\n"
        f"      module_name: {CODE_LOCATION_MODULE}\n"
        f"      location_name: {_yaml_str(location)}\n"
        f"      working_directory: {_yaml_str(str(project))}\n"
    )


def python_warnings(existing: str | None) -> str:
    """PYTHONWARNINGS for `dagster dev`: the user's own filters, then the one that hides the `dg dev` notice."""
    kept = [f for f in (existing or "").split(",") if f.strip() and f.strip() != DEV_SUPERSEDED_FILTER]
    return ",".join([*kept, DEV_SUPERSEDED_FILTER])  # the last filter given takes precedence


def prepare_ui(project: Path, port: int) -> UILaunch:
    from synthex_assets.deployment import is_deployment
    from synthex_assets.instance import ensure_instance_yaml, instance_home
    from synthex_assets.naming import DagsterNames

    notes = []
    if (project / PIPELINE_FILE).exists():
        pipeline = load_pipeline(project)
    else:
        pipeline = demo_pipeline(project)
        notes.append(f"no {PIPELINE_FILE} in {project}: showing the bundled demo pipeline")
    home = instance_home(pipeline)
    location = DagsterNames.of(pipeline).location
    workspace = home / "workspace.yaml"
    if is_deployment(home):
        # A shared deployment (`synthex deploy init`): its code server and daemon run on their own, and
        # `dagster dev` would start a second daemon on the team's instance. Only a webserver, on the
        # deployment's own workspace (left as it is).
        notes.append(f"{home} is a shared deployment: starting only a webserver on its {workspace.name} "
                     f"(its code server and daemon run on their own)")
        env = dict(os.environ, DAGSTER_HOME=str(home))
        args = [sys.executable, "-m", "dagster_webserver", "-w", str(workspace), "-p", str(port)]
        return UILaunch(location, f"http://127.0.0.1:{port}", args, env, notes)
    ensure_instance_yaml(home)
    workspace.write_text(workspace_yaml(location, project), encoding="utf-8")
    env = dict(os.environ, SYNTHEX_PROJECT=str(project), DAGSTER_HOME=str(home),
               PYTHONWARNINGS=python_warnings(os.environ.get("PYTHONWARNINGS")))
    # Dagster's `dagster dev`, its daemon looping every 2 s instead of 30 s so a UI backfill finishes in
    # seconds (synthex_assets/daemon.py).
    args = [sys.executable, "-m", DEV_MODULE, "-w", str(workspace), "-p", str(port)]
    return UILaunch(location, f"http://127.0.0.1:{port}", args, env, notes)


def open_when_up(url: str, opener: Callable[[str], object], timeout: float = 120.0) -> bool:
    """Open ``url`` in a browser once the server answers; False when it never did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/server_info", timeout=2):
                opener(url + "/asset-groups")
                return True
        except OSError:
            time.sleep(0.5)
    return False


def spawn_browser_opener(url: str) -> subprocess.Popen:
    """A detached helper process that opens the browser when the UI is up (`synthex ui` then execs)."""
    return subprocess.Popen([sys.executable, "-m", "synthex.surfaces.ui_launch", url], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    import webbrowser

    open_when_up(sys.argv[1], webbrowser.open)
