"""Fault-matrix cases of `synthex mcp` (issue 20, items 6 and 7): the bearer token over HTTP, the request
body bound, and a server stopped mid-sync (client gone, SIGTERM, SIGKILL) never leaving a run "running".

Each case drives real `synthex mcp` subprocesses with the official MCP client (streamable HTTP or stdio)
on a small project whose ``digests`` step waits at a known point: an item whose text holds
``HOLD-<tag>`` touches ``reached-<tag>`` in the gate folder and waits for ``release-<tag>``, so a stop
lands while ``notes`` is written and ``digests`` is not.
"""

from __future__ import annotations

import json
import re
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from evals.fault_matrix import Case, Observed, Workbench, cli_args, offline_env, quote, synthex

PIPELINE = '''
from pathlib import Path

from synthex import Pipeline

GATE = Path({gate!r})


def note(record):
    return "Note: " + record.content


def digest(record):
    # Waits at a known point (fault matrix, evals/faults/mcp.py): text holding HOLD-<tag> touches
    # reached-<tag>, then waits for release-<tag>.
    import re
    import time

    found = re.search(r"HOLD-(\\w+)", record.content)
    if found:
        (GATE / ("reached-" + found.group(1))).touch()
        deadline = time.monotonic() + 120
        while not (GATE / ("release-" + found.group(1))).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    return "Digest: " + record.content


pipeline = Pipeline("mcp-faults", agent="tester")
pipeline.source("inbox", stream="inbox.jsonl")
pipeline.transform("notes", from_="inbox", fn=note)
pipeline.transform("digests", from_="notes", fn=digest)
pipeline.output("search", from_="notes", surface="search")
'''
WAIT_S = 120.0
SECRET = "PERIWINKLE-7731"  # what the memory holds; no refused request may see it
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}}).encode()


# -- helpers ------------------------------------------------------------------------------------

def project(wb: Workbench, name: str) -> tuple[Path, Path]:
    """A fresh project of the pipeline above, and its gate folder."""
    root = wb.root / "mcp" / name
    gate = root / "gate"
    gate.mkdir(parents=True)
    (root / "pipeline.py").write_text(PIPELINE.format(gate=str(gate)))
    return root, gate


def stream_line(root: Path, text: str, key: str) -> None:
    with (root / "inbox.jsonl").open("a") as out:
        out.write(json.dumps({"id": key, "text": text, "created_at": "2024-05-01T12:00:00Z"}) + "\n")


class Server:
    """One `synthex mcp` subprocess over HTTP, its stderr collected."""

    def __init__(self, root: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(cli_args("mcp", "--project", str(root), "--http", "--port", "0", *extra),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, env=env or offline_env())
        self.lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stderr or []), daemon=True)
        self._reader.start()
        self.url = ""
        deadline = time.monotonic() + WAIT_S
        while not (found := re.search(r"http://127\.0\.0\.1:\d+/mcp", self.log)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start: {self.log.strip()[-300:]}")
            time.sleep(0.05)
        self.url = found.group(0)

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def stop(self, signum: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        try:
            code = self.proc.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._reader.join(10)
        return code

    def rss_kb(self, field: str = "VmHWM") -> int:
        """The server's peak (VmHWM) or current (VmRSS) resident memory, from /proc."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        return -1


def post(url: str, body: bytes | Any, authorization: str | None = None) -> tuple[int, str]:
    import httpx2

    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if authorization:
        headers["Authorization"] = authorization
    response = httpx2.post(url, content=body, headers=headers, timeout=60)
    return response.status_code, response.text


async def http_session(url: str, token: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """The documented client: the official SDK over streamable HTTP with the bearer token."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    out = []
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"} if token else {},
                                  timeout=httpx2.Timeout(30, read=300)) as http, \
            streamable_http_client(url, http_client=http) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for name, args in calls:
            out.append(await session.call_tool(name, args))
    return out


def refused_client(url: str) -> str:
    """What the official client meets without the token (the leaves of its exception group)."""
    import anyio

    try:
        anyio.run(http_session, url, "", [])
    except BaseException as exc:  # noqa: BLE001 - the refusal is what is observed
        return "; ".join(str(e) for e in leaves(exc))
    return "(connected)"


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaves(sub)]
    return [exc]


def runs_json(root: Path) -> list[dict[str, Any]]:
    listed = synthex("runs", "--json", "--project", str(root), cwd=root)
    return json.loads(listed.out) if listed.code == 0 else []


