"""Eval results on disk: the means per run as JSON (``.synthex/evals/*.json``), one row per question in
the DuckDB table ``eval_results`` (``.synthex/evals/eval_results.duckdb``); comparison tables, PNG
charts, markdown report.

``write_eval_results(con, eval_run_id, results)`` takes a DuckDB connection and knows nothing of
Dagster: the CLI passes a plain ``duckdb.connect``, the ``eval_locomo`` asset the connection of its
``DuckDBResource`` (``evals/dagster_evals.py``). In the same transaction it writes one row per result to
``eval_runs`` (the result's means, by category and scorecard as JSON, exactly the dict the JSON file holds), so
``latest_results`` reads back the figures every door printed, not recomputed from the question rows:
``synthex eval report`` and the eval asset's comparison with main read them there.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evals.scoring import RECALL_KS
from synthex.core.errors import SynthexError

HEADLINE = ("recall_any@1", "recall_any@5", "recall_any@10", "recall_all@5", "recall_all@10", "ndcg_any@10", "mrr")
EVAL_RESULTS_TABLE = "eval_results"
# One row per (eval run, benchmark, architecture, question). Metric columns: the turn level unprefixed,
# the session level prefixed ``session_``; NULL when the question has no gold at that level.
METRICS = tuple(f"{name}@{k}" for name in ("recall", "recall_any", "recall_all", "ndcg_any") for k in RECALL_KS) + ("mrr",)
ID_COLUMNS = (("eval_run_id", "VARCHAR"), ("benchmark", "VARCHAR"), ("architecture", "VARCHAR"), ("branch", "VARCHAR"),
              ("mode", "VARCHAR"), ("pipeline", "VARCHAR"), ("data", "VARCHAR"), ("question_id", "VARCHAR"),
              ("question", "VARCHAR"), ("category", "VARCHAR"), ("hits", "VARCHAR[]"), ("gold_turns", "VARCHAR[]"),
              ("gold_sessions", "VARCHAR[]"))


EVAL_RUNS_TABLE = "eval_runs"
# One row per (eval run, benchmark, architecture): ``result`` is the result dict without its questions (JSON);
# ``data_file``: its data file resolved when written (``data`` keeps the path as the door was given it).
EVAL_RUNS_COLUMNS = (("eval_run_id", "VARCHAR"), ("benchmark", "VARCHAR"), ("architecture", "VARCHAR"),
                     ("branch", "VARCHAR"), ("data_file", "VARCHAR"), ("result", "VARCHAR"),
                     ("evaluated_at", "TIMESTAMP"))


def metric_column(metric: str, level: str) -> str:
    """``recall_any@10`` at turn level -> ``recall_any_at_10``; at session level -> ``session_recall_any_at_10``."""
    name = metric.replace("@", "_at_")
    return name if level == "turn" else f"{level}_{name}"


def eval_results_columns() -> list[tuple[str, str]]:
    metrics = [(metric_column(m, level), "DOUBLE") for level in ("turn", "session") for m in METRICS]
    return [*ID_COLUMNS, *metrics, ("evaluated_at", "TIMESTAMP")]


def question_rows(eval_run_id: str, results: list[dict[str, Any]], evaluated_at: datetime) -> list[dict[str, Any]]:
    """The ``eval_results`` rows of ``results`` (each result's ``questions``, from ``Tally.result``)."""
    rows = []
    for r in results:
        for q in r.get("questions", []):
            row = {"eval_run_id": eval_run_id, "benchmark": r.get("benchmark"), "architecture": r.get("architecture"),
                   "branch": r.get("branch"), "mode": r.get("mode"), "pipeline": r.get("pipeline"), "data": r.get("data"),
                   "question_id": q["question_id"], "question": q.get("question", ""), "category": q.get("category"),
                   "hits": q.get("hits", []), "gold_turns": q.get("gold_turns", []),
                   "gold_sessions": q.get("gold_sessions", []), "evaluated_at": evaluated_at}
            for level in ("turn", "session"):
                scores = q.get(level) or {}
                row |= {metric_column(m, level): scores.get(m) for m in METRICS}
            rows.append(row)
    return rows


def write_eval_results(con: Any, eval_run_id: str, results: list[dict[str, Any]],
                       evaluated_at: datetime | None = None) -> int:
    """Write the per-question rows of ``results`` to table ``eval_results`` on the DuckDB connection ``con``.

    Idempotent: the rows already stored for (``eval_run_id``, benchmark, architecture) of each result are
    replaced, in one transaction. Creates the table (and adds columns an older file lacks). Returns the
    number of rows written.
    """
    import pyarrow as pa

    if not eval_run_id:
        raise SynthexError("an eval run id is empty")
    columns = eval_results_columns()
    when = (evaluated_at or datetime.now(UTC)).astimezone(UTC).replace(tzinfo=None)
    rows = question_rows(eval_run_id, results, when)
    arrow_types = {"VARCHAR": pa.string(), "VARCHAR[]": pa.list_(pa.string()), "DOUBLE": pa.float64(),
                   "TIMESTAMP": pa.timestamp("us")}
    table = pa.Table.from_pylist(rows, schema=pa.schema([(n, arrow_types[t]) for n, t in columns]))
    con.execute(f"CREATE TABLE IF NOT EXISTS {EVAL_RESULTS_TABLE} ("
                + ", ".join(f'"{n}" {t}' for n, t in columns) + ")")
    for name, kind in columns:
        con.execute(f'ALTER TABLE {EVAL_RESULTS_TABLE} ADD COLUMN IF NOT EXISTS "{name}" {kind}')
    con.execute(f"CREATE TABLE IF NOT EXISTS {EVAL_RUNS_TABLE} ("
                + ", ".join(f'"{n}" {t}' for n, t in EVAL_RUNS_COLUMNS) + ")")
    scopes = sorted({(str(r.get("benchmark")), str(r.get("architecture"))) for r in results})
    summaries = [[eval_run_id, r.get("benchmark"), r.get("architecture"), r.get("branch"), _data_file(r.get("data")),
                  json.dumps({k: v for k, v in r.items() if k != "questions"} | {"eval_run_id": eval_run_id}), when]
                 for r in results]
    con.register("_synthex_eval_rows", table)
    try:
        con.execute("BEGIN TRANSACTION")
        try:
            for benchmark, architecture in scopes:
                for name in (EVAL_RESULTS_TABLE, EVAL_RUNS_TABLE):
                    con.execute(f"DELETE FROM {name} WHERE eval_run_id = ? AND benchmark = ? "
                                "AND architecture = ?", [eval_run_id, benchmark, architecture])
            con.execute(f"INSERT INTO {EVAL_RESULTS_TABLE} BY NAME SELECT * FROM _synthex_eval_rows")
            if summaries:
                con.executemany(f"INSERT INTO {EVAL_RUNS_TABLE} VALUES ({', '.join('?' * len(EVAL_RUNS_COLUMNS))})",
                                summaries)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    finally:
        con.unregister("_synthex_eval_rows")
    return len(rows)


def _data_file(data: Any) -> str | None:
    return str(Path(data).expanduser().resolve()) if data else None


def latest_results(con: Any, *, benchmark: str | None = None, branch: str | None = None,
                   architecture: str | None = None, data_file: str | Path | None = None) -> list[dict[str, Any]]:
    """The latest result (``eval_runs``) per benchmark x architecture x branch, optionally only those of
    ``benchmark`` / ``branch`` / ``architecture`` / ``data_file`` (resolved); ordered by benchmark,
    architecture, branch. Each is the dict the eval printed (means, by category, scorecard, ``eval_run_id``)
    plus ``evaluated_at``. Empty when the file has no ``eval_runs`` table (written before it existed)."""
    if not con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?",
                       [EVAL_RUNS_TABLE]).fetchone()[0]:
        return []
    filters = {"benchmark": benchmark, "branch": branch, "architecture": architecture,
               "data_file": _data_file(data_file)}
    where = [f"{column} = ?" for column, value in filters.items() if value is not None]
    rows = con.execute(
        f"SELECT result, evaluated_at FROM (SELECT *, row_number() OVER (PARTITION BY benchmark, architecture, branch "
        f"ORDER BY evaluated_at DESC, eval_run_id DESC) AS newest FROM {EVAL_RUNS_TABLE}"
        + (f" WHERE {' AND '.join(where)}" if where else "")
        + ") WHERE newest = 1 ORDER BY benchmark, architecture, branch",
        [v for v in filters.values() if v is not None]).fetchall()
    return [json.loads(result) | {"evaluated_at": str(at)} for result, at in rows]


