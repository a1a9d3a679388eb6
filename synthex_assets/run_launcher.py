"""The run launcher of a project's Dagster instance (``dagster.yaml``): runs start in a warm process.

Dagster's DefaultRunLauncher asks the code server to spawn a fresh Python for every run, which imports
Dagster, the code location, LanceDB (its REST client builds hundreds of pydantic validators at import),
pyarrow and the embedder before the first step starts: 5-7 s on a quiet 2-core machine, 15-20 s under load,
for a run whose steps take a second (issue 23: a sensor run of one stream line). This launcher forks each
run from a multiprocessing *forkserver* that imported those libraries once (``PRELOAD``), so a run starts
in a fraction of a second. The run process is otherwise what Dagster's is: it loads the run's code origin
itself (so an edited pipeline.py is what runs), executes the run by id and records every event; the
run's pid is a tag so ``terminate`` (the UI's Terminate button) stops it.

Where a forkserver does not exist (Windows), or the run carries no code origin, it launches as Dagster's
DefaultRunLauncher does.

Before either, every run this instance launches (the UI, a backfill, the daemon's sensor and schedule
runs) gets its ``synthex/branch``, ``synthex/writer`` and ``synthex/launched_by`` tags, and a run over a branch or period that
is not the project's is refused: marked canceled with one line, no process started
(``synthex_assets.run_tags``).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dagster import DagsterInstance, DagsterInvariantViolationError, DefaultRunLauncher

from synthex.core.project import PIPELINE_FILE
from synthex_assets.dagster_internals import RUN_WORKER_MODULES, execute_run_by_id
from synthex_assets.event_log import dynamic_partitions_held
from synthex_assets.naming import BRANCH_PARTITIONS, PERIOD_PARTITIONS, run_namespace, scoped
from synthex_assets.run_tags import (
    CALLER_TAG,
    REFUSED_TAG,
    missing_tags,
    project_branches,
    refusal,
    run_partitions,
)

# The libraries a run imports, loaded once in the forkserver (a module that fails to import is skipped).
# lancedb among them (4 s of class decoration at import, most of a run's start): it supports fork (an
# at-fork hook restarts its event loop thread and native runtime in the child), and the forkserver never
# uses it, so nothing of it is mid-operation when a run is forked.
PRELOAD = ["dagster", "synthex", "synthex.core.project", "synthex.core.plugins", "synthex.core.pii",
           "synthex_assets.run_launcher", "synthex_assets.dagster_internals", "synthex_assets.definitions",
           "synthex_assets.executor", "synthex_resources.record_store", "synthex_resources.embedder", "lancedb",
           "lance", "pyarrow", "duckdb", "onnxruntime", "upath", "fsspec", "synthex.app", "evals.plugin",
           *RUN_WORKER_MODULES]
# lancedb warns in every forked child that its fork support is experimental; see above for why it is safe
# here. Only that message, only in the processes that import this module (the launcher's and the runs').
warnings.filterwarnings("ignore", message="lancedb fork support is experimental", category=RuntimeWarning)
PID_TAG = "synthex/run_worker_pid"
TERMINATE_GRACE_S = 5.0


def _run_worker(run_id: str, instance_ref: Any) -> None:
    """The run process: the run's events and failure go to the instance, like `dagster api execute_run`."""
    instance = DagsterInstance.from_ref(instance_ref)
    try:
        with dynamic_partitions_held(instance):  # the run's partitions exist before it starts: read once
            execute_run_by_id(run_id, instance)
    except BaseException as exc:  # e.g. the code origin does not load: the run must not stay STARTING
        run = instance.get_run_by_id(run_id)
        if run is not None and not run.is_finished:
            instance.report_run_failed(run, f"the run process failed: {type(exc).__name__}: {exc}"[:2000])
        raise
    finally:
        instance.dispose()


