"""`synthex deploy`: the files of a team's shared Dagster deployment (synthex_assets/deployment.py,
docs/deploy.md)."""

from __future__ import annotations

from pathlib import Path

import click

from synthex.surfaces.output import emit_json


@click.group("deploy")
def deploy_group() -> None:
    """A shared Dagster deployment: PostgreSQL instance, run queue, gRPC code server (docs/deploy.md)."""


@deploy_group.command("init")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--project", "projects", multiple=True, type=click.Path(file_okay=False),
              help="Project folder (holds pipeline.py); its code server loads it. Repeat it for several memories on "
                   "one instance (each with its own Pipeline(namespace=) and store): one code location each. "
                   "[default: .]")
@click.option("--grpc-host", default="localhost", show_default=True, help="Where the code servers listen.")
@click.option("--grpc-port", default=4266, show_default=True, type=click.IntRange(1, 65535),
              help="The first code server's port; the next memory's is the next port.")
@click.option("--max-concurrent-runs", default=8, show_default=True, type=click.IntRange(1, 1000),
              help="Runs in progress at once, all memories and branches together (one per branch of a memory always).")
@click.option("--store-uri", default=None, help="Where the records live, e.g. s3://bucket/prefix (synthex.env; "
                                                "one memory only: several set store_uri= each in pipeline.py).")
@click.option("--s3-endpoint", default=None, help="An S3-compatible store's endpoint (AWS_ENDPOINT_URL).")
@click.option("--force", is_flag=True, help="Replace the deployment files already in DIRECTORY.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def init_command(directory: str, projects: tuple[str, ...], grpc_host: str, grpc_port: int, max_concurrent_runs: int,
                 store_uri: str | None, s3_endpoint: str | None, force: bool, as_json: bool) -> None:
    """Write DIRECTORY/dagster.yaml, workspace.yaml and synthex.env for the project (or the projects)."""
    from synthex.core.errors import SynthexError
    from synthex.core.project import project_pipeline
    from synthex_assets.deployment import (
        DeploymentSpec,
        code_server_command,
        memory_locations,
        write_deployment,
    )

    roots = list(dict.fromkeys(Path(p).resolve() for p in projects or (".",)))
    if store_uri and len(roots) > 1:  # one SYNTHEX_STORE_URI for every memory would be one store for all
        raise SynthexError("--store-uri names one store: with several --project, set store_uri= in each "
                           "memory's pipeline.py")
    if len(roots) > 1:  # several memories: each must be a project already (a typo must not get the demo's files)
        missing = [str(root) for root in roots if not (root / "pipeline.py").is_file()]
        if missing:
            raise SynthexError(f"--project {missing[0]}: no pipeline.py there; with several --project, each "
                               f"must be a project folder (synthex init)")
    pipelines = [project_pipeline(root) for root in roots]
    spec = DeploymentSpec(locations=memory_locations(pipelines, grpc_port), grpc_host=grpc_host,
                          max_concurrent_runs=max_concurrent_runs, store_uri=store_uri, s3_endpoint=s3_endpoint)
    written = write_deployment(Path(directory), spec, force=force)
    if as_json:
        locations = [loc.name for loc in spec.locations]
        emit_json({"files": [str(p) for p in written], "location": locations[0], "locations": locations})
        return
    for path in written:
        click.echo(f"wrote {path}")
    home = written[0].parent
    click.echo(f"fill in {home / 'synthex.env'}, then in each process: set -a; . {home / 'synthex.env'}; set +a")
    for loc in spec.locations:
        click.echo(f"  code server{f' ({loc.name})' if len(spec.locations) > 1 else ''}: "
                   f"{code_server_command(spec, loc)}")
    # Dagster's daemon with a 2 s backfill loop (synthex_assets/daemon.py); `dagster-daemon run` works too.
    click.echo("  daemon:      python -m synthex_assets.daemon run -w " + str(home / "workspace.yaml"))
    click.echo("  webserver:   synthex ui   (or dagster-webserver -w " + str(home / "workspace.yaml") + ")")


@deploy_group.command("check")
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
def check_command(directory: str) -> None:
    """Check DIRECTORY/dagster.yaml with Dagster's own config validation (connects to nothing)."""
    from synthex_assets.deployment import validate_instance_config

    validate_instance_config(Path(directory).resolve())
    click.echo(f"{Path(directory) / 'dagster.yaml'}: valid")