def connect_eval_results(path: Path, attempts: int = 10, read_only: bool = False) -> Any:
    """A DuckDB connection on the eval results file (another process may hold it a moment)."""
    import duckdb

    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    delay = 0.05
    for attempt in range(attempts):
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if attempt == attempts - 1:
                raise SynthexError(f"{path}: cannot open the eval results ({str(exc).splitlines()[0]})") from None
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class ResultRow:
    """One question's ``eval_results`` row as the held-out checks read it: who answered it, which question, its
    category, and the requested columns by name."""
    architecture: str
    question_id: str
    category: str
    values: dict[str, Any]


@dataclass(frozen=True, order=True)
class Part:
    """One part of a held-out split. Parts sort by ``place`` (the split's own order: the part the choices were made
    on, the held-out rest, all), then by category; ``category`` "" is the part over every category."""
    place: int
    name: str
    category: str = ""

    @property
    def label(self) -> str:
        """How the part is printed and keyed in a split's figures ("first 100", "rest / multi-session")."""
        return f"{self.name} / {self.category}" if self.category else self.name


def run_rows(project: Path, eval_run_id: str, columns: list[str]) -> list[ResultRow]:
    """One eval run's ``eval_results`` rows of ``project``, each with ``columns``, ordered by architecture (for the
    held-out checks, evals/benchmarks/*/split_check.py)."""
    from synthex_resources.sql import eval_results_path

    con = connect_eval_results(eval_results_path(project / ".synthex"), read_only=True)
    try:
        rows = con.execute(f"select architecture, question_id, category, {', '.join(columns)} from eval_results "
                           "where eval_run_id = ? order by architecture", [eval_run_id]).fetchall()
    finally:
        con.close()
    return [ResultRow(row[0], row[1], row[2], dict(zip(columns, row[3:], strict=True))) for row in rows]


