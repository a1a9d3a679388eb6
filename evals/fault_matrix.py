"""Fault-injection matrix (issue 9: safe under concurrency, faults and bad input).

Runs every case the way a new user meets it: `python -m synthex.surfaces.cli ...` subprocesses in a fresh temp
dir, offline (no OPENAI_* in the environment, so the offline embedder and LLM stand-in are used), then
checks exit code, message text and what the store holds. Prints one markdown table (case, expected,
observed, held) and exits 1 if any case did not hold.

    python -m evals.fault_matrix [--out FILE.md] [--only SUBSTRING] [--keep]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from synthex.core.demo.generate import generate
from synthex.core.project import render_template

PIPELINE_NAME = "fault-matrix"
SUBPROCESS_TIMEOUT = 300.0
# Variables that would switch the subprocesses away from the offline defaults or point them at
# another Dagster home (the same list tests/conftest.py clears).
SCRUBBED_VARS = ("SYNTHEX_MODEL", "SYNTHEX_DAGSTER_HOME", "SYNTHEX_EMBEDDER", "SYNTHEX_EMBEDDING_MODEL",
                 "SYNTHEX_EMBEDDING_DIM", "FAULT_MATRIX_MARKER")
# The slow summary prompt makes a run last long enough for a second run (or a SIGKILL) to land inside
# it. It touches $FAULT_MATRIX_MARKER when it is first called, so the crash case can kill at a known
# moment; every project that is compared with the reference uses this same text (the prompt's source
# is part of each record id).
SLOW_SUMMARY = '''
def summarize(record):
    import os
    import time

    marker = os.environ.get("FAULT_MATRIX_MARKER")
    if marker:
        open(marker, "a").close()
    time.sleep(0.3)
    return "Summarize this conversation.\\n\\n" + record.content
'''
FAST_SUMMARY = '''
def summarize(record):
    return "Summarize this conversation.\\n\\n" + record.content
'''
RAISING_SUMMARY = '''
def summarize(record):
    raise ValueError("boom")
'''
PROGRESS_LINE = re.compile(r"^\[\d+/\d+\] ")
TEMP_PREFIX = "synthex-fault-matrix-"
# Messages name files under the matrix's temp dir; shown as $TMP/... so the table stays readable.
TEMP_PATH = re.compile(re.escape(os.path.join(tempfile.gettempdir(), TEMP_PREFIX)) + r"[^/\s]+")


# -- running the CLI --------------------------------------------------------------------------------

def offline_env(**extra: str) -> dict[str, str]:
    """The caller's environment without an LLM endpoint or key, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_") and k not in SCRUBBED_VARS}
    return env | extra


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        """What stderr says beyond the banner and progress bars: the lines a user reads as the message."""
        return [line for line in self.err.splitlines()
                if line.strip() and not PROGRESS_LINE.match(line) and not line.startswith("Running pipeline ")]

    @property
    def message(self) -> str:
        if "Traceback" in self.err:  # the exception, not the top of the stack, is what tells what broke
            return "Traceback ... " + self.err.strip().splitlines()[-1]
        return " / ".join(self.lines) or "(no message)"

    def one_line(self) -> bool:
        return len(self.lines) == 1 and "Traceback" not in self.err


def cli_args(*args: str) -> list[str]:
    return [sys.executable, "-m", "synthex.surfaces.cli", *args]


