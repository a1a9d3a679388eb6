"""`synthex eval <benchmark> | report`: the evals plugin's CLI commands, one per registered benchmark
(``evals.benchmarks.benchmark_registry``), built from the benchmark class when the command list is read."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from synthex.core.errors import BadInputError, SynthexError
from synthex.surfaces.cli import emit_json, json_option, project_option

if TYPE_CHECKING:
    from evals.benchmarks import Benchmark
    from synthex.core.plugins import Registry

run_id_option = click.option("--run-id", "run_id", default=None,
                             help="Name of this eval run in the eval_results table (default: <timestamp>-<benchmark>, "
                                  "the JSON file's name); re-using a name replaces that run's per-question rows.")
REGISTRY_KEY = "evals.benchmark_registry"  # the registry one invocation reads, in click's ``ctx.meta``


class BenchmarkGroup(click.Group):
    """``report`` plus one command per registered benchmark. The registry is built once per invocation (kept
    in ``ctx.meta``), and a plugin whose benchmark hook failed is a warning line."""

    def _benchmarks(self, ctx: click.Context) -> Registry[type[Benchmark]]:
        if REGISTRY_KEY not in ctx.meta:
            from evals.benchmarks import benchmark_registry
            from synthex.core.plugins import discover

            registry = benchmark_registry()
            already_reported = set(discover().failures)  # import failures: the synthex group warned of those
            for failure in registry.failures:
                if failure not in already_reported:
                    click.echo(f"warning: {failure}", err=True)
            ctx.meta[REGISTRY_KEY] = registry
        return ctx.meta[REGISTRY_KEY]

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._benchmarks(ctx).names()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in self._benchmarks(ctx):
            command = benchmark_command(self._benchmarks(ctx).get(cmd_name))
        return command


@click.group("eval", cls=BenchmarkGroup)
def eval_group() -> None:
    """Score memory architectures on a benchmark's retrieval (one command per registered benchmark)."""


def benchmark_command(benchmark_cls: type[Benchmark]) -> click.Command:
    """`synthex eval <name>`: the options every benchmark takes, ``--qa`` where it supports QA, and its own
    ``options`` (passed to its constructor)."""
    from evals.architectures import BUILTIN
    from evals.peers import PEER_NAMES

    def run(data: str, limit: int | None, compare: str | None, k: int, run_id: str | None, project: str,
            as_json: bool, qa: bool = False, **options: str) -> None:
        benchmark = benchmark_cls(**options)  # a bad option value is refused here, before any work
        run_id = _check_run_id(run_id)
        archs, eval_dir = _architectures(compare, project)
        peers = [n.strip() for n in (compare or "").split(",") if n.strip() in PEER_NAMES]
        for peer in peers:
            if peer not in benchmark.peers:
                raise BadInputError(f"benchmark {benchmark.name!r} has no peer {peer!r}; "
                                    f"peers: {', '.join(benchmark.peers) or 'none'}")
        from evals.benchmarks import EMBEDDING_CACHE, evaluate
        from evals.eval_progress import ProgressLine

        work_dir = eval_dir / "work" / benchmark.name
        results = evaluate(benchmark, Path(data), archs, work_dir, limit=limit, k=k, log=_log, qa=qa,
                           progress=ProgressLine(sys.stderr), embedding_cache=eval_dir / EMBEDDING_CACHE)
        for peer in peers:
            results.append(benchmark.evaluate_peer(peer, Path(data), work_dir, limit=limit, k=k, log=_log,
                                                   embedding_cache=eval_dir / EMBEDDING_CACHE))
        _finish(results, eval_dir, compare, as_json, run_id)

    params = [
        click.option("--data", type=click.Path(exists=True, dir_okay=False), required=True,
                     help=benchmark_cls.data_help),
        *(click.option(f"--{option.name.replace('_', '-')}", option.name, default=option.default, show_default=True,
                       type=click.Choice(option.choices) if option.choices else str, help=option.help)
          for option in benchmark_cls.options),
        click.option("--limit", type=int, default=None, help=f"Only the first N {benchmark_cls.unit}."),
        click.option("--compare", default=None,
                     help=f"Comma-separated architectures: {', '.join(_builtin_names(benchmark_cls.name, BUILTIN))}"
                          + (f", a peer ({', '.join(benchmark_cls.peers)})" if benchmark_cls.peers else "")
                          + ", or a branch of this project's pipeline (default: main)."),
        click.option("-k", "k", default=10, show_default=True),
        *([click.option("--qa", is_flag=True, help="Also answer from the top-5 hits and judge with the configured LLM.")]
          if benchmark_cls.supports_qa else []),
        run_id_option,
        project_option,
        json_option,
    ]
    for param in reversed(params):  # decorators apply bottom-up: reversed keeps the listed order in --help
        run = param(run)
    return click.command(benchmark_cls.name, help=benchmark_cls.description)(run)


