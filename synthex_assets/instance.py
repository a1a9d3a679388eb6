"""The project's persistent Dagster instance (DAGSTER_HOME inside the project's data dir)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from dagster import DagsterInstance

from synthex.definition import PipelineDefinition

INSTANCE_YAML = """\
# Written by synthex: a project-local Dagster instance.
telemetry:
  enabled: false
"""


def ensure_instance_yaml(home: Path) -> None:
    """A project-local instance with telemetry off (it would log every step to the console)."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(INSTANCE_YAML, encoding="utf-8")


def instance_home(pipeline: PipelineDefinition) -> Path:
    return Path(os.environ.get("SYNTHEX_DAGSTER_HOME") or pipeline.dagster_home).resolve()


def open_instance(pipeline: PipelineDefinition) -> DagsterInstance:
    """A new handle on the project's instance; the caller owns it (``dispose()`` when done)."""
    home = instance_home(pipeline)
    ensure_instance_yaml(home)
    logging.getLogger("dagster").setLevel(logging.ERROR)
    return DagsterInstance.from_config(str(home))