class WarmRunLauncher(DefaultRunLauncher):
    """Forks each run from a preloaded forkserver (see the module docstring); configured in the project's
    ``dagster.yaml`` by ``synthex_assets.instance``."""

    def __init__(self, inst_data: Any = None) -> None:
        super().__init__(inst_data=inst_data)
        self._context: Any = None

    def _forkserver(self) -> Any:
        if self._context is None:
            if "forkserver" not in multiprocessing.get_all_start_methods():
                return None
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(PRELOAD)
            self._context = context
        return self._context

    def launch_run(self, context: Any) -> None:
        run = context.dagster_run
        if not self._admit(run):
            return
        forkserver = self._forkserver()
        if forkserver is None or run.job_code_origin is None:
            super().launch_run(context)
            return
        worker = forkserver.Process(target=_run_worker, args=(run.run_id, self._instance.get_ref()),
                                    name=f"synthex-run-{run.run_id[:8]}", daemon=False)
        worker.start()
        self._instance.add_run_tags(run.run_id, {PID_TAG: str(worker.pid)})
        self._run_ids.add(run.run_id)

    def _admit(self, run: Any) -> bool:
        return admit_run(self._instance, run)

    def terminate(self, run_id: str) -> bool:
        run = self._instance.get_run_by_id(run_id) if self.has_instance else None
        if run is None or run.is_finished or PID_TAG not in run.tags:
            return super().terminate(run_id)
        self._instance.report_run_canceling(run)
        pid = int(run.tags[PID_TAG])
        try:
            os.kill(pid, signal.SIGTERM)
            _wait_gone(pid, TERMINATE_GRACE_S)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
                _wait_gone(pid, TERMINATE_GRACE_S)  # a caller told "terminated" finds the worker gone
        except ProcessLookupError:
            pass
        run = self._instance.get_run_by_id(run_id)
        if run is not None and not run.is_finished:
            self._instance.report_run_canceled(run)
        return True


def admit_run(instance: DagsterInstance, run: Any, projects: Mapping[str, Path] | None = None) -> bool:
    """Tag the run with its branch and door; False (the run canceled, one line) when it is refused. Every
    launcher of Synthex's instances calls it first (this one, and the deployment's:
    ``synthex_assets.queued_runs``). ``projects``: each code location's project folder, by location name
    (a deployment's launcher config, written by ``synthex deploy init``)."""
    # the partitions of the run's own memory (on an instance many namespaced memories share)
    namespace = run_namespace(run.tags, run.asset_selection)
    selected = run_partitions(run.tags, instance.get_dynamic_partitions(scoped(namespace, BRANCH_PARTITIONS)),
                              instance.get_dynamic_partitions(scoped(namespace, PERIOD_PARTITIONS)))
    if selected is None:  # not a run over the step partitions (e.g. an eval job's): nothing to say
        return True
    branches, periods = selected
    project = _project_dir(run, projects or {})
    why = refusal(branches, periods, project_branches(project)) \
        if project is not None and periods is not None else None
    tags = missing_tags(run.tags, branches, _memory_name(run))
    if why is not None:
        tags[REFUSED_TAG] = why[:1000]
    if tags:
        instance.add_run_tags(run.run_id, tags)
    if why is None:
        return True
    instance.report_run_canceled(instance.get_run_by_id(run.run_id) or run, message=why)
    return False


def _memory_name(run: Any) -> str | None:
    """The memory a run belongs to, for its writer tag: its code location's name (the memory's namespace, else
    its pipeline's name: synthex_assets.naming.DagsterNames.location); None when the run has no code location
    origin."""
    origin = run.remote_job_origin
    location = origin.repository_origin.code_location_origin if origin is not None else None
    return getattr(location, "location_name", None)


def _project_dir(run: Any, projects: Mapping[str, Path]) -> Path | None:
    """The project a run belongs to, for its branch check; None: the run is not judged here (each memory's
    partition-keys sensor and the step op still protect). A run `synthex run` queued (``CALLER_TAG``) is
    executed by that caller from its own checkout: judged by that checkout (its code location's working
    directory) when this host sees its pipeline.py, else not judged here (a caller on another machine checked
    its own branch when it loaded it). A location named in ``projects`` (a deployment's daemon serves several
    memories, each a gRPC location, which names no folder): by that folder only, when it holds a pipeline.py
    on this host (never by ``SYNTHEX_PROJECT``, which would be another memory's). Else SYNTHEX_PROJECT (`synthex
    ui` sets it for the webserver and the daemon), else the location's working directory."""
    working = _working_directory(run)
    if working and CALLER_TAG in run.tags:
        return _with_pipeline(Path(working))
    name = _memory_name(run)
    if name is not None and name in projects:
        return _with_pipeline(Path(projects[name]))
    named = os.environ.get("SYNTHEX_PROJECT")
    if named:
        return Path(named)
    return Path(working) if working else None


def _with_pipeline(folder: Path) -> Path | None:
    """``folder`` when it holds a pipeline.py here; None otherwise (read from it, every branch but main would
    look invented)."""
    return folder if (folder / PIPELINE_FILE).is_file() else None


def _working_directory(run: Any) -> str | None:
    """The working directory of the run's code location; None for none, or for a gRPC server location (it
    names a host and port, and raises when asked for its target)."""
    origin = run.remote_job_origin
    location = origin.repository_origin.code_location_origin if origin is not None else None
    try:
        target = getattr(location, "loadable_target_origin", None)
    except DagsterInvariantViolationError:
        return None
    return getattr(target, "working_directory", None) or None


def _wait_gone(pid: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
