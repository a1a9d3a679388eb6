"""`synthex doctor` finds and repairs what an older version or a crash left: duplicate ids, dangling
sources, runs stuck in "running"."""

from __future__ import annotations

import json
from collections import Counter

from conftest import cli, load

from synthex.core.record import Run


def test_doctor_finds_and_repairs_duplicates_dangling_sources_and_stuck_runs(tmp_path, ran_project):
    project = ran_project.copy(tmp_path / "proj")  # a project after one clean run, ours to damage
    pipe = load(project)
    assert pipe.plan().steps == []
    clean = {s: sorted((r.id, r.content) for r in pipe.records(s)) for s in pipe.steps}
    store = pipe.store()
    # What an older version could leave: three summaries stored twice (two concurrent runs) ...
    monthly = pipe.records("monthly")[0]
    table = store.records_table()
    doubled = [r.id for r in pipe.records("summaries") if r.id != monthly.source_ids[0]][:3]
    table.add(table.search().where("id IN (" + ",".join(f"'{i}'" for i in doubled) + ")").limit(None).to_arrow())
    # ... a monthly record whose summary is gone ...
    store.records.delete_ids([monthly.source_ids[0]])
    # ... and a run killed long ago, still "running".
    store.runs.save(Run(id="dead-run", pipeline=pipe.name, branch="main", steps=[], status="running",
                       started_at="2026-01-01T00:00:00.000Z"))

    doctor = cli("doctor", "--json", "--project", str(project), check=False)
    assert doctor.returncode == 3  # a problem found and not repaired: scripts can tell
    found = json.loads(doctor.stdout)
    assert found["healthy"] is False
    assert found["duplicate_ids"] == sorted(doubled)
    assert list(found["dangling_sources"]) == [monthly.id]
    assert found["stuck_runs"] == ["dead-run"]

    fixed = json.loads(cli("doctor", "--repair", "--json", "--project", str(project)).stdout)
    assert fixed["repaired"] is True
    assert json.loads(cli("doctor", "--json", "--project", str(project)).stdout)["healthy"] is True
    pipe = load(project)
    assert {r.id: r.status for r in pipe.runs()}["dead-run"] == "failed"
    pipe.run()  # recomputes what the repair removed
    after = {s: sorted((r.id, r.content) for r in pipe.records(s)) for s in pipe.steps}
    assert after == clean
    assert max(Counter(r["id"] for r in store.tables.read("records", columns=["id"])).values()) == 1
