"""CPU seconds a process spends opening a project's Dagster instance and setting up one run's event-log file
(what every `synthex run` pays before its first step), on a fresh project and on one that ran before.

    python -m evals.bench.instance_open --repeats 7

Imports are excluded (done before timing). Compare trees back to back under the same load
(``PYTHONPATH=<tree> python -m evals.bench.instance_open``): CPU seconds, which a busy machine inflates
far less than wall time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from dagster import DagsterInstance

from synthex_assets.dagster_internals import InstanceRef
from synthex_assets.instance import ensure_instance_yaml, storage_overrides


def open_and_set_up_a_run(home: Path) -> float:
    """CPU seconds: the instance opened as the CLI opens it, one new run's event-log file set up, closed."""
    started = time.process_time()
    ensure_instance_yaml(home)
    instance = DagsterInstance.from_ref(InstanceRef.from_dir(str(home), overrides=storage_overrides(home)))
    try:
        with instance.event_log_storage.run_connection(str(uuid.uuid4())):
            pass
        instance.get_runs(limit=1)
    finally:
        instance.dispose()
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    fresh, existing = [], []
    for _ in range(args.repeats):
        base = Path(tempfile.mkdtemp(prefix="synthex-bench-instance-"))
        try:
            fresh.append(open_and_set_up_a_run(base / "dagster"))
            existing.append(open_and_set_up_a_run(base / "dagster"))
        finally:
            shutil.rmtree(base, ignore_errors=True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"instance open + a run's event-log file: fresh project p50 {statistics.median(fresh):.3f} s CPU, "
          f"existing p50 {statistics.median(existing):.3f} s CPU (n={args.repeats}; load average {load})")


if __name__ == "__main__":
    main()
