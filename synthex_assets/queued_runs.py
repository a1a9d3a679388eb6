"""`synthex run` on a team's shared instance waits its turn in Dagster's run queue, on every machine.

On one machine one writer per branch is a file lock (synthex_resources.branch_lock), which another machine
cannot see. A deployment's ``dagster.yaml`` (synthex_assets/deployment.py) has a ``QueuedRunCoordinator`` whose
tag limit allows one run in progress per value of ``synthex/writer`` (a memory's branch), decided by the one daemon of the
deployment from the runs table in PostgreSQL. A ``synthex run`` against it therefore does not start its
Dagster run directly: it creates the run, submits it to the queue (QUEUED) and waits. When the daemon's
dequeue admits it (no run of its memory's branch in progress, wherever it was launched) it calls this module's
``DeploymentRunLauncher``, which starts no process for such a run (tagged ``CALLER_TAG``): the run is
STARTING and handed back to the ``synthex run`` that queued it, which sees the status and executes it in its
own process as before (live store, progress bar, its own records in the runs table). Every other run (a
sensor's, the UI's, ``dagster job launch``) is launched as Dagster's ``DefaultRunLauncher`` does: a process
the code server starts.

So the queue serializes ``synthex run`` against every other run of the branch, on any machine, with the same
guarantee as runs the daemon launches (one dequeue loop decides; a STARTED run counts against the limit until
it ends). While its run is QUEUED or STARTED the caller holds nothing else: its plan was made before it
waited, so a run of the same branch that ended meanwhile leaves the ops to find records already there (a
step op skips a record whose id it finds, synthex_assets.executor).

Run monitoring: the launcher checks a handed-back run's worker as the caller's pid on the caller's host; a
caller that died (killed) has its run marked failed by the daemon's run monitoring, so the branch's queue
moves on. A caller on another host than the daemon cannot be checked that way and is taken as running (the
next `synthex run` of the branch on the caller's machine marks it failed: ``ProjectApp._fail_abandoned_runs``).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dagster import (
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    DefaultRunLauncher,
    Field,
    Map,
    SubmitRunContext,
)

from synthex.core.errors import SynthexError
from synthex_assets.dagster_internals import (
    BRANCH_TAG,
    WRITER_TAG,
    CheckRunHealthResult,
    QueuedRunCoordinatorDaemon,
    WorkerStatus,
)
from synthex_assets.run_launcher import admit_run
from synthex_assets.run_tags import CALLER_TAG, REFUSED_TAG  # CALLER_TAG: also read here by the tests

# The launcher's config field: code location name -> project folder (``synthex deploy init`` writes it).
PROJECTS_FIELD = "projects"
POLL_S = 0.5
# How long a QUEUED run waits before the caller is told again that it is still waiting (and why).
REMIND_S = 30.0
# A daemon writes its heartbeat every 30 s (dagster._daemon.controller.DEFAULT_HEARTBEAT_INTERVAL_SECONDS):
# older than this, none is running.
DAEMON_STALE_S = 120.0


def caller_tags() -> dict[str, str]:
    return {CALLER_TAG: f"{socket.gethostname()}:{os.getpid()}"}


class DeploymentRunLauncher(DefaultRunLauncher):
    """The deployment's run launcher: a run queued by ``synthex run`` goes back to it (no process started);
    every other run is launched as ``DefaultRunLauncher`` launches it. Both after ``admit_run`` (the run's
    branch and door tags; a run over an invented branch or period, or over several branches, refused).

    Its config (dagster.yaml, written by ``synthex deploy init``) maps each code location to its memory's
    project folder, ``projects: {alice: /srv/memories/alice}``: a gRPC location names no folder and a daemon
    serving several memories has no ``SYNTHEX_PROJECT``, so this is how the daemon knows whose branches a UI,
    sensor or schedule run is judged by."""

    def __init__(self, inst_data: Any = None, projects: Mapping[str, str] | None = None) -> None:
        super().__init__(inst_data=inst_data)
        self.projects = {location: Path(folder) for location, folder in (projects or {}).items()}

    @classmethod
    def config_type(cls) -> dict[str, Field]:
        return {PROJECTS_FIELD: Field(Map(str, str), is_required=False, default_value={},
                                      description="Each code location's project folder, by location name: the "
                                                  "branches a run of that location may name are its project's.")}

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Mapping[str, Any]) -> DeploymentRunLauncher:
        return cls(inst_data=inst_data, projects=config_value.get(PROJECTS_FIELD) or {})

    def launch_run(self, context: Any) -> None:
        run = context.dagster_run
        if not admit_run(self._instance, run, self.projects):
            return
        if CALLER_TAG in run.tags:
            self._instance.report_engine_event(
                f"admitted by the run queue: handed back to the `synthex run` that queued it ({run.tags[CALLER_TAG]})",
                run)
            return
        super().launch_run(context)

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        caller = run.tags.get(CALLER_TAG)
        if caller is None:  # a code server's run process: not checked (as DefaultRunLauncher, which cannot)
            return CheckRunHealthResult(WorkerStatus.RUNNING, "not checked: a code server's run process")
        host, _, pid = caller.rpartition(":")
        if host != socket.gethostname() or not pid.isdigit():
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"not checked: the caller {caller} is on another host")
        if _alive(int(pid)):
            return CheckRunHealthResult(WorkerStatus.RUNNING)
        return CheckRunHealthResult(WorkerStatus.FAILED, f"the `synthex run` executing it ({caller}) is gone")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def queue_daemon_alive(instance: DagsterInstance) -> bool:
    """Whether a daemon's queue loop wrote a heartbeat to the instance in the last ``DAEMON_STALE_S``."""
    beat = instance.get_daemon_heartbeats().get(QueuedRunCoordinatorDaemon.daemon_type())
    return beat is not None and time.time() - beat.timestamp < DAEMON_STALE_S


