"""`synthex export`: take a project's memory out (``synthex.app.export``)."""

from __future__ import annotations

import click

from synthex.surfaces.output import emit_json


@click.command("export")
@click.argument("output", type=click.Path(dir_okay=False))
@click.option("--branch", default=None, help="Only what this branch reads (default: every branch, rows as stored).")
@click.option("--format", "fmt", default="synthex", show_default=True, type=click.Choice(["synthex", "mcp-memory"]),
              help="synthex: JSONL of every record (ids, steps, branches, sources, times, metadata, audit) that "
                   "`synthex init NAME --from FILE` restores; mcp-memory: the MCP reference memory server's "
                   "memory.jsonl (entities from key aggregates, observations from their members).")
@click.option("--project", "project", default=".", show_default=True, type=click.Path(file_okay=False),
              help="Project folder (holds pipeline.py).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def export_command(output: str, branch: str | None, fmt: str, project: str, as_json: bool) -> None:
    """Write the project's records to OUTPUT (a file, replaced whole)."""
    from synthex.app.export import export_project
    from synthex.core.project import load_pipeline

    pipe = load_pipeline(project)
    try:
        summary = export_project(pipe.app, output, branch=branch, fmt=fmt)  # type: ignore[attr-defined]
    finally:
        pipe.close()  # type: ignore[attr-defined]
    if as_json:
        emit_json(summary.to_dict())
        return
    what = (f"{summary.entities} entities, {summary.relations} relations from {summary.records} records"
            if fmt == "mcp-memory" else f"{summary.records} records")
    click.echo(f"wrote {summary.path}: {what} ({', '.join(summary.branches)})")
