"""A team's deployment with all its long-running processes (issue 38 item 2): a code server, a daemon and a
webserver started once for this module on the worker's PostgreSQL server (a database of its own), one
project on them. The sensor tick and the webserver's GraphQL are in the default `pytest`; run monitoring and
a daemon's restart (a `time.sleep(15)` and SIGKILLs) are marked ``deployment`` (`pytest -n 0 -m deployment`).

Its own module, not tests/test_deploy.py: under `--dist loadfile` a module runs on one worker, so the two
multi-process modules of the default run go to whichever workers are free instead of one after the other."""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import go_offline, load, write_json
from test_deploy import (
    Service,
    deploy_init,
    failures,
    finished_ok,
    graphql_runs,
    served,
    shared_env,
    shared_store_project,
    start_service,
    start_synthex,
    synthex,
    wait_for,
)

from evals.postgres_server import PostgresServer, free_port
from synthex.core.demo.generate import generate
from synthex_assets.dagster_internals import BRANCH_TAG


@dataclass
class Deployment:
    """The module's deployment: its processes, its project (and a second checkout of it), its instance."""

    project: Path
    other_machine: Path
    export: Path
    env: dict[str, str]
    instance: object
    logs: Path
    workspace: str
    web_port: int
    first_run_id: str = ""
    services: list[Service] = field(default_factory=list)  # code server, daemon, webserver
    runs: list[Service] = field(default_factory=list)  # the running test's `synthex run`s

    def stop_runs(self) -> None:
        for run in reversed(self.runs):
            run.stop()
        self.runs.clear()

    def start_daemon(self) -> Service:
        daemon = start_service("daemon", [sys.executable, "-m", "dagster._daemon", "run", "-w", self.workspace],
                               self.env, self.project, self.logs)
        self.services.append(daemon)
        return daemon

    @property
    def daemon(self) -> Service:
        return next(s for s in self.services if s.name == "daemon")

    def summary_ids(self) -> list[str]:
        with pytest.MonkeyPatch.context() as patch:  # the pipeline reads SYNTHEX_STORE_URI when loaded
            patch.setenv("SYNTHEX_STORE_URI", self.env["SYNTHEX_STORE_URI"])
            pipe = load(self.project)
            try:
                return sorted(r.id for r in pipe.app.records("summaries"))
            finally:
                pipe.close()

    def run_of(self, service: Service):
        from synthex_assets.queued_runs import CALLER_TAG

        found = [r for r in self.instance.get_runs() if r.tags.get(CALLER_TAG, "").endswith(f":{service.proc.pid}")]
        return found[0] if found else None

    def synthex_run(self, name: str, *args: str) -> Service:
        """A `synthex run` in a process of its own, stopped with the services if the test fails."""
        run = start_synthex(self.env, self.logs, name, "run", *args)
        self.runs.append(run)
        return run

    def graphql_lists_every_run(self) -> dict[str, dict]:
        """The webserver's GraphQL: every run of the instance, with its status and partition range."""
        from synthex_assets.dagster_internals import (
            ASSET_PARTITION_RANGE_END_TAG,
            ASSET_PARTITION_RANGE_START_TAG,
        )

        wait_for("the webserver", lambda: served(self.web_port), 180, self.services)
        shown = graphql_runs(self.web_port)
        runs = self.instance.get_runs()
        assert set(shown) == {r.run_id for r in runs}
        for run in runs:
            assert shown[run.run_id]["status"] == run.status.value
            for tag in (ASSET_PARTITION_RANGE_START_TAG, ASSET_PARTITION_RANGE_END_TAG, BRANCH_TAG):
                assert shown[run.run_id]["tags"][tag] == run.tags[tag]
        return shown


