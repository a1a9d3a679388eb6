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
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import warnings
from typing import Any

from dagster import DagsterInstance, DefaultRunLauncher

from synthex_assets.dagster_internals import RUN_WORKER_MODULES, execute_run_by_id
from synthex_assets.event_log import dynamic_partitions_held

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
        forkserver = self._forkserver()
        if forkserver is None or run.job_code_origin is None:
            super().launch_run(context)
            return
        worker = forkserver.Process(target=_run_worker, args=(run.run_id, self._instance.get_ref()),
                                    name=f"synthex-run-{run.run_id[:8]}", daemon=False)
        worker.start()
        self._instance.add_run_tags(run.run_id, {PID_TAG: str(worker.pid)})
        self._run_ids.add(run.run_id)

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
