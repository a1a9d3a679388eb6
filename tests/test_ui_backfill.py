"""A UI backfill from the job's page over a range of (branch, period) partitions (issue 23, item 7).

Dagster 1.13 launches it as a *job* backfill: one run whose tags name the range but keep the first
partition's ``dagster/partition/<dimension>`` tags, which Dagster reads first, so the run would do one
partition and the backfill would report all of them done. The step op refuses such a run before it reads
or writes anything (``synthex_assets.partitions.misresolved_range``); range tags alone (an asset backfill,
``synthex run``) still select the whole range (tests/test_uiviews.py runs that path).
"""

from __future__ import annotations

from conftest import load
from dagster import AssetKey, DagsterEventType, PartitionKeyRange

from synthex_assets.dagster_internals import partition_range_tags
from synthex_assets.definitions import build_definitions
from synthex_assets.naming import job_name
from synthex_assets.partitions import misresolved_range

STEPS = ["chatgpt", "transcripts", "summaries", "monthly", "world_model"]


def job_backfill_tags(job, first: str, last: str) -> dict[str, str]:
    """The tags Dagster's job backfill gives its one run over ``first`` .. ``last``
    (dagster/_core/execution/job_backfill.py: the first partition's tags without ``dagster/partition``,
    plus the range), computed from the job's partitioned config as the code server computes them."""
    first_tags = job.partitioned_config.get_tags_for_partition_key(first, job_name=job.name)
    return {**{k: v for k, v in first_tags.items() if k != "dagster/partition"}, **partition_range_tags(first, last)}


def test_agreeing_ranges_pass_and_a_misresolved_one_names_both():
    agree = PartitionKeyRange("main|2024-01", "main|2024-03")
    assert misresolved_range(partition_range_tags("main|2024-01", "main|2024-03"), agree) is None
    assert misresolved_range({}, PartitionKeyRange("main|2024-01", "main|2024-01")) is None  # one partition
    why = misresolved_range(partition_range_tags("main|2024-01", "main|2024-03"),
                            PartitionKeyRange("main|2024-01", "main|2024-01"))
    assert why is not None and "main|2024-01 .. main|2024-03" in why and "resolved it to main|2024-01 " in why


def test_a_job_backfill_over_a_range_is_refused_with_nothing_written(ran_project, tmp_path):
    pipe = load(ran_project.copy(tmp_path / "proj"))
    try:
        instance = pipe.app.instance
        periods = instance.get_dynamic_partitions("period")
        assert len(periods) >= 3
        job = build_definitions(pipe).resolve_job_def(job_name(pipe.name))
        tags = job_backfill_tags(job, f"main|{periods[0]}", f"main|{periods[-1]}")
        # The Dagster behaviour the refusal is for: the range run carries one partition's dimension tags.
        assert tags["dagster/partition/branch"] == "main" and tags["dagster/partition/period"] == periods[0]
        counts = {s: len(pipe.records(s)) for s in pipe.steps}
        result = job.execute_in_process(instance=instance, tags=tags, raise_on_error=False)
        assert not result.success
        [failure] = [e for e in result.all_events if e.event_type == DagsterEventType.STEP_FAILURE]
        message = failure.event_specific_data.error.message
        assert failure.step_key == "chatgpt"
        assert f"main|{periods[0]} .. main|{periods[-1]}" in message and "synthex run" in message
        materialized = [r for s in STEPS for r in instance.fetch_materializations(AssetKey(s), limit=1000).records
                        if r.run_id == result.run_id]
        assert materialized == []  # not the one partition Dagster resolved the run to either
        assert {s: len(pipe.records(s)) for s in pipe.steps} == counts
    finally:
        pipe.close()
