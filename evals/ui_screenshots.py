"""Screenshots of the Dagster UI on the demo, from a real (headless) browser: ``python -m evals.ui_screenshots``.

Makes the demo project in a temporary folder (``synthex init demo --demo``; two steps given a group, owners and
``automation="eager"``; ``synthex run``), re-runs every period once the way a UI backfill does (nothing
changes), starts ``synthex ui`` on a free port, waits
until the code location answers, launches two backfills of every period of ``main`` through the GraphQL
mutation the UI's Materialize dialog sends (an asset backfill, as from the Lineage page, and a job
backfill, as from the job's page) and waits for the daemon to finish them, creates the branch ``exp``
(its partitions served by main, now the newest materializations), and has headless Chromium take
one PNG per view (the asset lineage, a step's partitions, the latest materialization's metadata, the
checks, a model step's overview with its group and owners, a step's automation, a step's partitions
on both branches, the Runs list filtered by branch, the job graph fitted, the asset backfill, the job
backfill's refused run, main's latest in the Partitions tab)
into ``docs/screenshots/`` (``--out``). The server and the browser are stopped at the end, whatever
happened. About 7 minutes on 2 busy cores, most of it the demo's first run.

The job graph: Dagster 1.13's job page fits the graph to the width its pane has *before* the job's
sidebar opens (its SVG viewport fits once, when the layout arrives; a resize only re-renders), so the
graph opens about twice too wide and its last steps are off-screen. A double-click on the background is
the UI's own "fit" (it refits to the pane as it is now); the script does that before the shot.

Needs Chromium (Debian/Ubuntu: ``apt-get install -y chromium``; or set ``CHROMIUM=/path/to/chrome``).
The test suite does not depend on it.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote

from websockets.sync.client import connect

ROOT = Path(__file__).resolve().parents[1]
MAX_PNG_BYTES = 300_000
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


@dataclass(frozen=True)
class View:
    file: str
    path: str  # URL path on the UI server
    what: str
    size: tuple[int, int] = (1440, 900)
    fit_graph: bool = False  # double-click the graph's background first: the UI's own zoom-to-fit


@dataclass(frozen=True)
class Backfills:
    """The two UI backfills of every period of ``main`` and the run the job backfill launched."""
    asset_backfill: str
    job_backfill: str
    job_backfill_run: str


def views(location: str, job: str, backfills: Backfills | None = None, newest: str | None = None) -> list[View]:
    """``newest``: the newest period (``2024-10``), for the views of one partition of main and of the branch."""
    return [
        View("lineage.png", "/asset-groups", "the asset lineage: every step an asset, branch x period"),
        View("partitions.png", "/assets/summaries?view=partitions", "a step's branch x period partitions"),
        View("latest_materialization.png", "/assets/world_model?view=events",
             f"world_model's events after `synthex branch create {BRANCH}`: Dagster's latest materialization is "
             f"of any partition, here {BRANCH}'s (served by main)"),
        *([View("main_latest.png", f"/assets/world_model?view=partitions&partition={quote('main|' + newest)}",
                "main's latest: the Partitions tab, branch main, its newest period selected"),
           View("branch_partitions.png", f"/assets/monthly?view=partitions&partition={quote(BRANCH + '|' + newest)}",
                f"monthly's partitions on both branches: {BRANCH}'s served by main (metadata served_by), "
                f"100 % filled")] if newest else []),
        View("checks.png", "/assets/summaries?view=checks", "the checks a step carries and their results"),
        View("stand_in.png", "/assets/summaries?view=overview",
             "a model step's overview: the offline stand-in named, its group and owners from the pipeline"),
        View("automation.png", "/assets/monthly?view=automation",
             "monthly's declarative automation (automation=\"eager\"): the automation sensor's evaluations"),
        View("runs_by_branch.png", "/runs?q%5B0%5D=tag%3Asynthex%2Fbranch%3Dmain",
             "the Runs list filtered by the synthex/branch tag (main), each run's door in synthex/launched_by"),
        View("job.png", f"/locations/{location}/jobs/{job}", "the pipeline's job graph, fitted (double-click)",
             fit_graph=True),
        *([View("backfill.png", f"/runs/b/{backfills.asset_backfill}",
                "an asset backfill of every period of main: each step's 14 partitions targeted and materialized"),
           View("job_backfill_refused.png", f"/runs/{backfills.job_backfill_run}",
                "a job backfill's range run, refused in one line (Dagster would do its first partition only)")]
          if backfills else []),
    ]


def find_chromium() -> str | None:
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return explicit if Path(explicit).exists() else None
    return next((p for p in (shutil.which(b) for b in BROWSERS) if p), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def synthex(*args: str, cwd: Path) -> None:
    subprocess.run([sys.executable, "-m", "synthex.surfaces.cli", *args], cwd=cwd, check=True)


# Issue 36 item 8 on the demo: two steps given a group, owners and automation (the template has none); named
# prompt functions, so the steps' versions and record ids are the demo's own.
STEP_OPTIONS = {
    'pipeline.transform("summaries", from_="transcripts", prompt=summarize_conversation)':
        'pipeline.transform("summaries", from_="transcripts", prompt=summarize_conversation, group="memory",\n'
        '                   owners=["team:memory", "ana@example.com"])',
    'pipeline.aggregate("monthly", from_="summaries", period="month", prompt=monthly_reflection)':
        'pipeline.aggregate("monthly", from_="summaries", period="month", prompt=monthly_reflection,\n'
        '                   group="memory", owners=["team:memory"], automation="eager")',
}
BRANCH = "exp"


def with_step_options(project: Path) -> None:
    path = project / "pipeline.py"
    text = path.read_text(encoding="utf-8")
    for line, replaced in STEP_OPTIONS.items():
        if line not in text:
            raise RuntimeError(f"{path}: the demo template no longer has {line!r}")
        text = text.replace(line, replaced)
    path.write_text(text, encoding="utf-8")


def make_demo(parent: Path) -> Path:
    """The demo project (two steps with a group, owners and automation) after one run and a UI-style backfill
    of every period that changes nothing."""
    synthex("init", "demo", "--demo", cwd=parent)
    project = parent / "demo"
    with_step_options(project)
    synthex("run", "--project", str(project), cwd=parent)
    rerun_every_period(project)
    return project


def rerun_every_period(project: Path) -> None:
    """What a single-run backfill from the UI does over every period: the location's job, one range."""
    from synthex.core.project import load_pipeline
    from synthex_assets.dagster_internals import partition_range_tags
    from synthex_assets.definitions import build_definitions
    from synthex_assets.launcher import console_config
    from synthex_assets.naming import job_name

    pipe = load_pipeline(project)
    try:
        periods = pipe.app.instance.get_dynamic_partitions("period")
        job = build_definitions(pipe).resolve_job_def(job_name(pipe.name))
        result = job.execute_in_process(instance=pipe.app.instance, run_config=console_config(verbose=False),
                                        tags=partition_range_tags(f"main|{periods[0]}", f"main|{periods[-1]}"))
        assert result.success
    finally:
        pipe.close()


