"""The `synthex` command line. Every command takes --project DIR (default: the current directory).

Commands import only what they need (the pipeline definition is light; LanceDB and Dagster load
when a command touches the store or launches a run). Installed plugins add commands (``synthex
eval`` comes from the evals plugin) through ``synthex.plugins``.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from synthex.core.errors import BadInputError, PipelineDefinitionError, SourceError, SynthexError
from synthex.surfaces.output import emit_json
from synthex_resources.search.rerankers import RERANKER_NAMES, TOP_N_MAX

if TYPE_CHECKING:
    from synthex.app.pipeline import Pipeline

project_option = click.option("--project", "project", default=".", show_default=True,
                              type=click.Path(file_okay=False), help="Project folder (holds pipeline.py).")
branch_option = click.option("--branch", default=None,
                             help="Branch to act on (default: the current one, `synthex branch switch`; else main).")
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
allow_deletions_option = click.option(
    "--allow-deletions", is_flag=True,
    help="Apply deletions the guard holds back: an export or folder emptied or losing more than 20 % of at "
         "least 10 items, a table returning no rows (a source's own deletions always apply).")
verbose_option = click.option("--verbose", is_flag=True,
                              help="Also print Dagster's own run log (always kept in the UI).")


def load_project(project: str) -> Pipeline:
    from synthex.core.project import load_pipeline

    return load_pipeline(project)  # type: ignore[return-value]


WARNINGS_SHOWN = 5  # real exports have many tool / reasoning messages without text


def echo_import_warnings(pipe: Pipeline, branch: str) -> None:
    warnings = pipe.app.import_warnings(branch)
    for line in warnings[:WARNINGS_SHOWN]:
        click.echo(f"warning: {line}", err=True)
    if len(warnings) > WARNINGS_SHOWN:
        click.echo(f"warning: ... and {len(warnings) - WARNINGS_SHOWN} more (`synthex plan --json` lists them all)",
                   err=True)


def pick_branch(pipe: Pipeline, branch: str | None) -> str:
    """``--branch``, else the branch `synthex branch switch` chose for this project, else main."""
    from synthex.core.project import current_branch

    return branch or current_branch(pipe)


class SynthexGroup(click.Group):
    """Report Synthex errors as one clear line and exit 2 (bad input) or 1 (failed), not a traceback; plugins' commands
    (``synthex.plugins``) join the first time the command list is read, not at import."""

    _plugins_loaded = False

    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        from synthex.core import hookspecs
        from synthex.core.plugins import discover

        _, failures = discover().call(hookspecs.register_commands, self)
        for failure in failures:  # reported, never skipped in silence
            click.echo(f"warning: {failure}", err=True)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_plugins()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            self._load_plugins()
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SynthexError as exc:
            click.echo(f"error: {exc}", err=True)
            # 2: the input is wrong (an export, pipeline.py, an argument); 1: a run or lookup failed.
            sys.exit(2 if isinstance(exc, SourceError | PipelineDefinitionError | BadInputError) else 1)

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        """Click's own usage errors as one line too (it prints usage, a hint and the error otherwise)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # a bare group: its help, as Click prints it
            click.echo(exc.format_message(), err=True)
            sys.exit(2)
        except click.UsageError as exc:
            where = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx else ""
            click.echo(f"error: {exc.format_message()}{where}", err=True)
            sys.exit(2)
        except click.ClickException as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("aborted", err=True)
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)


@click.group(cls=SynthexGroup)
@click.version_option(package_name="synthex")
def main() -> None:
    """Synthex: memory architectures that evolve with your agent."""
    from synthex_resources.search.threads import apply_search_threads

    # The CLI owns its process (every command, `synthex mcp` too): it chooses the BLAS threads, library code never does.
    apply_search_threads()


@main.command()
@click.argument("name")
@click.option("--from", "sources", multiple=True, type=click.Path(exists=True),
              help="An export file or folder (repeatable): ChatGPT/Claude conversations.json, .jsonl, folder.")
@click.option("--demo", is_flag=True, help="Use the bundled synthetic ChatGPT export (200 conversations).")
@click.option("--template", default="hierarchical", show_default=True,
              type=click.Choice(["hierarchical", "raw", "conversational", "hierarchical-conversational", "enriched",
                                 "structured"]),
              help="hierarchical: summaries, monthly reflections, a world model. raw: verbatim transcripts. "
                   "conversational: chat turns in context, no model. hierarchical-conversational: chat turns plus "
                   "one record per speaker, entity and topic, searched with --mode hierarchical (no "
                   "model). enriched: transcripts with the dates and "
                   "names they mention. structured: a DuckDB/SQLite table (writes data/example.sqlite).")
