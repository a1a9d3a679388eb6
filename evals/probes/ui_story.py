"""Issue 36 probes on a project that has run (e.g. `synthex init demo --demo && cd demo && synthex run`):
how long recording a new branch's served partitions takes, and how long the run launcher takes to refuse a
run over an invented period. Writes into the project's Dagster instance (a branch file and its partitions;
the invented period is removed again).

    python -m evals.probes.ui_story PROJECT_DIR [BRANCH]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def main(project: Path, branch: str) -> None:
    os.environ["SYNTHEX_PROJECT"] = str(project)  # as `synthex ui` sets it for the launcher's process
    from synthex.core.project import create_branch_file, load_pipeline
    from synthex_assets.dagster_internals import partition_range_tags
    from synthex_assets.definitions import build_definitions
    from synthex_assets.instance import open_instance
    from synthex_assets.naming import job_name
    from synthex_assets.partitions import register
    from synthex_assets.run_tags import REFUSED_TAG
    from synthex_assets.served import record_served_partitions

    pipe = load_pipeline(project)
    instance = open_instance(pipe)
    try:
        create_branch_file(project, branch)
        register(instance, branch, [])
        started = time.perf_counter()
        served = record_served_partitions(instance, pipe.for_branch(branch))
        print(f"served partitions recorded for {branch!r}: {served} in {time.perf_counter() - started:.2f} s")

        job = build_definitions(pipe).resolve_job_def(job_name(pipe.name))
        instance.add_dynamic_partitions("period", ["not-a-month"])
        first = instance.get_dynamic_partitions("period")[0]
        run = instance.create_run_for_job(job, tags=partition_range_tags(f"main|{first}", "main|not-a-month"))
        started = time.perf_counter()
        instance.launch_run(run.run_id, workspace=None)
        elapsed = time.perf_counter() - started
        refused = instance.get_run_by_id(run.run_id)
        print(f"run over main|{first} .. main|not-a-month: {refused.status.value} in {elapsed * 1000:.0f} ms")
        print(f"  {refused.tags.get(REFUSED_TAG, '(no refusal)')}")
        instance.delete_dynamic_partition("period", "not-a-month")
    finally:
        instance.dispose()
        pipe.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), sys.argv[2] if len(sys.argv) > 2 else "probe")