def graphql(url: str, query: str, variables: dict | None = None) -> dict:
    request = urllib.request.Request(url + "/graphql", data=json.dumps({"query": query,
                                                                       "variables": variables or {}}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


LAUNCH_BACKFILL = """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }"""
BACKFILL = """query($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill {
  status runs(limit: 5) { runId } } } }"""
PARTITION_SETS = """query($repository: RepositorySelector!, $job: String!) {
  partitionSetsOrError(repositorySelector: $repository, pipelineName: $job) { ... on PartitionSets {
    results { name partitionsOrError { ... on Partitions { results { name } } } } } } }"""
MAIN_PERIODS = """{ assetNodeOrError(assetKey: {path: ["world_model"]}) { ... on AssetNode {
  partitionKeysByDimension { name partitionKeys } } } }"""
REPOSITORY = "__repository__"  # the one repository of a Definitions code location


def launch_ui_backfills(url: str, location: str, job: str, timeout: float = 600.0) -> Backfills:
    """Every period of ``main``, launched as the UI's Materialize dialog launches it: without a partition
    set (Lineage / Catalog page: an asset backfill) and with the job's (the job's page: a job backfill)."""
    sets = graphql(url, PARTITION_SETS, {"repository": {"repositoryLocationName": location, "repositoryName": REPOSITORY},
                                         "job": job})
    [partition_set] = sets["data"]["partitionSetsOrError"]["results"]
    names = [p["name"] for p in partition_set["partitionsOrError"]["results"] if p["name"].startswith("main|")]
    keys = [n["assetKey"] for n in graphql(url, "{ assetNodes { assetKey { path } } }")["data"]["assetNodes"]]
    params = {"tags": [], "assetSelection": keys, "partitionNames": names, "fromFailure": False}
    job_params = {**params, "selector": {"partitionSetName": partition_set["name"], "repositorySelector": {
        "repositoryLocationName": location, "repositoryName": REPOSITORY}}}
    ids, runs = [], []
    # One after the other (one writer per branch); the job backfill first, so the steps' latest run is the
    # asset backfill's (the job graph shows each step's latest run).
    for backfill in (job_params, params):
        answer = graphql(url, LAUNCH_BACKFILL, {"params": backfill})["data"]["launchPartitionBackfill"]
        if answer["__typename"] != "LaunchBackfillSuccess":
            raise RuntimeError(f"launchPartitionBackfill: {answer}")
        ids.append(answer["backfillId"])
        runs.append(wait_for_backfill(url, ids[-1], timeout))
    return Backfills(asset_backfill=ids[1], job_backfill=ids[0], job_backfill_run=runs[0][0])


def wait_for_backfill(url: str, backfill_id: str, timeout: float) -> list[str]:
    """Until the daemon has finished the backfill; its run ids."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = graphql(url, BACKFILL, {"id": backfill_id})["data"]["partitionBackfillOrError"]
        if found["status"] not in ("REQUESTED", "IN_PROGRESS", "CANCELING", "FAILING"):
            return [r["runId"] for r in found["runs"]]
        time.sleep(2.0)
    raise RuntimeError(f"backfill {backfill_id} did not finish within {timeout:.0f} s")


def wait_until_loaded(url: str, server: subprocess.Popen, timeout: float = 300.0) -> None:
    """Until the webserver answers and the code location has loaded its assets."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"`synthex ui` exited with {server.returncode} before it answered")
        try:
            if graphql(url, "{ assetNodes { id } }").get("data", {}).get("assetNodes"):
                return
        except (OSError, ValueError):
            pass
        time.sleep(1.0)
    raise RuntimeError(f"the UI at {url} did not load the code location within {timeout:.0f} s")


class Browser:
    """Headless Chromium driven over the DevTools protocol (``websockets``, installed with Dagster's
    webserver): the Dagster UI keeps polling, so "page loaded" never comes; each view is given
    ``settle_s`` seconds to render, then captured. A process of our own, stopped by ``close``."""

    def __init__(self, chromium: str, profile: Path) -> None:
        port = free_port()
        self.process = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             "--remote-allow-origins=*", f"--remote-debugging-port={port}", f"--user-data-dir={profile}",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self._connection = connect(self._page_socket(port), max_size=None)
        self.page = self._connection.__enter__()  # left in close()
        self._next_id = 0

    def _page_socket(self, port: int, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as response:
                    pages = [t for t in json.loads(response.read()) if t.get("type") == "page"]
                if pages:
                    return pages[0]["webSocketDebuggerUrl"]
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError("Chromium's DevTools endpoint did not answer")

    def call(self, method: str, **params: object) -> dict:
        self._next_id += 1
        self.page.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:  # events arrive in between; the answer carries our id
            message = json.loads(self.page.recv(timeout=120))
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def shoot(self, url: str, out: Path, size: tuple[int, int], settle_s: float, fit_graph: bool = False) -> None:
        self.call("Emulation.setDeviceMetricsOverride", width=size[0], height=size[1], deviceScaleFactor=1,
                  mobile=False)
        self.call("Page.navigate", url=url)
        time.sleep(settle_s)
        if fit_graph:
            self.fit_graph()
        shot = self.call("Page.captureScreenshot", format="png")
        out.write_bytes(base64.b64decode(shot["data"]))

    def graph_fit(self) -> dict:
        """The graph's width (SVG units), its zoom and the width of the pane that shows it."""
        found = self.call("Runtime.evaluate", returnByValue=True, expression=GRAPH_FIT_JS)["result"].get("value")
        if not found:
            raise RuntimeError("no graph on the page")
        return json.loads(found)

    def fit_graph(self) -> None:
        """Double-click the graph's background (the UI's own zoom-to-fit), left of the graph, mid-height."""
        pane = self.graph_fit()
        x, y = pane["left"] + 8, pane["top"] + pane["height"] / 2
        for kind in ("mousePressed", "mouseReleased"):
            for clicks in (1, 2):
                self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=clicks)
        time.sleep(2.0)  # the zoom animates
        fit = self.graph_fit()
        if fit["graph_width"] * fit["scale"] > fit["width"] + 1:
            raise RuntimeError(f"the job graph is still wider than its pane after the double-click: {fit}")

    def close(self) -> None:
        self._connection.__exit__(None, None, None)
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


# The largest SVG's size attributes, its parent's CSS transform (matrix(scale, 0, 0, scale, x, y)) and the pane.
GRAPH_FIT_JS = """(() => { const svg = [...document.querySelectorAll('svg')].filter(s => +s.getAttribute('width') > 300)
  .sort((a, b) => b.getAttribute('width') - a.getAttribute('width'))[0];
  if (!svg) return null;
  const pane = svg.parentElement.parentElement.getBoundingClientRect();
  const scale = +(svg.parentElement.style.transform.match(/matrix\\(([^,]+)/) || [0, 1])[1];
  return JSON.stringify({graph_width: +svg.getAttribute('width'), scale: scale, left: pane.left, top: pane.top,
                         width: pane.width, height: pane.height}); })()"""


def start_ui(project: Path, log: BinaryIO) -> tuple[str, subprocess.Popen]:
    """`synthex ui` on ``project`` on a free port, its output to ``log``, once the code location has loaded:
    its URL and process (a process group of our own; ``stop`` it)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "synthex.surfaces.cli", "ui", "--port", str(port),
                               "--project", str(project)], stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        wait_until_loaded(url, server)
    except BaseException:
        stop(server)
        raise
    return url, server


def stop(server: subprocess.Popen) -> None:
    """Stop `synthex ui` (dagster dev and the processes it started: one process group, ours)."""
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGINT)  # dagster dev shuts its webserver, daemon and code server down
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--project", type=Path, help="an existing project (default: a new demo in a temp dir)")
    parser.add_argument("--url", help="a `synthex ui` already serving --project (default: start one)")
    parser.add_argument("--settle-s", type=float, default=12.0, help="how long each view renders before the shot")
    args = parser.parse_args(argv)
    chromium = find_chromium()
    if chromium is None:
        print("ui_screenshots: no Chromium found. Install it (Debian/Ubuntu: `apt-get install -y chromium`) "
              "or set CHROMIUM=/path/to/chrome, then run again.", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="synthex-screens-") as tmp:
        project = args.project.resolve() if args.project else make_demo(Path(tmp))
        from synthex.core.project import load_pipeline
        from synthex_assets.naming import job_name, location_name

        pipe = load_pipeline(project)
        location, job = location_name(pipe.name), job_name(pipe.name)
        server, browser = None, None
        log = open(Path(tmp) / "ui.log", "wb")  # noqa: SIM115 - closed below, after the server stopped
        try:
            if args.url:
                url = args.url.rstrip("/")
            else:
                url, server = start_ui(project, log)
            backfills = launch_ui_backfills(url, location, job)
            # After main's backfills: the branch's served partitions are the newest materializations (item 9).
            synthex("branch", "create", BRANCH, "--project", str(project), cwd=project)
            browser = Browser(chromium, Path(tmp) / "chromium-profile")
            main_periods = graphql(url, MAIN_PERIODS)["data"]["assetNodeOrError"]["partitionKeysByDimension"][1]
            for view in views(location, job, backfills, max(p for p in main_periods["partitionKeys"] if p != "all")):
                out = args.out / view.file
                browser.shoot(url + view.path, out, view.size, args.settle_s, view.fit_graph)
                size = out.stat().st_size
                flag = "" if size <= MAX_PNG_BYTES else f"  (over {MAX_PNG_BYTES // 1000} KB)"
                print(f"{out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}: {view.what}, "
                      f"{size // 1000} KB{flag}")
        finally:
            if browser is not None:
                browser.close()
            if server is not None:
                stop(server)
            log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
