"""The project's persistent Dagster instance (DAGSTER_HOME inside the project's data dir)."""

from __future__ import annotations

import logging
from pathlib import Path

from dagster import DagsterInstance

from synthex.core.definition import PipelineDefinition
from synthex_assets.dagster_internals import InstanceRef

INSTANCE_YAML = """\
# Written by synthex: a project-local Dagster instance.
telemetry:
  enabled: false
# No "Join the Dagster community" pop-up over the UI on a first visit (`synthex ui`).
nux:
  enabled: false
# Runs a sensor requests (or the UI launches) start at once: a change is searchable seconds after the tick,
# not after a queue's dequeue loop (issue 23: 10-17 s queued with Dagster's default queue).
run_coordinator:
  module: dagster._core.run_coordinator
  class: DefaultRunCoordinator
# ... in a process forked from one that imported the run's libraries already (seconds saved per run).
run_launcher:
  module: synthex_assets.run_launcher
  class: WarmRunLauncher
"""

# What earlier versions of synthex wrote. A dagster.yaml equal to one of these is brought up to date;
# any other existing file is the user's own and is never rewritten.
EARLIER_INSTANCE_YAMLS = (
    "# Written by synthex: a project-local Dagster instance.\ntelemetry:\n  enabled: false\n",
    "# Written by synthex: a project-local Dagster instance.\ntelemetry:\n  enabled: false\n"
    "# No \"Join the Dagster community\" pop-up over the UI on a first visit (`synthex ui`).\nnux:\n  enabled: false\n",
)


def ensure_instance_yaml(home: Path) -> None:
    """A project-local instance with telemetry (it would log every step to the console) and the UI's
    first-visit pop-up off, launching runs without a queue. Written when missing or still as an earlier
    synthex wrote it."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists() or _written_by_earlier_synthex(config):
        config.write_text(INSTANCE_YAML, encoding="utf-8")


def _written_by_earlier_synthex(config: Path) -> bool:
    try:
        text = config.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return text in EARLIER_INSTANCE_YAMLS


def instance_home(pipeline: PipelineDefinition) -> Path:
    return pipeline.instance_home


def open_instance(pipeline: PipelineDefinition) -> DagsterInstance:
    """A new handle on the project's instance; the caller owns it (``dispose()`` when done)."""
    home = instance_home(pipeline)
    ensure_instance_yaml(home)
    logging.getLogger("dagster").setLevel(logging.ERROR)
    return DagsterInstance.from_ref(InstanceRef.from_dir(str(home), overrides=storage_overrides(home)))


def storage_overrides(home: Path) -> dict:
    """The project's event log (synthex_assets/event_log.py: Dagster's SQLite storage, same files, with its
    connections kept open) and run and schedule storages (synthex_assets/sqlite_storage.py) for an instance whose dagster.yaml is synthex's own; a user's own storage
    settings are left as they are. The UI's process reads the same files with Dagster's stock class."""
    if (home / "dagster.yaml").read_text(encoding="utf-8") != INSTANCE_YAML:
        return {}
    return {"event_log_storage": {"module": "synthex_assets.event_log", "class": "SqliteEventLog",
                                  "config": {"base_dir": str(home / "history" / "runs")}},
            # Dagster's files and schema, opened without reading its alembic scripts (sqlite_storage.py).
            "run_storage": {"module": "synthex_assets.sqlite_storage", "class": "SqliteRuns",
                            "config": {"base_dir": str(home / "history")}},
            "schedule_storage": {"module": "synthex_assets.sqlite_storage", "class": "SqliteSchedules",
                                 "config": {"base_dir": str(home / "schedules")}}}
