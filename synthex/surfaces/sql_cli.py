"""`synthex sql`: query the memory with DuckDB (``synthex_resources.sql.SqlConsole``).

Views: ``records`` (no ``vector``), ``record_vectors``, ``runs``, ``run_steps`` and the store's other
tables, scanned from LanceDB through Arrow; ``eval_results`` when the project has eval results
(``.synthex/evals/eval_results.duckdb``, or ``--eval-results FILE``); ``cdc_sources`` and ``cdc_items``,
the sources' sync state (``.synthex/cdc.duckdb``, a snapshot: a sync is never kept waiting). Read-only
and sandboxed: DuckDB's external access is off, so no file, URL or extension beyond the views. DuckDB,
Lance and pyarrow load inside the command; lancedb and Dagster never do.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

import click

CELL_WIDTH = 60  # the aligned table cuts longer cells (--json and --csv never do)
SIZE_UNITS = {"": 1, "B": 1, "KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3, "TB": 1024 ** 4}  # as Limits counts
# How a statement stopped by a bound is told to raise it, per bound (``StatementLimitError.bound``).
RAISE_WITH = {"sql_timeout_s": "--timeout SECONDS", "sql_memory_bytes": "--memory-limit SIZE"}


class ByteSize(click.ParamType):
    """A size such as ``2GB``, ``512MB`` or a number of bytes (units of 1024, as ``Limits`` counts)."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        import re

        if isinstance(value, int):
            return value
        found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?b?)\s*", str(value), re.IGNORECASE)
        unit = found.group(2).upper() if found else ""
        unit = unit + "B" if unit and not unit.endswith("B") else unit
        size = int(float(found.group(1)) * SIZE_UNITS[unit]) if found else 0
        if size <= 0:
            self.fail(f"{value!r} is not a size (e.g. 2GB, 512MB)", param, ctx)
        return size


@click.command("sql")
@click.argument("query")
@click.option("--project", "project", default=".", show_default=True, type=click.Path(file_okay=False),
              help="Project folder (holds pipeline.py).")
@click.option("--json", "as_json", is_flag=True, help="Rows as a JSON list of objects.")
@click.option("--csv", "as_csv", is_flag=True, help="Rows as CSV with a header line.")
@click.option("--eval-results", "eval_results", default=None, type=click.Path(dir_okay=False),
              help="The eval results DuckDB file (default: the project's .synthex/evals/eval_results.duckdb).")
@click.option("--timeout", "timeout_s", default=None, type=click.FloatRange(0, min_open=True),
              help="Seconds a statement may run before it is stopped (default: the project's "
                   "Limits.sql_timeout_s, 30).")
@click.option("--memory-limit", "memory_bytes", default=None, type=ByteSize(),
              help="DuckDB memory for the statement, e.g. 2GB; beyond it DuckDB spills to .synthex/sql-tmp "
                   "(default: the project's Limits.sql_memory_bytes, 1GB).")
def sql_command(query: str, project: str, as_json: bool, as_csv: bool, eval_results: str | None,
                timeout_s: float | None, memory_bytes: int | None) -> None:
    """Run a read-only SQL QUERY (DuckDB) over the records, runs and eval results.

    Views: records (every column but vector), record_vectors (id, branch, step, vector), runs, run_steps,
    cdc_sources and cdc_items (what each source held at its last sync), and eval_results (one row per
    eval question) once `synthex eval` has run. Nothing else: files, URLs and extensions are out of reach.
    A statement is stopped after --timeout seconds and given --memory-limit of memory (spilling to the
    project's .synthex/sql-tmp beyond it).

    \b
    Examples:
      synthex sql "select step, count(*) from records where branch = 'main' group by 1"
      synthex sql "select category, avg(recall_at_10) from eval_results group by 1" --json
    """
    from synthex.core.errors import BadInputError
    from synthex.core.project import load_pipeline
    from synthex_resources.sql import SqlConsole, StatementLimitError, eval_results_path, sql_limits

    if as_json and as_csv:
        raise BadInputError("give --json or --csv, not both")
    if eval_results and not Path(eval_results).exists():
        raise BadInputError(f"{eval_results}: no such eval results file")
    pipeline = load_pipeline(project)
    results = Path(eval_results) if eval_results else eval_results_path(pipeline.data_dir)
    limits = sql_limits(pipeline.limits, pipeline.data_dir, timeout_s=timeout_s, memory_bytes=memory_bytes)
    with SqlConsole(pipeline.store_uri, eval_results=results, cdc_state=pipeline.data_dir, limits=limits) as console:
        try:
            table = console.query(query)
        except StatementLimitError as exc:
            raise StatementLimitError(f"{exc}; raise it with {RAISE_WITH[exc.bound]} or "
                                      f"Pipeline(limits=Limits({exc.bound}=...))", exc.bound) from None
    columns = table.column_names
    rows = [list(r) for r in zip(*(c.to_pylist() for c in table.columns), strict=True)] if columns else []
    if as_json:
        click.echo(json.dumps([dict(zip(columns, r, strict=True)) for r in rows], indent=2, ensure_ascii=False,
                              default=str))
    elif as_csv:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([_text(v) for v in row] for row in rows)
    elif columns == ["explain_key", "explain_value"]:  # EXPLAIN: DuckDB's plan drawing as it is
        click.echo("\n".join(str(r[1]) for r in rows))
    else:
        click.echo(aligned(columns, rows))


def _text(value: Any) -> str:
    """A value as text: NULL empty, nested values as JSON."""
    if value is None:
        return ""
    if isinstance(value, list | dict | tuple):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _cell(value: Any) -> str:
    """A value in the aligned table: on one line, floats to 4 decimals, cut at CELL_WIDTH."""
    if value is None:
        return "NULL"
    if isinstance(value, float) and value == value and abs(value) < 1e15:
        text = f"{value:.4f}"
    else:
        text = " ".join(_text(value).split())
    return text if len(text) <= CELL_WIDTH else text[: CELL_WIDTH - 1] + "…"


def aligned(columns: list[str], rows: list[list[Any]]) -> str:
    """A plain aligned table: numbers right-aligned, text left; one line per row; the row count last."""
    cells = [[_cell(v) for v in row] for row in rows]
    numeric = [all(isinstance(r[i], int | float) and not isinstance(r[i], bool) or r[i] is None for r in rows)
               for i in range(len(columns))]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()

    out = [line(columns), "  ".join("-" * w for w in widths)] + [line(r) for r in cells]
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)
