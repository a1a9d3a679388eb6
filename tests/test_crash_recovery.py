"""A run killed with SIGKILL mid-step, started again, converges to the same records (no duplicates).

The run that is killed is a process of its own (SIGKILL); the run that recovers is started in this
process, as a new process would: a fresh pipeline load, the dead run's lock already released by the kernel.
The reference records come from the session's shared uninterrupted run of the same pipeline and export.
"""

import os
import signal
import subprocess
import sys
import time
from collections import Counter

from conftest import PIPELINE_PY, env_without_openai, load, write_project

SLOW = PIPELINE_PY.replace(
    'return "Summarize this conversation.',
    'import time; time.sleep(0.25)\n    return "Summarize this conversation.')
RUN = "from synthex.core.project import load_pipeline; load_pipeline({root!r}).run()"


def test_sigkill_mid_step_then_rerun_converges(tmp_path, ran_project):
    clean = load(ran_project.root)
    expected = {s: sorted(r.content for r in clean.records(s)) for s in ("chatgpt", "summaries", "monthly")}
    clean.close()
    assert all(expected.values())

    root = write_project(tmp_path / "killed", ran_project.export, SLOW)
    proc = subprocess.Popen([sys.executable, "-c", RUN.format(root=str(root))], env=env_without_openai())
    deadline = time.time() + 120
    store_dir = root / ".synthex" / "lancedb" / "records.lance"
    while time.time() < deadline and not store_dir.exists():
        time.sleep(0.1)
    time.sleep(2.0)  # well inside the slow summaries step
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL

    assert load(root).run().status == "completed"  # started again
    pipe = load(root)
    for step, contents in expected.items():
        records = pipe.records(step)
        assert sorted(r.content for r in records) == contents
        assert max(Counter(r.id for r in records).values()) == 1
    assert pipe.plan().steps == []
    # The killed run is not left "running", here or in Dagster.
    runs = pipe.runs()
    assert "running" not in {r.status for r in runs}
    killed = [r for r in runs if r.error.startswith("killed")]
    assert len(killed) == 1 and killed[0].status == "failed"
    assert pipe.app.instance.get_run_by_id(killed[0].id).is_failure