@pytest.fixture(scope="module")
def deployment_processes(postgres_server: PostgresServer, tmp_path_factory) -> Iterator[Deployment]:
    """Code server, daemon and webserver as processes of their own, and a first `synthex run` of main; every
    process is stopped however the module's tests ended."""
    from dagster import DagsterInstance

    tmp = tmp_path_factory.mktemp("deployment")
    db = f"test_{uuid.uuid4().hex[:12]}"
    postgres_server.create_database(db)
    postgres = dataclasses.replace(postgres_server, db=db)
    export = write_json(tmp / "exports" / "conversations.json", generate(conversations=2, months=1, seed=3))
    project = shared_store_project(tmp / "proj", export)
    other_machine = shared_store_project(tmp / "proj-b", export)
    port, web_port = free_port(), free_port()
    with pytest.MonkeyPatch.context() as patch:  # module fixtures run before the autouse offline_env
        go_offline(patch)
        home = deploy_init(tmp / "deploy", project, "--grpc-host", "127.0.0.1", "--grpc-port", str(port))
    config = (home / "dagster.yaml").read_text()
    (home / "dagster.yaml").write_text(config.replace("poll_interval_seconds: 30", "poll_interval_seconds: 5"))
    env = {**shared_env(home, postgres), "SYNTHEX_PROJECT": str(project), "SYNTHEX_STORE_URI": str(tmp / "shared-store")}
    with pytest.MonkeyPatch.context() as patch:  # the instance reads its credentials when opened
        for key, value in postgres.env().items():
            patch.setenv(key, value)
        instance = DagsterInstance.from_config(str(home))
    logs = tmp / "logs"
    logs.mkdir()
    workspace = str(home / "workspace.yaml")
    d = Deployment(project, other_machine, export, env, instance, logs, workspace, web_port)
    try:
        d.services.append(start_service("code-server", [sys.executable, "-m", "dagster", "api", "grpc", "-m",
                                                        "synthex_assets.code_location", "-h", "127.0.0.1",
                                                        "-p", str(port)], env, project, logs))
        d.start_daemon()
        d.services.append(start_service("webserver", [sys.executable, "-m", "dagster_webserver", "-w", workspace,
                                                      "-h", "127.0.0.1", "-p", str(web_port)], env, project, logs))
        synthex(env, "run", "--project", str(project))
        from synthex_assets.queued_runs import CALLER_TAG

        (d.first_run_id,) = (r.run_id for r in instance.get_runs() if CALLER_TAG in r.tags)
        yield d
    finally:
        instance.dispose()
        for service in reversed(d.services):
            service.stop()


@pytest.fixture
def deployment(deployment_processes: Deployment) -> Iterator[Deployment]:
    """The module's deployment; the `synthex run`s a test started are stopped when it ends, passed or not."""
    try:
        yield deployment_processes
    finally:
        deployment_processes.stop_runs()


@pytest.mark.deployment
@pytest.mark.deployment_core
def test_a_sensor_tick_runs_through_the_daemon_and_the_webserver_lists_every_run(deployment):
    """A changed export is picked up by the source sensor's tick and run through the daemon (a process the
    code server starts); the webserver's GraphQL lists every run with its status and partition range."""
    from dagster import DagsterRunStatus

    from synthex_assets.queued_runs import CALLER_TAG
    from synthex_assets.run_tags import LAUNCHED_BY_TAG

    d = deployment
    first = d.summary_ids()
    assert first

    # a sensor tick: the export gained a month; the daemon's sensor requests a run, the queue launches it
    write_json(d.export, generate(conversations=3, months=2, seed=3))

    def sensor_runs() -> list:
        return [r for r in d.instance.get_runs() if r.tags.get(LAUNCHED_BY_TAG) == "sensor"]

    wait_for("the sensor's runs", lambda: (runs := sensor_runs()) and all(r.is_finished for r in runs)
             and d.summary_ids() != first, 300, d.services)
    for run in sensor_runs():  # one per tick that saw the change (a tick may see it before a run took it in)
        assert run.status == DagsterRunStatus.SUCCESS, failures(d.instance, run.run_id)
        assert run.tags[BRANCH_TAG] == "main" and CALLER_TAG not in run.tags
    assert len(d.summary_ids()) > len(first)  # the new export's conversations are in memory

    shown = d.graphql_lists_every_run()
    assert {d.first_run_id, *(r.run_id for r in sensor_runs())} <= set(shown)


