"""The `synthex` command line. Every command takes --project DIR (default: the current directory)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import click

from synthex.errors import SynthexError
from synthex.pipeline import Pipeline

project_option = click.option("--project", "project", default=".", show_default=True,
                              type=click.Path(file_okay=False), help="Project folder (holds pipeline.py).")
branch_option = click.option("--branch", default="main", show_default=True, help="Branch to act on.")
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def _emit(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _load(project: str) -> Pipeline:
    from synthex.project import load_pipeline

    return load_pipeline(project)


class SynthexGroup(click.Group):
    """Report Synthex errors as one clear line and a non-zero exit, not a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SynthexError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)


@click.group(cls=SynthexGroup)
@click.version_option(package_name="synthex")
def main() -> None:
    """Synthex: memory architectures that evolve with your agent."""


@main.command()
@click.argument("name")
@click.option("--from", "sources", multiple=True, type=click.Path(exists=True),
              help="An export file or folder (repeatable): ChatGPT/Claude conversations.json, .jsonl, folder.")
@click.option("--demo", is_flag=True, help="Use the bundled synthetic ChatGPT export (200 conversations).")
@click.option("--dir", "target", default=None, help="Folder to create (default: NAME).")
def init(name: str, sources: tuple[str, ...], demo: bool, target: str | None) -> None:
    """Create a project with the default pipeline (source -> transcripts -> summaries -> monthly -> world-model)."""
    from synthex.project import DEMO_EXPORT, init_project

    chosen = list(sources) + ([str(DEMO_EXPORT)] if demo else [])
    if not chosen:
        raise click.UsageError("give --from FILE (repeatable) or --demo")
    path = init_project(target or name, Path(name).name, chosen)
    click.echo(f"created {path}\nnext: cd {path.parent} && synthex run")


@main.command()
@click.argument("step", required=False)
@click.option("--from", "from_", default=None, help="Run this step and everything downstream.")
@click.option("--full", is_flag=True, help="Reprocess everything, ignoring materialization keys.")
@branch_option
@project_option
@json_option
def run(step: str | None, from_: str | None, full: bool, branch: str, project: str, as_json: bool) -> None:
    """Run the pipeline (only partitions whose inputs changed), through the project's Dagster instance."""
    from synthex.progress import TerminalProgress

    pipe = _load(project)
    selected = pipe.select(step, from_)
    click.echo(f"Running pipeline '{pipe.name}' on branch '{branch}'...", err=True)
    result = pipe.run(step=step, from_=from_, full=full, branch=branch, progress=TerminalProgress(selected))
    if as_json:
        _emit(result.to_dict())
        return
    s = result.stats
    click.echo(f"✓ {result.status} in {s.duration:.1f}s (step time)  records: {s.output} created, "
               f"{s.skipped} skipped, {s.errors} errors  tokens: {s.tokens}  run: {result.id}")


@main.command()
@click.argument("step", required=False)
@click.option("--from", "from_", default=None)
@click.option("--full", is_flag=True)
@branch_option
@project_option
@json_option
def plan(step: str | None, from_: str | None, full: bool, branch: str, project: str, as_json: bool) -> None:
    """Dry run: steps that would run, records to process, token and cost estimates."""
    result = _load(project).plan(step=step, from_=from_, full=full, branch=branch)
    if as_json:
        _emit(result.to_dict())
        return
    if not result.steps:
        click.echo("Everything is up to date.")
    for name, info in result.per_step.items():
        click.echo(f"{name:<16} {info['kind']:<10} {info['records']:>6} records  {len(info['periods']):>3} periods  "
                   f"~{info['tokens']} tokens" + (f"  {info['model']}" if info["model"] else ""))
    e = result.estimates
    click.echo(f"total: {e['records']} records, ~{e['tokens']} tokens, ~${e['cost']:.4f}"
               + (" (offline stand-in: no cost)" if e.get("offline") else ""))


@main.command()
@branch_option
@project_option
@json_option
def stats(branch: str, project: str, as_json: bool) -> None:
    """Record counts by step."""
    data = _load(project).stats(branch)
    if as_json:
        _emit(data)
        return
    for name, info in data["steps"].items():
        click.echo(f"{name:<16} {info['kind']:<10} {info['records']:>7}")


