"""A team's shared Dagster deployment of one Synthex project: the files ``synthex deploy init`` writes.

Three files in one folder (the deployment's DAGSTER_HOME, docs/deploy.md):

- ``dagster.yaml``: runs, events and schedules in PostgreSQL (``dagster-postgres``; credentials read from
  the environment when a process opens the instance, never written into the file), Dagster's run queue
  with one run per branch of one memory at a time (a tag concurrency limit per value of ``WRITER_TAG``,
  ``<memory>|<branch>``, which every run Synthex launches or a sensor requests carries: the branches of
  different memories on one instance do not wait on each other), the run launcher with each code
  location's project folder (``DeploymentRunLauncher``'s ``projects``) and run monitoring on.
- ``workspace.yaml``: the project loaded through a gRPC code server (``dagster api grpc``), so the
  webserver and the daemon never import the project's code themselves; or several memories (projects),
  each its own code location and code server, kept apart in the instance by their namespaces
  (``Pipeline(namespace=)``, synthex_assets.naming.DagsterNames).
- ``synthex.env``: the variables every process of the deployment needs (the instance, the project,
  PostgreSQL's credentials, the records' object store).

Pointing ``SYNTHEX_DAGSTER_HOME`` at the folder makes ``synthex run`` / ``status`` / ``ui`` use the shared
instance (``synthex_assets.instance.open_instance`` keeps a ``dagster.yaml`` it did not write as it is).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from synthex.core.definition import PipelineDefinition
from synthex.core.errors import SynthexError
from synthex_assets.dagster_internals import WRITER_TAG

INSTANCE_FILE = "dagster.yaml"
WORKSPACE_FILE = "workspace.yaml"
ENV_FILE = "synthex.env"
# The first line of the deployment's workspace.yaml: `synthex ui` recognises a deployment by it (and then
# starts only a webserver on that workspace, never rewriting it; synthex/surfaces/ui_launch.py).
WORKSPACE_HEADER = "# Written by `synthex deploy init`: the project through its gRPC code server."
# PostgreSQL's connection, read from these variables by every process that opens the instance.
PG_ENV = {"username": "DAGSTER_PG_USERNAME", "password": "DAGSTER_PG_PASSWORD", "hostname": "DAGSTER_PG_HOST",
          "db_name": "DAGSTER_PG_DB", "port": "DAGSTER_PG_PORT"}


@dataclass(frozen=True)
class CodeLocation:
    """One memory's code location: its name (``DagsterNames.location``), its project, its code server's port."""

    name: str
    project_dir: Path
    port: int


@dataclass(frozen=True)
class DeploymentSpec:
    """What a deployment's files say: one code location per memory (several need a namespace each, see
    ``memory_locations``). ``store_uri`` None: the records stay where pipeline.py puts them."""

    locations: tuple[CodeLocation, ...]
    grpc_host: str = "localhost"
    max_concurrent_runs: int = 8
    store_uri: str | None = None
    s3_endpoint: str | None = None


def memory_locations(pipelines: list[PipelineDefinition], first_port: int) -> tuple[CodeLocation, ...]:
    """The code locations of ``pipelines`` on one instance, their code servers on consecutive ports. Several
    memories must each have their own namespace (else their asset keys, partitions and sensors would be one)
    and their own store: one line naming the two that do not."""
    from synthex_assets.naming import DagsterNames

    if len(pipelines) > 1:
        seen: dict[str, Path] = {}
        stores: dict[str, Path] = {}
        for pipe in pipelines:
            if pipe.namespace is None:
                raise SynthexError(f"{pipe.project_dir}: several memories on one instance need a namespace each: "
                                   f"set Pipeline(..., namespace=\"<name>\") in its pipeline.py")
            for what, taken, value in (("namespace", seen, pipe.namespace), ("store", stores, pipe.store_uri)):
                if value in taken:
                    raise SynthexError(f"{taken[value]} and {pipe.project_dir} have the same {what} {value!r}: "
                                       f"each memory on one instance needs its own")
                taken[value] = pipe.project_dir
    if first_port + len(pipelines) - 1 > 65535:
        raise SynthexError(f"--grpc-port {first_port}: {len(pipelines)} code servers need ports up to "
                           f"{first_port + len(pipelines) - 1}, past 65535")
    return tuple(CodeLocation(DagsterNames.of(p).location, p.project_dir, first_port + i)
                 for i, p in enumerate(pipelines))


def _yaml_str(value: str) -> str:
    # A JSON string is a valid YAML double-quoted scalar.
    return json.dumps(value, ensure_ascii=False)


def instance_yaml(spec: DeploymentSpec) -> str:
    pg = "\n".join(f"      {field}:\n        env: {var}" for field, var in PG_ENV.items())
    projects = "\n".join(f"      {_yaml_str(loc.name)}: {_yaml_str(str(loc.project_dir))}" for loc in spec.locations)
    return f"""\
