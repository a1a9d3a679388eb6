"""Fault-matrix cases: a `synthex purge` killed mid-way is finished later (issue 20, item 1).

Each case builds a project with two branches (main, and one overriding the summaries) over an export
with one planted conversation whose text holds a unique token, runs both branches, then kills
`synthex purge --match TOKEN` at a known point and checks the kill landed mid-way (the journal says
which steps are left; the token is still on disk) before a later command finishes it. Held when the
raw-byte scan of the data directory finds the token 0 times, no run is left "running", nothing is
journaled any more, and both branches are up to date.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

from evals.fault_matrix import (
    FAST_SUMMARY,
    Case,
    Observed,
    Workbench,
    finish,
    offline_env,
    quote,
    start,
    synthex,
)
from synthex.core.demo.generate import generate
from synthex.core.purge_journal import PurgeJournal, PurgePhase, PurgeStep

TOKEN = "ZQXPURGE4471"
BRANCH = "short"
# The monthly prompt SIGKILLs its own process when PURGE_KILL_IN_RERUN is set (only for the purge that is
# to be killed): it runs first in the purge's re-run of main, after the ledger and both branches' deletes.
KILLING_REFLECTION = FAST_SUMMARY + '''

def reflect(records, period):
    import os
    import signal

    if os.environ.get("PURGE_KILL_IN_RERUN"):
        os.kill(os.getpid(), signal.SIGKILL)
    return monthly_reflection(records, period)
'''
SHORT_SUMMARIES = '''
def short_summary(record):
    return "In short: " + record.content[:120]


def overrides(pipeline):
    pipeline.transform("summaries", from_="transcripts", fn=short_summary)
'''


def planted_conversation() -> dict:
    def node(mid: str, role: str, text: str, parent: str | None, children: list[str]) -> dict:
        return {"id": mid, "parent": parent, "children": children,
                "message": {"id": mid, "author": {"role": role}, "create_time": 1693540000.0,
                            "content": {"content_type": "text", "parts": [text]}}}
    return {"id": "planted-1", "title": "Clinic locker", "create_time": 1693540000.0, "update_time": 1693540000.0,
            "mapping": {"a": node("a", "user", f"My locker code at the clinic is {TOKEN}, keep it safe.", None, ["b"]),
                        "b": node("b", "assistant", f"Noted: the clinic locker code {TOKEN} is stored.", "a", [])}}


def token_hits(data_dir: Path) -> dict[str, int]:
    """Raw-byte occurrences of the token in every file under the data directory."""
    found = {}
    for path in data_dir.rglob("*"):
        if path.is_file() and (n := path.read_bytes().count(TOKEN.encode())):
            found[str(path.relative_to(data_dir))] = n
    return found


def two_branch_project(wb: Workbench, name: str, obs: Observed) -> Path | None:
    """The project, run on both branches; None (and a failed check) when that did not work."""
    export = wb.write_export(name, [planted_conversation(), *generate(conversations=12, months=3, seed=3)])
    root = wb.project(name, export=export, summary=KILLING_REFLECTION)
    pipeline_py = root / "pipeline.py"
    pipeline_py.write_text(pipeline_py.read_text().replace("prompt=monthly_reflection", "prompt=reflect"))
    created = synthex("branch", "create", BRANCH, "--project", str(root), cwd=root)
    branch_file = root / "branches" / f"{BRANCH}.py"
    if not obs.check(created.code == 0 and branch_file.exists(), f"branch create failed: {quote(created.message)}"):
        return None
    body = branch_file.read_text()
    branch_file.write_text(body[:body.index("def overrides")] + SHORT_SUMMARIES.lstrip("\n"))
    for args in (("run",), ("run", "--branch", BRANCH)):
        done = synthex(*args, "--project", str(root), cwd=root)
        if not obs.check(done.code == 0, f"`synthex {' '.join(args)}` failed: {quote(done.message)}"):
            return None
    return root


def check_finished(obs: Observed, root: Path) -> None:
    data_dir = root / ".synthex"
    hits = token_hits(data_dir)
    obs.note(f"raw-byte scan for the token: {sum(hits.values())} hit(s)")
    obs.check(not hits, f"the token is still on disk: {hits}")
    obs.check(not PurgeJournal(data_dir).exists(), "the purge is still journaled")
    runs = synthex("runs", "--json", "--limit", "100", "--project", str(root), cwd=root)
    statuses = [r["status"] for r in json.loads(runs.out)] if runs.code == 0 else ["?"]
    obs.check("running" not in statuses, f"a run is still running: {statuses}")
    status = synthex("status", "--json", "--project", str(root), cwd=root)
    data = json.loads(status.out) if status.code == 0 else {}
    obs.check(status.code == 0 and data.get("unfinished_purge") is None, "`synthex status` still shows a purge")
    stale = [b["branch"] for b in data.get("branches", []) if b.get("stale")]
    obs.check(not stale, f"branches with work left: {stale}")
    world = synthex("stats", "--json", "--project", str(root), cwd=root)
    records = json.loads(world.out)["steps"]["world-model"]["records"] if world.code == 0 else 0
    obs.note(f"world-model records {records}, runs {dict((s, statuses.count(s)) for s in set(statuses))}")
    obs.check(records > 0, "the world model is empty")


def left_half_done(obs: Observed, root: Path, what: str) -> list[str]:
    """The steps the killed purge left (from its journal), noted; a failed check when nothing was left."""
    progress = PurgeJournal(root / ".synthex").progress()
    pending = [s.key for s in progress.pending()] if progress else []
    hits = sum(token_hits(root / ".synthex").values())
    obs.note(f"killed {what}: steps left {pending[:3]}{'...' if len(pending) > 3 else ''}; token on disk {hits}x")
    obs.check(bool(pending) and hits > 0, "the kill did not land mid-purge (nothing left to do)")
    status = synthex("status", "--project", str(root), cwd=root)
    line = next((x for x in status.out.splitlines() if x.startswith("unfinished purge")), "")
    obs.check("synthex purge --resume" in line, f"`synthex status` does not show the purge: {quote(status.out)}")
    return pending


def case_killed_after_delete(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    root = two_branch_project(wb, "purge-after-delete", obs)
    if root is None:
        return obs.outcome()
    killed = synthex("purge", "--match", TOKEN, "--project", str(root), cwd=root,
                     env=offline_env(PURGE_KILL_IN_RERUN="1"))
    obs.check(killed.code == -signal.SIGKILL, f"the purge was not killed: exit {killed.code}")
    pending = left_half_done(obs, root, "in the re-run of main")
    deletes = [PurgeStep(PurgePhase.DELETE, b).key for b in ("main", BRANCH)]
    obs.check(not set(deletes) & set(pending) and PurgeStep(PurgePhase.RERUN, "main").key in pending,
              "the kill did not land after both deletes and before the re-runs")
    again = synthex("purge", "--match", TOKEN, "--project", str(root), cwd=root)
    obs.note(f"same command again: exit {again.code}, {quote(again.out.strip().splitlines()[0] if again.out else '')}")
    obs.check(again.code == 0 and "finished the interrupted purge" in again.out,
              f"the re-run did not finish it: {quote(again.message)}")
    check_finished(obs, root)
    return obs.outcome()


def case_killed_during_sweep(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    root = two_branch_project(wb, "purge-during-sweep", obs)
    if root is None:
        return obs.outcome()
    proc = start("purge", "--match", TOKEN, "--project", str(root), cwd=root)
    assert proc.stderr is not None
    # `synthex purge` says this line as its sweep begins (the re-runs are done and journaled); the kill
    # lands inside the sweep, and the journal read below proves it did (sweep steps left).
    for line in proc.stderr:
        if "sweeping the data directory" in line:
            proc.send_signal(signal.SIGKILL)
            break
    killed = finish(proc)
    obs.check(killed.code == -signal.SIGKILL, f"the purge was not killed in its sweep: exit {killed.code}")
    pending = left_half_done(obs, root, "in the sweep")
    obs.check(not any(k.startswith(("delete", "rerun")) for k in pending) and "scan" in pending,
              "the kill did not land inside the sweep")
    run = synthex("run", "--project", str(root), cwd=root)
    obs.note(f"next `synthex run`: exit {run.code}, {quote(run.message, 120)}")
    obs.check(run.code == 0 and "finishing the interrupted purge" in run.err, "the run did not finish the purge")
    check_finished(obs, root)
    return obs.outcome()


CASES = [
    Case("purge: killed after delete, re-run completes",
         "`synthex purge --match T` killed after both branches' deletes (in the re-run); the same command "
         "finishes it: 0 bytes of T under .synthex, no run left running, status clean",
         case_killed_after_delete),
    Case("purge: killed during sweep, next run completes",
         "`synthex purge --match T` killed in its sweep; the next `synthex run` finishes it: 0 bytes of T "
         "under .synthex, status clean",
         case_killed_during_sweep),
]