def step_contents(root: Path, step: str) -> list[str]:
    from synthex.core.project import load_pipeline

    pipe: Any = load_pipeline(root)
    try:
        return sorted(r.content for r in pipe.records(step))
    finally:
        pipe.close()


def running_runs(root: Path) -> list[str]:
    """Ids of the runs the runs table shows running (read in-process, without Dagster)."""
    from synthex.core.project import load_pipeline

    pipe: Any = load_pipeline(root)
    try:
        return [r.id for r in pipe.app.store.runs.running()]
    finally:
        pipe.close()


def wait_for(path: Path, proc: subprocess.Popen[str] | None = None) -> bool:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def stdio_params(root: Path) -> Any:
    import sys

    from mcp import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=["-m", "synthex.surfaces.cli", "mcp", "--project",
                                                               str(root)], env=offline_env())


async def stdio_until(root: Path, errlog_path: Path, text: str | None, reached: Path | None,
                      find: str | None = None) -> float:
    """A stdio session: wait until exact search in ``digests`` finds ``find`` (a resumed sync), remember
    ``text``, wait for ``reached``, then close the client. Returns how long the client took to close
    (closing stdin, and the SDK's wait for the server to exit)."""
    import anyio
    from mcp import ClientSession, stdio_client

    with errlog_path.open("w") as errlog:
        async with stdio_client(stdio_params(root), errlog=errlog) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=WAIT_S) as session:
                await session.initialize()
                deadline = time.monotonic() + WAIT_S
                while find is not None and not (await session.call_tool(
                        "search", {"query": find, "step": "digests", "exact": True})).structured_content["hits"]:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{find!r} never reached digests")
                    await anyio.sleep(0.1)
                while find is not None and running_runs(root):  # the resumed run's tail (checks, stats)
                    if time.monotonic() > deadline:
                        raise RuntimeError("the resumed run never finished")
                    await anyio.sleep(0.1)
                if text is not None:
                    await session.call_tool("remember", {"text": text, "created_at": "2024-05-02T12:00:00Z"})
                while reached is not None and not reached.exists():
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{reached.name} never appeared")
                    await anyio.sleep(0.05)
            closing = time.monotonic()
        return time.monotonic() - closing


def no_run_running(obs: Observed, root: Path) -> list[dict[str, Any]]:
    runs = runs_json(root)
    statuses = [(r["status"], (r.get("error") or "")[:60]) for r in runs]
    obs.note(f"`synthex runs`: {statuses}")
    obs.check(bool(runs), "`synthex runs` lists nothing")
    obs.check(all(s != "running" for s, _ in statuses), "a run is still shown as running")
    return runs


# -- the cases ----------------------------------------------------------------------------------

