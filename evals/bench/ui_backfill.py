"""Where a UI backfill's time goes: ``python -m evals.bench.ui_backfill PROJECT [--trials N]``.

Starts ``synthex ui`` on PROJECT (a project after its first ``synthex run``, e.g. ``synthex init demo --demo
&& synthex run --project demo``): Dagster's webserver, daemon and code server. Then, ``--trials`` times, it
launches an asset backfill of ``--steps`` (default ``summaries``, the issue's no-op backfill) over every
period of ``main`` through the GraphQL mutation the
UI's Materialize dialog sends (``launchPartitionBackfill``) and waits for it to end; and, for comparison,
one run over the same range the way the dialog's "Launch as: Single run" option sends it
(``launchPipelineExecution`` with the range tags). Prints, per trial, from Dagster's own timestamps:

- ``to_run_created``: backfill requested until the daemon created its run (the backfill daemon's loop);
- ``to_run_started``: the run created until it started (run coordinator, launcher, run worker);
- ``run``: the run's own start to end (the work, Dagster's events included);
- ``run_end_to_completed``: the run ended until the backfill says COMPLETED (the daemon's next loop);
- ``total``: requested until COMPLETED, as the UI's backfill page shows it.

The server is stopped at the end, whatever happened.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from evals.ui_screenshots import REPOSITORY, graphql, start_ui, stop

LAUNCH_BACKFILL = """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }"""
BACKFILL = """query($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill {
  status timestamp endTimestamp runs(limit: 10) { runId status creationTime startTime endTime
  tags { key value } } } } }"""
LAUNCH_RUN = """mutation($params: ExecutionParams!) { launchPipelineExecution(executionParams: $params) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"""
RUN = """query($id: ID!) { runOrError(runId: $id) { ... on Run { status creationTime startTime endTime
  tags { key value } } } }"""
PERIODS = """{ assetNodes { assetKey { path } partitionKeysByDimension { name partitionKeys } } }"""
DONE = ("COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED")
RUN_DONE = ("SUCCESS", "FAILURE", "CANCELED")


@dataclass
class BackfillTiming:
    run_tags: dict[str, str]
    to_run_created: float
    to_run_started: float
    run: float
    run_end_to_completed: float
    total: float


def step_selection(url: str, steps: list[str]) -> tuple[list[dict], list[str]]:
    """The step assets named (every one: ``all``) and main's period keys."""
    nodes = [n for n in graphql(url, PERIODS)["data"]["assetNodes"]
             if [d["name"] for d in n["partitionKeysByDimension"]] == ["branch", "period"]
             and (steps == ["all"] or n["assetKey"]["path"][-1] in steps)]
    periods = nodes[0]["partitionKeysByDimension"][1]["partitionKeys"]
    return [n["assetKey"] for n in nodes], periods


def launch_asset_backfill(url: str, keys: list[dict], periods: list[str]) -> str:
    params = {"tags": [], "assetSelection": keys, "partitionNames": [f"main|{p}" for p in periods],
              "fromFailure": False}
    answer = graphql(url, LAUNCH_BACKFILL, {"params": params})["data"]["launchPartitionBackfill"]
    if answer["__typename"] != "LaunchBackfillSuccess":
        raise RuntimeError(f"launchPartitionBackfill: {answer}")
    return answer["backfillId"]


def wait_backfill(url: str, backfill_id: str, timeout: float = 600.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = graphql(url, BACKFILL, {"id": backfill_id})["data"]["partitionBackfillOrError"]
        if found["status"] in DONE:
            return found
        time.sleep(0.25)
    raise RuntimeError(f"backfill {backfill_id} did not end within {timeout:.0f} s")


def backfill_timing(found: dict) -> BackfillTiming:
    if found["status"] not in ("COMPLETED", "COMPLETED_SUCCESS") or len(found["runs"]) != 1:
        raise RuntimeError(f"backfill ended {found['status']} with {len(found['runs'])} run(s)")
    [run] = found["runs"]
    return BackfillTiming(run_tags={t["key"]: t["value"] for t in run["tags"]},
                          to_run_created=run["creationTime"] - found["timestamp"],
                          to_run_started=run["startTime"] - run["creationTime"],
                          run=run["endTime"] - run["startTime"],
                          run_end_to_completed=found["endTimestamp"] - run["endTime"],
                          total=found["endTimestamp"] - found["timestamp"])


def launch_single_run(url: str, location: str, job: str, keys: list[dict], periods: list[str]) -> dict:
    """As the Materialize dialog's "Launch as: Single run": one run, the range in its tags."""
    tags = [{"key": "dagster/asset_partition_range_start", "value": f"main|{periods[0]}"},
            {"key": "dagster/asset_partition_range_end", "value": f"main|{periods[-1]}"}]
    params = {"selector": {"repositoryLocationName": location, "repositoryName": REPOSITORY, "pipelineName": job,
                           "assetSelection": keys},
              "mode": "default", "executionMetadata": {"tags": tags}, "runConfigData": "{}"}
    began = time.time()
    answer = graphql(url, LAUNCH_RUN, {"params": params})["data"]["launchPipelineExecution"]
    if answer["__typename"] != "LaunchRunSuccess":
        raise RuntimeError(f"launchPipelineExecution: {answer}")
    run_id = answer["run"]["runId"]
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        run = graphql(url, RUN, {"id": run_id})["data"]["runOrError"]
        if run["status"] in RUN_DONE:
            return {"status": run["status"], "to_run_started": run["startTime"] - began,
                    "run": run["endTime"] - run["startTime"], "total": run["endTime"] - began}
        time.sleep(0.25)
    raise RuntimeError(f"run {run_id} did not end")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--single-runs", type=int, default=1, help="single runs after the backfills")
    parser.add_argument("--steps", default="summaries", help="comma-separated asset names, or all")
    parser.add_argument("--url", help="a `synthex ui` already serving PROJECT (default: start one)")
    args = parser.parse_args(argv)
    from synthex.core.project import load_pipeline
    from synthex_assets.naming import job_name, location_name

    project = args.project.resolve()
    pipe = load_pipeline(project)
    location, job = location_name(pipe.name), job_name(pipe.name)
    server = None
    with tempfile.TemporaryDirectory(prefix="synthex-bench-backfill-") as tmp, \
            open(Path(tmp) / "ui.log", "wb") as log:
        try:
            if args.url:
                url = args.url.rstrip("/")
            else:
                url, server = start_ui(project, log)
            keys, periods = step_selection(url, args.steps.split(","))
            timings = []
            for trial in range(args.trials):
                timing = backfill_timing(wait_backfill(url, launch_asset_backfill(url, keys, periods)))
                timings.append(timing)
                print(f"backfill {trial + 1}: to_run_created {timing.to_run_created:.1f} s, to_run_started "
                      f"{timing.to_run_started:.1f} s, run {timing.run:.1f} s, run_end_to_completed "
                      f"{timing.run_end_to_completed:.1f} s, total {timing.total:.1f} s; tags "
                      f"{ {k: v for k, v in timing.run_tags.items() if k.startswith('synthex/')} }", flush=True)
            for name in ("to_run_created", "to_run_started", "run", "run_end_to_completed", "total"):
                values = [getattr(t, name) for t in timings]
                print(f"{name}: median {statistics.median(values):.1f} s (min {min(values):.1f}, "
                      f"max {max(values):.1f})")
            for trial in range(args.single_runs):
                single = launch_single_run(url, location, job, keys, periods)
                print(f"single run {trial + 1} (Launch as: Single run): {single['status']}, launch to started "
                      f"{single['to_run_started']:.1f} s, run {single['run']:.1f} s, total {single['total']:.1f} s",
                      flush=True)
        finally:
            if server is not None:
                stop(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