def part_means(rows: list[ResultRow], parts_of: Callable[[ResultRow], list[Part]],
               figures_of: dict[str, str]) -> dict[str, dict[str, dict[str, Any]]]:
    """``run_rows`` grouped by architecture and by each part ``parts_of(row)`` names -> the part's question count
    ("n"), the mean of each figure (``figures_of``: figure name -> column; None values left out) and its rows
    ("rows"). Each architecture's parts are keyed by ``Part.label``, in ``Part`` order."""
    grouped: dict[str, dict[Part, list[ResultRow]]] = {}
    for row in rows:
        for part in parts_of(row):
            grouped.setdefault(row.architecture, {}).setdefault(part, []).append(row)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for arch, by_part in grouped.items():
        for part in sorted(by_part):
            part_rows = by_part[part]
            figures: dict[str, Any] = {"n": len(part_rows), "rows": part_rows}
            for name, column in figures_of.items():
                values = [r.values[column] for r in part_rows if r.values[column] is not None]
                figures[name] = round(sum(values) / len(values), 4) if values else None
            out.setdefault(arch, {})[part.label] = figures
    return out


def save_eval_results(results: list[dict[str, Any]], path: Path, eval_run_id: str) -> int:
    """``write_eval_results`` through a plain DuckDB connection on ``path`` (the CLI's path)."""
    con = connect_eval_results(path)
    try:
        return write_eval_results(con, eval_run_id, results)
    finally:
        con.close()


