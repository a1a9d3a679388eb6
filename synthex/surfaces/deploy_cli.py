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
@click.option("--project", "project", default=".", show_default=True, type=click.Path(file_okay=False),
              help="Project folder (holds pipeline.py); the code server loads it.")
@click.option("--grpc-host", default="localhost", show_default=True, help="Where the code server listens.")
@click.option("--grpc-port", default=4266, show_default=True, type=click.IntRange(1, 65535))
@click.option("--max-concurrent-runs", default=8, show_default=True, type=click.IntRange(1, 1000),
              help="Runs in progress at once, all memories and branches together (one per branch of a memory always).")
@click.option("--store-uri", default=None, help="Where the records live, e.g. s3://bucket/prefix (synthex.env).")
@click.option("--s3-endpoint", default=None, help="An S3-compatible store's endpoint (AWS_ENDPOINT_URL).")
@click.option("--force", is_flag=True, help="Replace the deployment files already in DIRECTORY.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def init_command(directory: str, project: str, grpc_host: str, grpc_port: int, max_concurrent_runs: int,
                 store_uri: str | None, s3_endpoint: str | None, force: bool, as_json: bool) -> None:
    """Write DIRECTORY/dagster.yaml, workspace.yaml and synthex.env for the project."""
    from synthex.core.project import PIPELINE_FILE, demo_pipeline, load_pipeline
    from synthex_assets.deployment import DeploymentSpec, write_deployment
    from synthex_assets.naming import location_name

    root = Path(project).resolve()
    pipeline = load_pipeline(root) if (root / PIPELINE_FILE).exists() else demo_pipeline(root)
    spec = DeploymentSpec(location=location_name(pipeline.name), project_dir=root, grpc_host=grpc_host,
                          grpc_port=grpc_port, max_concurrent_runs=max_concurrent_runs, store_uri=store_uri,
                          s3_endpoint=s3_endpoint)
    written = write_deployment(Path(directory), spec, force=force)
    if as_json:
        emit_json({"files": [str(p) for p in written], "location": spec.location})
        return
    for path in written:
        click.echo(f"wrote {path}")
    home = written[0].parent
    click.echo(f"fill in {home / 'synthex.env'}, then in each process: set -a; . {home / 'synthex.env'}; set +a")
    click.echo(f"  code server: dagster api grpc -m synthex_assets.code_location -h {grpc_host} -p {grpc_port}")
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