@click.option("--dir", "target", default=None, help="Folder to create (default: NAME).")
@click.option("--with-evals", is_flag=True,
              help="Add the LoCoMo eval to the Dagster UI: asset eval_locomo per branch over data/locomo10.json, "
                   "job eval_locomo_job, schedule eval_locomo_schedule (03:00 on main).")
def init(name: str, sources: tuple[str, ...], demo: bool, template: str, target: str | None,
         with_evals: bool) -> None:
    """Create a project from a template (default: source -> transcripts -> summaries -> monthly -> world-model)."""
    from synthex.core.project import DEMO_EXPORT, init_project

    chosen = list(sources) + ([str(DEMO_EXPORT)] if demo and template != "structured" else [])
    if not chosen and template != "structured":
        raise click.UsageError("give --from FILE (repeatable) or --demo")
    path = init_project(target or name, Path(name).name, chosen, template=template, with_evals=with_evals)
    workspace = path.parent / "workspace.yaml"
    if not workspace.exists():  # `dagster dev` in the project shows the location `synthex ui` shows
        from synthex.surfaces.ui_launch import workspace_yaml

        workspace.write_text(workspace_yaml(Path(name).name, path.parent), encoding="utf-8")
    click.echo(f"created {path}\nnext: cd {path.parent} && synthex run")


@main.command()
@click.argument("step", required=False)
@click.option("--from", "from_", default=None, help="Run this step and everything downstream.")
@click.option("--full", is_flag=True, help="Reprocess everything, ignoring materialization keys.")
@click.option("--wait", is_flag=True, help="Wait for another run on the same branch instead of refusing.")
@click.option("--workers", type=int, default=None,
              help="Processes that embed and write a first ingest's records (1..cores); the same records. "
                   "Default: the pipeline's ingest_workers (1 unless pipeline.py says).")
@allow_deletions_option
@verbose_option
@branch_option
@project_option
@json_option
def run(step: str | None, from_: str | None, full: bool, wait: bool, workers: int | None, allow_deletions: bool,
        verbose: bool, branch: str, project: str, as_json: bool) -> None:
    """Run the pipeline (only partitions whose inputs changed) as one run of its Dagster job."""
    from synthex.core.progress import TerminalProgress

    pipe = load_project(project)
    branch = pick_branch(pipe, branch)
    selected = pipe.select(step, from_)
    click.echo(f"Running pipeline '{pipe.name}' on branch '{branch}'...", err=True)
    echo_import_warnings(pipe, branch)
    result = pipe.app.run(step=step, from_=from_, full=full, branch=branch, progress=TerminalProgress(selected),
                          wait=wait, on_wait=lambda msg: click.echo(msg, err=True), allow_deletions=allow_deletions,
                          verbose=verbose, say=lambda msg: click.echo(msg, err=True), workers=workers)
    if as_json:
        emit_json(result.to_dict())
        return
    s = result.stats
    if not result.dagster_run_ids:
        click.echo(f"✓ everything up to date, nothing to run ({result.wall_s:.1f}s)")
        return
    from synthex_resources.llm import LLMConfig  # what the run's model steps used (the facade's LLMConfig())

    click.echo(f"✓ {result.status} in {result.wall_s:.1f}s wall ({s.duration:.1f}s step time)  records: "
               f"{s.output} created, {s.skipped} skipped, {s.errors} errors  "
               f"{tokens_shown(s.tokens, LLMConfig().is_offline())}  run: {result.id}")


def tokens_shown(tokens: int, offline: bool) -> str:
    """A run's tokens as the summary line says them: the offline stand-in calls no model, so it used none;
    the estimate of what a model would have been sent (the planner's token model) is named as such."""
    if offline and tokens:
        return f"tokens: 0 (offline stand-in, not an LLM; ~{tokens} if a model)"
    return f"tokens: {tokens}"


@main.command()
@click.option("--source", default=None, help="Only this source (and what is downstream of it).")
@click.option("--no-wait", "no_wait", is_flag=True, help="Refuse instead of waiting when a run holds the branch.")
@click.option("--workers", type=int, default=None,
              help="Processes that embed and write a first ingest's records (1..cores), as `run --workers`. "
                   "Default: the pipeline's ingest_workers (1 unless pipeline.py says).")
