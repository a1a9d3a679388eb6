"""A team's shared deployment (`synthex deploy init`, docs/deploy.md) on a real PostgreSQL server started
here (evals/postgres_server.py): the written dagster.yaml passes Dagster's own validation and opens as an
instance; `synthex run` in one process and readers in others see the same runs, tagged with their branch."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import PIPELINE_PY, cli, env_without_openai, load, write_json, write_project
from test_hostile_mcp import INITIALIZE, post

from evals.postgres_server import PostgresServer, free_port
from synthex.core.demo.generate import generate
from synthex.core.errors import SynthexError
from synthex_assets.dagster_internals import BRANCH_TAG, WRITER_TAG, writer_key
from synthex_assets.deployment import validate_instance_config

RUN_TIMEOUT_S = 240
MCP_URL = r"http://127\.0\.0\.1:\d+/mcp"


def deploy_init(home: Path, project: Path, *extra: str) -> Path:
    cli("deploy", "init", str(home), "--project", str(project), *extra)
    return home


def shared_env(home: Path, postgres: PostgresServer) -> dict[str, str]:
    return {**env_without_openai(), **postgres.env(), "SYNTHEX_DAGSTER_HOME": str(home), "DAGSTER_HOME": str(home)}


def synthex(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "synthex.surfaces.cli", *args], capture_output=True, text=True,
                          env=env, timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, f"synthex {args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_deploy_init_writes_a_shared_instance_dagster_validates(tmp_path, project):
    home = deploy_init(tmp_path / "deploy", project, "--store-uri", "s3://team-bucket/memory",
                       "--s3-endpoint", "http://127.0.0.1:9000", "--grpc-port", "4300")
    config = validate_instance_config(home)  # Dagster's own instance schema and class config schemas

    assert config["storage"]["postgres"]["postgres_db"]["password"] == {"env": "DAGSTER_PG_PASSWORD"}
    assert config["run_coordinator"]["class"] == "QueuedRunCoordinator"
    assert config["concurrency"]["runs"]["tag_concurrency_limits"] == [
        {"key": WRITER_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1}]
    assert config["run_monitoring"]["enabled"] is True
    # the launcher knows the location's project (the daemon judges a run's branch by it)
    assert config["run_launcher"]["config"] == {"projects": {"test-memory": str(project.resolve())}}
    workspace = yaml.safe_load((home / "workspace.yaml").read_text())
    assert workspace == {"load_from": [{"grpc_server": {"host": "localhost", "port": 4300,
                                                        "location_name": "test-memory"}}]}
    env = dict(line.split("=", 1) for line in (home / "synthex.env").read_text().splitlines()
               if line and not line.startswith("#"))
    assert env["SYNTHEX_STORE_URI"] == "s3://team-bucket/memory"
    assert env["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9000" and env["AWS_ALLOW_HTTP"] == "true"
    assert env["SYNTHEX_DAGSTER_HOME"] == str(home.resolve()) == env["DAGSTER_HOME"]
    assert env["SYNTHEX_PROJECT"] == str(project.resolve())
    assert stat.S_IMODE((home / "synthex.env").stat().st_mode) == 0o600  # it gets the database password

    again = cli("deploy", "init", str(home), "--project", str(project), check=False)
    assert again.returncode != 0 and "exists; pass --force" in again.stderr


def test_deploy_check_names_the_file_and_the_problem(tmp_path, project):
    home = deploy_init(tmp_path / "deploy", project)
    text = (home / "dagster.yaml").read_text()
    (home / "dagster.yaml").write_text(text.replace("max_concurrent_runs: 8", "max_concurrent_runs: many"))
    with pytest.raises(SynthexError, match=r"dagster\.yaml: .*max_concurrent_runs"):
        validate_instance_config(home)
    # a class's own config is checked too (Dagster checks it only once connected to the storage)
    (home / "dagster.yaml").write_text(text + "run_launcher:\n  module: dagster._core.launcher\n"
                                       "  class: DefaultRunLauncher\n  config:\n    no_such_field: 1\n")
    with pytest.raises(SynthexError, match=r"dagster\.yaml: .*no_such_field"):
        validate_instance_config(home)


def test_a_branch_is_registered_in_the_instance_synthex_dagster_home_names(ran_project, tmp_path, monkeypatch):
    """`synthex branch create` adds the branch partition to the instance in use, not only to a project-local one."""
    from synthex_assets.instance import open_instance

    project = ran_project.copy(tmp_path / "proj")
    elsewhere = tmp_path / "shared-home"
    (project / ".synthex" / "dagster").rename(elsewhere)
    monkeypatch.setenv("SYNTHEX_DAGSTER_HOME", str(elsewhere))
    cli("branch", "create", "exp", "--project", str(project))
    pipe = load(project)
    instance = open_instance(pipe)
    try:
        assert instance.has_dynamic_partition("branch", "exp")
    finally:
        instance.dispose()
        pipe.close()


def test_the_written_instance_opens_on_postgres_with_the_branch_queue(tmp_path, project, postgres, monkeypatch):
    from dagster import DagsterInstance, QueuedRunCoordinator

    home = deploy_init(tmp_path / "deploy", project)
    for key, value in postgres.env().items():
        monkeypatch.setenv(key, value)
    instance = DagsterInstance.from_config(str(home))
    try:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
        limits = instance.get_concurrency_config().run_queue_config.tag_concurrency_limits
        assert limits == [{"key": WRITER_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1}]
        assert instance.run_monitoring_enabled
    finally:
        instance.dispose()


def tiny_project(root: Path) -> Path:
    """One month of two conversations: the runs below are about where they run, not what they compute."""
    return write_project(root, write_json(root.parent / "exports" / "conversations.json",
                                          generate(conversations=2, months=1, seed=3)))


@dataclass
class Service:
    """A long-running process of the deployment, in a session of its own (stopped with its children)."""

    name: str
    proc: subprocess.Popen
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            os.killpg(self.proc.pid, signal.SIGCONT)  # one a test held with SIGSTOP and then failed
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=20)

    def tail(self) -> str:
        return f"--- {self.name} ---\n" + self.log.read_text(errors="replace")[-3000:]


def start_service(name: str, args: list[str], env: dict[str, str], cwd: Path, logs: Path) -> Service:
    log = logs / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    return Service(name, proc, log)


def wait_for(what: str, ready, timeout: float, services: list[Service]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        for service in services:
            assert service.proc.poll() is None, f"{service.name} exited while waiting for {what}\n{service.tail()}"
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n"
                         + "\n".join(s.tail() for s in services))


def launch(env: dict[str, str], workspace: Path, location: str, job: str, run_id: str, tags: dict) -> None:
    """`dagster job launch`: the run goes to the instance's queue (QueuedRunCoordinator), not to a process."""
    proc = subprocess.run([sys.executable, "-m", "dagster", "job", "launch", "-w", str(workspace), "-l", location,
                           "-j", job, "--run-id", run_id, "--tags", json.dumps(tags)],
                          env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, f"dagster job launch failed:\n{proc.stdout}\n{proc.stderr}"


@pytest.mark.deployment
def test_daemon_serializes_a_branch_and_runs_two_branches_at_once(tmp_path, postgres, monkeypatch):
    """A code server and a daemon as processes of their own, on the PostgreSQL instance: queued runs are
    launched by the daemon through the code server; two runs of main never overlap (the second starts
    after the first ended: the tag limit), while the run of another branch overlaps the first."""
    from dagster import DagsterInstance, DagsterRunStatus

    from synthex_assets.dagster_internals import partition_range_tags
    from synthex_assets.naming import job_name

    project = tiny_project(tmp_path / "proj")
    port = free_port()
    home = deploy_init(tmp_path / "deploy", project, "--grpc-host", "127.0.0.1", "--grpc-port", str(port))
    env = {**shared_env(home, postgres), "SYNTHEX_PROJECT": str(project)}
    workspace, location, job = home / "workspace.yaml", "test-memory", job_name("test-memory")
    logs = tmp_path / "logs"
    logs.mkdir()
    # a `synthex run` on a deployment waits in the queue: a daemon for it, stopped before the runs below queue
    setup = start_service("daemon-setup", [sys.executable, "-m", "dagster._daemon", "run", "-w", str(workspace)],
                          env, project, logs)
    try:
        synthex(env, "run", "--project", str(project))  # registers the partitions; main's records exist
    finally:
        setup.stop()
    synthex(env, "branch", "create", "exp", "--project", str(project))
    for key, value in postgres.env().items():
        monkeypatch.setenv(key, value)
    instance = DagsterInstance.from_config(str(home))
    periods = instance.get_dynamic_partitions("period")  # in the order the run registered them
    assert periods and "exp" in instance.get_dynamic_partitions("branch")

    services: list[Service] = []
    try:
        services.append(start_service("code-server", [sys.executable, "-m", "dagster", "api", "grpc", "-m",
                                                      "synthex_assets.code_location", "-h", "127.0.0.1",
                                                      "-p", str(port)], env, project, logs))
        wait_for("the code server", lambda: subprocess.run(
            [sys.executable, "-m", "dagster", "api", "grpc-health-check", "-h", "127.0.0.1", "-p", str(port)],
            env=env, capture_output=True, timeout=60).returncode == 0, 180, services)
        # queued before the daemon starts, so its first dequeue sees all three
        runs = {"main-1": "main", "main-2": "main", "exp-1": "exp"}
        ids = {}
        for name, branch in runs.items():
            ids[name] = str(uuid.uuid4())
            # the writer tag, as `synthex run` and the sensors set it: what the queue's limit counts
            launch(env, workspace, location, job, ids[name],
                   {**partition_range_tags(f"{branch}|{periods[0]}", f"{branch}|{periods[-1]}"),
                    WRITER_TAG: writer_key("test-memory", branch)})
        try:
            queued = {r.run_id: r for r in instance.get_runs()}
            assert all(queued[i].status == DagsterRunStatus.QUEUED for i in ids.values())
            assert {queued[ids[n]].tags["synthex/branch"] for n in runs} == {"main", "exp"}
            services.append(start_service("daemon", [sys.executable, "-m", "dagster._daemon", "run", "-w",
                                                     str(workspace)], env, project, logs))
            wait_for("the three runs to finish", lambda: all(
                r.is_finished for r in instance.get_runs() if r.run_id in ids.values()), 300, services)
            records = {r.dagster_run.run_id: r for r in instance.get_run_records()}
            finished = {n: records[ids[n]] for n in runs}
            assert {n: r.dagster_run.status for n, r in finished.items()} == dict.fromkeys(runs, DagsterRunStatus.SUCCESS), \
                "\n".join(s.tail() for s in services)
            first, second = sorted((finished["main-1"], finished["main-2"]), key=lambda r: r.start_time)
            assert second.start_time >= first.end_time  # one run of main at a time
            other = finished["exp-1"]
            assert other.start_time < first.end_time and first.start_time < other.end_time  # side by side
        finally:
            instance.dispose()
    finally:
        for service in reversed(services):
            service.stop()


@pytest.mark.parametrize("name", ["k8s", "ecs"])
def test_the_documented_kubernetes_and_ecs_instances_pass_dagsters_validation(tmp_path, name):
    """docs/deploy.md's instance configs for K8sRunLauncher and EcsRunLauncher, checked with Dagster's
    validation and the launcher's own config schema (dagster-k8s / dagster-aws; no cluster, no AWS)."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "deploy.md").read_text()
    block = doc.split(f"<!-- validated: {name} -->\n```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "dagster.yaml").write_text(block)
    config = validate_instance_config(tmp_path)
    assert config["run_launcher"]["class"] == {"k8s": "K8sRunLauncher", "ecs": "EcsRunLauncher"}[name]
    # the same check refuses a field the launcher does not have
    (tmp_path / "dagster.yaml").write_text(block.replace("  config:\n", "  config:\n    no_such_field: 1\n", 1)
                                           if name == "ecs" else block.replace("job_namespace", "job_namespaces"))
    with pytest.raises(SynthexError):
        validate_instance_config(tmp_path)


def test_synthex_ui_on_a_deployment_starts_only_a_webserver_on_its_workspace(tmp_path, project, monkeypatch):
    from synthex.surfaces.ui_launch import prepare_ui

    home = deploy_init(tmp_path / "deploy", project)
    workspace = (home / "workspace.yaml").read_text()
    monkeypatch.setenv("SYNTHEX_DAGSTER_HOME", str(home))
    launch = prepare_ui(project, 3999)
    assert launch.args[1:] == ["-m", "dagster_webserver", "-w", str(home.resolve() / "workspace.yaml"), "-p", "3999"]
    assert "dev" not in launch.args  # `dagster dev` would start a second daemon on the team's instance
    assert (home / "workspace.yaml").read_text() == workspace
    assert launch.env["DAGSTER_HOME"] == str(home.resolve())


EXP_OVERRIDE = """def overrides(pipeline):
    pipeline.transform("summaries", from_="transcripts", fn=lambda record: "Briefly: " + record.content[:60])
"""


def shared_store_project(root: Path, export: Path) -> Path:
    """The test project with its records where ``SYNTHEX_STORE_URI`` says (as docs/deploy.md's pipeline.py):
    two copies of it are two machines' checkouts of one memory (each its own data dir and branch file
    lock; one store, one instance)."""
    body = PIPELINE_PY.replace("pipeline = Pipeline('test-memory', agent='tester')",
                               "import os\npipeline = Pipeline('test-memory', agent='tester', "
                               "store_uri=os.environ.get('SYNTHEX_STORE_URI'))")
    assert body != PIPELINE_PY
    return write_project(root, export, body)


def start_synthex(env: dict[str, str], logs: Path, name: str, *args: str) -> Service:
    return start_service(name, [sys.executable, "-m", "synthex.surfaces.cli", *args], env, logs, logs)


def finished_ok(service: Service) -> None:
    assert service.proc.wait(timeout=RUN_TIMEOUT_S) == 0, service.tail()


@pytest.mark.deployment
@pytest.mark.deployment_core
def test_synthex_run_from_two_machines_is_serialized_by_dagsters_queue(tmp_path, postgres, monkeypatch):
    """Two checkouts of one memory (two machines: separate branch file locks, one store, one PostgreSQL
    instance) each `synthex run` main: the second waits QUEUED in Dagster's queue while the first is in
    progress (held there by SIGSTOP, so the order cannot come from timing), and starts only after it ended;
    a run of another branch starts and finishes meanwhile. The daemon decides all three. (A `synthex run` on
    a deployment waits for the daemon, so this is where a run's being seen by other processes is tested.)"""
    from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

    from synthex_assets.queued_runs import CALLER_TAG

    export = write_json(tmp_path / "exports" / "conversations.json", generate(conversations=2, months=1, seed=3))
    first = shared_store_project(tmp_path / "machine-a", export)
    second = shared_store_project(tmp_path / "machine-b", export)
    port = free_port()
    home = deploy_init(tmp_path / "deploy", first, "--grpc-host", "127.0.0.1", "--grpc-port", str(port))
    env = {**shared_env(home, postgres), "SYNTHEX_PROJECT": str(first),
           "SYNTHEX_STORE_URI": str(tmp_path / "shared-store")}
    synthex(env, "branch", "create", "exp", "--project", str(first))
    for key, value in postgres.env().items():
        monkeypatch.setenv(key, value)
    instance = DagsterInstance.from_config(str(home))
    logs = tmp_path / "logs"
    logs.mkdir()
    services: list[Service] = []

    def run_of(service: Service):
        found = [r for r in instance.get_runs() if r.tags.get(CALLER_TAG, "").endswith(f":{service.proc.pid}")]
        return found[0] if found else None

    try:
        services.append(start_service("daemon", [sys.executable, "-m", "dagster._daemon", "run", "-w",
                                                 str(home / "workspace.yaml")], env, first, logs))
        synthex(env, "run", "--project", str(first))  # main's records, for exp to read its parent's
        exp = first / "branches" / "exp.py"
        exp.write_text(exp.read_text().split("def overrides")[0] + EXP_OVERRIDE)
        # --full: both runs of main have work to do (else the second would find nothing and start no run)
        a = start_synthex(env, logs, "run-a", "run", "--full", "--project", str(first))
        services.append(a)  # every `synthex run` is stopped in `finally` too, if the test fails before its end
        wait_for("machine A's run to start", lambda: (r := run_of(a)) is not None
                 and r.status == DagsterRunStatus.STARTED, 240, [*services, a])
        os.kill(a.proc.pid, signal.SIGSTOP)  # A's run stays in progress until we let it go on
        try:
            b = start_synthex(env, logs, "run-b", "run", "--full", "--project", str(second))
            services.append(b)
            wait_for("machine B's run to be queued", lambda: (r := run_of(b)) is not None
                     and r.status == DagsterRunStatus.QUEUED, 240, [*services, b])
            c = start_synthex(env, logs, "run-exp", "run", "--branch", "exp", "--project", str(first))
            services.append(c)
            finished_ok(c)  # another branch: admitted while main's run is in progress
            exp_run = run_of(c)
            assert run_of(c).status == DagsterRunStatus.SUCCESS and run_of(c).tags[BRANCH_TAG] == "exp"
            assert run_of(b).status == DagsterRunStatus.QUEUED  # the daemon dequeued exp's run, not this one
            assert run_of(a).status == DagsterRunStatus.STARTED
        finally:
            os.kill(a.proc.pid, signal.SIGCONT)
        finished_ok(a)
        finished_ok(b)
        records = {r.dagster_run.run_id: r for r in instance.get_run_records(RunsFilter(tags={BRANCH_TAG: "main"}))}
        ra, rb = records[run_of(a).run_id], records[run_of(b).run_id]
        assert ra.dagster_run.status == rb.dagster_run.status == DagsterRunStatus.SUCCESS
        assert rb.start_time >= ra.end_time  # B executed after A ended
        # another process reads the same runs: `synthex status` on machine B, and this one from PostgreSQL
        status = json.loads(synthex(env, "status", "--json", "--project", str(second)).stdout)
        assert status["last_run"]["id"] == exp_run.run_id  # the last started: exp's (the store is shared)
        assert {r.tags[BRANCH_TAG] for r in instance.get_runs()} == {"main", "exp"}
        # nothing went to either checkout's own SQLite instance
        assert not (first / ".synthex" / "dagster").exists() and not (second / ".synthex" / "dagster").exists()
    finally:
        instance.dispose()
        for service in reversed(services):
            service.stop()


RUNS_QUERY = "{ runsOrError { __typename ... on Runs { results { runId status tags { key value } } } } }"


def graphql_data(port: int, query: str) -> dict:
    """The webserver's GraphQL answer to ``query`` (its ``data``)."""
    import urllib.request

    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())["data"]


def graphql_runs(port: int) -> dict[str, dict]:
    """The webserver's GraphQL answer: run id -> (status, tags)."""
    answer = graphql_data(port, RUNS_QUERY)["runsOrError"]
    assert answer["__typename"] == "Runs", answer
    return {r["runId"]: {"status": r["status"], "tags": {t["key"]: t["value"] for t in r["tags"]}}
            for r in answer["results"]}


def failures(instance, run_id: str) -> str:
    """What a failed run's event log says went wrong (for an assertion's message)."""
    return "\n".join(f"{e.dagster_event.event_type_value}: {e.user_message}" for e in instance.all_logs(run_id)
                     if e.dagster_event is not None and "FAILURE" in e.dagster_event.event_type_value
                     or e.dagster_event is not None and e.dagster_event.event_type_value == "ENGINE_EVENT")


def served(port: int) -> bool:
    try:
        graphql_runs(port)
    except OSError:
        return False
    return True


def test_a_run_over_several_branches_is_refused_and_never_tagged_with_a_joined_value():
    """The queue's limit is per value of the branch tag: "exp,main" would hold back neither branch."""
    from synthex_assets.run_tags import LAUNCHED_BY_TAG, branch_tags, missing_tags, refusal

    assert branch_tags("main", "sensor") == {BRANCH_TAG: "main", LAUNCHED_BY_TAG: "sensor"}
    assert missing_tags({}, ["exp", "main"]) == {LAUNCHED_BY_TAG: "ui"}  # no branch tag for a run it refuses
    assert missing_tags({}, ["main", "main"])[BRANCH_TAG] == "main"
    # the queue's key: one memory's branch; the same branch of two memories are two writers
    assert branch_tags("main", "synthex", "memory-a")[WRITER_TAG] == "memory-a|main"
    assert branch_tags("main", "synthex", "memory-b")[WRITER_TAG] != branch_tags("main", "synthex", "memory-a")[WRITER_TAG]
    assert missing_tags({}, ["exp", "main"], "memory-a") == {LAUNCHED_BY_TAG: "ui"}
    assert missing_tags({}, ["exp"], "memory-a")[WRITER_TAG] == "memory-a|exp"
    why = refusal(["main", "exp"], ["2024-01"], {"main", "exp"})
    assert why is not None and "spans branches exp, main" in why and "one per branch" in why
    assert refusal(["exp"], ["2024-01"], {"main", "exp"}) is None


@pytest.mark.deployment
def test_two_memories_on_one_postgres_instance_see_only_their_own_runs_and_records(tmp_path, postgres, monkeypatch):
    """Two projects (two memories, each its own store and data dir) run on one PostgreSQL-backed instance and
    one daemon: both runs complete; each project's `synthex runs` lists only its own run; the instance holds
    both runs, told apart by their job (the pipeline's name); each memory's records are its own, and each
    memory's MCP token is refused by the other's server."""
    from dagster import DagsterInstance, DagsterRunStatus

    export_a = write_json(tmp_path / "exports" / "a.json", generate(conversations=2, months=1, seed=3))
    export_b = write_json(tmp_path / "exports" / "b.json", generate(conversations=3, months=1, seed=4))
    project_a = write_project(tmp_path / "memory-a", export_a, PIPELINE_PY)
    body_b = PIPELINE_PY.replace("Pipeline('test-memory'", "Pipeline('other-memory'")
    assert body_b != PIPELINE_PY
    project_b = write_project(tmp_path / "memory-b", export_b, body_b)
    home = deploy_init(tmp_path / "deploy", project_a, "--grpc-host", "127.0.0.1", "--grpc-port", str(free_port()))
    env = shared_env(home, postgres)
    for key, value in postgres.env().items():
        monkeypatch.setenv(key, value)
    instance = DagsterInstance.from_config(str(home))
    logs = tmp_path / "logs"
    logs.mkdir()
    services: list[Service] = []
    try:
        services.append(start_service("daemon", [sys.executable, "-m", "dagster._daemon", "run", "-w",
                                                 str(home / "workspace.yaml")], env, project_a, logs))
        synthex(env, "run", "--project", str(project_a))
        synthex(env, "run", "--project", str(project_b))
        own = {name: json.loads(synthex(env, "runs", "--json", "--project", str(p)).stdout)
               for name, p in (("a", project_a), ("b", project_b))}
        assert len(own["a"]) == len(own["b"]) == 1
        assert own["a"][0]["id"] != own["b"][0]["id"]
        ids = {own["a"][0]["id"], own["b"][0]["id"]}
        runs = {r.run_id: r for r in instance.get_runs()}
        assert set(runs) == ids  # one instance (this test's own database) holds both, and nothing else
        assert all(r.status == DagsterRunStatus.SUCCESS for r in runs.values())
        assert runs[own["a"][0]["id"]].job_name != runs[own["b"][0]["id"]].job_name
        contents = {}
        for name, p in (("a", project_a), ("b", project_b)):
            pipe = load(p)
            try:
                contents[name] = {r.content for r in pipe.app.records("transcripts")}
            finally:
                pipe.close()
        assert contents["a"] and contents["b"] and not contents["a"] & contents["b"]  # each its own export

        # each memory's MCP server has its own token: one memory's token opens nothing of the other's
        urls, tokens = {}, {}
        for name, p in (("a", project_a), ("b", project_b)):
            server = start_service(f"mcp-{name}", [sys.executable, "-m", "synthex.surfaces.cli", "mcp", "--project",
                                                   str(p), "--http", "--port", "0"], env, p, logs)
            services.append(server)
            wait_for(f"memory {name}'s MCP server", lambda s=server: re.search(MCP_URL, s.log.read_text())
                     is not None, 120, services)
            urls[name] = re.search(MCP_URL, server.log.read_text()).group(0)
            tokens[name] = (p / ".synthex" / "mcp-token").read_text().strip()
        assert tokens["a"] != tokens["b"]
        for name, other in (("a", "b"), ("b", "a")):
            assert post(urls[name], INITIALIZE, tokens[other])[0] == 401
            assert post(urls[name], INITIALIZE, tokens[name])[0] == 200
        assert not (project_a / ".synthex" / "dagster").exists() and not (project_b / ".synthex" / "dagster").exists()
    finally:
        instance.dispose()
        for service in reversed(services):
            service.stop()


@pytest.mark.deployment
def test_two_memories_main_runs_side_by_side_and_one_memorys_main_runs_one_at_a_time(tmp_path, postgres, monkeypatch):
    """One instance, one daemon, two memories: while memory A's `synthex run` of main is in progress (held by
    SIGSTOP, so nothing comes from timing), memory B's run of main is admitted and finishes, and a second
    checkout of memory A waits QUEUED; by Dagster's recorded start and end times A's and B's runs were in
    progress at once, and A's second run started after its first ended. The queue's key is the writer tag
    (memory + branch), not the branch alone."""
    from dagster import DagsterInstance, DagsterRunStatus

    from synthex_assets.queued_runs import CALLER_TAG

    export_a = write_json(tmp_path / "exports" / "a.json", generate(conversations=2, months=1, seed=3))
    export_b = write_json(tmp_path / "exports" / "b.json", generate(conversations=2, months=1, seed=4))
    memory_a = shared_store_project(tmp_path / "memory-a", export_a)
    memory_a_elsewhere = shared_store_project(tmp_path / "memory-a-machine-b", export_a)
    memory_b = write_project(tmp_path / "memory-b", export_b,
                             PIPELINE_PY.replace("Pipeline('test-memory'", "Pipeline('other-memory'"))
    home = deploy_init(tmp_path / "deploy", memory_a, "--grpc-host", "127.0.0.1", "--grpc-port", str(free_port()))
    env = {**shared_env(home, postgres), "SYNTHEX_STORE_URI": str(tmp_path / "store-a")}  # only A's pipeline reads it
    for key, value in postgres.env().items():
        monkeypatch.setenv(key, value)
    instance = DagsterInstance.from_config(str(home))
    logs = tmp_path / "logs"
    logs.mkdir()
    services: list[Service] = []

    def run_of(service: Service):
        found = [r for r in instance.get_runs() if r.tags.get(CALLER_TAG, "").endswith(f":{service.proc.pid}")]
        return found[0] if found else None

    try:
        services.append(start_service("daemon", [sys.executable, "-m", "dagster._daemon", "run", "-w",
                                                 str(home / "workspace.yaml")], env, memory_a, logs))
        a = start_synthex(env, logs, "run-a", "run", "--project", str(memory_a))
        services.append(a)  # every `synthex run` is stopped in `finally` too, if the test fails before its end
        wait_for("memory A's run to start", lambda: (r := run_of(a)) is not None
                 and r.status == DagsterRunStatus.STARTED, 240, [*services, a])
        os.kill(a.proc.pid, signal.SIGSTOP)  # A's main stays in progress until we let it go on
        try:
            # --full: it has work to do whatever A's run wrote meanwhile
            a_again = start_synthex(env, logs, "run-a-again", "run", "--full", "--project", str(memory_a_elsewhere))
            services.append(a_again)
            wait_for("memory A's second run to be queued", lambda: (r := run_of(a_again)) is not None
                     and r.status == DagsterRunStatus.QUEUED, 240, [*services, a_again])
            b = start_synthex(env, logs, "run-b", "run", "--project", str(memory_b))
            services.append(b)
            finished_ok(b)  # another memory's main: admitted while A's main is in progress
            assert run_of(b).status == DagsterRunStatus.SUCCESS
            assert run_of(a).status == DagsterRunStatus.STARTED
            assert run_of(a_again).status == DagsterRunStatus.QUEUED  # B's run was dequeued, not this one
        finally:
            os.kill(a.proc.pid, signal.SIGCONT)
        finished_ok(a)
        finished_ok(a_again)
        records = {r.dagster_run.run_id: r for r in instance.get_run_records()}
        ra, rb, ra2 = (records[run_of(s).run_id] for s in (a, b, a_again))
        assert {r.dagster_run.status for r in (ra, rb, ra2)} == {DagsterRunStatus.SUCCESS}
        assert ra.dagster_run.tags[WRITER_TAG] == ra2.dagster_run.tags[WRITER_TAG] == "test-memory|main"
        assert rb.dagster_run.tags[WRITER_TAG] == "other-memory|main"
        assert {r.dagster_run.tags[BRANCH_TAG] for r in (ra, rb, ra2)} == {"main"}  # the branch tag as before
        assert rb.start_time < ra.end_time and ra.start_time < rb.end_time  # A and B in progress at once
        assert ra2.start_time >= ra.end_time  # one writer on memory A's main
    finally:
        instance.dispose()
        for service in reversed(services):
            service.stop()


def open_shared_instance(home: Path, postgres: PostgresServer, monkeypatch, tmp_path: Path):
    """The deployment's environment, its instance (opened here: it reads the credentials when opened) and a
    folder for the services' logs."""
    from dagster import DagsterInstance

    for key, value in postgres.env().items():
        monkeypatch.setenv(key, value)
    logs = tmp_path / "logs"
    logs.mkdir()
    return shared_env(home, postgres), DagsterInstance.from_config(str(home)), logs


ASSETS_QUERY = "{ assetNodes { assetKey { path } repository { location { name } } } }"


def consecutive_free_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports (``synthex deploy init`` gives memory i port first + i)."""
    import socket

    while True:
        first = free_port()
        try:
            with contextlib.ExitStack() as held:
                for port in range(first, first + count):
                    held.enter_context(socket.socket()).bind(("127.0.0.1", port))
            return first
        except OSError:
            continue


@pytest.mark.deployment
def test_two_namespaced_memories_on_one_instance_and_one_workspace_share_no_dagster_name(tmp_path, postgres,
                                                                                          monkeypatch):
    """Two memories with their own namespaces on one PostgreSQL instance, one `synthex deploy init` workspace
    listing both code locations, one daemon, one webserver, a code server each: each `synthex run`s; their
    asset keys are their own (prefixed) in the instance and in the webserver's GraphQL, each under its own
    location; `synthex branch delete exp` in one leaves the other's `exp` partition key; each `synthex runs`
    and `status` shows only its own run. Today's names (no namespace) share the keys and the partitions. A
    run of bob over a branch bob does not have, launched through its code server and the daemon's queue, is
    canceled by the deployment's run launcher with the one-line refusal before any step."""
    from dagster import DagsterRunStatus

    memories = {}
    for seed, ns in enumerate(("alice", "bob"), start=3):
        export = write_json(tmp_path / "exports" / f"{ns}.json", generate(conversations=2, months=1, seed=seed))
        body = PIPELINE_PY.replace("agent='tester'", f"agent='tester', namespace={ns!r}")
        assert body != PIPELINE_PY
        memories[ns] = write_project(tmp_path / ns, export, body)  # one pipeline name, two memories
    first = consecutive_free_ports(2)
    home = deploy_init(tmp_path / "deploy", memories["alice"], "--project", memories["bob"], "--grpc-host",
                       "127.0.0.1", "--grpc-port", str(first))
    workspace = home / "workspace.yaml"
    assert [e["grpc_server"]["location_name"] for e in yaml.safe_load(workspace.read_text())["load_from"]] == \
        ["alice", "bob"]
    env, instance, logs = open_shared_instance(home, postgres, monkeypatch, tmp_path)
    services: list[Service] = []
    try:
        services.append(start_service("daemon", [sys.executable, "-m", "dagster._daemon", "run", "-w", str(workspace)],
                                      env, home, logs))
        for root in memories.values():
            synthex(env, "run", "--project", str(root))
            synthex(env, "branch", "create", "exp", "--project", str(root))
        for ns in memories:
            assert sorted(instance.get_dynamic_partitions(f"{ns}__branch")) == ["exp", "main"]
        synthex(env, "branch", "delete", "exp", "--project", str(memories["alice"]))
        assert instance.get_dynamic_partitions("alice__branch") == ["main"]
        assert sorted(instance.get_dynamic_partitions("bob__branch")) == ["exp", "main"]  # bob's exp stays
        assert not instance.get_dynamic_partitions("branch") and not instance.get_dynamic_partitions("period")

        keys = {k.to_user_string() for k in instance.get_asset_keys()}
        assert {k.split("/")[0] for k in keys} == {"alice", "bob"} and "alice/summaries" in keys
        assert {k.split("/", 1)[1] for k in keys if k.startswith("alice/")} == \
            {k.split("/", 1)[1] for k in keys if k.startswith("bob/")}
        own = {ns: json.loads(synthex(env, "runs", "--json", "--project", str(root)).stdout)
               for ns, root in memories.items()}
        assert len(own["alice"]) == len(own["bob"]) == 1 and own["alice"][0]["id"] != own["bob"][0]["id"]
        runs = {r.run_id: r for r in instance.get_runs()}
        assert set(runs) == {own["alice"][0]["id"], own["bob"][0]["id"]}
        for ns, root in memories.items():
            run = runs[own[ns][0]["id"]]
            assert run.status == DagsterRunStatus.SUCCESS and run.job_name == f"{ns}__test_memory"
            assert run.tags[WRITER_TAG] == f"{ns}|main" and {k.path[0] for k in run.asset_selection} == {ns}
            status = json.loads(synthex(env, "status", "--json", "--project", str(root)).stdout)
            assert status["last_run"]["id"] == own[ns][0]["id"]
            assert [b["branch"] for b in status["branches"]] == (["main"] if ns == "alice" else ["main", "exp"])

        # One code server per memory, one webserver on the one workspace: each memory's assets under its location.
        for ns, root in memories.items():
            services.append(start_service(f"code-server-{ns}", [
                sys.executable, "-m", "dagster", "api", "grpc", "-m", "synthex_assets.code_location", "-h",
                "127.0.0.1", "-p", str(first + list(memories).index(ns))], {**env, "SYNTHEX_PROJECT": str(root)},
                root, logs))
        web_port = free_port()
        services.append(start_service("webserver", [sys.executable, "-m", "dagster_webserver", "-w", str(workspace),
                                                    "-h", "127.0.0.1", "-p", str(web_port)], env, home, logs))

        def listed() -> dict[str, set[str]] | None:
            try:
                nodes = graphql_data(web_port, ASSETS_QUERY)["assetNodes"]
            except OSError:
                return None
            found: dict[str, set[str]] = {}
            for node in nodes:
                found.setdefault(node["repository"]["location"]["name"], set()).add("/".join(node["assetKey"]["path"]))
            return found if set(found) == {"alice", "bob"} else None

        wait_for("both code locations in the webserver", lambda: listed() is not None, 240, services)
        shown = listed()
        assert shown["alice"] | shown["bob"] == keys  # every key the instance holds, each in one location only
        assert all(k.startswith("alice/") for k in shown["alice"]) and all(k.startswith("bob/") for k in shown["bob"])

        # A run of bob over a branch bob does not have (a key typed into the UI's "Add a partition"), launched
        # as the UI launches one (through bob's code server): queued, dequeued by the daemon, which serves both
        # memories and so has no SYNTHEX_PROJECT, and refused by the deployment's launcher, which knows bob's
        # project from dagster.yaml (`projects`), before any step: canceled with the one line.
        from dagster import DagsterEventType

        from synthex_assets.dagster_internals import partition_range_tags
        from synthex_assets.run_tags import REFUSED_TAG

        assert "SYNTHEX_PROJECT" not in env
        period = instance.get_dynamic_partitions("bob__period")[0]
        instance.add_dynamic_partitions("bob__branch", ["typo"])
        refused_id = str(uuid.uuid4())
        launch(env, workspace, "bob", "bob__test_memory", refused_id,
               partition_range_tags(f"typo|{period}", f"typo|{period}"))
        wait_for("the daemon to dequeue bob's run", lambda: instance.get_run_by_id(refused_id).is_finished, 240,
                 services)
        refused = instance.get_run_by_id(refused_id)
        assert refused.status == DagsterRunStatus.CANCELED, failures(instance, refused_id)
        assert refused.tags[REFUSED_TAG].startswith("refused before any step ran: branch 'typo' is not a branch")
        assert "\n" not in refused.tags[REFUSED_TAG]
        assert not instance.all_logs(refused_id, of_type=DagsterEventType.STEP_START)  # no step ran
    finally:
        instance.dispose()
        for service in reversed(services):
            service.stop()


@pytest.mark.deployment
def test_a_sensor_run_the_daemon_launches_spreads_its_first_ingest_over_the_pipelines_ingest_workers(
        tmp_path, postgres, monkeypatch):
    """A deployment (code server and daemon as processes of their own, PostgreSQL) of a pipeline declaring
    ``ingest_workers=2``: the source sensor's first tick requests the runs with ``synthex/workers=2``, the
    daemon launches them through the code server (a run process of Dagster's, not `synthex run`'s), and that
    process's workers write the first ingest (more fragments than one process writes); the records are, row
    for row, the ones a one-process `synthex run` of the same export leaves."""
    from dagster import DagsterRunStatus
    from test_run_workers import appended_fragments, declared_workers, table_rows

    from synthex_assets.naming import job_name
    from synthex_assets.queued_runs import CALLER_TAG
    from synthex_assets.run_tags import LAUNCHED_BY_TAG
    from synthex_assets.step_assets import WORKERS_TAG
    from synthex_resources.store.fragment_append import max_workers

    if max_workers() < 2:
        pytest.skip("needs 2 cores")
    export = write_json(tmp_path / "exports" / "conversations.json", generate(conversations=2, months=1, seed=3))
    one_process = write_project(tmp_path / "one-process", export)
    synthex(env_without_openai(), "run", "--project", str(one_process))  # its own SQLite instance, one process
    deployed = write_project(tmp_path / "deployed", export, declared_workers(PIPELINE_PY, 2))
    port = free_port()
    home = deploy_init(tmp_path / "deploy", deployed, "--grpc-host", "127.0.0.1", "--grpc-port", str(port))
    env, instance, logs = open_shared_instance(home, postgres, monkeypatch, tmp_path)
    env["SYNTHEX_PROJECT"] = str(deployed)
    services: list[Service] = []
    try:
        services.append(start_service("code-server", [sys.executable, "-m", "dagster", "api", "grpc", "-m",
                                                      "synthex_assets.code_location", "-h", "127.0.0.1",
                                                      "-p", str(port)], env, deployed, logs))
        services.append(start_service("daemon", [sys.executable, "-m", "dagster._daemon", "run", "-w",
                                                 str(home / "workspace.yaml")], env, deployed, logs))

        def sensor_runs() -> list:
            return [r for r in instance.get_runs() if r.tags.get(LAUNCHED_BY_TAG) == "sensor"]

        wait_for("the sensor's runs to finish", lambda: (runs := sensor_runs()) and all(r.is_finished for r in runs)
                 and (deployed / ".synthex" / "lancedb" / "records.lance").exists(), 420, services)
        runs = sensor_runs()
        for run in runs:
            assert run.status == DagsterRunStatus.SUCCESS, failures(instance, run.run_id)
            assert run.tags[WORKERS_TAG] == "2" and CALLER_TAG not in run.tags  # the code server's run process
            assert run.job_name == job_name("test-memory")
        assert table_rows(deployed) == table_rows(one_process)
        assert appended_fragments(deployed) > appended_fragments(one_process)  # the workers wrote the ingest
    finally:
        instance.dispose()
        for service in reversed(services):
            service.stop()
