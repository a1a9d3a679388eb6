"""A team's shared deployment (`synthex deploy init`, docs/deploy.md) on a real PostgreSQL server started
here (tests/postgres_server.py): the written dagster.yaml passes Dagster's own validation and opens as an
instance; `synthex run` in one process and readers in others see the same runs, tagged with their branch."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import cli, env_without_openai
from postgres_server import PostgresServer, find_bin, start_postgres

from synthex.core.errors import SynthexError
from synthex_assets.dagster_internals import BRANCH_TAG
from synthex_assets.deployment import validate_instance_config

RUN_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def postgres() -> PostgresServer:
    if not (find_bin("initdb") and find_bin("pg_ctl")):
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL's initdb/pg_ctl are missing: .ci/run installs Debian's postgresql")
        pytest.skip("PostgreSQL's initdb/pg_ctl are not installed (Debian: apt-get install postgresql)")
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


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
        {"key": BRANCH_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1}]
    assert config["run_monitoring"]["enabled"] is True
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
        assert limits == [{"key": BRANCH_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1}]
        assert instance.run_monitoring_enabled
    finally:
        instance.dispose()


def test_synthex_run_on_the_shared_instance_is_seen_by_other_processes(tmp_path, project, postgres, monkeypatch):
    from dagster import DagsterInstance, DagsterRunStatus

    home = deploy_init(tmp_path / "deploy", project)
    env = shared_env(home, postgres)
    synthex(env, "run", "--project", str(project))
    status = json.loads(synthex(env, "status", "--json", "--project", str(project)).stdout)

    # this process, a third one, reads the run the first wrote, from PostgreSQL
    for key, value in postgres.env().items():
        monkeypatch.setenv(key, value)
    instance = DagsterInstance.from_config(str(home))
    try:
        runs = instance.get_runs()
        assert [r.run_id for r in runs] == [status["last_run"]["id"]]
        assert runs[0].status == DagsterRunStatus.SUCCESS
        assert runs[0].tags[BRANCH_TAG] == "main"
    finally:
        instance.dispose()
    # nothing went to the project's own SQLite instance
    assert not (project / ".synthex" / "dagster").exists()