@main.command()
@click.argument("run_id", required=False)
@click.option("--limit", default=20, show_default=True)
@project_option
@json_option
def runs(run_id: str | None, limit: int, project: str, as_json: bool) -> None:
    """List recent runs (or one run's details)."""
    items = _load(project).runs(limit=10_000 if run_id else limit)
    if run_id:
        items = [r for r in items if r.id.startswith(run_id)]
        if not items:
            raise SynthexError(f"no run with id {run_id!r}")
    if as_json:
        _emit([r.to_dict() for r in items])
        return
    for r in items:
        s = r.stats
        click.echo(f"{r.id}  {r.status:<9} {r.branch:<10} {r.started_at}  out={s.output} skip={s.skipped} "
                   f"err={s.errors} tokens={s.tokens}" + (f"  error: {r.error}" if r.error else ""))


def _get_record(project: str, record_id: str):
    rec = _load(project).get(record_id)
    if rec is None:
        raise SynthexError(f"no record with id {record_id!r}")
    return rec


@main.command()
@click.argument("record_id")
@project_option
@json_option
def get(record_id: str, project: str, as_json: bool) -> None:
    """Show one record."""
    rec = _get_record(project, record_id)
    if as_json:
        _emit(rec.to_dict())
        return
    click.echo(f"{rec.id}  step={rec.step} branch={rec.branch} period={rec.period}\n"
               f"sources: {', '.join(rec.source_ids) or '-'}\nmodel: {rec.audit.get('model')}\n\n{rec.content}")


@main.command()
@click.argument("record_id")
@project_option
@json_option
def lineage(record_id: str, project: str, as_json: bool) -> None:
    """Show a record's provenance tree down to the source records."""
    tree = _get_record(project, record_id).lineage()
    if as_json:
        _emit(tree)
        return

    def show(node: dict, depth: int) -> None:
        text = node["content"].replace("\n", " ")
        click.echo(f"{'  ' * depth}- [{node['step']}] {node['id'][:8]}  {text[:90]}")
        for child in node["sources"]:
            show(child, depth + 1)

    show(tree, 0)


@main.command()
@click.argument("query")
@click.option("--step", "steps", multiple=True, help="Step(s) to search (default: the search output's steps).")
@click.option("--exact", is_flag=True, help="Verbatim substring search (default steps: the leaf/source steps).")
@click.option("-k", "k", default=10, show_default=True, help="Number of hits.")
@click.option("--mode", type=click.Choice(["bm25", "dense", "hybrid", "conversational"]), default="hybrid",
              show_default=True, help="conversational: rank turns (leaves) through their context records")
@branch_option
@project_option
@json_option
def search(query: str, steps: tuple[str, ...], exact: bool, k: int, mode: str, branch: str, project: str,
           as_json: bool) -> None:
    """Search records at any altitude of the pipeline; drill down with `synthex lineage ID`."""
    hits = _load(project).search(query, step=list(steps) or None, exact=exact, branch=branch, k=k, mode=mode)
    if as_json:
        _emit({"hits": [h.to_hit_dict() for h in hits]})
        return
    if not hits:
        click.echo("no hits")
    for i, h in enumerate(hits, 1):
        text = h.content.replace("\n", " ")
        click.echo(f"{i:>2}. {h.score:8.4f}  [{h.step}] {h.id[:8]}  {h.period}  {text[:100]}")


@main.group("eval")
def eval_group() -> None:
    """Score memory architectures on LoCoMo / LongMemEval retrieval."""


@eval_group.command("locomo")
@click.option("--data", type=click.Path(exists=True, dir_okay=False), required=True,
              help="The official locomo10.json (or a subset in the same format).")
@click.option("--limit", type=int, default=None, help="Only the first N conversations.")
@click.option("--compare", default=None,
              help="Comma-separated architectures: raw-bm25, raw-dense, raw-hybrid, contextual-hybrid, conversational, or a branch "
                   "of this project's pipeline (default: main).")
@click.option("-k", "k", default=10, show_default=True)
@click.option("--qa", is_flag=True, help="Also answer from the top-5 hits and judge with the configured LLM.")
@project_option
@json_option
def eval_locomo(data: str, limit: int | None, compare: str | None, k: int, qa: bool, project: str,
                as_json: bool) -> None:
    """LoCoMo retrieval: each conversation ingested through the architecture's sources."""
    from evals.locomo_eval import evaluate_locomo

    archs, eval_dir = _architectures(compare, project)
    results = evaluate_locomo(Path(data), archs, eval_dir / "work" / "locomo", limit=limit, k=k, log=_log, qa=qa)
    if "mem0" in (compare or "").split(","):
        from evals.peers.mem0_peer import evaluate_mem0_locomo

        try:
            results.append(evaluate_mem0_locomo(Path(data), eval_dir / "work" / "locomo", limit=limit, k=k, log=_log))
        except RuntimeError as exc:
            raise SynthexError(str(exc)) from exc
    _finish(results, eval_dir, compare, as_json)


