"""`synthex purge` and `synthex pii scan`: the privacy commands (design doc Part XI)."""

from __future__ import annotations

import sys
import traceback
from collections import Counter
from typing import Any

import click

from synthex.core.errors import BadInputError, SynthexError
from synthex.surfaces.output import emit_json


def _emit(data: Any) -> None:
    emit_json(data)


@click.command("purge")
@click.argument("record_ids", nargs=-1)
@click.option("--match", "match", default=None, help="Purge the source records whose text contains this "
              "(case-insensitive).")
@click.option("--regex", is_flag=True, help="--match is a regular expression.")
@click.option("--dry-run", is_flag=True, help="Only list what would be removed, on every step and branch.")
@click.option("--resume", is_flag=True, help="Finish a purge that was killed before it finished (any purge, "
              "`synthex run` or `synthex doctor --repair` does too).")
@click.option("--project", "project", default=".", show_default=True, type=click.Path(file_okay=False),
              help="Project folder (holds pipeline.py).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--verbose", is_flag=True, help="On a failure, also print its Python traceback (one line otherwise).")
def purge_command(record_ids: tuple[str, ...], match: str | None, regex: bool, dry_run: bool, resume: bool,
                  project: str, as_json: bool, verbose: bool) -> None:
    """Remove RECORD_IDS (or the source records --match finds) and everything made from them, on every
    branch; recompute the aggregates and folds that used them; leave no copy of their text under the
    project's data directory (old LanceDB versions, FTS index, LLM cache, Dagster's event log, CDC
    state). The purged source items are remembered, so re-running the same export does not bring them
    back.

    A purge killed before it finished is finished by running `synthex purge` again (with the same
    arguments, or `--resume`), by any `synthex run` or by `synthex doctor --repair`; `synthex status`
    shows it meanwhile.

    \b
    Examples:
      synthex purge 3f2a9c1e --dry-run
      synthex purge --match "jane.doe@example.com" --dry-run
      synthex purge --resume
    """
    try:
        _purge(record_ids, match, regex, dry_run, resume, project, as_json)
    except (click.ClickException, click.Abort):
        raise
    except Exception as exc:
        # Every failure is one line (the group prints a SynthexError); the trace only when asked for.
        if verbose:
            traceback.print_exception(exc.__cause__ or exc, file=sys.stderr)
        if isinstance(exc, SynthexError):
            raise
        raise SynthexError(f"purge: {type(exc).__name__}: {exc}") from exc


def _purge(record_ids: tuple[str, ...], match: str | None, regex: bool, dry_run: bool, resume: bool,
           project: str, as_json: bool) -> None:
    from synthex.core.project import load_pipeline
    from synthex.core.purge_journal import PurgeJournal

    pipe = load_pipeline(project)
    say = None if as_json else (lambda msg: click.echo(msg, err=True))
    if not record_ids and match is None:
        if not resume and not PurgeJournal(pipe.data_dir).exists():
            raise BadInputError("purge: give record ids or --match TEXT (or --resume to finish an interrupted purge)")
        finished = pipe.app.finish_interrupted_purge(say=say, wait=True)
        if finished is None:
            if as_json:
                _emit({"resumed": False, "message": "no unfinished purge"})
            else:
                click.echo("no unfinished purge: nothing to resume")
            return
        report = finished
    else:
        report = pipe.app.purge(list(record_ids), match=match, regex=regex, dry_run=dry_run, say=say)
    data = report.to_dict()
    if as_json:
        _emit(data)
        return
    steps = ", ".join(f"{s} {n}" for s, n in data["steps"].items()) or "nothing"
    verb = "would remove" if dry_run else ("finished the interrupted purge: removed" if report.resumed else "removed")
    click.echo(f"{verb} {len(data['affected_records'])} record(s) on branch(es) "
               f"{', '.join(data['branches']) or '-'}: {steps}")
    if dry_run:
        for rid in data["affected_records"]:
            click.echo(f"  {rid}")
        return
    compaction = data["compaction"]
    click.echo(f"recomputed: {data['recomputed']}; LLM cache entries dropped: {data['cache_entries']}; "
               f"old versions removed: {compaction.get('versions_removed', 0)}; "
               f"files scrubbed: {len(data['files_scrubbed'])}")
    if data["residue"]:
        click.echo("residue still found in: " + ", ".join(f"{f} ({n})" for f, n in data["residue"].items()))
        raise SystemExit(1)
    click.echo(f"residue under {pipe.data_dir}: none ({data['seconds']:.1f}s)")
    for path in data["outside"]:
        click.echo(f"note: {path} (your source, outside the data directory) still holds the text; the purge "
                   f"ledger keeps it out of every run", err=True)


@click.group("pii")
def pii_group() -> None:
    """Find personal data in the memory (emails, phones, cards, IBANs, SSNs, IPs, keys)."""


@pii_group.command("scan")
@click.option("--step", "steps", multiple=True, help="Only these steps (default: every step).")
@click.option("--branch", default="main", show_default=True)
@click.option("--project", "project", default=".", show_default=True, type=click.Path(file_okay=False),
              help="Project folder (holds pipeline.py).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def pii_scan(steps: tuple[str, ...], branch: str, project: str, as_json: bool) -> None:
    """Count personal data per step and type in the stored records (values are never printed), and name
    the records that hold it, so a source can get `pii="redact"` or a record a purge."""
    from synthex.core.pii import scan
    from synthex.core.project import load_pipeline

    pipe = load_pipeline(project)
    for name in steps:
        if name not in pipe.steps:
            raise BadInputError(f"unknown step {name!r}; steps: {', '.join(pipe.steps)}")
    per_step: dict[str, Counter[str]] = {}
    records: list[dict[str, Any]] = []
    scanned = 0
    for name in steps or list(pipe.steps):
        counts: Counter[str] = Counter()
        for rec in pipe.app.records(name, branch=branch):
            scanned += 1
            found = Counter(f.type for f in scan(rec.content))
            if found:
                counts.update(found)
                records.append({"id": rec.id, "step": name, "types": dict(sorted(found.items()))})
        per_step[name] = counts
    data = {"branch": branch, "records_scanned": scanned, "records_with_pii": len(records),
            "steps": {s: dict(sorted(c.items())) for s, c in per_step.items()}, "records": records}
    if as_json:
        _emit(data)
        return
    click.echo(f"{scanned} record(s) scanned on {branch}, {len(records)} hold personal data")
    for step, counts in data["steps"].items():
        click.echo(f"  {step:<20} " + (", ".join(f"{t} {n}" for t, n in counts.items()) or "-"))
    for row in records[:20]:
        click.echo(f"  {row['id'][:8]}  {row['step']:<16} " + ", ".join(f"{t} {n}" for t, n in row["types"].items()))
    if len(records) > 20:
        click.echo(f"  ... and {len(records) - 20} more (--json lists them all)")


@click.command("keygen")
def keygen_command() -> None:
    """Print a new encryption key for SYNTHEX_ENCRYPTION_KEY (encryption at rest, for a new store).

    Keep it somewhere safe: a store written with it cannot be read without it, and nothing recovers it.
    """
    from synthex_resources.encryption import generate_key

    click.echo(generate_key())
    click.echo("export SYNTHEX_ENCRYPTION_KEY=<the key above> before `synthex run` on a new project; "
               "losing the key loses the memory", err=True)
