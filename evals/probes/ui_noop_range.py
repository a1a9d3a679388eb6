"""Issue 36 item 2 on a project that has run (e.g. `synthex init demo --demo && cd demo && synthex run`): a
no-op backfill of one step over a range other than the first run's, as the UI launches it, and what Dagster
then says of the step below it. Prints each backfilled partition's data version before and after, and the
staleness Dagster reports for every partition of the step below (the resolver behind its GraphQL
`staleStatus`: Dagster-internal, so a probe, not a test). Writes one run into the project's Dagster instance.

    python -m evals.probes.ui_noop_range PROJECT_DIR [STEP] [DOWNSTREAM] [N_PERIODS]
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

DATA_VERSION_TAG = "dagster/data_version"


def latest_data_version(instance, asset: str, partition: str) -> str | None:
    from dagster import AssetKey, AssetRecordsFilter

    wanted = AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=[partition])
    records = instance.fetch_materializations(wanted, limit=1).records
    return records[0].asset_materialization.tags.get(DATA_VERSION_TAG) if records else None


def main(project: Path, step: str, downstream: str, n_periods: int) -> None:
    from dagster import AssetKey

    from synthex.core.project import load_pipeline
    from synthex_assets.dagster_internals import partition_range_tags, stale_statuses
    from synthex_assets.definitions import build_definitions
    from synthex_assets.naming import asset_name, job_name

    pipe = load_pipeline(project)
    try:
        instance = pipe.app.instance
        defs = build_definitions(pipe)
        periods = sorted(instance.get_dynamic_partitions("period"))
        keys = [f"main|{p}" for p in periods]
        chosen = keys[1:1 + n_periods]  # not the first run's range (every period)

        def stale() -> Counter:
            statuses = stale_statuses(instance, defs.resolve_asset_graph(), AssetKey(asset_name(downstream)), keys)
            return Counter(statuses.values())

        before = {k: latest_data_version(instance, asset_name(step), k) for k in chosen}
        print(f"{downstream} before: {dict(stale())} over {len(keys)} partitions")
        job = defs.resolve_job_def(job_name(pipe.name))
        started = time.perf_counter()
        result = job.execute_in_process(instance=instance, tags=partition_range_tags(chosen[0], chosen[-1]),
                                        asset_selection=[AssetKey(asset_name(step))], raise_on_error=False)
        print(f"backfill of {step} over {chosen[0]} .. {chosen[-1]}: success={result.success} in "
              f"{time.perf_counter() - started:.1f} s")
        for k in chosen:
            print(f"  {k}: {before[k]} -> {latest_data_version(instance, asset_name(step), k)}")
        print(f"{downstream} after: {dict(stale())}")
    finally:
        pipe.close()


if __name__ == "__main__":
    args = sys.argv[1:]
    main(Path(args[0]).resolve(), args[1] if len(args) > 1 else "summaries",
         args[2] if len(args) > 2 else "monthly", int(args[3]) if len(args) > 3 else 2)