def runs_through_queue(instance: DagsterInstance) -> bool:
    """Whether a run this process starts must wait in the instance's queue: a deployment's instance."""
    return isinstance(instance.run_launcher, DeploymentRunLauncher)


def wait_for_queue(instance: DagsterInstance, on_wait: Callable[[str], None] | None = None,
                   ) -> Callable[[DagsterRun], DagsterRun]:
    """The ``admit`` step of ``execute_as_location_run`` on a deployment: submit the created run to the queue,
    return it once the daemon handed it back (STARTING); raise when it was canceled or failed in the queue
    (one line). Interrupted while queued (Ctrl-C), the run is canceled so the daemon never hands it over."""

    def admit(run: DagsterRun) -> DagsterRun:
        instance.add_run_tags(run.run_id, caller_tags())
        # Straight to the queue: ``DagsterInstance.submit_run`` also wants a code origin a launcher could start
        # a process from, which this run (executed by its caller) has no use for. The queue reads no workspace.
        instance.run_coordinator.submit_run(SubmitRunContext(instance.get_run_by_id(run.run_id) or run,
                                                             workspace=None))  # type: ignore[arg-type]
        said = 0.0
        try:
            while True:
                current = instance.get_run_by_id(run.run_id)
                if current is None:
                    raise SynthexError(f"run {run.run_id} vanished from the instance while queued")
                if current.status not in (DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED):
                    break
                if on_wait is not None and time.monotonic() - said >= REMIND_S:
                    on_wait(f"queued in Dagster's run queue as run {run.run_id}: one run per branch of a memory at "
                            f"a time (branch {current.tags.get(BRANCH_TAG, '?')} of "
                            f"{current.tags.get(WRITER_TAG, '?|').rpartition('|')[0]}); "
                            + ("waiting for the daemon to start it" if queue_daemon_alive(instance) else
                               f"no daemon has ticked the queue in the last {DAEMON_STALE_S:.0f} s: it waits "
                               f"until one runs (`python -m synthex_assets.daemon run -w workspace.yaml`, docs/deploy.md)"))
                    said = time.monotonic()
                time.sleep(POLL_S)
        except BaseException:
            current = instance.get_run_by_id(run.run_id)
            if current is not None and current.status in (DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED):
                instance.report_run_canceled(current, message="the `synthex run` that queued it stopped waiting")
            raise
        if current.status != DagsterRunStatus.STARTING:
            reason = current.tags.get(REFUSED_TAG) or f"it is {current.status.value}"
            raise SynthexError(f"run {run.run_id} did not start from Dagster's run queue: {reason}")
        return current

    return admit