# Written by `synthex deploy init`: a team's shared Dagster instance (docs/deploy.md).
telemetry:
  enabled: false
nux:
  enabled: false
# Runs, events, schedules and sensor cursors in one PostgreSQL database (dagster-postgres). The credentials
# come from the environment of each process (synthex.env), never from this file.
storage:
  postgres:
    postgres_db:
{pg}
      # The driver dagster-postgres installs (psycopg2): SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3.
      scheme: postgresql+psycopg2
# Every run waits in Dagster's queue; the daemon starts it when the limits below allow.
run_coordinator:
  module: dagster._core.run_coordinator
  class: QueuedRunCoordinator
concurrency:
  runs:
    max_concurrent_runs: {spec.max_concurrent_runs}
    # One writer per branch of one memory across every machine: at most one run in progress per value of the
    # writer tag, "<memory>|<branch>" (other branches, and other memories' branches, go on side by side).
    # Synthex's runs and its sensors' run requests carry the tag.
    tag_concurrency_limits:
      - key: {WRITER_TAG}
        value:
          applyLimitPerUniqueValue: true
        limit: 1
# The code server starts each run in a process of its own (`dagster api execute_run`), except a run queued
# by `synthex run`: the queue hands it back to that process, which executes it (synthex_assets/queued_runs.py).
# Each code location's project folder (as the daemon's host sees it): a gRPC location names none, so this is
# how a run of memory B over a branch B does not have is refused before any step, whichever memory it is.
run_launcher:
  module: synthex_assets.queued_runs
  class: DeploymentRunLauncher
  config:
    projects:
{projects}
# A run stuck starting or cancelling is marked failed, and so is a `synthex run`'s run whose process died
# (checked by pid on the daemon's host); a code server's run process is not checked (docs/deploy.md).
run_monitoring:
  enabled: true
  start_timeout_seconds: 180
  cancel_timeout_seconds: 180
  poll_interval_seconds: 30
"""


def code_server_command(spec: DeploymentSpec, location: CodeLocation) -> str:
    """How to start ``location``'s code server (with several memories, each in its own project)."""
    project = f"SYNTHEX_PROJECT={location.project_dir} " if len(spec.locations) > 1 else ""
    return f"{project}dagster api grpc -m synthex_assets.code_location -h {spec.grpc_host} -p {location.port}"


def workspace_yaml(spec: DeploymentSpec) -> str:
    starts = [f"# Start it with: {code_server_command(spec, loc)}" for loc in spec.locations]
    entries = "".join(
        "  - grpc_server:\n"
        f"      host: {_yaml_str(spec.grpc_host)}\n"
        f"      port: {loc.port}\n"
        f"      location_name: {_yaml_str(loc.name)}\n" for loc in spec.locations)
    return f"{WORKSPACE_HEADER}\n" + "\n".join(starts) + "\nload_from:\n" + entries