def case_token(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    root, _ = project(wb, "token")
    stream_line(root, f"The door code is {SECRET}.", "secret")
    synced = synthex("sync", "--project", str(root), cwd=root)
    obs.check(synced.code == 0, f"the setup sync failed: {quote(synced.message)}")
    server = Server(root)
    try:
        token_file = root / ".synthex" / "mcp-token"
        token = token_file.read_text().strip()
        mode = stat.S_IMODE(token_file.stat().st_mode)
        obs.note(f"token file mode {mode:o}; the log names it: {str(token_file) in server.log}, "
                 f"shows the token: {token in server.log}")
        obs.check(mode == 0o600, "the token file is not 0600")
        obs.check(str(token_file) in server.log and token not in server.log, "the log does not say where the "
                  "token is, or shows the token itself")
        wrong = token[:-1] + ("x" if token[-1] != "x" else "y")
        for label, authorization in (("no token", None), ("wrong token", f"Bearer {wrong}"),
                                     ("token as Basic", f"Basic {token}")):
            status, text = post(server.url, INITIALIZE, authorization)
            obs.note(f"{label}: {status} {quote(text.strip(), 80)}")
            obs.check(status == 401 and "\n" not in text.strip() and SECRET not in text,
                      f"{label}: not a one-line 401 without memory content")
        refusal = refused_client(server.url)
        obs.note(f"official client without token: {quote(refusal, 60)}")
        obs.check(refusal != "(connected)", "the official client connected without the token")
        import anyio

        [found] = anyio.run(http_session, server.url, token, [("search", {"query": SECRET, "exact": True})])
        hits = [h["content"] for h in (found.structured_content or {}).get("hits", [])]
        obs.note(f"right token: search finds the secret: {any(SECRET in h for h in hits)}")
        obs.check(any(SECRET in h for h in hits), "with the token, search did not find the memory")
    finally:
        code = server.stop()
    obs.check(code == 0, f"the server exited {code} on SIGTERM")

    env_server = Server(root, env=offline_env(SYNTHEX_MCP_TOKEN="env-token-0123456789abcdef"))
    try:
        by_env = post(env_server.url, INITIALIZE, "Bearer env-token-0123456789abcdef")[0]
        by_file = post(env_server.url, INITIALIZE, f"Bearer {token}")[0]
        obs.note(f"$SYNTHEX_MCP_TOKEN set: env token {by_env}, file token {by_file}")
        obs.check(by_env == 200 and by_file == 401, "$SYNTHEX_MCP_TOKEN is not the one token accepted")
    finally:
        env_server.stop()
    short = synthex("mcp", "--http", "--port", "0", "--project", str(root), cwd=root,
                    env=offline_env(SYNTHEX_MCP_TOKEN="short"))
    obs.note(f"a 5-character $SYNTHEX_MCP_TOKEN: exit {short.code}, {quote(short.message, 90)}")
    obs.check(short.code == 2 and short.one_line(), "a too-short env token is not refused in one line")
    return obs.outcome()


def case_big_body(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    root, _ = project(wb, "big-body")
    server = Server(root)
    try:
        token = (root / ".synthex" / "mcp-token").read_text().strip()
        two_mb = b'{"pad": "' + b"x" * (2 * 1024 * 1024) + b'"}'
        before = server.rss_kb("VmRSS")
        results = {
            "declared, no token": post(server.url, two_mb),
            "declared": post(server.url, two_mb, f"Bearer {token}"),
            "streamed (chunked)": post(server.url, iter([two_mb[i:i + 65536] for i in range(0, len(two_mb), 65536)]),
                                       f"Bearer {token}"),
        }
        after = server.rss_kb("VmRSS")
        for label, (status, text) in results.items():
            obs.note(f"{label}: {status} {quote(text.strip(), 40)}")
        obs.check(results["declared, no token"][0] == 401, "an unauthenticated 2 MB body is not refused with 401")
        obs.check(results["declared"] == (413, "Request body too large"), "a declared 2 MB body is not refused (413)")
        obs.check(results["streamed (chunked)"] == (413, "Request body too large"),
                  "a streamed 2 MB body is not refused (413)")
        small = post(server.url, INITIALIZE, f"Bearer {token}")[0]
        obs.note(f"then a small initialize: {small}; server RSS {before // 1024} -> {after // 1024} MB")
        obs.check(small == 200, "the server does not answer after the refusals")
    finally:
        code = server.stop()
    obs.check(code == 0, f"the server exited {code}")
    return obs.outcome()


def case_client_disconnects(wb: Workbench) -> tuple[str, bool]:
    import anyio

    obs = Observed()
    root, gate = project(wb, "disconnect")
    errlog = root / "server-1.err"
    closed_in = anyio.run(stdio_until, root, errlog, "HOLD-a: the user moved to Lisbon", gate / "reached-a")
    err = errlog.read_text()
    obs.note(f"client closed mid-sync (notes written, digests waiting); the server exited within {closed_in:.1f} s "
             f"(the SDK SIGTERMs at 2 s)")
    obs.check("interrupted (end of input)" in err and "Traceback" not in err,
              f"the server did not record the interruption: {quote(err.strip()[-160:])}")
    runs = no_run_running(obs, root)
    obs.check(bool(runs) and runs[0]["status"] == "failed" and runs[0]["error"].startswith("interrupted"),
              "the latest run is not failed 'interrupted'")
    half = (step_contents(root, "notes"), step_contents(root, "digests"))
    obs.note(f"before the next start: notes {len(half[0])}, digests {len(half[1])}")
    obs.check(half == (["Note: HOLD-a: the user moved to Lisbon"], []), "the stop did not land mid-sync")
    (gate / "release-a").touch()
    anyio.run(stdio_until, root, root / "server-2.err", None, None, "HOLD-a")
    digests = step_contents(root, "digests")
    obs.note(f"the next `synthex mcp` start resumed the sync: digests {len(digests)}")
    obs.check(digests == ["Digest: Note: HOLD-a: the user moved to Lisbon"], "the next start did not finish the steps")
    no_run_running(obs, root)
    plan = synthex("plan", "--project", str(root), cwd=root)
    obs.check("Everything is up to date." in plan.out, "`synthex plan` still has work")
    return obs.outcome()


def stop_mid_sync(wb: Workbench, name: str, signum: int) -> tuple[Observed, Path, Path]:
    """An HTTP server, a remember whose sync waits in digests, then ``signum``."""
    import anyio

    obs = Observed()
    root, gate = project(wb, name)
    server = Server(root, "--grace", "0.5")
    try:
        token = (root / ".synthex" / "mcp-token").read_text().strip()
        anyio.run(http_session, server.url, token,
                  [("remember", {"text": f"HOLD-{name}: the cat is called Miso", "created_at": "2024-05-02T12:00:00Z"})])
        reached = wait_for(gate / f"reached-{name}", server.proc)
        obs.check(reached, "the sync never reached digests")
    finally:
        code = server.stop(signum)
    obs.note(f"{signal.Signals(signum).name} mid-sync: exit {code}")
    if signum == signal.SIGTERM:
        obs.check(code == 0 and "interrupted (SIGTERM)" in server.log and "Traceback" not in server.log,
                  f"no clean stop recording the interruption: {quote(server.log.strip()[-160:])}")
    else:
        obs.check(code == -signal.SIGKILL, "not killed by SIGKILL")
    half = (len(step_contents(root, "notes")), len(step_contents(root, "digests")))
    obs.note(f"notes {half[0]}, digests {half[1]}")
    obs.check(half == (1, 0), "the stop did not land mid-sync")
    (gate / f"release-{name}").touch()
    return obs, root, gate


def case_sigterm(wb: Workbench) -> tuple[str, bool]:
    obs, root, _ = stop_mid_sync(wb, "sigterm", signal.SIGTERM)
    runs = no_run_running(obs, root)
    obs.check(bool(runs) and runs[0]["error"].startswith("interrupted: the MCP server stopped (SIGTERM)"),
              "the run is not recorded as interrupted")
    again = synthex("sync", "--project", str(root), cwd=root)
    obs.note(f"next `synthex sync`: exit {again.code}, digests {len(step_contents(root, 'digests'))}")
    obs.check(again.code == 0 and len(step_contents(root, "digests")) == 1, "the next sync did not finish the steps")
    return obs.outcome()


def case_sigkill(wb: Workbench) -> tuple[str, bool]:
    import anyio

    obs, root, _ = stop_mid_sync(wb, "sigkill", signal.SIGKILL)
    stuck = [r["id"] for r in runs_json(root) if r["status"] == "running"]
    obs.note(f"left running by the dead server: {len(stuck)}")
    obs.check(len(stuck) == 1, "SIGKILL did not leave the run running (the case would prove nothing)")
    err = root / "server-2.err"
    anyio.run(stdio_until, root, err, None, None, "HOLD-sigkill")
    said = [line for line in err.read_text().splitlines() if "left running" in line]
    obs.note(f"the next `synthex mcp` says: {quote(said[0] if said else '(nothing)', 120)}")
    obs.check(bool(said), "the next start did not say it closed a run left running")
    runs = {r["id"]: r for r in no_run_running(obs, root)}
    closed = runs.get(stuck[0], {}) if stuck else {}
    obs.check(closed.get("status") == "failed" and "found by synthex mcp at start" in closed.get("error", ""),
              "the next start did not close the dead run")
    obs.check(len(step_contents(root, "digests")) == 1, "the next start did not finish the steps")
    return obs.outcome()


CASES: list[Case] = [
    Case("mcp: HTTP without token / wrong token / right token",
         "token file 0600, the log names it and never shows it; no / wrong / Basic token: 401 in one line without "
         "memory content, the official client cannot connect; with the token the client searches the memory; "
         "$SYNTHEX_MCP_TOKEN replaces the file's; a short one is refused in one line", case_token),
    Case("mcp: 2 MB request body",
         "over limits.mcp_request_bytes (1 MB): 401 without token; 413 with it, declared or streamed; the server "
         "keeps answering", case_big_body),
    Case("mcp: client disconnects mid-sync",
         "the official stdio client closes while a sync runs: the server exits before the SDK's SIGTERM, the run is "
         "'failed' (interrupted), not 'running'; the next `synthex mcp` start finishes the steps; plan up to date",
         case_client_disconnects),
    Case("mcp: SIGTERM mid-sync (HTTP)",
         "exit 0, the run recorded as interrupted, none running; the next `synthex sync` finishes the steps",
         case_sigterm),
    Case("mcp: SIGKILL mid-sync, next start",
         "the run is left running (nothing can record it); the next `synthex mcp` closes it (failed) and "
         "finishes the steps", case_sigkill),
]