@dataclass(frozen=True)
class RecordedRun:
    """Where one eval run's results were written (``record_results``)."""

    eval_run_id: str
    means_file: Path  # the JSON file of the means (``save``)
    database: Path  # the eval_results DuckDB file
    n_rows: int  # per-question rows written


def record_results(results: list[dict[str, Any]], eval_dir: Path, run_id: str | None = None) -> RecordedRun:
    """Every door's writer (``synthex eval`` and ``pipeline.eval``): the means to a JSON file, one row per
    question to the ``eval_results`` table. ``results`` lose their ``questions`` (they are in DuckDB) and
    gain their ``eval_run_id``: copy them first to keep the rows."""
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
    return RecordedRun(eval_run_id, saved, database, n_rows)


def default_eval_run_id(results: list[dict[str, Any]], stamp: str) -> str:
    """``<stamp>-<benchmark>``: the stem of the JSON file ``save(results, eval_dir, stamp)`` writes."""
    return f"{stamp}-{results[0]['benchmark']}"


def strip_questions(results: list[dict[str, Any]], eval_run_id: str) -> list[dict[str, Any]]:
    """The results without their per-question rows (those live in DuckDB), tagged with the eval run id."""
    for r in results:
        r.pop("questions", None)
        r["eval_run_id"] = eval_run_id
    return results


def save(results: list[dict[str, Any]], eval_dir: Path, stamp: str | None = None) -> Path:
    eval_dir.mkdir(parents=True, exist_ok=True)
    stamp = stamp or time.strftime("%Y%m%d-%H%M%S")
    path = eval_dir / f"{stamp}-{results[0]['benchmark']}.json"
    path.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return path


# The best LLM-free built-in architecture (evals/architectures.py BUILTIN) per benchmark, by turn
# recall_any/all@10 on the data docs/benchmarks.md measures it on. A comparison names it, so that
# `--compare conversational` (long the best) still points at the best LLM-free architecture: on LoCoMo dev7
# hierarchical-expanded 0.8914 / 0.7970, at least as good in every category as hierarchical-conversational
# 0.8714 / 0.7807, itself above conversational 0.8587 / 0.7680 (issue 22).
BEST_LLM_FREE: dict[str, str] = {"locomo": "hierarchical-expanded"}


def _best_marked(values: list[float], fmt: str) -> list[str]:
    """Each value formatted; the best of a column (ties too) in bold when there are rows it beats."""
    cells = [format(v, fmt) for v in values]
    if len(set(cells)) < 2:  # one row, or all equal as printed: nothing to mark
        return cells
    top = max(cells, key=float)  # compared as printed, so a tie at the printed precision is a tie
    return [f"**{c}**" if c == top else c for c in cells]


def _columns(values: list[list[float]], fmt: str) -> list[list[str]]:
    """Rows of values -> rows of cells, each column's best marked."""
    columns = [_best_marked(list(col), fmt) for col in zip(*values, strict=True)] if values else []
    return [list(row) for row in zip(*columns, strict=True)] if columns else [[] for _ in values]


def table(results: list[dict[str, Any]], level: str = "turn") -> str:
    """Markdown rows per architecture; with several, each column's best in bold. A result with no figure at this
    level (a peer that ranks session documents has no turn ranking) is a row of dashes, not of zeros."""
    head = "| architecture | n | " + " | ".join(HEADLINE) + " |"
    rows = [head, "|" + "---|" * (len(HEADLINE) + 2)]
    scored = [r for r in results if r["metrics"][level]]
    cells = dict(zip((id(r) for r in scored),
                     _columns([[r["metrics"][level].get(h, 0) for h in HEADLINE] for r in scored], ".4f"), strict=True))
    for r in results:
        row = cells.get(id(r), ["-"] * len(HEADLINE))
        rows.append(f"| {r['architecture']} | {r['n_questions']} | " + " | ".join(row) + " |")
    return "\n".join(rows)