@eval_group.command("report")
@click.option("--benchmark", default=None, help="Only this benchmark's results (needed by --chart when there are several).")
@click.option("--branch", default=None, help="Only results on this branch.")
@click.option("--chart", "chart_file", type=click.Path(dir_okay=False), default=None,
              help="Also write the comparison chart of the reported results as this PNG file.")
@project_option
@json_option
def eval_report(benchmark: str | None, branch: str | None, chart_file: str | None, project: str, as_json: bool) -> None:
    """The latest eval result per benchmark x architecture x branch (the eval_results DuckDB file, written by
    `synthex eval`, pipeline.eval and the eval assets), with the scorecard; --chart FILE.png writes the chart."""
    from evals.report import chart, connect_eval_results, latest_results, report, results_report
    from synthex_resources.sql import eval_results_path

    eval_dir = Path(project).resolve() / ".synthex" / "evals"
    database = eval_results_path(eval_dir.parent)
    results: list[dict] = []
    if database.is_file():
        con = connect_eval_results(database, read_only=True)
        try:
            results = latest_results(con, benchmark=benchmark, branch=branch)
        finally:
            con.close()
    if not results and (benchmark or branch or chart_file or as_json):
        raise BadInputError(f"{database}: no eval result" + (f" of benchmark {benchmark!r}" if benchmark else "")
                            + (f" on branch {branch!r}" if branch else "") + ": run `synthex eval <benchmark>` first")
    if chart_file:
        benchmarks = sorted({r["benchmark"] for r in results})
        if len(benchmarks) > 1:
            raise BadInputError(f"--chart draws one benchmark; these results have {', '.join(benchmarks)}: "
                                f"add --benchmark")
        from evals.report import labelled

        png = chart(labelled(results), Path(chart_file).expanduser().resolve())
    if as_json:
        emit_json({"database": str(database), "results": results, "chart": str(png) if chart_file else None})
        return
    # An eval results file from before the eval_runs table: the JSON files of the means, as before.
    click.echo(results_report(results, database) if results else report(eval_dir))
    if chart_file:
        click.echo(f"\nchart {png}")


def _builtin_names(benchmark: str, builtin: tuple[str, ...]) -> list[str]:
    """The built-in architectures as --help lists them, the benchmark's best LLM-free one marked."""
    from evals.report import BEST_LLM_FREE

    best = BEST_LLM_FREE.get(benchmark)
    return [f"{name} (the best LLM-free)" if name == best else name for name in builtin]


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
    from evals.report import category_table, chart, comparison_notes, record_results, table
    from evals.scorecard import Scorecard, scorecard_table

    recorded = record_results(results, eval_dir, run_id)
    saved, database, eval_run_id, n_rows = recorded.means_file, recorded.database, recorded.eval_run_id, recorded.n_rows
    png = chart(results, saved.with_suffix(".png")) if len(results) > 1 or compare else None
    quoted = eval_run_id.replace("'", "''")
    carded = [r for r in results if r.get("scorecard")]  # a peer's result has none
    cards = ("\n\nscorecard (design doc §9.5; protocols: --json key scorecard)\n"
             + scorecard_table([r["architecture"] for r in carded], [Scorecard.from_dict(r["scorecard"]) for r in carded])
             if carded else "")
    if as_json:
        emit_json(results[0] if len(results) == 1 else {"results": results, "chart": str(png) if png else None})
        return
    notes = comparison_notes(results)  # the best compared, and the best LLM-free built-in (in it or not)
    click.echo(f"Turn level\n{table(results, 'turn')}\n\nSession level\n{table(results, 'session')}\n\n"
               f"recall_any@10 by category\n{category_table(results)}{cards}"
               + (f"\n\n{notes}" if notes else "") + f"\n\nsaved {saved}"
               + (f"\nchart {png}" if png else "")
               + f"\n{n_rows} per-question rows in {database} (eval run {eval_run_id}): "
                 f"synthex sql \"select category, avg(recall_at_10) from eval_results "
                 f"where eval_run_id = '{quoted}' group by 1\"")
