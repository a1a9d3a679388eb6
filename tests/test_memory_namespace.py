"""Many memories on one Dagster instance, kept apart in Dagster too (issue 38 item 4): a memory's namespace
(``Pipeline(namespace=)``) prefixes its asset keys and names its partitions, job, sensors and schedule, so
two memories on one instance share no key (synthex_assets.naming.DagsterNames). Here on one SQLite instance
(``SYNTHEX_DAGSTER_HOME``); with real processes on PostgreSQL in tests/test_deploy.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import PIPELINE_PY, cli, load, write_project

from synthex.core.errors import PipelineDefinitionError
from synthex.core.project import load_pipeline
from synthex_assets.definitions import build_definitions


def namespaced_body(namespace: str | None, store: str | None = None) -> str:
    """The test pipeline.py with ``namespace=`` (and ``store_uri=``) in its ``Pipeline(...)``."""
    args = (f", namespace={namespace!r}" if namespace is not None else "") + (f", store_uri={store!r}" if store else "")
    body = PIPELINE_PY.replace("agent='tester'", f"agent='tester'{args}")
    assert body != PIPELINE_PY or not args
    return body


def two_memories(tmp_path: Path, small_export: Path) -> dict[str, Path]:
    return {ns: write_project(tmp_path / ns, small_export, namespaced_body(ns)) for ns in ("alice", "bob")}


def test_a_namespace_names_everything_the_memory_has_in_dagster_and_none_keeps_todays_names(tmp_path, small_export):
    plain = load(write_project(tmp_path / "plain", small_export))
    named = load(write_project(tmp_path / "alice", small_export, namespaced_body("alice")))
    defs = {"plain": build_definitions(plain), "alice": build_definitions(named)}
    repo = {k: d.get_repository_def() for k, d in defs.items()}
    keys = {k: {a.to_user_string() for a in r.asset_graph.get_all_asset_keys()} for k, r in repo.items()}
    assert keys["alice"] == {f"alice/{k}" for k in keys["plain"]} and "summaries" in keys["plain"]
    jobs = {k: {j.name for j in r.get_all_jobs() if not j.name.startswith("__")} for k, r in repo.items()}
    assert jobs == {"plain": {"test_memory"}, "alice": {"alice__test_memory"}}
    sensors = {k: {s.name for s in r.sensor_defs} for k, r in repo.items()}
    assert sensors["alice"] == {f"alice__{s}" for s in sensors["plain"]}
    assert {s.name for s in repo["alice"].schedule_defs} == {"alice__test_memory_reconcile"}
    dims = {k: {d.name: d.partitions_def.name for d in
                r.asset_graph.get(next(iter(r.asset_graph.get_all_asset_keys()))).partitions_def.partitions_defs}
            for k, r in repo.items()}
    assert dims == {"plain": {"branch": "branch", "period": "period"},
                    "alice": {"branch": "alice__branch", "period": "alice__period"}}
    checks = {c.asset_key.to_user_string() for c in repo["alice"].asset_graph.asset_check_keys}
    assert checks and all(c.startswith("alice/") for c in checks)  # the asset checks follow their assets
    job = defs["alice"].resolve_job_def("alice__test_memory")
    assert job.run_tags == {"synthex/namespace": "alice"} and not defs["plain"].resolve_job_def("test_memory").run_tags


@pytest.mark.parametrize("bad", ["al ice", "a-b", "", "x" * 65, "ns/1", 7])
def test_a_namespace_that_is_not_a_dagster_name_is_one_line(tmp_path, small_export, bad):
    root = write_project(tmp_path / "p", small_export, namespaced_body(bad))  # type: ignore[arg-type]
    with pytest.raises(PipelineDefinitionError, match="is not a Dagster name") as caught:
        load_pipeline(root)
    assert "\n" not in str(caught.value)
    out = cli("status", "--project", root, check=False)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert len([line for line in out.stderr.splitlines() if "is not a Dagster name" in line]) == 1


def test_two_namespaced_memories_on_one_instance_share_no_key_and_a_branch_delete_stays_in_its_memory(
        tmp_path, small_export, monkeypatch):
    from dagster import DagsterInstance

    home = tmp_path / "shared-instance"
    monkeypatch.setenv("SYNTHEX_DAGSTER_HOME", str(home))
    memories = two_memories(tmp_path, small_export)
    for root in memories.values():
        cli("run", "--project", root)
        cli("branch", "create", "exp", "--project", root)
    instance = DagsterInstance.from_config(str(home))
    try:
        keys = {k.to_user_string() for k in instance.get_asset_keys()}
        assert {k.split("/")[0] for k in keys} == {"alice", "bob"}
        assert {k for k in keys if k.startswith("alice/")} == {k.replace("bob/", "alice/", 1) for k in keys
                                                              if k.startswith("bob/")}
        assert not instance.get_dynamic_partitions("branch") and not instance.get_dynamic_partitions("period")
        for ns in memories:
            assert sorted(instance.get_dynamic_partitions(f"{ns}__branch")) == ["exp", "main"]
        cli("branch", "delete", "exp", "--project", memories["alice"])
        assert instance.get_dynamic_partitions("alice__branch") == ["main"]
        assert sorted(instance.get_dynamic_partitions("bob__branch")) == ["exp", "main"]  # bob's exp stays
        runs = {ns: json.loads(cli("runs", "--json", "--project", root).stdout) for ns, root in memories.items()}
        assert len(runs["alice"]) == len(runs["bob"]) == 1 and runs["alice"][0]["id"] != runs["bob"][0]["id"]
        dagster_runs = {r.run_id: r for r in instance.get_runs()}
        assert set(dagster_runs) == {runs["alice"][0]["id"], runs["bob"][0]["id"]}
        for ns, own in runs.items():
            run = dagster_runs[own[0]["id"]]
            assert run.job_name == f"{ns}__test_memory" and run.tags["synthex/writer"] == f"{ns}|main"
            assert {k.path[0] for k in run.asset_selection} == {ns}
        status = json.loads(cli("status", "--json", "--project", memories["bob"]).stdout)
        assert "exp" in json.dumps(status)  # bob still has its branch
    finally:
        instance.dispose()


def test_deploy_init_writes_one_code_location_per_memory_and_refuses_memories_it_cannot_keep_apart(
        tmp_path, small_export):
    memories = two_memories(tmp_path, small_export)
    home = tmp_path / "deploy"
    out = json.loads(cli("deploy", "init", home, "--project", memories["alice"], "--project", memories["bob"],
                         "--grpc-port", "4301", "--json").stdout)
    assert out["locations"] == ["alice", "bob"]
    workspace = yaml.safe_load((home / "workspace.yaml").read_text())
    assert [e["grpc_server"] for e in workspace["load_from"]] == [
        {"host": "localhost", "port": 4301, "location_name": "alice"},
        {"host": "localhost", "port": 4302, "location_name": "bob"}]
    text = (home / "workspace.yaml").read_text()
    assert f"SYNTHEX_PROJECT={memories['bob']} dagster api grpc" in text
    # the daemon's launcher knows each location's project: a gRPC location names no folder
    launcher = yaml.safe_load((home / "dagster.yaml").read_text())["run_launcher"]
    assert launcher["class"] == "DeploymentRunLauncher"
    assert launcher["config"] == {"projects": {ns: str(root.resolve()) for ns, root in memories.items()}}
    assert "\nSYNTHEX_PROJECT=" not in (home / "synthex.env").read_text()  # the daemon serves both memories

    plain = write_project(tmp_path / "plain", small_export)
    same = write_project(tmp_path / "alice-again", small_export, namespaced_body("alice"))
    shared_store = [write_project(tmp_path / f"s{i}", small_export, namespaced_body(f"s{i}", str(tmp_path / "one")))
                    for i in (1, 2)]
    for projects, why in (([memories["alice"], plain], "need a namespace each"),
                          ([memories["alice"], same], "have the same namespace 'alice'"),
                          (shared_store, "have the same store"),
                          ([memories["alice"], memories["bob"], "--store-uri", "s3://b/p"], "--store-uri names one")):
        args = [a for p in projects for a in (("--project", p) if isinstance(p, Path) else (p,))]
        result = cli("deploy", "init", tmp_path / "refused", *args, check=False)
        assert result.returncode != 0 and why in result.stderr and "Traceback" not in result.stderr, result
        assert not (tmp_path / "refused").exists()
    typo = tmp_path / "memories" / "alcie"  # a --project that is not a project: refused, nothing made there
    result = cli("deploy", "init", tmp_path / "refused", "--project", memories["alice"], "--project", typo, check=False)
    assert result.returncode != 0 and "Traceback" not in result.stderr, result
    assert f"--project {typo}: no pipeline.py there" in result.stderr
    assert not typo.exists() and not (tmp_path / "refused").exists()


def test_the_run_launcher_judges_a_namespaced_run_by_its_own_memorys_partitions(tmp_path, small_export, monkeypatch):
    """A run the UI or a backfill creates (no Synthex tags of its own) over a range of alice's periods that
    holds a key typed in by hand between them: the launcher reads alice's partitions (``alice__period``), finds
    it, and refuses the run; alice's tags are added. Read from the unnamespaced ``period`` (empty), the range
    would be its two ends only and the run admitted."""
    from dagster._core.definitions.reconstruct import ReconstructableRepository

    from synthex_assets.dagster_internals import partition_range_tags
    from synthex_assets.instance import open_instance
    from synthex_assets.naming import CODE_LOCATION_MODULE, DagsterNames, run_namespace
    from synthex_assets.partitions import register
    from synthex_assets.run_launcher import admit_run
    from synthex_assets.run_tags import REFUSED_TAG

    monkeypatch.setenv("SYNTHEX_DAGSTER_HOME", str(tmp_path / "shared-instance"))
    root = two_memories(tmp_path, small_export)["alice"]
    monkeypatch.setenv("SYNTHEX_PROJECT", str(root))
    pipeline = load(root)
    names = DagsterNames.of(pipeline)
    instance = open_instance(pipeline)
    try:
        register(instance, "main", ["2024-01"], names)
        instance.add_dynamic_partitions("alice__period", ["typed-by-hand"])
        register(instance, "main", ["2024-02"], names)
        job = build_definitions(pipeline).resolve_job_def(names.job)
        origin = ReconstructableRepository.for_module(CODE_LOCATION_MODULE, "defs", working_directory=str(root)) \
            .get_reconstructable_job(job.name).get_python_origin()
        run = instance.create_run_for_job(job, tags={**job.run_tags, **partition_range_tags("main|2024-01", "main|2024-02")},
                                          job_code_origin=origin)
        assert run_namespace(run.tags, None) == "alice"
        assert admit_run(instance, run) is False
        refused = instance.get_run_by_id(run.run_id)
        assert "'typed-by-hand' is not a period" in refused.tags[REFUSED_TAG]
        # a UI asset backfill's run carries no job tags: its assets' key prefix names the memory
        assert run_namespace({}, [names.asset_key("summaries"), names.asset_key("chatgpt")]) == "alice"
        assert run_namespace({}, [DagsterNames("test-memory").asset_key("summaries")]) is None
    finally:
        instance.dispose()
        pipeline.close()


def test_a_shared_toml_keeps_the_namespace(tmp_path):
    from synthex import Pipeline

    pipe = Pipeline("m", namespace="alice", project_dir=tmp_path)
    path = tmp_path / "p.toml"
    pipe.to_toml(path)
    assert 'namespace = "alice"' in path.read_text()
    assert Pipeline.from_toml(path, project_dir=tmp_path).namespace == "alice"
    Pipeline("m", project_dir=tmp_path).to_toml(path)
    assert "namespace" not in path.read_text() and Pipeline.from_toml(path, project_dir=tmp_path).namespace is None


def test_a_namespaced_memorys_source_sensor_requests_runs_of_its_own_keys_and_partitions(tmp_path):
    """A source sensor tick of a namespaced memory (test_sensors' live project): its run requests select the
    prefixed keys and carry the namespace and writer; the partitions it adds are the memory's; the requested
    runs materialize the prefixed keys only."""
    from dagster import SensorResult, build_sensor_context
    from test_sensors import Live, dagster_instance, make_project

    root = make_project(tmp_path / "proj")
    text = (root / "pipeline.py").read_text()
    assert 'agent="tester"' in text
    (root / "pipeline.py").write_text(text.replace('agent="tester"', 'agent="tester", namespace="ns1"'))
    with dagster_instance(tmp_path / "dagster") as instance:
        live = Live(root, instance)
        sensor = live.defs.get_sensor_def("ns1__notes_changes")
        result = sensor(build_sensor_context(instance=instance, resources={"cdc": live.defs.resources["cdc"]},
                                             definitions=live.defs))
        assert isinstance(result, SensorResult) and result.run_requests
        assert {r.partitions_def_name for r in result.dynamic_partitions_requests} == {"ns1__branch", "ns1__period"}
        for request in result.dynamic_partitions_requests:
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        for request in result.run_requests:
            assert {k.path[0] for k in request.asset_selection} == {"ns1"}
            assert request.tags["synthex/namespace"] == "ns1" and request.tags["synthex/writer"] == "ns1|main"
            job = live.defs.resolve_job_def("ns1__live")
            assert job.execute_in_process(instance=instance, tags=request.tags,
                                          asset_selection=request.asset_selection, raise_on_error=True).success
        keys = {k.to_user_string() for k in instance.get_asset_keys()}
        assert keys and all(k.startswith("ns1/") for k in keys)
        assert not instance.get_dynamic_partitions("branch") and not instance.get_dynamic_partitions("period")
        live.pipeline.close()


def grpc_location_run(instance, job, location: str, tags: dict):
    """A run as the daemon creates one for a sensor, schedule or the UI on a deployment: its origin is a gRPC
    server location, which names a host and port but no project folder."""
    from dagster._core.remote_origin import (
        GrpcServerCodeLocationOrigin,
        RemoteJobOrigin,
        RemoteRepositoryOrigin,
    )

    origin = RemoteJobOrigin(RemoteRepositoryOrigin(
        GrpcServerCodeLocationOrigin("127.0.0.1", 4301, location_name=location), "__repository__"), job.name)
    return instance.create_run_for_job(job, tags={**job.run_tags, **tags}, remote_job_origin=origin)


def test_the_deployments_launcher_judges_a_grpc_locations_run_by_its_memorys_own_branches(tmp_path, small_export):
    """A deployment serving two memories: its daemon has no SYNTHEX_PROJECT and a gRPC location names no
    folder, so the launcher's ``projects`` (written by `synthex deploy init`, checked by the launcher's own
    config schema) says whose branches a run names. A run of bob over a branch bob does not have is canceled
    with the one-line refusal, launched through the instance's own launcher; bob's own branch ``exp`` (alice has
    none) is admitted. Here the written launcher config on a SQLite instance; with real processes (daemon, code
    servers, PostgreSQL) in tests/test_deploy.py."""
    from dagster import DagsterInstance, DagsterRunStatus
    from dagster._core.launcher import LaunchRunContext

    from synthex_assets.dagster_internals import partition_range_tags
    from synthex_assets.deployment import validate_instance_config
    from synthex_assets.naming import DagsterNames
    from synthex_assets.queued_runs import CALLER_TAG, DeploymentRunLauncher
    from synthex_assets.run_tags import REFUSED_TAG

    memories = two_memories(tmp_path, small_export)
    cli("branch", "create", "exp", "--project", memories["bob"])
    deploy = tmp_path / "deploy"
    cli("deploy", "init", deploy, "--project", memories["alice"], "--project", memories["bob"])
    written = yaml.safe_load((deploy / "dagster.yaml").read_text())["run_launcher"]
    home = tmp_path / "instance"  # the written launcher on SQLite storage (no PostgreSQL needed here)
    home.mkdir()
    (home / "dagster.yaml").write_text(yaml.safe_dump({"run_launcher": written, "telemetry": {"enabled": False}}))
    validate_instance_config(home)
    pipeline = load(memories["bob"])
    names = DagsterNames.of(pipeline)
    instance = DagsterInstance.from_config(str(home))
    try:
        launcher = instance.run_launcher
        assert isinstance(launcher, DeploymentRunLauncher) and launcher.projects["bob"] == memories["bob"].resolve()
        instance.add_dynamic_partitions(names.branch_partitions, ["main", "exp", "typo"])
        instance.add_dynamic_partitions(names.period_partitions, ["2024-01"])
        job = build_definitions(pipeline).resolve_job_def(names.job)
        invented = grpc_location_run(instance, job, "bob", partition_range_tags("typo|2024-01", "typo|2024-01"))
        launcher.launch_run(LaunchRunContext(invented, workspace=None))
        refused = instance.get_run_by_id(invented.run_id)
        assert refused.status == DagsterRunStatus.CANCELED
        assert refused.tags[REFUSED_TAG].startswith("refused before any step ran: branch 'typo' is not a branch")
        assert "\n" not in refused.tags[REFUSED_TAG]
        # bob's own branch passes (a run `synthex run` queued: handed back, so no process is started here)
        own = grpc_location_run(instance, job, "bob", {**partition_range_tags("exp|2024-01", "exp|2024-01"),
                                                       CALLER_TAG: "elsewhere:1"})
        launcher.launch_run(LaunchRunContext(own, workspace=None))
        admitted = instance.get_run_by_id(own.run_id)
        assert admitted.status == DagsterRunStatus.NOT_STARTED and REFUSED_TAG not in admitted.tags
        assert admitted.tags["synthex/branch"] == "exp" and admitted.tags["synthex/writer"] == "bob|exp"
        # another checkout of bob with a branch the deployment's copy does not have (review finding): a run its
        # own `synthex run` queued is judged by that checkout (the caller executes it from there), another run
        # naming the same branch by the deployment's copy
        checkout = tmp_path / "bob-checkout"
        shutil.copytree(memories["bob"], checkout)
        cli("branch", "create", "feature", "--project", checkout)
        instance.add_dynamic_partitions(names.branch_partitions, ["feature"])
        from synthex_assets.launcher import remote_job_origin

        elsewhere = load(checkout)
        try:
            origin = remote_job_origin(elsewhere)
        finally:
            elsewhere.close()
        feature = partition_range_tags("feature|2024-01", "feature|2024-01")
        for tags, status in (({**feature, CALLER_TAG: "laptop:7"}, DagsterRunStatus.NOT_STARTED),
                             (feature, DagsterRunStatus.CANCELED)):
            run = instance.create_run_for_job(job, tags={**job.run_tags, **tags}, remote_job_origin=origin)
            launcher.launch_run(LaunchRunContext(run, workspace=None))
            assert instance.get_run_by_id(run.run_id).status == status, tags
        # a caller on another machine: its checkout's folder does not exist on the daemon's host, so the run is
        # not judged here (its own load checked the branch), not refused as if only main existed
        from synthex_assets.dagster_internals import code_location_job_origin
        from synthex_assets.naming import CODE_LOCATION_MODULE

        far = code_location_job_origin(module=CODE_LOCATION_MODULE, working_directory="/home/alice/bob-on-a-laptop",
                                       location="bob", job=names.job)
        run = instance.create_run_for_job(job, tags={**job.run_tags, **feature, CALLER_TAG: "laptop:8"},
                                          remote_job_origin=far)
        launcher.launch_run(LaunchRunContext(run, workspace=None))
        assert instance.get_run_by_id(run.run_id).status == DagsterRunStatus.NOT_STARTED
    finally:
        instance.dispose()
        pipeline.close()

    # the launcher's own config schema checks the map (deploy check, and the instance when it opens)
    for bad in ({"projects": {"bob": 7}}, {"projects": ["bob"]}, {"project": {"bob": "/x"}}):
        (home / "dagster.yaml").write_text(yaml.safe_dump({"run_launcher": {**written, "config": bad}}))
        result = cli("deploy", "check", home, check=False)
        assert result.returncode != 0 and "Traceback" not in result.stderr, result
        assert "dagster.yaml" in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