@allow_deletions_option
@verbose_option
@branch_option
@project_option
@json_option
def sync(source: str | None, no_wait: bool, workers: int | None, allow_deletions: bool, verbose: bool, branch: str,
         project: str, as_json: bool) -> None:
    """One sync pass: fetch API pages, find what each source gained / changed / lost since the last
    sync, and run what that makes dirty (what the sensors do while `synthex ui` runs)."""
    from synthex.core.progress import TerminalProgress

    pipe = load_project(project)
    branch = pick_branch(pipe, branch)
    pipe.source_steps([source] if source else None)  # an unknown source is one line before anything runs
    echo_import_warnings(pipe, branch)  # as `synthex run` says them (lines set aside included)
    report = pipe.app.sync(source=source, branch=branch, progress=None if as_json else TerminalProgress(
        pipe.select(None, source)), wait=not no_wait, on_wait=lambda msg: click.echo(msg, err=True),
        allow_deletions=allow_deletions, verbose=verbose, say=lambda msg: click.echo(msg, err=True), workers=workers)
    if as_json:
        emit_json(report.to_dict())
        return
    for change in report.changes:
        click.echo(change.summary())
    run = report.run
    if not run.dagster_run_ids:
        click.echo(f"✓ memory up to date, nothing to run ({run.wall_s:.1f}s)")
    else:
        s = run.stats
        click.echo(f"✓ synced in {run.wall_s:.1f}s  records: {s.output} created, {s.skipped} skipped, "
                   f"{s.errors} errors  run: {run.id}")


@main.command()
@click.argument("text")
@click.option("--id", "item_id", default=None, help="Your id for it (remembering the same id again replaces it).")
@click.option("--created-at", "created_at", default=None, help="When it happened, ISO-8601 (default: now).")
@click.option("--source", default=None, help="The stream source to append to (when the pipeline has several).")
@project_option
@json_option
def remember(text: str, item_id: str | None, created_at: str | None, source: str | None, project: str,
             as_json: bool) -> None:
    """Append TEXT ('-': read it from stdin) to the project's stream source; `synthex sync` (or a sensor
    tick) brings it into memory. Says so only when its line is whole and valid in the stream."""
    pipe = load_project(project)
    if text == "-":
        text = read_stdin_text(pipe.limits.remember_bytes)
    out = pipe.remember(text, id=item_id, created_at=created_at, source=source)
    for warning in out["warnings"]:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        emit_json(out | {"status": str(out["status"])})
        return
    click.echo(f"remembered {out['id']} (record {out['record_id'][:8]}) in {out['source']}: {out['status']}; "
               f"`synthex sync` brings it into memory")


