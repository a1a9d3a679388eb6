"""Issue 20, items 6 and 7: `synthex mcp --http` requires a bearer token (owner-only file or env, compared in
constant time; 401 without it; bodies over ``limits.mcp_request_bytes`` refused with 413), and a server
stopped mid-sync (SIGINT over HTTP, the client closing stdin on stdio) never leaves a run "running": it
records the run as interrupted, and the next start (`synthex mcp`, `synthex sync`) finishes its steps.

Real parts: `synthex mcp` subprocesses, the official MCP client (HTTP and stdio), a real LanceDB store and
Dagster instance. The kill lands at a known point: the ``digests`` step's function touches
``reached-<tag>`` and waits for ``release-<tag>``; the tests stop the server while it waits, when
``notes`` is written and ``digests`` is not.
"""

import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest
from conftest import env_without_openai

# The gated pipeline of the fault matrix's MCP cases (its `digests` step waits at a known point).
from evals.faults.mcp import PIPELINE

WAIT_S = 120


# -- the token file -------------------------------------------------------------------------------

def test_token_file_is_owner_only_from_the_start(tmp_path):
    from synthex.core.errors import BadInputError
    from synthex.surfaces.mcp_token import TOKEN_ENV, load_or_create_token, token_path

    old = os.umask(0)  # even with no umask, the file is never readable by others
    try:
        made = load_or_create_token(tmp_path / "data", env={})
    finally:
        os.umask(old)
    path = token_path(tmp_path / "data")
    assert made.created and made.origin == str(path) and len(made.value) >= 40
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert made.value not in repr(made)
    assert [p.name for p in path.parent.iterdir()] == ["mcp-token"]  # no temporary file left
    again = load_or_create_token(tmp_path / "data", env={})
    assert not again.created and again.value == made.value
    assert again.matches(made.value) and not again.matches(made.value[:-1] + "x") and not again.matches("")

    path.chmod(0o644)
    with pytest.raises(BadInputError, match=r"mcp-token: the MCP token file can be read by others \(mode 644\)"):
        load_or_create_token(tmp_path / "data", env={})
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(BadInputError, match="cannot read the MCP token file"):
        load_or_create_token(tmp_path / "data", env={})

    from_env = load_or_create_token(tmp_path / "other", env={TOKEN_ENV: "  s3cret-s3cret-s3cret  "})
    assert (from_env.value, from_env.origin) == ("s3cret-s3cret-s3cret", "$SYNTHEX_MCP_TOKEN")
    assert not (tmp_path / "other").exists()
    with pytest.raises(BadInputError, match=r"\$SYNTHEX_MCP_TOKEN: the MCP token is 5 characters"):
        load_or_create_token(tmp_path / "other", env={TOKEN_ENV: "short"})


# -- a server stopped mid-sync, over HTTP and over stdio ---------------------------------------------

def wait_for(path: Path, proc: subprocess.Popen | None = None, log: list[str] | None = None) -> None:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        assert proc is None or proc.poll() is None, "".join(log or [])
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)


def state(project: Path) -> tuple[list, dict[str, list[str]]]:
    """The project's runs (newest first; as the runs table has them, without asking Dagster) and each
    step's record contents, read in-process."""
    from synthex.core.project import load_pipeline

    pipe = load_pipeline(project)
    try:
        return pipe.app.store.runs.recent(limit=100), {step: sorted(r.content for r in pipe.records(step)) for step in pipe.steps}
    finally:
        pipe.close()


def post(url: str, body: bytes | None = None, token: str | None = None, chunks: list[bytes] | None = None,
         authorization: str | None = None):
    """One raw POST to the MCP endpoint (status, body text)."""
    import httpx2

    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None or authorization is not None:
        headers["Authorization"] = authorization or f"Bearer {token}"
    content = iter(chunks) if chunks is not None else body
    response = httpx2.post(url, content=content, headers=headers, timeout=60)
    return response.status_code, response.text


INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}}).encode()


@pytest.fixture(scope="module")
def hostile_project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("mcp-hostile")
    (root / "gate").mkdir()
    (root / "proj").mkdir()
    (root / "proj" / "pipeline.py").write_text(PIPELINE.format(gate=str(root / "gate")))
    return root / "proj"