def category_table(results: list[dict[str, Any]], metric: str = "recall_any@10") -> str:
    """``metric`` per category and architecture; with several, each category's best in bold."""
    cats = sorted({c for r in results for c in r["by_category"]})
    rows = ["| architecture | " + " | ".join(f"{c} (n={results[0]['by_category'].get(c, {}).get('n', 0)})" for c in cats) + " |",
            "|" + "---|" * (len(cats) + 1)]
    cells = _columns([[r["by_category"].get(c, {}).get(metric, 0) for c in cats] for r in results], ".3f")
    for r, row in zip(results, cells, strict=True):
        rows.append(f"| {r['architecture']} | " + " | ".join(row) + " |")
    return "\n".join(rows)


def best_of(results: list[dict[str, Any]], metric: str, level: str = "turn") -> dict[str, Any] | None:
    """The result with the highest ``metric`` at ``level`` (the first of equals, in the order compared)."""
    scored = [r for r in results if metric in r["metrics"].get(level, {})]
    return max(scored, key=lambda r: r["metrics"][level][metric], default=None)


def headline_notes(results: list[dict[str, Any]]) -> list[str]:
    """One line per benchmark protocol whose results name a ``headline`` ("<level> <metric> (how)"): the
    protocol, what its headline is, and each result's value of it (LongMemEval's official and MemPalace's
    protocols head with different figures)."""
    lines = []
    for bench in dict.fromkeys(r["benchmark"] for r in results if r.get("headline")):
        rows = [r for r in results if r["benchmark"] == bench and r.get("headline")]
        headline = rows[0]["headline"]
        level, metric = headline.split(" ")[:2]
        values = ", ".join(f"{r['architecture']} {r['metrics'].get(level, {}).get(metric, float('nan')):.4f} "
                           f"({r['n_questions']} questions)" for r in rows)
        scored = rows[0].get("selection", {}).get("scored")
        lines.append(f"{bench}: headline {headline}"
                     + (f"; the protocol scores {scored} questions of the file" if scored is not None else "")
                     + f": {values}")
    return lines


def comparison_notes(results: list[dict[str, Any]]) -> str:
    """Which compared architecture is best (turn recall_any@10 and recall_all@10), and, for a benchmark
    with a named best LLM-free built-in (``BEST_LLM_FREE``), that one: in the comparison or not."""
    lines = headline_notes(results)
    if len(results) > 1:
        picks = [(m, best_of(results, m)) for m in ("recall_any@10", "recall_all@10")]
        lines.append("best here: " + "; ".join(f"turn {m} {r['architecture']} {r['metrics']['turn'][m]:.4f}"
                                              for m, r in picks if r is not None))
    for bench in sorted({r["benchmark"] for r in results}):
        best = BEST_LLM_FREE.get(bench)
        if best is None:
            continue
        compared = [r["architecture"] for r in results if r["benchmark"] == bench]
        where = ("in this comparison" if best in compared
                 else f"not in this comparison; add it: --compare {','.join([*compared, best])}")
        lines.append(f"best LLM-free built-in on {bench} (docs/benchmarks.md): {best}, {where}")
    return "\n".join(lines)