@eval_group.command("longmemeval")
@click.option("--data", type=click.Path(exists=True, dir_okay=False), required=True,
              help="longmemeval_s_cleaned.json, longmemeval_m*.json or longmemeval_oracle.json.")
@click.option("--protocol", type=click.Choice(["official", "any"]), default="official", show_default=True)
@click.option("--limit", type=int, default=None, help="Only the first N questions.")
@click.option("--compare", default=None, help="Comma-separated architectures (as for `eval locomo`).")
@click.option("-k", "k", default=10, show_default=True)
@project_option
@json_option
def eval_longmemeval(data: str, protocol: str, limit: int | None, compare: str | None, k: int, project: str,
                     as_json: bool) -> None:
    """LongMemEval retrieval: each question's haystack ingested through the architecture's sources."""
    from evals.longmemeval_eval import evaluate_longmemeval

    archs, eval_dir = _architectures(compare, project)
    results = evaluate_longmemeval(Path(data), archs, eval_dir / "work" / "longmemeval", protocol=protocol,
                                   limit=limit, k=k, log=_log)
    _finish(results, eval_dir, compare, as_json)


def _log(msg: str) -> None:
    click.echo(msg, err=True)


def _architectures(compare: str | None, project: str) -> tuple[list, Path]:
    """The architectures named by --compare (default: the project's pipeline on main), and the eval dir."""
    from evals.architectures import resolve

    root = Path(project).resolve()
    names = [n.strip() for n in (compare or "main").split(",") if n.strip()]
    try:
        return resolve(names, root), root / ".synthex" / "evals"
    except ValueError as exc:
        raise SynthexError(str(exc)) from exc


def _finish(results: list[dict], eval_dir: Path, compare: str | None, as_json: bool) -> None:
    from evals.report import category_table, chart, save, table

    saved = save(results, eval_dir)
    png = chart(results, saved.with_suffix(".png")) if len(results) > 1 or compare else None
    if as_json:
        _emit(results[0] if len(results) == 1 else {"results": results, "chart": str(png) if png else None})
        return
    click.echo(f"Turn level\n{table(results, 'turn')}\n\nSession level\n{table(results, 'session')}\n\n"
               f"recall_any@10 by category\n{category_table(results)}\n\nsaved {saved}"
               + (f"\nchart {png}" if png else ""))


@eval_group.command("report")
@project_option
def eval_report(project: str) -> None:
    """Markdown report of the latest eval runs."""
    from evals.report import report

    click.echo(report(Path(project).resolve() / ".synthex" / "evals"))


@main.command("export-toml")
@click.option("-o", "--output", default=None, help="File to write (default: stdout).")
@project_option
def export_toml(output: str | None, project: str) -> None:
    """Serialize the pipeline's structure to TOML (prompt functions by import path)."""
    text = _load(project).to_toml(output)
    if output is None:
        click.echo(text)
    else:
        click.echo(f"wrote {output}")


@main.command()
@click.option("--port", default=3000, show_default=True)
@project_option
def ui(port: int, project: str) -> None:
    """Open the Dagster UI on this project: every step an asset, lineage visible."""
    root = Path(project).resolve()
    from synthex.project import PIPELINE_FILE

    home = root / ".synthex" / "dagster"
    home.mkdir(parents=True, exist_ok=True)
    from synthex_assets.instance import ensure_instance_yaml

    ensure_instance_yaml(home)
    env = dict(os.environ, SYNTHEX_PROJECT=str(root), DAGSTER_HOME=str(home))
    if not (root / PIPELINE_FILE).exists():
        click.echo(f"no {PIPELINE_FILE} in {root}: showing the bundled demo pipeline", err=True)
    args = [sys.executable, "-m", "dagster", "dev", "-m", "evals.code_location", "-p", str(port)]
    # dagster dev ignores SIGINT/SIGTERM when started with SIGINT ignored (e.g. from a background script).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.execvpe(args[0], args, env)


if __name__ == "__main__":
    main()