def test_http_token_body_limit_and_interrupted_sync(hostile_project):
    """The documented client example, then 401 / 413, then a sync stopped by SIGINT (which the server's
    parent ignored: the server resets it) is recorded as interrupted, not left running."""

    project, gate = hostile_project, hostile_project.parent / "gate"
    proc = subprocess.Popen([sys.executable, "-m", "synthex.surfaces.cli", "mcp", "--project", str(project),
                             "--http", "--port", "0", "--grace", "0.2"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_without_openai(),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    log: list[str] = []
    reader = threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + WAIT_S
        while not (found := re.search(r"http://127\.0\.0\.1:\d+/mcp", "".join(log))):
            assert proc.poll() is None, "".join(log)
            assert time.monotonic() < deadline, "the server printed no URL"
            time.sleep(0.05)
        url = found.group(0)
        token_file = project / ".synthex" / "mcp-token"
        token = token_file.read_text().strip()
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert str(token_file) in "".join(log) and token not in "".join(log)

        # Without the token, or with a wrong one: 401, one line, nothing of the memory.
        wrong = token[:-1] + ("x" if token[-1] != "x" else "y")
        for authorization in (None, f"Bearer {wrong}", f"Basic {token}", f"Bearer {token}x"):
            status, text = post(url, INITIALIZE, authorization=authorization)
            assert status == 401 and "\n" not in text.strip() and "invalid_token" in text
        with pytest.raises(Exception) as refused:  # the official client, without the token: initialize fails
            anyio.run(client_example, url, None)
        assert "Server returned an error response" in str(leaves(refused.value))

        # With it: bodies over limits.mcp_request_bytes (1 MB) are refused, declared or streamed.
        two_mb = b'{"pad": "' + b"x" * (2 * 1024 * 1024) + b'"}'
        assert post(url, two_mb, token) == (413, "Request body too large")
        assert post(url, token=token, chunks=[two_mb[i:i + 65536] for i in range(0, len(two_mb), 65536)]) \
            == (413, "Request body too large")

        # The client example: a session with the token; remember starts a sync that waits in `digests`.
        remembered = anyio.run(client_example, url, token, "HOLD-http: the user moved to Lisbon")
        assert remembered["status"] == "queued for sync"
        wait_for(gate / "reached-http", proc, log)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(10)
    err = "".join(log)
    assert code == 0, err
    assert "Traceback" not in err and "interrupted (SIGINT)" in err
    runs, records = state(project)
    assert not [r for r in runs if r.status == "running"]
    assert runs[0].status == "failed" and runs[0].error.startswith("interrupted: the MCP server stopped (SIGINT)")
    # Stopped mid-way: the note is written, its digest is not.
    assert records["notes"] == ["Note: HOLD-http: the user moved to Lisbon"] and records["digests"] == []


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaves(sub)]
    return [exc]


async def client_example(url: str, token: str | None, text: str | None = None) -> dict:
    """How a Python agent connects (README, "MCP over HTTP"): the official client with the bearer token."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        assert {t.name for t in (await session.list_tools()).tools} >= {"search", "remember"}
        if text is None:
            return {}
        result = await session.call_tool("remember", {"text": text, "created_at": "2024-05-01T12:00:00Z"})
        assert not result.is_error, result.content[0].text
        return result.structured_content


def test_next_start_resumes_then_a_client_that_closes_mid_sync(hostile_project, tmp_path):
    """The next `synthex mcp` closes a run a dead process left running and finishes the interrupted
    sync; a stdio client that closes mid-sync leaves its run interrupted, not running. (That the next
    start finishes this one too is the same path as above; the fault matrix runs it end to end.)"""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from synthex.core.periods import now_iso
    from synthex.core.project import load_pipeline
    from synthex.core.record import Run, RunStatus

    project, gate = hostile_project, hostile_project.parent / "gate"
    if not (project / "inbox.jsonl").exists():
        pytest.skip("needs the state test_http_token_body_limit_and_interrupted_sync leaves")
    (gate / "release-http").touch()
    pipe = load_pipeline(project)  # a run a SIGKILLed process left "running" (no one holds the branch lock)
    try:
        pipe.app.store.runs.save(Run(id="dead-run", pipeline=pipe.name, branch="main", steps=["digests"],
                                     status=RunStatus.RUNNING, started_at=now_iso()))
    finally:
        pipe.close()

    params = StdioServerParameters(command=sys.executable, env=env_without_openai(),
                                   args=["-m", "synthex.surfaces.cli", "mcp", "--project", str(project)])
    errlog_path = tmp_path / "server.err"

    async def session_until_mid_sync() -> None:
        with errlog_path.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), \
                    ClientSession(read, write, read_timeout_seconds=WAIT_S) as session:
                await session.initialize()
                deadline = time.monotonic() + WAIT_S
                while not (await session.call_tool("search", {"query": "HOLD-http", "step": "digests",
                                                              "exact": True})).structured_content["hits"]:
                    assert time.monotonic() < deadline, "the interrupted sync was not resumed at start"
                    await anyio.sleep(0.1)
                out = await session.call_tool("remember", {"text": "HOLD-stdio: the cat is called Miso",
                                                           "created_at": "2024-05-02T12:00:00Z"})
                assert not out.is_error
                while not (gate / "reached-stdio").exists():
                    assert time.monotonic() < deadline, "the second sync never reached digests"
                    await anyio.sleep(0.05)
            # Leaving the block closed stdin; the client waited for the server to exit (2 s, then SIGTERM).

    anyio.run(session_until_mid_sync)
    (gate / "release-stdio").touch()
    err = errlog_path.read_text()
    assert "Traceback" not in err
    assert "run dead-run of branch 'main' was left running by a process that died" in err
    assert "interrupted (end of input)" in err
    runs, records = state(project)
    by_id = {r.id: r for r in runs}
    assert by_id["dead-run"].status == "failed" and "found by synthex mcp at start" in by_id["dead-run"].error
    assert not [r for r in runs if r.status == "running"]
    assert len([r for r in runs if r.status == "failed"
                and r.error.startswith("interrupted: the MCP server stopped (end of input)")]) == 1
    # The resumed sync finished the first item; the second was stopped mid-way (note written, no digest).
    assert records["digests"] == ["Digest: Note: HOLD-http: the user moved to Lisbon"]
    assert records["notes"] == ["Note: HOLD-http: the user moved to Lisbon", "Note: HOLD-stdio: the cat is called Miso"]


# -- malformed lines on stdio ----------------------------------------------------------------------

def test_stdio_answers_lines_that_are_not_json_and_keeps_serving(tmp_path):
    """Issue 32 item 8: a line that is not JSON, or holds a raw NUL, is answered with JSON-RPC's parse error
    (-32700, id null), JSON that is no JSON-RPC message with -32600, and the next request is served. (The
    SDK's stdio transport dropped such lines: the client waited forever.) A raw `synthex mcp` subprocess:
    the official client cannot send a malformed line."""
    from conftest import write_project, write_small_export

    project = write_project(tmp_path / "proj", write_small_export(tmp_path / "exports" / "conversations.json"))
    proc = subprocess.Popen([sys.executable, "-m", "synthex.surfaces.cli", "mcp", "--project", str(project)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env_without_openai())
    requests = [INITIALIZE, b'{"jsonrpc": "2.0", "method": "notifications/initialized"}',
                b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"',  # cut short: not JSON
                b'{"jsonrpc": "2.0", "id": 3, "method": "tools/\x00list"}',  # a raw NUL inside a string
                b"\x00",
                b"",  # a blank line is no message: no answer
                b'{"jsonrpc": "2.0", "id": 5, "params": {}}',  # JSON, but no method
                b'{"jsonrpc": "2.0", "id": 6, "method": "tools/list"}']
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        proc.stdin.write(b"\n".join(requests) + b"\n")
        proc.stdin.flush()
        # stdin stays open until the last request is answered (at end of input the SDK stops serving).
        deadline = time.monotonic() + WAIT_S
        while not any(b'"id":6' in line for line in list(lines)):
            assert proc.poll() is None and time.monotonic() < deadline, "the request after the bad lines was not answered"
            time.sleep(0.05)
        proc.stdin.close()
        err = proc.stderr.read()
        proc.wait(WAIT_S)
        reader.join(WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and b"Traceback" not in err, err.decode()
    replies = [json.loads(line) for line in lines]
    parse_errors = [r for r in replies if r.get("error", {}).get("code") == -32700]
    assert len(parse_errors) == 3
    assert all(r["id"] is None and r["error"]["message"] == "Parse error" for r in parse_errors)
    assert "control character" in parse_errors[1]["error"]["data"]
    assert all("\n" not in r["error"]["data"] and "tools/" not in r["error"]["data"] for r in parse_errors)
    [invalid] = [r for r in replies if r.get("error", {}).get("code") == -32600]
    assert invalid["id"] == 5 and invalid["error"]["message"] == "Invalid Request"
    by_id = {r["id"]: r for r in replies if "result" in r}
    assert set(by_id) == {1, 6} and len(replies) == 6
    assert {t["name"] for t in by_id[6]["result"]["tools"]} >= {"search", "remember"}