def read_stdin_text(limit: int) -> str:
    """At most ``limit`` bytes of stdin as text: more is refused before it is read whole."""
    data = sys.stdin.buffer.read(limit + 1)
    if len(data) > limit:
        raise BadInputError(f"remember: the text on stdin is over {limit} bytes (Limits.remember_bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInputError(f"remember: stdin is not UTF-8 text (byte {exc.start})") from None


@main.command()
@click.argument("step", required=False)
@click.option("--from", "from_", default=None)
@click.option("--full", is_flag=True)
@branch_option
@project_option
@json_option
def plan(step: str | None, from_: str | None, full: bool, branch: str, project: str, as_json: bool) -> None:
    """Dry run: steps that would run, records to process, token and cost estimates."""
    pipe = load_project(project)
    branch = pick_branch(pipe, branch)
    result = pipe.plan(step=step, from_=from_, full=full, branch=branch)
    shrinkage = [str(s) for s in pipe.app.source_shrinkage(branch)]
    if as_json:
        emit_json(result.to_dict() | {"source_deletions": shrinkage, "import_warnings": pipe.app.import_warnings(branch)})
        return
    echo_import_warnings(pipe, branch)
    for line in shrinkage:
        click.echo(f"deletions: {line}")
    if not result.steps:
        click.echo("Everything is up to date.")
        return
    click.echo(f"{'step':<16} {'kind':<10} {'records':>7} {'stale':>6} {'periods':>7}  tokens")
    for name, info in result.per_step.items():
        click.echo(f"{name:<16} {info['kind']:<10} {info['records']:>7} {info['stale']:>6} {len(info['periods']):>7}  "
                   f"~{info['tokens']}" + (f"  {info['model']}" if info["model"] else ""))
    e = result.estimates
    click.echo(f"total: {e['records']} records, ~{e['tokens']} tokens, ~${e['cost']:.4f}"
               + (" (offline stand-in: no cost)" if e.get("offline") else ""))


@main.command()
@branch_option
@project_option
@json_option
def stats(branch: str, project: str, as_json: bool) -> None:
    """Record counts by step."""
    pipe = load_project(project)
    data = pipe.stats(pick_branch(pipe, branch))
    if as_json:
        emit_json(data)
        return
    click.echo(f"branch {data['branch']}")
    click.echo(f"{'step':<16} {'kind':<10} {'records':>7}  served by")
    for name, info in data["steps"].items():
        click.echo(f"{name:<16} {info['kind']:<10} {info['records']:>7}  {info['served_by']}")


@main.command()
@click.argument("run_id", required=False)
@click.option("--limit", default=20, show_default=True)
@project_option
@json_option
def runs(run_id: str | None, limit: int, project: str, as_json: bool) -> None:
    """List recent runs, or one run's per-step detail (RUN_ID or a unique prefix)."""
    items = load_project(project).runs(limit=10_000 if run_id else limit)
    if run_id:
        items = [r for r in items if r.id.startswith(run_id)]
        if not items:
            raise SynthexError(f"no run with id {run_id!r}")
        if len(items) > 1:
            raise SynthexError(f"run id prefix {run_id!r} matches {len(items)} runs; give more characters")
    if as_json:
        emit_json([r.to_dict() for r in items])
        return
    if run_id:
        r = items[0]
        click.echo(f"run {r.id}  {r.status}  branch {r.branch}  started {r.started_at}  finished {r.completed_at}"
                   f"  wall {r.wall_s:.1f}s" + (f"\nerror: {r.error}" if r.error else ""))
        click.echo(f"{'step':<16} {'input':>7} {'created':>8} {'skipped':>8} {'errors':>7} {'tokens':>8} {'time':>8}")
        for step, s in r.step_stats.items():
            click.echo(f"{step:<16} {s.input:>7} {s.output:>8} {s.skipped:>8} {s.errors:>7} {s.tokens:>8} "
                       f"{s.duration:>7.2f}s")
        if not r.step_stats:
            click.echo("(no step ran: everything was up to date)")
        return
    for r in items:
        s = r.stats
        click.echo(f"{r.id}  {r.status:<9} {r.branch:<10} {r.started_at}  out={s.output} skip={s.skipped} "
                   f"err={s.errors} tokens={s.tokens}" + (f"  error: {r.error}" if r.error else ""))


@main.group(invoke_without_command=True)
@project_option
@json_option
@click.pass_context
def hooks(ctx: click.Context, project: str, as_json: bool) -> None:
    """on_update deliveries still pending (a failed delivery is retried by every run and `hooks retry`)."""
    if ctx.invoked_subcommand is not None:
        return
    due = load_project(project).hooks_due()
    if as_json:
        emit_json([s.row() for s in due])
        return
    if not due:
        click.echo("no hook delivery pending")
    for s in due:
        click.echo(f"{s.output}@{s.branch}  record {s.pending_record[:8]}  failed attempts {s.attempts}"
                   + (f"  last error: {s.last_error}" if s.last_error else ""))


@hooks.command("retry")
@project_option
def hooks_retry(project: str) -> None:
    """Deliver every pending on_update hook now; exit 1 if one still fails."""
    report = load_project(project).deliver_hooks()
    for key in report.delivered:
        click.echo(f"delivered {key}")
    if report.failed:
        raise SynthexError("; ".join(report.failed))
    if not report.delivered:
        click.echo("no hook delivery pending")


@main.group()
def branch() -> None:
    """Branches: copy-on-write experiments on the pipeline (list, create, switch, diff, promote, delete)."""


@branch.command("list")
@project_option
@json_option
def branch_list(project: str, as_json: bool) -> None:
    """Every branch: its parent, the steps it owns (the rest it reads through its parent), its records."""
    infos = load_project(project).app.branches.list()
    if as_json:
        emit_json([i.to_dict() for i in infos])
        return
    for i in infos:
        mark = "*" if i.current else " "
        state = (f"  (definition gone: branches/{i.name}.py)" if not i.defined
                 else "  (promoted into main)" if i.promoted else "")
        owns = ", ".join(i.owned_steps) or "nothing (reads its parent)"
        parent = f" from {i.parent}" if i.parent else ""
        click.echo(f"{mark} {i.name}{parent}  owns: {owns}  own records: {i.own_records}{state}")


@branch.command("create")
@click.argument("name")
@click.option("--from", "parent", default="main", show_default=True, help="The parent branch.")
@project_option
def branch_create(name: str, parent: str, project: str) -> None:
    """Create branches/NAME.py (no record is written or recomputed); override steps in it."""
    pipe = load_project(project)
    pipe.app.branches.create(name, parent)
    click.echo(f"created branch {name!r} from {parent!r}: edit branches/{name}.py to override steps, then "
               f"`synthex run --branch {name}`")


@branch.command("switch")
@click.argument("name")
@project_option
def branch_switch(name: str, project: str) -> None:
    """Make NAME the branch later commands in this project act on."""
    load_project(project).app.branches.switch(name)
    click.echo(f"switched to branch {name!r}")


@branch.command("diff")
@click.argument("name")
@project_option
@json_option
def branch_diff(name: str, project: str, as_json: bool) -> None:
    """What NAME changes against its parent: steps, records added / removed / changed, samples."""
    diff = load_project(project).app.branches.diff(name)
    if as_json:
        emit_json(diff.to_dict())
        return
    click.echo(f"branch {diff.branch} vs {diff.parent}: changed steps: {', '.join(diff.changed_steps) or 'none'}")
    for s in diff.steps:
        click.echo(f"  {s.step:<16} +{s.added} -{s.removed} ~{s.changed}")
        for sample in s.samples[:1]:
            click.echo(f"    [{sample['period']}] {diff.parent}: {sample['parent'][:70]!r}")
            click.echo(f"    [{sample['period']}] {diff.branch}: {sample['branch'][:70]!r}")


@branch.command("promote")
@click.argument("name")
@project_option
def branch_promote(name: str, project: str) -> None:
    """Main takes NAME's definition (pipeline.py applies its overrides) and records (copied, no recompute)."""
    copied = load_project(project).app.branches.promote(name)
    click.echo(f"promoted {name!r} into main: " + ", ".join(f"{s} {n}" for s, n in copied.items())
               + " records copied; pipeline.py now ends with apply_branch(" + repr(name) + ", __file__)")


@branch.command("delete")
@click.argument("name")
@project_option
def branch_delete(name: str, project: str) -> None:
    """Delete NAME's own records and partition key (main cannot be deleted)."""
    out = load_project(project).app.branches.delete(name)
    click.echo(f"deleted branch {name!r}: {out['records_deleted']} records of its own"
               + ("; branches/" + name + ".py kept: main applies it" if out["file_kept"] else ""))


@main.command()
@project_option
@json_option
def status(project: str, as_json: bool) -> None:
    """The current branch, stale steps per branch, sources whose deletions are held back, the last run,
    what a run would do, and a purge or a promote that was killed before it finished."""
    from synthex.core.deletions import refusal_line
    from synthex.core.naming import MAIN
    from synthex.core.project import current_branch
    from synthex.core.purge_journal import PurgeJournal

    pipe = load_project(project)
    here = current_branch(pipe)
    rows = []
    for info in pipe.app.branches.list():
        if not info.defined:
            rows.append({"branch": info.name, "stale": None, "error": "definition gone"})
            continue
        plan = pipe.plan(branch=info.name)
        held = pipe.app.held_back(info.name)
        rows.append({"branch": info.name, "stale": {s: len(v) for s, v in plan.partitions.items()},
                     "records_to_compute": plan.estimates["records"],
                     "held_back": [v.to_dict() | {"message": refusal_line([v])} for v in held]})
    last = next(iter(pipe.runs(limit=1)), None)
    quarantined = pipe.app.quarantined()
    empty = pipe.app.empty_sources()
    unfinished = PurgeJournal(pipe.data_dir).progress()
    purge = unfinished.to_dict() | {"message": unfinished.describe()} if unfinished else None
    promotions = pipe.app.branches.interrupted_promotions()
    if as_json:
        emit_json({"current": here, "branches": rows, "last_run": last.to_dict() if last else None,
                   "unfinished_purge": purge, "interrupted_promotes": [p.to_dict() for p in promotions],
                   "quarantined": [q.to_dict() for q in quarantined],
                   "empty_sources": [{"source": name, "message": why} for name, why in empty]})
        return
    if purge:
        click.echo(purge["message"])
    for promotion in promotions:
        click.echo(promotion.describe())
    # What main's (or the promoted branch's) staleness is waiting for: the promote, not a run.
    finish_first = ({MAIN: promotions[0]} | {p.branch: p for p in promotions}) if promotions else {}
    click.echo(f"on branch {here}")
    for row in rows:
        stale = row["stale"]
        what = row.get("error") or (", ".join(f"{s} ({n} period(s))" for s, n in stale.items()) or "up to date")
        pending = finish_first.get(row["branch"])
        next_step = (f"; `{pending.command()}` finishes first" if pending else
                     f"; a run computes ~{row['records_to_compute']} records")
        click.echo(f"  {row['branch']:<20} {what}" + (next_step if stale else ""))
        for held in row.get("held_back", []):
            click.echo(f"  {'':<20} held back: {held['message']}")
    for name, why in empty:
        click.echo(f"source {name}: nothing imported: {why}")
    for q in quarantined:
        click.echo(q.headline())
        for line in q.lines:
            click.echo(f"  {line}")
        if q.total > len(q.lines):
            click.echo(f"  ... and {q.total - len(q.lines)} more")
    if last:
        click.echo(f"last run {last.id[:8]} {last.status} on {last.branch} at {last.started_at}")


def _get_record(project: str, record_id: str, branch: str | None = None):
    rec = load_project(project).get(record_id, branch)
    if rec is None:
        raise SynthexError(f"no record with id {record_id!r}" + (f" on branch {branch!r}" if branch else ""))
    return rec


@main.command()
@click.argument("record_id")
@click.option("--branch", default=None, help="Only a record this branch reads (default: any branch).")
@project_option
@json_option
def get(record_id: str, branch: str | None, project: str, as_json: bool) -> None:
    """Show one record."""
    rec = _get_record(project, record_id, branch)
    if as_json:
        emit_json(rec.to_dict())
        return
    click.echo(f"{rec.id}  step={rec.step} branch={rec.branch} period={rec.period}\n"
               f"sources: {', '.join(rec.source_ids) or '-'}\nmodel: {rec.audit.get('model')}\n\n{rec.content}")


@main.command()
@click.argument("record_id")
@click.option("--branch", default=None, help="Only a record this branch reads (default: any branch).")
@project_option
@json_option
def lineage(record_id: str, branch: str | None, project: str, as_json: bool) -> None:
    """Show a record's provenance tree down to the source records."""
    tree = _get_record(project, record_id, branch).lineage()
    if as_json:
        emit_json(tree)
        return

    def show(node: dict, depth: int) -> None:
        text = node["content"].replace("\n", " ")
        click.echo(f"{'  ' * depth}- [{node['step']}] {node['id'][:8]}  {text[:90]}")
        for child in node["sources"]:
            show(child, depth + 1)

    show(tree, 0)


def parse_metadata_filters(pairs: tuple[str, ...]) -> dict[str, Any] | None:
    """``--metadata chat.conversation_id=abc`` (repeatable) -> {"chat.conversation_id": "abc"}."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r}: expected KEY=VALUE (e.g. chat.conversation_id=abc)",
                                     param_hint="--metadata")
        out[key] = value
    return out or None


class SearchMode(click.ParamType):
    """A name in the search strategy registry (built-ins and installed plugins). The registry is loaded
    when a value is checked or help is shown, not at import: loading it imports the plugins."""

    name = "mode"

    @staticmethod
    def registry() -> Any:
        from synthex_resources.search.strategies.registry import load_search_strategies

        return load_search_strategies()

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        return "[" + "|".join(self.registry().names()) + "]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        names = self.registry().names()
        if value not in names:
            self.fail(f"{value!r} is not one of {', '.join(map(repr, names))}", param, ctx)
        return value

    def shell_complete(self, ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
        from click.shell_completion import CompletionItem

        return [CompletionItem(n) for n in self.registry().names() if n.startswith(incomplete)]


class SearchModeOption(click.Option):
    """``--mode``: its help lists each registered strategy with its description."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        self.help = "Search strategy. " + SearchMode.registry().describe()
        return super().get_help_record(ctx)


def via_line(via: list) -> str:
    """A drilled-down hit's ``via`` on one line: per step its most specific record, and how many more."""
    by_step: dict[str, list] = {}
    for v in via:
        by_step.setdefault(v.step, []).append(v)
    return ", ".join(f"{step} {found[0].id[:8]}" + (f" (+{len(found) - 1})" if len(found) > 1 else "")
                     for step, found in by_step.items())


@main.command()
@click.argument("query")
@click.option("--step", "steps", multiple=True, help="Step(s) to search (default: the search output's steps). "
              "Without --mode, surface search: the step's own records ranked; `synthex lineage ID` drills down.")
@click.option("--exact", is_flag=True, help="Verbatim substring search (default steps: the leaf/source steps).")
@click.option("-k", "k", default=10, show_default=True, type=click.IntRange(min=1), help="Number of hits.")
@click.option("--mode", cls=SearchModeOption, type=SearchMode(), default=None,
              show_default="the search output's mode=, else hybrid; with --step, hybrid if that mode drills down")
@click.option("--period", "periods", multiple=True, help="Only records of this period, e.g. 2024-03 (repeatable).")
@click.option("--metadata", "metadata", multiple=True, help="KEY=VALUE metadata filter (repeatable).")
@click.option("--rerank", type=click.Choice(RERANKER_NAMES), default=None,
              help="A second stage that reorders the top hits: cross-encoder (offline model reads the question "
                   "with each of the top 20, and the turn before each) or llm (one call to the configured "
                   "model orders the top 20).")
@click.option("--rerank-top-n", type=click.IntRange(2, TOP_N_MAX), default=None,
              help="How many first-stage hits the reranker reorders (default: 20 for either).")
@branch_option
@project_option
@json_option
def search(query: str, steps: tuple[str, ...], exact: bool, k: int, mode: str | None, periods: tuple[str, ...],
           metadata: tuple[str, ...], rerank: str | None, rerank_top_n: int | None, branch: str, project: str,
           as_json: bool) -> None:
    """Search records at any altitude of the pipeline; drill down with `synthex lineage ID`."""
    if not query.strip():
        raise click.BadParameter("the query is empty", param_hint="QUERY")
    pipe = load_project(project)
    for failure in pipe.app.search_strategies.failures:  # a plugin that did not load: said, not skipped
        click.echo(f"warning: {failure}", err=True)
    on = pick_branch(pipe, branch)
    hits = pipe.app.search(query, step=list(steps) or None, exact=exact, branch=on, k=k,
                           mode=mode, periods=list(periods) or None, metadata=parse_metadata_filters(metadata),
                           rerank=rerank, rerank_top_n=rerank_top_n)
    for warning in hits.warnings:  # e.g. a reranker that could not rank: the hits are in first-stage order
        click.echo(f"warning: {warning}", err=True)
    if as_json:  # the same keys as the MCP tool's answer: which branch and mode answered, then the hits
        emit_json({"branch": on, "mode": hits.mode, "hits": [h.to_hit_dict() for h in hits]}
                  | ({"warnings": [str(w) for w in hits.warnings]} if hits.warnings else {}))
        return
    if not hits:
        click.echo("no hits")
        return
    click.echo(f"{'#':>2}  {'score':>8}  {'step':<14} {'id':<8}  {'period':<7}  content")
    for i, h in enumerate(hits, 1):
        text = h.content.replace("\n", " ")
        click.echo(f"{i:>2}. {h.score:8.4f}  {h.step:<14.14} {h.id[:8]}  {h.period:<7}  {text[:100]}")
        if h.via:  # a leaf the search drilled down to: the records (altitudes) it was reached through
            click.echo(f"{'':>14}via  " + via_line(h.via))


@main.command()
@click.option("--repair", is_flag=True, help="Fix what was found (duplicate ids, dangling sources, stuck runs, "
              "an unfinished purge or promote).")
@project_option
@json_option
def doctor(repair: bool, project: str, as_json: bool) -> None:
    """Check the project's store for duplicate ids, dangling sources, runs stuck in "running" and a purge
    that was killed before it finished. Exit status: 0 healthy (or repaired), 3 a problem found and not
    repaired (scripts can tell), 1 the check itself failed."""
    from synthex.app.doctor import diagnose
    from synthex.app.doctor import repair as fix

    app = load_project(project).app
    report = diagnose(app)
    if repair and not report.healthy:
        report = fix(app, report)
    if as_json:
        emit_json(report.to_dict())
        sys.exit(report.exit_code)
    click.echo(f"duplicate ids: {len(report.duplicate_ids)}  dangling sources: {len(report.dangling)}  "
               f"stuck runs: {len(report.stuck_runs)}")
    for rid in report.duplicate_ids[:10]:
        click.echo(f"  duplicate id {rid}")
    for rid, missing in list(report.dangling.items())[:10]:
        click.echo(f"  record {rid} names missing source(s) {', '.join(missing[:3])}")
    for rid in report.stuck_runs[:10]:
        click.echo(f"  run {rid} is marked running but nothing runs on its branch")
    if report.unfinished_purge is not None:
        click.echo(f"  {report.unfinished_purge.describe()}"
                   + ("; finished by this repair" if report.repaired else ""))
    for promotion in report.interrupted_promotes:
        click.echo(f"  {promotion.describe()}" + ("; finished by this repair" if report.repaired else ""))
    if report.healthy:
        click.echo("healthy")
    elif report.repaired:
        click.echo("repaired; `synthex run` recomputes what was removed")
    else:
        click.echo("run `synthex doctor --repair` to fix")
    sys.exit(report.exit_code)


@main.command("export-toml")
@click.option("-o", "--output", default=None, help="File to write (default: stdout).")
@project_option
def export_toml(output: str | None, project: str) -> None:
    """Serialize the pipeline's structure to TOML (prompt functions by import path)."""
    text = load_project(project).to_toml(output)
    if output is None:
        click.echo(text)
    else:
        click.echo(f"wrote {output}")


# -- import-toml (design doc §4.8): a shared TOML to pipeline.py, under synthex.core.shared_toml's rule ----------
@main.command("import-toml")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-o", "--out", default=None, help="The pipeline.py to write (default: PROJECT/pipeline.py).")
@click.option("--trust", is_flag=True, help="Import modules it names outside synthex's prompt modules and the "
                                            "project (that runs their code).")
@click.option("--allow-effects", is_flag=True, help="Allow its on_update URLs and sources outside the project "
                                                    "(asked on a terminal; refused otherwise).")
@click.option("--force", is_flag=True, help="Replace the file if it exists.")
@project_option
def import_toml_command(file: str, out: str | None, trust: bool, allow_effects: bool, force: bool,
                        project: str) -> None:
    """Write the Python equivalent of a shared TOML pipeline (a pipeline.py building the same steps)."""
    from synthex.core.definition import PipelineDefinition
    from synthex.core.shared_toml import TomlTrust, import_toml

    def confirm(path: Path, effects: list[str]) -> bool:
        click.echo(f"{path} reaches outside the project:", err=True)
        for line in effects:
            click.echo(f"  {line}", err=True)
        return click.confirm("Allow these?", default=False, err=True)

    effects: Any = True if allow_effects else (confirm if sys.stdin.isatty() else False)
    target, fingerprint = import_toml(PipelineDefinition, file, out or Path(project) / "pipeline.py",
                                      TomlTrust(code=trust, effects=effects), replace=force)
    click.echo(f"wrote {target} (definition {fingerprint})")


@main.command()
@click.option("--port", default=3000, show_default=True)
@click.option("--open", "open_browser", is_flag=True, help="Open the UI in a browser once it answers.")
@project_option
def ui(port: int, open_browser: bool, project: str) -> None:
    """Open the Dagster UI on this project: every step an asset, lineage visible."""
    from synthex.surfaces.ui_launch import prepare_ui, spawn_browser_opener

    root = Path(project).resolve()
    launch = prepare_ui(root, port)
    for note in launch.notes:
        click.echo(note, err=True)
    click.echo(f"Dagster UI for '{launch.location}' at {launch.url} (Ctrl-C to stop)", err=True)
    if open_browser:
        spawn_browser_opener(launch.url)
    # dagster dev ignores SIGINT/SIGTERM when started with SIGINT ignored (e.g. from a background script).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.execvpe(launch.args[0], launch.args, launch.env)


def _add_commands_from_modules() -> None:
    # Commands with a module of their own (their heavy imports happen inside the command).
    from synthex.surfaces.deploy_cli import deploy_group
    from synthex.surfaces.export_cli import export_command
    from synthex.surfaces.mcp_server import mcp_command
    from synthex.surfaces.privacy_cli import keygen_command, pii_group, purge_command
    from synthex.surfaces.sql_cli import sql_command

    main.add_command(mcp_command)
    main.add_command(sql_command)
    main.add_command(purge_command)
    main.add_command(pii_group)
    main.add_command(keygen_command)
    main.add_command(export_command)
    main.add_command(deploy_group)


_add_commands_from_modules()

if __name__ == "__main__":
    main()
