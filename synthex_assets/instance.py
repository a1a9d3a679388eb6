"""The project's persistent Dagster instance (DAGSTER_HOME inside the project's data dir)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from dagster import DagsterInstance

from synthex.pipeline import Pipeline

_INSTANCES: dict[str, DagsterInstance] = {}


def ensure_instance_yaml(home: Path) -> None:
    """A project-local instance with telemetry off (it would log every step to the console)."""
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text("telemetry:\n  enabled: false\n", encoding="utf-8")


def project_instance(pipeline: Pipeline) -> DagsterInstance:
    home = Path(os.environ.get("SYNTHEX_DAGSTER_HOME") or pipeline.dagster_home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    ensure_instance_yaml(home)
    key = str(home)
    if key not in _INSTANCES:
        logging.getLogger("dagster").setLevel(logging.ERROR)
        _INSTANCES[key] = DagsterInstance.from_config(key)
    return _INSTANCES[key]