@pytest.mark.deployment
def test_run_monitoring_fails_a_killed_run_and_a_restarted_daemon_takes_the_queue_over(deployment):
    """A `synthex run` killed mid-run is marked failed by the daemon's run monitoring and the next run leaves
    every record once; the daemon killed while a run waits QUEUED leaves it queued until a restarted daemon
    takes the queue over and runs it to the end; the webserver's GraphQL shows these runs too."""
    from dagster import DagsterRunStatus

    d = deployment
    before = d.summary_ids()
    assert before

    # a `synthex run` killed mid-run: run monitoring sees its process gone and fails the run
    killed = d.synthex_run("run-killed", "--full", "--project", str(d.project))
    wait_for("the run to start", lambda: (r := d.run_of(killed)) is not None
             and r.status == DagsterRunStatus.STARTED, 240, [*d.services, killed])
    os.kill(killed.proc.pid, signal.SIGKILL)
    killed.proc.wait(timeout=20)  # reaped: its pid is gone, not a zombie
    wait_for("run monitoring to fail the killed run", lambda: d.run_of(killed).status == DagsterRunStatus.FAILURE,
             180, d.services)
    synthex(d.env, "run", "--full", "--project", str(d.project))  # admitted: the branch is free again
    assert d.summary_ids() == before  # every record once, none half-written

    # the daemon killed while a run of main waits QUEUED behind one in progress (held there by SIGSTOP):
    # the run in progress goes on (its worker is not the daemon's child); the queued one stays QUEUED with
    # the branch free and no daemon, and only a restarted daemon takes the queue over and starts it
    holder = d.synthex_run("run-holder", "--full", "--project", str(d.project))
    wait_for("the holding run to start", lambda: (r := d.run_of(holder)) is not None
             and r.status == DagsterRunStatus.STARTED, 240, [*d.services, holder])
    os.kill(holder.proc.pid, signal.SIGSTOP)  # main's one slot stays taken: the next run of main queues
    try:
        # from a second checkout of the memory (another machine: the first one's branch file lock is not its)
        queued = d.synthex_run("run-queued", "--full", "--project", str(d.other_machine))
        wait_for("the next run of main to be queued", lambda: (r := d.run_of(queued)) is not None
                 and r.status == DagsterRunStatus.QUEUED, 240, [*d.services, queued])
        # at the kill: the holder is still in progress (stopped) and the next run still waits in the queue
        assert d.run_of(holder).status == DagsterRunStatus.STARTED
        assert d.run_of(queued).status == DagsterRunStatus.QUEUED
        daemon = d.daemon
        os.killpg(daemon.proc.pid, signal.SIGKILL)
        daemon.proc.wait(timeout=20)
        d.services.remove(daemon)
    finally:
        os.kill(holder.proc.pid, signal.SIGCONT)
    finished_ok(holder)
    assert d.run_of(holder).status == DagsterRunStatus.SUCCESS
    # the branch is free now: several dequeue intervals pass, and without a daemon nothing launches it
    time.sleep(15)
    assert d.run_of(queued).status == DagsterRunStatus.QUEUED and queued.proc.poll() is None
    d.start_daemon()
    finished_ok(queued)
    assert d.run_of(queued).status == DagsterRunStatus.SUCCESS, failures(d.instance, d.run_of(queued).run_id)
    assert d.summary_ids() == before

    shown = d.graphql_lists_every_run()
    assert shown[d.run_of(killed).run_id]["status"] == "FAILURE"
    assert {d.first_run_id, d.run_of(holder).run_id, d.run_of(queued).run_id} <= set(shown)
    assert len(shown) >= 5  # the first run, the killed one, the run after it, the holder and the queued one