def synthex(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Result:
    """One CLI command, waited for."""
    try:
        proc = subprocess.run(cli_args(*args), cwd=cwd, capture_output=True, text=True,
                              env=env or offline_env(), timeout=SUBPROCESS_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        return Result(-1, str(exc.stdout or ""), f"timed out after {SUBPROCESS_TIMEOUT:.0f}s")
    return Result(proc.returncode, proc.stdout, proc.stderr)


def start(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """One CLI command in the background (for the concurrency and crash cases)."""
    return subprocess.Popen(cli_args(*args), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env or offline_env())


def finish(proc: subprocess.Popen[str]) -> Result:
    try:
        out, err = proc.communicate(timeout=SUBPROCESS_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        err += f"\ntimed out after {SUBPROCESS_TIMEOUT:.0f}s"
    return Result(proc.returncode, out, err)


def quote(text: str, limit: int = 160) -> str:
    """A message as the table shows it: temp paths as $TMP, quoted, clipped to ``limit`` characters."""
    text = TEMP_PATH.sub("$TMP", text)
    return "\"" + (text if len(text) <= limit else text[: limit - 1] + "…") + "\""


# -- reading a project's store (what an uninterrupted run is compared with) --------------------------

Snapshot = dict[str, list[tuple[str, str]]]


def snapshot(root: Path, branch: str = "main") -> Snapshot:
    """step -> sorted (id, content) of the branch's records."""
    from synthex.core.project import load_pipeline

    pipe: Any = load_pipeline(root)
    try:
        return {step: sorted((r.id, r.content) for r in pipe.records(step, branch)) for step in pipe.steps}
    finally:
        pipe.close()


def duplicate_ids(root: Path) -> list[str]:
    """Ids stored in more than one row (any branch): what two writers of one branch could leave."""
    from synthex.core.project import load_pipeline

    pipe: Any = load_pipeline(root)
    try:
        rows = pipe.store().records.scan(["id"])
    finally:
        pipe.close()
    return sorted(i for i, n in Counter(r["id"] for r in rows).items() if n > 1)


def counts(snap: Snapshot) -> str:
    return ",".join(f"{step}={len(rows)}" for step, rows in snap.items())


def has_store(root: Path) -> bool:
    return (root / ".synthex" / "lancedb" / "records.lance").exists()


# -- the observation of one case ------------------------------------------------------------------

class Observed:
    """Notes what a case saw; a failed check is noted as such and makes the case not hold."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.failed: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)

    def check(self, ok: bool, failure: str) -> bool:
        if not ok:
            self.failed.append(failure)
        return ok

    def outcome(self) -> tuple[str, bool]:
        text = "; ".join(self.notes)
        if self.failed:
            text += (" — " if text else "") + "NOT HELD: " + "; ".join(self.failed)
        return text, not self.failed


class Workbench:
    """The temp dir of one matrix run: fresh exports and projects per case, and (computed once, on
    first use) the store of an uninterrupted run of the slow pipeline that concurrency and crash cases
    are compared with."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.export = self.write_export("shared")
        self._reference: Snapshot | None = None

    def write_export(self, name: str, data: Any = None) -> Path:
        """A ChatGPT export (12 conversations over 3 months unless ``data`` is given)."""
        path = self.root / "exports" / name / "conversations.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(generate(conversations=12, months=3, seed=3) if data is None else data))
        return path

    def project(self, name: str, export: Path | None = None, summary: str = FAST_SUMMARY, fmt: str = "chatgpt-export",
                extra: str = "") -> Path:
        """A project folder with the default pipeline (as `synthex init` writes it) and ``summary`` as
        the summaries prompt; ``extra`` is appended (e.g. a hooked output)."""
        root = self.root / "projects" / name
        root.mkdir(parents=True)
        text = render_template(PIPELINE_NAME, [("chatgpt", str(export or self.export), fmt)], agent="tester",
                               summarize="summarize", prelude=summary)
        (root / "pipeline.py").write_text(text + extra)
        return root

    def reference(self) -> Snapshot:
        if self._reference is None:
            root = self.project("reference", summary=SLOW_SUMMARY)
            done = synthex("run", "--project", str(root), cwd=self.root)
            if done.code != 0:
                raise RuntimeError(f"the uninterrupted reference run failed: {done.message}")
            self._reference = snapshot(root)
        return self._reference


@dataclass
class Case:
    name: str
    expected: str
    run: Callable[[Workbench], tuple[str, bool]]  # -> (observed, held)


# -- 1-3: concurrency -----------------------------------------------------------------------------

def same_branch(wb: Workbench, gap: float) -> tuple[str, bool]:
    obs = Observed()
    expected = wb.reference()
    root = wb.project(f"same-branch-{gap}", summary=SLOW_SUMMARY)
    first = start("run", "--project", str(root), cwd=wb.root)
    time.sleep(gap)
    second = start("run", "--project", str(root), cwd=wb.root)
    r2, r1 = finish(second), finish(first)
    obs.note(f"exit codes {r1.code}, {r2.code}")
    if obs.check(sorted([r1.code, r2.code]) == [0, 1], "expected one run to exit 0 and the other 1"):
        refused = r2 if r2.code == 1 else r1
        obs.note(f"refused: {quote(refused.message, 160)}")
        obs.check(refused.one_line(), "the refusal is not one line (or has a traceback)")
        obs.check("is being written by run" in refused.message and "--wait" in refused.message,
                  "the refusal does not say 'is being written by run' and '--wait'")
    store_matches_reference(obs, root, expected)
    return obs.outcome()


def store_matches_reference(obs: Observed, root: Path, expected: Snapshot) -> None:
    got = snapshot(root)
    dups = duplicate_ids(root)
    obs.note(f"store {counts(got)}, duplicate ids {len(dups)}")
    obs.check(got == expected, "the store differs from an uninterrupted run (ids or contents)")
    obs.check(not dups, f"duplicate ids {dups[:3]}")
    plan = synthex("plan", "--project", str(root), cwd=root)
    if obs.check(plan.code == 0 and "Everything is up to date." in plan.out,
                 f"`synthex plan` still has work: {quote(plan.out.strip(), 120)}"):
        obs.note("plan: up to date")


def case_same_branch_close(wb: Workbench) -> tuple[str, bool]:
    return same_branch(wb, 0.1)


def case_same_branch_apart(wb: Workbench) -> tuple[str, bool]:
    return same_branch(wb, 2.0)


def case_wait(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    expected = wb.reference()
    root = wb.project("wait", summary=SLOW_SUMMARY)
    first = start("run", "--project", str(root), cwd=wb.root)
    time.sleep(2.0)
    second = start("run", "--wait", "--project", str(root), cwd=wb.root)
    r2, r1 = finish(second), finish(first)
    obs.note(f"exit codes {r1.code}, {r2.code}; second says {quote(r2.message, 100)} / "
             f"{quote(r2.out.strip(), 60)}")
    obs.check((r1.code, r2.code) == (0, 0), "both runs should exit 0")
    obs.check("waiting: branch 'main' is being written by run" in r2.err, "the second run did not say it waits")
    obs.check("everything up to date" in r2.out, "the second run did not find everything up to date")
    store_matches_reference(obs, root, expected)
    return obs.outcome()


def case_two_branches(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    expected = wb.reference()
    root = wb.project("two-branches", summary=SLOW_SUMMARY)
    # The branch is made the way a user makes one (`synthex branch create`, then an override in its
    # file). It overrides the source (same export, format "auto"), so it owns every step and does the
    # whole slow run itself, at the same time as main, instead of reading main's half-written records.
    created = synthex("branch", "create", "experiment", "--project", str(root), cwd=root)
    branch_file = root / "branches" / "experiment.py"
    if obs.check(created.code == 0 and branch_file.exists(), f"`synthex branch create` failed: {quote(created.message)}"):
        branch_file.write_text(branch_file.read_text() + f"    pipeline.source('chatgpt', file={str(wb.export)!r}, "
                                                          "format='auto')\n")
    first = start("run", "--project", str(root), cwd=wb.root)
    time.sleep(2.0)
    other = start("run", "--branch", "experiment", "--project", str(root), cwd=wb.root)
    r2, r1 = finish(other), finish(first)
    obs.note(f"exit codes main {r1.code}, experiment {r2.code}")
    obs.check((r1.code, r2.code) == (0, 0),
              f"both should exit 0 ({quote(r1.message, 80)} / {quote(r2.message, 80)})")
    main, experiment = snapshot(root), snapshot(root, "experiment")
    obs.note(f"main {counts(main)}; experiment {counts(experiment)}")
    obs.check(main == expected, "branch main differs from an uninterrupted run")
    obs.check({s: len(r) for s, r in experiment.items()} == {s: len(r) for s, r in expected.items()},
              "branch experiment does not hold a full set of records")
    obs.check(not duplicate_ids(root), "duplicate ids")
    plan = synthex("plan", "--branch", "experiment", "--project", str(root), cwd=root)
    obs.check("Everything is up to date." in plan.out, "`synthex plan --branch experiment` still has work")
    return obs.outcome()


# -- 4: SIGKILL mid-run --------------------------------------------------------------------------

def case_sigkill(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    expected = wb.reference()
    root = wb.project("sigkill", summary=SLOW_SUMMARY)
    marker = wb.root / "sigkill.marker"
    proc = start("run", "--project", str(root), cwd=wb.root, env=offline_env(FAULT_MATRIX_MARKER=str(marker)))
    deadline = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    # The first summary prompt ran inside the Dagster run: 1 s later ~3 of 12 summaries are computed
    # and chatgpt/transcripts are written; the kill lands mid-step.
    time.sleep(1.0)
    was_running = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    obs.note(f"killed while running: {was_running}, returncode {proc.returncode}")
    obs.check(was_running and proc.returncode == -signal.SIGKILL, "the run was not killed by SIGKILL mid-run")
    again = synthex("run", "--project", str(root), cwd=wb.root)
    obs.note(f"re-run exit {again.code}")
    obs.check(again.code == 0, f"the re-run failed: {quote(again.message, 120)}")
    store_matches_reference(obs, root, expected)
    runs = synthex("runs", "--json", "--project", str(root), cwd=root)
    listed = json.loads(runs.out) if runs.code == 0 else []
    statuses = [(r["status"], (r.get("error") or "")[:40]) for r in listed]
    obs.note(f"`synthex runs`: {statuses}")
    obs.check(any(s == "failed" and e.startswith("killed") for s, e in statuses),
              "`synthex runs` does not show the killed run as failed")
    obs.check(all(s != "running" for s, _ in statuses), "a run is still shown as running")
    return obs.outcome()


# -- 5: deletions are explicit -------------------------------------------------------------------

def case_emptied_export(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    export = wb.write_export("emptied")
    root = wb.project("emptied", export)
    first = synthex("run", "--project", str(root), cwd=root)
    obs.check(first.code == 0, f"the first run failed: {quote(first.message, 120)}")
    before = snapshot(root)
    export.write_text("[]")
    refused = synthex("run", "--project", str(root), cwd=root)
    obs.note(f"run on [] exits {refused.code}: {quote(refused.message, 140)}")
    obs.check(refused.code != 0 and refused.one_line(), "not refused with one line")
    obs.check(refused.message.startswith("error: refusing to delete memory"), "no 'refusing to delete memory'")
    obs.check(snapshot(root) == before, "records were deleted")
    plan = synthex("plan", "--project", str(root), cwd=root)
    obs.note(f"plan: {quote(plan.out.splitlines()[0] if plan.out else plan.message, 90)}")
    obs.check(plan.out.startswith("deletions: chatgpt:"), "`synthex plan` does not list the deletions first")
    allowed = synthex("run", "--allow-deletions", "--project", str(root), cwd=root)
    after = snapshot(root)
    obs.note(f"--allow-deletions exits {allowed.code}, store {counts(after)}")
    obs.check(allowed.code == 0 and all(not rows for rows in after.values()), "--allow-deletions did not proceed")
    return obs.outcome()


def case_shrunk_export(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    export = wb.write_export("shrunk")
    conversations = json.loads(export.read_text())
    root = wb.project("shrunk", export)
    first = synthex("run", "--project", str(root), cwd=root)
    obs.check(first.code == 0, f"the first run failed: {quote(first.message, 120)}")
    export.write_text(json.dumps(conversations[:11]))  # 1 of 12 gone: 8 %
    small = synthex("run", "--project", str(root), cwd=root)
    kept = len(snapshot(root)["chatgpt"])
    obs.note(f"12->11 (8%) exits {small.code}, chatgpt={kept}")
    obs.check(small.code == 0 and kept == 11, "a shrink below 20 % did not proceed")
    export.write_text(json.dumps(conversations[:6]))  # 5 of 11 gone: 45 %
    large = synthex("run", "--project", str(root), cwd=root)
    kept = len(snapshot(root)["chatgpt"])
    obs.note(f"11->6 (45%) exits {large.code}: {quote(large.message, 120)}, chatgpt={kept}")
    obs.check(large.code == 1 and large.one_line() and "refusing to delete memory" in large.message
              and "--allow-deletions" in large.message, "a shrink above 20 % was not refused in one line")
    obs.check(kept == 11, "records were deleted by the refused run")
    return obs.outcome()


# -- 6: bad input --------------------------------------------------------------------------------

def bad_input_case(name: str, expected_detail: str, make: Callable[[Path], tuple[Path, str]]) -> Case:
    """``make(dir) -> (file the source names, format)``: the run must exit 2 with one line naming the
    file, without a traceback, and write nothing."""

    def run(wb: Workbench) -> tuple[str, bool]:
        obs = Observed()
        folder = wb.root / "bad" / name.replace(" ", "-")
        folder.mkdir(parents=True)
        path, fmt = make(folder)
        root = wb.project("bad-" + folder.name, path, fmt=fmt)
        result = synthex("run", "--project", str(root), cwd=root)
        obs.note(f"exit {result.code}: {quote(result.message, 200)}")
        obs.check(result.code == 2, "exit code is not 2")
        obs.check(result.one_line(), "not exactly one line" + (" (Traceback)" if "Traceback" in result.err else ""))
        obs.check(str(path) in result.message, "the line does not name the file")
        written = has_store(root) and any(snapshot(root).values())
        obs.check(not written, "records were written")
        return obs.outcome()

    return Case(f"bad input: {name}", f"exit 2, one line naming the file ({expected_detail}), no traceback, "
                                      f"nothing written", run)


def export_data() -> list[dict[str, Any]]:
    return generate(conversations=4, months=1, seed=5)


def active_node(conv: dict[str, Any]) -> str:
    """The id of the first user message on the conversation's current path (the importer reads it)."""
    node = conv["current_node"]
    found = node
    while node is not None:
        message = conv["mapping"][node].get("message")
        if message and message["author"]["role"] == "user":
            found = node
        node = conv["mapping"][node]["parent"]
    return found


def write_json_file(folder: Path, data: Any, name: str = "conversations.json") -> tuple[Path, str]:
    path = folder / name
    path.write_text(json.dumps(data))
    return path, "chatgpt-export"


def make_truncated(folder: Path) -> tuple[Path, str]:
    path = folder / "conversations.json"
    text = json.dumps(export_data())
    path.write_text(text[: len(text) * 3 // 5])
    return path, "chatgpt-export"


def make_object(folder: Path) -> tuple[Path, str]:
    return write_json_file(folder, {"conversations": export_data()})


def make_empty(folder: Path) -> tuple[Path, str]:
    path = folder / "conversations.json"
    path.write_bytes(b"")
    return path, "chatgpt-export"


def make_missing_mapping(folder: Path) -> tuple[Path, str]:
    data = export_data()
    del data[1]["mapping"]
    return write_json_file(folder, data)


def make_string_node(folder: Path) -> tuple[Path, str]:
    data = export_data()
    data[1]["mapping"][active_node(data[1])] = "not a node"
    return write_json_file(folder, data)


def make_string_content(folder: Path) -> tuple[Path, str]:
    data = export_data()
    data[1]["mapping"][active_node(data[1])]["message"]["content"] = "plain text instead of {parts}"
    return write_json_file(folder, data)


def make_huge_time(folder: Path) -> tuple[Path, str]:
    data = export_data()
    conv = data[1]
    conv["create_time"] = conv["update_time"] = 1e20
    for node in conv["mapping"].values():
        if node.get("message"):
            node["message"]["create_time"] = 1e20
    return write_json_file(folder, data)


def make_non_utf8_jsonl(folder: Path) -> tuple[Path, str]:
    path = folder / "notes.jsonl"
    path.write_bytes(b'{"id": "a", "content": "fine"}\n{"id": "b", "content": "caf\xe9 au lait"}\n')
    return path, "jsonl"


def make_binary(folder: Path) -> tuple[Path, str]:
    path = folder / "conversations.json"
    path.write_bytes(bytes(range(256)) * 8)
    return path, "chatgpt-export"


def make_duplicate_id(folder: Path) -> tuple[Path, str]:
    data = export_data()
    data[2]["conversation_id"] = data[2]["id"] = data[0]["conversation_id"]
    return write_json_file(folder, data)


def make_wrong_format(folder: Path) -> tuple[Path, str]:
    path, _ = write_json_file(folder, export_data())
    return path, "chatgpt"  # a plausible typo of "chatgpt-export"


def make_missing_file(folder: Path) -> tuple[Path, str]:
    return folder / "no-such-export.json", "chatgpt-export"


# -- 7-8: a failing step, an unreachable LLM -----------------------------------------------------

def case_prompt_raises(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    root = wb.project("prompt-raises", summary=RAISING_SUMMARY)
    result = synthex("run", "--project", str(root), cwd=root)
    obs.note(f"exit {result.code}: {quote(result.message, 220)}")
    obs.check(result.code == 1, "exit code is not 1")
    obs.check(result.one_line(), "not exactly one line")
    obs.check("STEP_FAILURE" not in result.err, "Dagster's STEP_FAILURE log is printed")
    obs.check(result.message.startswith("error: step 'summaries'") and "boom" in result.message,
              "the line does not name the step and the error")
    named = re.search(r"record ([0-9a-f-]{36})", result.message)
    transcripts = {rid for rid, _ in snapshot(root)["transcripts"]}
    obs.check(bool(named) and named is not None and named.group(1) in transcripts,
              "the line does not name the input record (a stored transcript)")
    obs.check(not snapshot(root)["summaries"], "summaries were written")
    runs = synthex("runs", "--json", "--project", str(root), cwd=root)
    newest = json.loads(runs.out)[0] if runs.code == 0 and runs.out.strip().startswith("[") else {}
    obs.note(f"`synthex runs`: {newest.get('status')}")
    obs.check(newest.get("status") == "failed", "`synthex runs` does not show the run failed")
    return obs.outcome()


def case_llm_unreachable(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    key = "sk-test-SECRET123456789"
    root = wb.project("llm-unreachable")
    env = offline_env(OPENAI_BASE_URL="http://127.0.0.1:9", OPENAI_API_KEY=key)
    result = synthex("run", "--project", str(root), cwd=root, env=env)
    obs.note(f"exit {result.code}: {quote(result.message, 200)}")
    obs.check(result.code == 1, "exit code is not 1")
    obs.check(result.one_line(), "not exactly one line")
    obs.check("summaries" in result.message, "the line does not name the step")
    leaked = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
    files = sum(1 for p in root.rglob("*") if p.is_file())
    obs.note(f"key found in {len(leaked)} of {files} files under the project")
    obs.check(not leaked, f"the key is stored in {leaked[:3]}")
    obs.check(key not in result.out + result.err, "the key is printed")
    return obs.outcome()


# -- 9: ids from data never become paths ---------------------------------------------------------

def locomo_sample(sample_id: str, seed: int) -> dict[str, Any]:
    """One small LoCoMo sample in the official shape (3 sessions of 4 turns, one question each)."""
    topics = ["adopted a puppy named Rex", "started pottery classes", "ran the Lisbon half marathon",
              "moved to a flat in Porto", "learned to bake sourdough", "visited Kyoto in spring"]
    conv: dict[str, Any] = {"speaker_a": "Ann", "speaker_b": "Bob"}
    qa = []
    for s in range(1, 4):
        conv[f"session_{s}_date_time"] = f"1:{10 + s} pm on {s + 4} May, 2023"
        turns = []
        for t in range(1, 5):
            speaker = "Ann" if t % 2 else "Bob"
            topic = topics[(seed + s + t) % len(topics)]
            turns.append({"speaker": speaker, "dia_id": f"D{s}:{t}", "text": f"{speaker}: I {topic} ({seed}{s}{t})."})
        conv[f"session_{s}"] = turns
        qa.append({"question": f"Who {topics[(seed + s + 1) % len(topics)]}?", "answer": "Ann",
                   "evidence": [f"D{s}:1"], "category": 4})
    return {"sample_id": sample_id, "conversation": conv, "qa": qa}


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def case_eval_sample_ids(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    root = wb.project("eval-paths")
    absolute = wb.root / "absolute-escape"
    data = wb.root / "eval-data" / "locomo.json"
    data.parent.mkdir()
    # A distinctive last segment: a plain "x" could already exist in /tmp and fool the check.
    escape = "fault-matrix-escaped-x"
    data.write_text(json.dumps([locomo_sample(f"../../../../{escape}", 1), locomo_sample(str(absolute), 2)]))
    before = files_under(wb.root)
    result = synthex("eval", "locomo", "--data", str(data), "--compare", "raw-bm25", "--json", "--project",
                     str(root), cwd=root)
    evals_dir = root / ".synthex" / "evals"
    work = evals_dir / "work" / "locomo" / "raw"
    outside = sorted(str(p.relative_to(wb.root)) for p in files_under(wb.root) - before
                     if evals_dir not in p.parents and p != evals_dir and not is_parent_of(p, evals_dir))
    escaped = [str(a / escape) for a in work.parents if (a / escape).exists()]
    made = sorted(p.name for p in work.iterdir()) if work.exists() else []
    n_questions = json.loads(result.out).get("n_questions") if result.code == 0 else None
    obs.note(f"exit {result.code}, {n_questions} questions; workspaces {made}; new paths outside the eval dir: "
             f"{outside[:4]}")
    obs.check(result.code == 0, f"the eval failed: {quote(result.message, 160)}")
    obs.check(not outside, "paths were created outside the eval work dir")
    obs.check(not escaped and not absolute.exists(), f"an id became a path: {escaped or absolute}")
    obs.check(len(made) == 2 and all("/" not in m and m not in (".", "..") for m in made),
              "expected two workspaces, each one folder inside the work dir")
    return obs.outcome()


def is_parent_of(path: Path, child: Path) -> bool:
    """``path`` is a folder on the way to ``child`` (created when the eval dir was made)."""
    return path in child.parents


# -- 10: on_update hooks -------------------------------------------------------------------------

class Receiver:
    """A local webhook endpoint: answers 500 while ``down``, else 204; counts what it got."""

    def __init__(self) -> None:
        self.down = True
        self.refused = 0
        self.accepted: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep the matrix's stderr to one line per case
                pass

            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if receiver.down:
                    receiver.refused += 1
                    self.send_response(500)
                else:
                    receiver.accepted.append(body)
                    self.send_response(204)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def hooked_output(url: str) -> str:
    # A second projection of world-model, hooked (the template's "context" output stays as it is).
    return f'pipeline.output("hooked", from_="world-model", surface="projection", on_update={url!r})\n'


def case_hook_outbox(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    receiver = Receiver()
    try:
        export = wb.write_export("hooked")
        root = wb.project("hooked", export, extra=hooked_output(receiver.url))
        failed = synthex("run", "--project", str(root), cwd=root)
        obs.note(f"endpoint 500: exit {failed.code}, {receiver.refused} refused: {quote(failed.message, 140)}")
        obs.check(failed.code == 1 and failed.one_line() and "hooked" in failed.message and "hook" in failed.message,
                  "the run did not exit 1 with one line naming the hook")
        obs.check(bool(snapshot(root)["world-model"]), "the records were not written")
        receiver.down = False
        fixed = synthex("run", "--project", str(root), cwd=root)
        again = synthex("run", "--project", str(root), cwd=root)
        obs.note(f"endpoint fixed: next runs exit {fixed.code}, {again.code} ({quote(fixed.out.strip(), 50)}); "
                 f"delivered {len(receiver.accepted)}")
        obs.check(fixed.code == 0 and again.code == 0, f"the runs after the fix failed: {quote(fixed.message, 100)}")
        obs.check("everything up to date" in fixed.out, "the run after the fix had other work to do")
        obs.check(len(receiver.accepted) == 1, "the pending delivery was not delivered exactly once by the next run")
        latest = snapshot(root)["world-model"]
        delivered = [p.get("record", {}).get("id") for p in receiver.accepted]
        obs.check(bool(delivered) and delivered[-1] in {rid for rid, _ in latest},
                  "the delivery does not carry a current world-model record")
        # A new conversation changes the world model; the endpoint is down again, so it stays pending.
        receiver.down = True
        conversations = json.loads(export.read_text())
        extra = copy.deepcopy(conversations[-1])
        extra["id"] = extra["conversation_id"] = "00000000-0000-4000-8000-00000000f417"
        export.write_text(json.dumps([*conversations, extra]))
        pending_run = synthex("run", "--project", str(root), cwd=root)
        listed = synthex("hooks", "--project", str(root), cwd=root)
        obs.note(f"down again: run exits {pending_run.code}; `synthex hooks` exits {listed.code}: "
                 f"{quote((listed.out.strip() or listed.message), 100)}")
        obs.check(pending_run.code == 1, "the run with an undelivered hook did not exit 1")
        obs.check(listed.code == 0 and "hooked@main" in listed.out,
                  "`synthex hooks` does not list the pending delivery")
        receiver.down = False
        retried = synthex("hooks", "retry", "--project", str(root), cwd=root)
        after = synthex("hooks", "--project", str(root), cwd=root)
        obs.note(f"`hooks retry` exits {retried.code}: {quote((retried.out.strip() or retried.message), 80)}; "
                 f"delivered {len(receiver.accepted)}; then {quote((after.out.strip() or after.message), 60)}")
        obs.check(retried.code == 0 and len(receiver.accepted) == 2, "`synthex hooks retry` did not deliver it once")
        obs.check(after.code == 0 and "hooked@main" not in after.out, "the delivery is still listed as pending")
    finally:
        receiver.close()
    return obs.outcome()


def case_hook_schemes(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    for url in ("file:///etc/passwd", "ftp://example.com/hook"):
        root = wb.project("scheme-" + url.split(":")[0], extra=hooked_output(url))
        result = synthex("run", "--project", str(root), cwd=root)
        obs.note(f"{url}: exit {result.code}: {quote(result.message, 150)}")
        obs.check(result.code == 2 and result.one_line() and "on_update" in result.message,
                  f"{url} not refused in one line (exit 2)")
        obs.check(not has_store(root), f"{url}: something was written")
    return obs.outcome()


# -- 11: previews in the Dagster UI --------------------------------------------------------------

CRAFTED = "Look ![x](http://example.com/x.png) and <script>alert(1)</script> | [a](b)"


def case_preview_escaping(wb: Workbench) -> tuple[str, bool]:
    """End to end: a run writes the materialization metadata the UI renders; read it from Dagster."""
    from dagster import AssetKey

    from synthex.core.project import load_pipeline
    from synthex.core.record import Record
    from synthex_assets.preview import preview_markdown

    obs = Observed()
    data = generate(conversations=2, months=1, seed=11)
    data[0]["title"] = CRAFTED
    node = active_node(data[0])
    data[0]["mapping"][node]["message"]["content"]["parts"] = [CRAFTED]
    root = wb.project("preview", wb.write_export("preview", data))
    result = synthex("run", "--project", str(root), cwd=root)
    obs.check(result.code == 0, f"the run failed: {quote(result.message, 120)}")
    pipe: Any = load_pipeline(root)
    try:
        events = pipe.app.instance.fetch_materializations(AssetKey("chatgpt"), limit=50).records
        previews = [e.asset_materialization.metadata["preview"].value for e in events
                    if e.asset_materialization and "preview" in e.asset_materialization.metadata]
    finally:
        pipe.close()
    crafted = [p for p in previews if "example" in p]
    obs.note(f"{len(previews)} chatgpt previews in Dagster, {len(crafted)} with the crafted record")
    if obs.check(bool(crafted), "no preview shows the crafted conversation"):
        row = next(line for line in crafted[0].splitlines() if "example" in line)
        obs.note(f"row: {quote(row, 150)}")
        obs.check("![x](" not in row and "](" not in row and "<script" not in row,
                  "the preview holds a live image, link or HTML tag")
        obs.check("\\!\\[x\\]" in row and "&lt;script" in row, "the crafted text is not shown escaped")
    direct = preview_markdown([Record(id="0123456789", step="chatgpt", content=CRAFTED)]).splitlines()[2]
    obs.check("<script" not in direct and "![x](" not in direct and direct.count(" | ") == 1,
              "preview_markdown does not escape")
    return obs.outcome()


# -- 12-14: ids, search arguments, init ----------------------------------------------------------

def case_id_prefixes(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    home = wb.root / "users"
    home.mkdir(exist_ok=True)
    init = synthex("init", "prefixes", "--from", str(wb.export), cwd=home)
    root = home / "prefixes"
    run = synthex("run", cwd=root)
    obs.check(init.code == 0 and run.code == 0,
              f"init/run failed: {quote(init.message, 80)} {quote(run.message, 80)}")
    found = synthex("search", "Rust borrow checker", cwd=root)
    rows = [line.split() for line in found.out.splitlines() if re.match(r"^\s*\d+\.", line)]
    short = rows[0][3] if rows and len(rows[0]) > 3 else ""
    got = synthex("get", short, cwd=root)
    tree = synthex("lineage", short, cwd=root)
    obs.note(f"search printed {short!r}; get exits {got.code}, lineage exits {tree.code}")
    obs.check(len(short) == 8, "search did not print an 8-character id")
    obs.check(got.code == 0 and got.out.startswith(short), "`synthex get <8 chars>` did not find the record")
    first_line = tree.out.splitlines()[0] if tree.out else ""
    obs.check(tree.code == 0 and short in first_line, "`synthex lineage <8 chars>` did not find the record")
    ids = [rid for rows_ in snapshot(root).values() for rid, _ in rows_]
    shared = Counter(i[0] for i in ids).most_common(1)[0][0]  # a 1-character prefix several ids share
    unknown = next(p for p in (f"{n:08x}" for n in range(1 << 16)) if not any(i.startswith(p) for i in ids))
    # An ambiguous prefix is a bad argument (2); an id nobody has is a failed lookup (1, docs/architecture.md).
    for label, prefix, code in (("ambiguous", shared, 2), ("unknown", unknown, 1)):
        for command in ("get", "lineage"):
            result = synthex(command, prefix, cwd=root)
            obs.note(f"{command} {label} {prefix!r}: exit {result.code} {quote(result.message, 90)}")
            obs.check(result.code == code and result.one_line(),
                      f"{command} with an {label} prefix: not exit {code} + one line")
    return obs.outcome()


def case_search_arguments(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    root = wb.project("search-args")
    for args in (("",), ("rust", "-k", "0"), ("rust", "-k", "-5")):
        result = synthex("search", *args, "--project", str(root), cwd=root)
        obs.note(f"search {' '.join(repr(a) for a in args)}: exit {result.code}, {len(result.lines)} line(s) "
                 f"{quote(result.message, 110)}")
        obs.check(result.code == 2 and result.one_line(), f"search {args!r}: not exit 2 with one line")
    obs.check(not (root / ".synthex").exists(), "a refused search touched the data dir")
    return obs.outcome()


def case_failed_init(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    home = wb.root / "init-home"
    home.mkdir()
    (home / "taken").write_text("a file, not a project\n")
    not_export = home / "notes.json"
    not_export.write_text('{"not": "an export"}')
    attempts = [("a file is in the way", ["taken", "--from", str(wb.export)]),
                ("under a file", ["taken/mem", "--from", str(wb.export)]),
                ("empty name", ["", "--from", str(wb.export)]),
                ("not an export", ["fresh", "--from", str(not_export)])]
    for label, args in attempts:
        before = files_under(home)
        result = synthex("init", *args, cwd=home)
        created = sorted(str(p.relative_to(home)) for p in files_under(home) - before)
        obs.note(f"{label}: exit {result.code}, left {created}: {quote(result.message, 80)}")
        obs.check(result.code == 2 and result.one_line(), f"{label}: not exit 2 with one line")
        obs.check(not created, f"{label}: left {created}")
    obs.check((home / "taken").read_text() == "a file, not a project\n", "the file in the way was changed")
    return obs.outcome()


# -- 15: doctor ----------------------------------------------------------------------------------

def case_doctor(wb: Workbench) -> tuple[str, bool]:
    from synthex.core.project import load_pipeline
    from synthex.core.record import Run

    obs = Observed()
    root = wb.project("doctor")
    first = synthex("run", "--project", str(root), cwd=root)
    obs.check(first.code == 0, f"the first run failed: {quote(first.message, 120)}")
    clean = snapshot(root)
    # Plant what an older version or a crash could leave (as tests/test_doctor.py does): three
    # summaries stored twice, a monthly record whose summary is gone, a run stuck in "running".
    pipe: Any = load_pipeline(root)
    try:
        store = pipe.store()
        monthly = pipe.records("monthly")[0]
        doubled = [r.id for r in pipe.records("summaries") if r.id != monthly.source_ids[0]][:3]
        table = store.records_table()
        table.add(table.search().where("id IN (" + ",".join(f"'{i}'" for i in doubled) + ")").limit(None).to_arrow())
        store.records.delete_ids([monthly.source_ids[0]])
        store.runs.save(Run(id="dead-run", pipeline=pipe.name, branch="main", steps=[], status="running",
                           started_at="2026-01-01T00:00:00.000Z"))
    finally:
        pipe.close()
    found = synthex("doctor", "--json", "--project", str(root), cwd=root)
    # Exit 3: doctor found problems it did not repair (0 would tell a script all is well).
    report = json.loads(found.out) if found.code == 3 else {}
    obs.check(found.code == 3, f"doctor exits {found.code} while it reports problems (3 expected)")
    obs.note(f"doctor: duplicates {len(report.get('duplicate_ids', []))}, dangling "
             f"{len(report.get('dangling_sources', {}))}, stuck {report.get('stuck_runs')}")
    obs.check(report.get("duplicate_ids") == sorted(doubled), "the duplicate ids were not reported")
    obs.check(list(report.get("dangling_sources", {})) == [monthly.id], "the dangling source was not reported")
    obs.check(report.get("stuck_runs") == ["dead-run"], "the stuck run was not reported")
    fixed = synthex("doctor", "--repair", "--json", "--project", str(root), cwd=root)
    healthy = synthex("doctor", "--project", str(root), cwd=root)
    rerun = synthex("run", "--project", str(root), cwd=root)
    runs = synthex("runs", "--json", "--project", str(root), cwd=root)
    dead = [r["status"] for r in json.loads(runs.out) if r["id"] == "dead-run"] if runs.code == 0 else []
    obs.note(f"--repair exits {fixed.code}; then doctor says {healthy.out.strip().splitlines()[-1:]}; "
             f"dead-run {dead}; re-run exits {rerun.code}")
    obs.check(fixed.code == 0 and json.loads(fixed.out).get("repaired") is True, "--repair did not repair")
    obs.check(healthy.out.strip().endswith("healthy"), "doctor after the repair is not healthy")
    obs.check(dead == ["failed"], "the stuck run is not marked failed")
    obs.check(snapshot(root) == clean and not duplicate_ids(root), "the re-run did not restore the clean store")
    return obs.outcome()


# -- the matrix ----------------------------------------------------------------------------------

CASES: list[Case] = [
    Case("concurrency: same branch, 0.1 s apart",
         "one exits 0, the other 1 with one line 'is being written by run ... --wait'; store = uninterrupted run, "
         "no duplicate ids, plan up to date", case_same_branch_close),
    Case("concurrency: same branch, 2 s apart", "as above", case_same_branch_apart),
    Case("concurrency: --wait", "the second run waits, then says everything is up to date; store = uninterrupted run",
         case_wait),
    Case("concurrency: two branches at once",
         "both exit 0; main = uninterrupted run; the other branch complete and up to date; no duplicate ids",
         case_two_branches),
    Case("crash: SIGKILL mid-run, then re-run",
         "killed by the signal (-9) mid-run; re-run exits 0; store = uninterrupted run; `synthex runs` shows it failed",
         case_sigkill),
    Case("deletions: export emptied",
         "refused in one line 'refusing to delete memory', nothing deleted; plan shows 'deletions:'; "
         "--allow-deletions proceeds", case_emptied_export),
    Case("deletions: export shrunk 8 % then 45 %", "8 % proceeds; 45 % refused in one line, nothing deleted",
         case_shrunk_export),
    bad_input_case("truncated JSON", "invalid JSON", make_truncated),
    bad_input_case("object instead of a list", "not a list", make_object),
    bad_input_case("empty file", "empty", make_empty),
    bad_input_case("missing mapping", "missing 'mapping'", make_missing_mapping),
    bad_input_case("mapping node is a string", "bad node", make_string_node),
    bad_input_case("message content is a string", "bad content", make_string_content),
    bad_input_case("create_time 1e20", "bad timestamp", make_huge_time),
    bad_input_case("non-UTF-8 bytes in JSONL", "not UTF-8", make_non_utf8_jsonl),
    bad_input_case("binary file", "not UTF-8 / not JSON", make_binary),
    bad_input_case("duplicate conversation id", "the id", make_duplicate_id),
    bad_input_case("wrong format=", "unknown format", make_wrong_format),
    bad_input_case("missing file", "no such file", make_missing_file),
    Case("step: a prompt that raises",
         "exit 1, one line naming the step and record, no STEP_FAILURE/traceback; `synthex runs` shows failed",
         case_prompt_raises),
    Case("LLM endpoint unreachable",
         "exit 1, one line naming the step (README: errors name the step); the API key appears in no file under the "
         "project (Dagster storage included) nor in the output",
         case_llm_unreachable),
    Case("eval data: sample id '../../../../<x>' / absolute",
         "the eval runs; nothing is created outside its work dir", case_eval_sample_ids),
    Case("hooks: failing webhook, retried",
         "run exits 1 naming the hook; after the fix the next run delivers it exactly once; `synthex hooks` lists "
         "pending, `synthex hooks retry` delivers", case_hook_outbox),
    Case("hooks: file:// and ftp:// URLs", "refused at definition time, exit 2, one line", case_hook_schemes),
    Case("UI preview escaping", "the Dagster materialization preview shows ![x](...) and <script> escaped",
         case_preview_escaping),
    Case("ids by unique prefix",
         "the 8 characters search prints work for get and lineage; ambiguous prefix: exit 2, unknown id: exit 1; one line",
         case_id_prefixes),
    Case("search: '' / -k 0 / -k -5", "refused, exit 2, one line", case_search_arguments),
    Case("init: failed init leaves nothing", "exit 2, one line, no folder or file left behind", case_failed_init),
    Case("doctor: duplicate id, dangling source, stuck run",
         "doctor reports all three and exits 3; --repair fixes them; the next run restores the clean store",
         case_doctor),
]


def all_cases() -> list[Case]:
    """The matrix's own cases, then those of every module of ``evals.faults`` (imported here, not at the
    top, because those modules import this harness)."""
    import importlib
    import pkgutil

    import evals.faults

    cases = list(CASES)
    for info in sorted(pkgutil.iter_modules(evals.faults.__path__), key=lambda m: m.name):
        cases += importlib.import_module(f"evals.faults.{info.name}").CASES
    return cases


def cell(text: str) -> str:
    """Text as one markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def render(rows: list[tuple[Case, str, bool]]) -> str:
    lines = ["| case | expected | observed | held |", "|---|---|---|---|"]
    lines += [f"| {cell(c.name)} | {cell(c.expected)} | {cell(observed)} | {'yes' if held else 'no'} |"
              for c, observed, held in rows]
    held = sum(1 for _, _, h in rows if h)
    return "\n".join(lines) + f"\n\n{len(rows)} cases, {held} held\n"


def run_case(case: Case, wb: Workbench) -> tuple[str, bool]:
    try:
        observed, held = case.run(wb)
    except Exception as exc:  # noqa: BLE001 - a case that crashes is reported as not held, the matrix goes on
        observed, held = f"the case itself crashed: {type(exc).__name__}: {exc}", False
    return observed.replace(str(wb.root), "$TMP"), held  # temp paths would only make the table wider


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="Also write the table as markdown to this file.")
    parser.add_argument("--only", default=None, help="Only the cases whose name contains this substring.")
    parser.add_argument("--keep", action="store_true", help="Keep the temp dir (printed) for inspection.")
    args = parser.parse_args(argv)
    cases = [c for c in all_cases() if args.only is None or args.only.lower() in c.name.lower()]
    if not cases:
        parser.error(f"no case name contains {args.only!r}")
    tmp = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
    started = time.monotonic()
    rows: list[tuple[Case, str, bool]] = []
    try:
        wb = Workbench(tmp)
        for i, case in enumerate(cases, 1):
            print(f"[{i}/{len(cases)}] {case.name} ...", end="", file=sys.stderr, flush=True)
            t0 = time.monotonic()
            observed, held = run_case(case, wb)
            print(f" {'held' if held else 'NOT HELD'} ({time.monotonic() - t0:.1f}s)", file=sys.stderr, flush=True)
            rows.append((case, observed, held))
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    table = render(rows)
    print(table, end="")
    print(f"wall time {time.monotonic() - started:.0f}s", file=sys.stderr)
    if args.out:
        args.out.write_text(table, encoding="utf-8")
    return 0 if all(h for _, _, h in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
