"""`synthex eval locomo | longmemeval | report`: the evals plugin's CLI commands."""

from __future__ import annotations

from pathlib import Path

import click

from synthex.cli import emit_json, json_option, project_option
from synthex.errors import BadInputError, SynthexError

run_id_option = click.option("--run-id", "run_id", default=None,
                             help="Name of this eval run in the eval_results table (default: <timestamp>-<benchmark>, "
                                  "the JSON file's name); re-using a name replaces that run's per-question rows.")


@click.group("eval")
def eval_group() -> None:
    """Score memory architectures on LoCoMo / LongMemEval retrieval."""


@eval_group.command("locomo")
@click.option("--data", type=click.Path(exists=True, dir_okay=False), required=True,
              help="The official locomo10.json (or a subset in the same format).")
@click.option("--limit", type=int, default=None, help="Only the first N conversations.")
@click.option("--compare", default=None,
              help="Comma-separated architectures: raw-bm25, raw-dense, raw-hybrid, contextual-hybrid, conversational, "
                   "or a branch of this project's pipeline (default: main).")
@click.option("-k", "k", default=10, show_default=True)
@click.option("--qa", is_flag=True, help="Also answer from the top-5 hits and judge with the configured LLM.")
@run_id_option
@project_option
@json_option
def eval_locomo(data: str, limit: int | None, compare: str | None, k: int, qa: bool, run_id: str | None, project: str,
                as_json: bool) -> None:
    """LoCoMo retrieval: each conversation ingested through the architecture's sources."""
    from evals.locomo_eval import evaluate_locomo

    run_id = _check_run_id(run_id)
    archs, eval_dir = _architectures(compare, project)
    results = evaluate_locomo(Path(data), archs, eval_dir / "work" / "locomo", limit=limit, k=k, log=_log, qa=qa)
    if "mem0" in (compare or "").split(","):
        from evals.peers.mem0_peer import evaluate_mem0_locomo

        try:
            results.append(evaluate_mem0_locomo(Path(data), eval_dir / "work" / "locomo", limit=limit, k=k, log=_log))
        except RuntimeError as exc:
            raise SynthexError(str(exc)) from exc
    _finish(results, eval_dir, compare, as_json, run_id)


@eval_group.command("longmemeval")
@click.option("--data", type=click.Path(exists=True, dir_okay=False), required=True,
              help="longmemeval_s_cleaned.json, longmemeval_m*.json or longmemeval_oracle.json.")
@click.option("--protocol", type=click.Choice(["official", "any"]), default="official", show_default=True)
@click.option("--limit", type=int, default=None, help="Only the first N questions.")
@click.option("--compare", default=None, help="Comma-separated architectures (as for `eval locomo`).")
@click.option("-k", "k", default=10, show_default=True)
@run_id_option
@project_option
@json_option
def eval_longmemeval(data: str, protocol: str, limit: int | None, compare: str | None, k: int, run_id: str | None,
                     project: str, as_json: bool) -> None:
    """LongMemEval retrieval: each question's haystack ingested through the architecture's sources."""
    from evals.longmemeval_eval import evaluate_longmemeval

    run_id = _check_run_id(run_id)
    archs, eval_dir = _architectures(compare, project)
    results = evaluate_longmemeval(Path(data), archs, eval_dir / "work" / "longmemeval", protocol=protocol,
                                   limit=limit, k=k, log=_log)
    _finish(results, eval_dir, compare, as_json, run_id)


@eval_group.command("report")
@project_option
def eval_report(project: str) -> None:
    """Markdown report of the latest eval runs."""
    from evals.report import report

    click.echo(report(Path(project).resolve() / ".synthex" / "evals"))


def _log(msg: str) -> None:
    click.echo(msg, err=True)


def _check_run_id(run_id: str | None) -> str | None:
    if run_id is not None and not run_id.strip():
        raise BadInputError("--run-id is empty")
    return run_id.strip() if run_id else None


def _architectures(compare: str | None, project: str) -> tuple[list, Path]:
    """The architectures named by --compare (default: the project's pipeline on main), and the eval dir."""
    from evals.architectures import resolve

    root = Path(project).resolve()
    names = [n.strip() for n in (compare or "main").split(",") if n.strip()]
    try:
        return resolve(names, root), root / ".synthex" / "evals"
    except ValueError as exc:
        raise SynthexError(str(exc)) from exc


def _finish(results: list[dict], eval_dir: Path, compare: str | None, as_json: bool, run_id: str | None) -> None:
    """Per-question rows to the eval_results DuckDB table, the means to a JSON file, then the output."""
    import time

    from evals.report import (
        category_table,
        chart,
        default_eval_run_id,
        save,
        save_eval_results,
        strip_questions,
        table,
    )
    from synthex_resources.sql import EVAL_RESULTS_FILE

    stamp = time.strftime("%Y%m%d-%H%M%S")
    eval_run_id = run_id or default_eval_run_id(results, stamp)
    database = eval_dir / EVAL_RESULTS_FILE
    with_questions = [dict(r) for r in results]  # the per-question rows go to DuckDB, not to the JSON file
    saved = save(strip_questions(results, eval_run_id), eval_dir, stamp)
    try:
        n_rows = save_eval_results(with_questions, database, eval_run_id)
    except SynthexError as exc:
        raise SynthexError(f"{exc}; the means are saved in {saved}") from None
    png = chart(results, saved.with_suffix(".png")) if len(results) > 1 or compare else None
    quoted = eval_run_id.replace("'", "''")
    if as_json:
        emit_json(results[0] if len(results) == 1 else {"results": results, "chart": str(png) if png else None})
        return
    click.echo(f"Turn level\n{table(results, 'turn')}\n\nSession level\n{table(results, 'session')}\n\n"
               f"recall_any@10 by category\n{category_table(results)}\n\nsaved {saved}"
               + (f"\nchart {png}" if png else "")
               + f"\n{n_rows} per-question rows in {database} (eval run {eval_run_id}): "
                 f"synthex sql \"select category, avg(recall_at_10) from eval_results "
                 f"where eval_run_id = '{quoted}' group by 1\"")