def chart(results: list[dict[str, Any]], path: Path, level: str = "turn") -> Path:
    """Grouped bars: one group per metric, one bar per architecture; and recall_any@10 per category."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = ["recall_any@5", "recall_any@10", "recall_all@10", "ndcg_any@10"]
    cats = sorted({c for r in results for c in r["by_category"]})
    fig, axes = plt.subplots(1, 2, figsize=(14, 5))
    width = 0.8 / max(1, len(results))
    for i, r in enumerate(results):
        xs = [j + i * width for j in range(len(metrics))]
        axes[0].bar(xs, [r["metrics"][level].get(m, 0) for m in metrics], width, label=r["architecture"])
        xs = [j + i * width for j in range(len(cats))]
        axes[1].bar(xs, [r["by_category"].get(c, {}).get("recall_any@10", 0) for c in cats], width, label=r["architecture"])
    axes[0].set_xticks([j + width * (len(results) - 1) / 2 for j in range(len(metrics))], metrics)
    axes[1].set_xticks([j + width * (len(results) - 1) / 2 for j in range(len(cats))], cats)
    bench = results[0]["benchmark"]
    axes[0].set_title(f"{bench}: {level}-level retrieval")
    axes[1].set_title(f"{bench}: {level} recall_any@10 by category")
    for ax in axes:
        ax.set_ylim(0, 1)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def labelled(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies whose ``architecture`` names the branch too when it is neither main nor the architecture's own
    name (``raw-bm25 (exp)``), as table rows."""
    return [r | {"architecture": r["architecture"] if r.get("branch") in (None, "main", r["architecture"])
                 else f"{r['architecture']} ({r['branch']})"} for r in results]


def results_report(results: list[dict[str, Any]], database: Path) -> str:
    """Markdown of the latest result per benchmark x architecture x branch (``latest_results``): per benchmark,
    which eval run each row comes from, the turn and session tables, recall by category and the scorecard
    with the protocol of each figure."""
    from evals.scorecard import Scorecard, scorecard_table

    parts = [f"# Synthex eval report\n\nThe latest result per benchmark, architecture and branch in {database}."]
    for bench in sorted({r["benchmark"] for r in results}):
        rows = labelled([r for r in results if r["benchmark"] == bench])
        runs = "\n".join(f"| {r['architecture']} | {r.get('eval_run_id')} | {r.get('evaluated_at', '')[:19]} | "
                         f"{r.get('data', '')} |" for r in rows)
        parts.append(f"\n## {bench}\n\n| result | eval run | evaluated at (UTC) | data |\n|---|---|---|---|\n{runs}\n\n"
                     f"Turn level:\n\n{table(rows, 'turn')}\n\nSession level:\n\n{table(rows, 'session')}\n\n"
                     f"Turn recall_any@10 by category:\n\n{category_table(rows)}")
        notes = comparison_notes(rows)
        if notes:
            parts.append("\n" + notes)
        carded = [(r["architecture"], Scorecard.from_dict(r["scorecard"])) for r in rows if r.get("scorecard")]
        if carded:
            protocols: dict[str, str] = {}
            for _, card in carded:
                for entry in card.entries:
                    protocols.setdefault(entry.name, entry.protocol)
            parts.append("\nScorecard (design doc §9.5):\n\n" + scorecard_table([a for a, _ in carded], [c for _, c in carded])
                         + "\n\nProtocols (of the first result having each figure):\n\n"
                         + "\n".join(f"- {name}: {text}" for name, text in protocols.items()))
    return "\n".join(parts)


def report(eval_dir: Path) -> str:
    """Markdown of the latest result file per benchmark (the JSON files; ``results_report`` reads the table)."""
    latest: dict[str, Path] = {}
    for path in sorted(eval_dir.glob("*.json")):
        latest[path.stem.split("-", 2)[-1]] = path
    if not latest:
        return "No eval results yet: run `synthex eval locomo` first."
    parts = ["# Synthex eval report"]
    for bench, path in sorted(latest.items()):
        results = json.loads(path.read_text())
        parts.append(f"\n## {bench} ({path.name})\n\nTurn level:\n\n{table(results, 'turn')}\n\n"
                     f"Session level:\n\n{table(results, 'session')}\n\nTurn recall_any@10 by category:\n\n"
                     f"{category_table(results)}")
    return "\n".join(parts)