def env_file(spec: DeploymentSpec, home: Path) -> str:
    store = [f"SYNTHEX_STORE_URI={spec.store_uri}" if spec.store_uri else "# SYNTHEX_STORE_URI=s3://bucket/prefix"]
    if spec.s3_endpoint:
        store += [f"AWS_ENDPOINT_URL={spec.s3_endpoint}",
                  *(["AWS_ALLOW_HTTP=true"] if spec.s3_endpoint.startswith("http://") else [])]
    else:
        store += ["# AWS_ENDPOINT_URL=http://minio:9000   (an S3-compatible store; AWS_ALLOW_HTTP=true for http)"]
    return "\n".join([
        "# Written by `synthex deploy init`: the environment of every process of the deployment (code server,",
        "# daemon, webserver, `synthex run`). Load it with: set -a; . ./synthex.env; set +a",
        f"DAGSTER_HOME={home}",
        f"SYNTHEX_DAGSTER_HOME={home}",
        # one memory: its project, for every process; several: each code server is given its own (workspace.yaml)
        # and the daemon and webserver serve them all
        (f"SYNTHEX_PROJECT={spec.locations[0].project_dir}" if len(spec.locations) == 1
         else "# SYNTHEX_PROJECT: per code server (workspace.yaml), never here: this instance serves several memories"),
        "DAGSTER_PG_HOST=localhost",
        "DAGSTER_PG_PORT=5432",
        "DAGSTER_PG_USERNAME=synthex",
        "DAGSTER_PG_PASSWORD=",
        "DAGSTER_PG_DB=synthex",
        "# Records on object storage: pipeline.py passes it on, Pipeline(..., store_uri=os.environ.get(",
        '# "SYNTHEX_STORE_URI")). lancedb and pylance read the AWS_* variables themselves.',
        *store,
        "AWS_ACCESS_KEY_ID=",
        "AWS_SECRET_ACCESS_KEY=",
        "AWS_REGION=us-east-1",
        "",
    ])


def is_deployment(home: Path) -> bool:
    """Whether ``home`` holds a deployment's files (its workspace.yaml starts with ``WORKSPACE_HEADER``)."""
    try:
        with open(home / WORKSPACE_FILE, encoding="utf-8") as handle:
            return handle.readline().rstrip("\n") == WORKSPACE_HEADER
    except (OSError, UnicodeDecodeError):
        return False


def write_deployment(home: Path, spec: DeploymentSpec, *, force: bool = False) -> list[Path]:
    """Write the deployment's three files into ``home`` (each replaced whole); an existing one is refused
    unless ``force``. The instance config is then checked by Dagster's own validation."""
    home = home.resolve()
    files = {home / INSTANCE_FILE: instance_yaml(spec), home / WORKSPACE_FILE: workspace_yaml(spec),
             home / ENV_FILE: env_file(spec, home)}
    existing = [p for p in files if p.exists()]
    if existing and not force:
        raise SynthexError(f"{existing[0]} exists; pass --force to replace the deployment's files")
    home.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        # synthex.env gets the database password and the object store's keys: only its owner reads it.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if path.name == ENV_FILE else 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    validate_instance_config(home)
    return list(files)


def validate_instance_config(home: Path) -> dict:
    """The folder's dagster.yaml as Dagster's own validation reads it (the instance schema, then each
    configured class's own config schema); raises SynthexError naming the file and the first problem.
    Connects to nothing: ``env:`` fields are checked as fields, not read."""
    from dagster import DagsterInvalidConfigError

    from synthex_assets.dagster_internals import validated_instance_config

    path = home / INSTANCE_FILE
    try:
        return validated_instance_config(home)
    except DagsterInvalidConfigError as exc:
        first = next(iter(exc.errors), None)
        raise SynthexError(f"{path}: {exc.args[0].splitlines()[0]}"
                           + (f" {first.message}" if first is not None else "")) from None
    except (ImportError, AttributeError) as exc:  # a class the file names does not load here
        raise SynthexError(f"{path}: {type(exc).__name__}: {exc}") from None
