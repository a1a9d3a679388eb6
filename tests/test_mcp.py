"""`synthex mcp`: a real MCP client (the official SDK) against a real `synthex mcp` subprocess, over stdio
and over streamable HTTP, on a small project that has been run."""

import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest
from conftest import PIPELINE_PY, env_without_openai, write_project

from synthex.core.demo.generate import generate

TOOLS = {"search", "get", "lineage", "projection", "remember"}
STREAM_SOURCE = '\npipeline.source("agent", stream="inbox.jsonl")\n'


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A small project (the default template plus a stream source for `remember`), run once, and the
    records the tests expect search to find."""
    from synthex.core.project import load_pipeline

    root = tmp_path_factory.mktemp("mcp")
    export = root / "exports" / "conversations.json"
    export.parent.mkdir()
    export.write_text(json.dumps(generate(conversations=12, months=3, seed=3)))
    proj = write_project(root / "proj", export, PIPELINE_PY + STREAM_SOURCE)
    with pytest.MonkeyPatch.context() as mp:
        for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "SYNTHEX_MODEL"):
            mp.delenv(var, raising=False)
        pipe = load_pipeline(proj)
        pipe.run()
        target = pipe.records("summaries")[5]
        expected = {"project": proj, "summary_id": target.id, "title": target.meta("chat.title"),
                    "world_model_ids": {r.id for r in pipe.records("world-model")}}
        pipe.app.close()
    return expected


def server_params(project: Path, *extra: str):
    from mcp import StdioServerParameters

    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "synthex.surfaces.cli", "mcp", "--project", str(project), *extra],
                                 env=env_without_openai())


def payload(result) -> dict:
    assert not result.is_error, result.content[0].text
    return result.structured_content


def error_line(result) -> str:
    assert result.is_error
    [block] = result.content
    assert "\n" not in block.text and "Traceback" not in block.text
    return block.text


async def read_tools(session, served: dict) -> None:
    """What both transports must do: the five tools, search, get by prefix, lineage, projection, errors."""
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == TOOLS
    schema = tools["search"].input_schema
    assert schema["required"] == ["query"]
    assert set(schema["properties"]) == {"query", "step", "branch", "mode", "k", "exact", "rerank",
                                          "rerank_top_n"}
    assert all(p.get("description") for p in schema["properties"].values())
    assert tools["search"].annotations.read_only_hint and not tools["remember"].annotations.read_only_hint

    # hybrid: the summaries' own ranking (the template's default drills down to conversations: test_default_template_drill_down)
    hits = payload(await session.call_tool("search", {"query": served["title"], "k": 5, "mode": "hybrid"}))["hits"]
    assert served["summary_id"] in [h["id"] for h in hits]
    assert {h["step"] for h in hits} <= {"summaries", "monthly"}
    hit = next(h for h in hits if h["id"] == served["summary_id"])
    assert {"id", "step", "score", "period", "content", "sources"} <= set(hit)
    assert hit["period"] and len(hit["sources"]) == 1

    record = payload(await session.call_tool("get", {"id": hit["id"][:8]}))
    assert record["id"] == hit["id"] and record["step"] == "summaries" and record["sources"] == hit["sources"]
    assert record["content"].startswith(hit["content"].rstrip("…"))

    tree = payload(await session.call_tool("lineage", {"id": hit["id"][:8]}))["tree"]
    assert tree["id"] == hit["id"]
    assert [s["step"] for s in tree["sources"]] == ["transcripts"]
    assert [s["step"] for s in tree["sources"][0]["sources"]] == ["chatgpt"]
    assert tree["sources"][0]["sources"][0]["sources"] == []

    latest = payload(await session.call_tool("projection", {"name": "context"}))
    assert latest["step"] == "world-model" and latest["id"] in served["world_model_ids"]

    exact = payload(await session.call_tool("search", {"query": served["title"], "exact": True}))["hits"]
    assert exact and all(h["step"] in ("chatgpt", "agent") for h in exact)

    assert "unknown step 'nope'" in error_line(await session.call_tool("search", {"query": "x", "step": "nope"}))
    assert "k must be at least 1" in error_line(await session.call_tool("search", {"query": "x", "k": 0}))
    assert "k:" in error_line(await session.call_tool("search", {"query": "x", "k": "many"}))
    # the CLI's --rerank-top-n bound (2..200), one line naming the parameter
    assert "rerank_top_n" in error_line(await session.call_tool("search", {"query": "x", "rerank_top_n": 1}))
    assert "no record with id 'zzzzzzzz'" in error_line(await session.call_tool("get", {"id": "zzzzzzzz"}))
    assert "no projection output 'nope'" in error_line(await session.call_tool("projection", {"name": "nope"}))


async def remember_then_search(session) -> None:
    """remember answers at once; the background sync brings the text into the store; searches keep
    answering meanwhile and then find it under the record id remember announced."""
    word = f"zanzibar{int(time.time())}"
    out = payload(await session.call_tool("remember", {
        "text": f"The user's cat is called {word}.", "id": "note-1",
        "created_at": "2024-05-01T12:00:00Z", "metadata": {"topic": "pets"}}))
    assert out["id"] == "note-1" and out["source"] == "agent" and out["status"] == "queued for sync"
    deadline = time.monotonic() + 120
    while True:
        hits = payload(await session.call_tool("search", {"query": word, "step": "agent", "mode": "bm25"}))["hits"]
        if hits:
            break
        assert time.monotonic() < deadline, "remembered text not searchable after 120 s"
        await anyio.sleep(0.2)
    assert hits[0]["id"] == out["record_id"] and word in hits[0]["content"]
    record = payload(await session.call_tool("get", {"id": out["record_id"]}))
    assert record["step"] == "agent" and record["period"] == "2024-05"
    # A request over Limits.mcp_request_bytes (1 MB) never reaches the SDK whole (BoundedStdin): the
    # client gets a JSON-RPC error naming the bound and the session goes on.
    from mcp import MCPError

    with pytest.raises(MCPError) as refused:
        await session.call_tool("remember", {"text": "x" * (2 * 1024 * 1024)})
    assert "over the mcp_request_bytes bound of 1.0 MB" in str(refused.value.data)
    assert "empty" in error_line(await session.call_tool("remember", {"text": "   "}))


def test_stdio_session_tools_errors_and_remember(served, tmp_path):
    from mcp import ClientSession, stdio_client

    errlog = (tmp_path / "server.err").open("w")

    async def main() -> None:
        async with stdio_client(server_params(served["project"]), errlog=errlog) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=120) as session:
                init = await session.initialize()
                assert init.server_info.name == "synthex" and "summaries" in init.instructions
                await read_tools(session, served)
                await remember_then_search(session)

    anyio.run(main)
    errlog.close()
    assert "Traceback" not in (tmp_path / "server.err").read_text()


def test_streamable_http_on_loopback(served):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    proc = subprocess.Popen([sys.executable, "-m", "synthex.surfaces.cli", "mcp", "--project", str(served["project"]),
                             "--http", "--port", "0"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env_without_openai())
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while not (found := re.search(r"http://127\.0\.0\.1:\d+/mcp", "".join(lines))):
            assert proc.poll() is None, "".join(lines)
            assert time.monotonic() < deadline, "the server printed no URL"
            time.sleep(0.1)
        url = found.group(0)

        import httpx2

        token = (served["project"] / ".synthex" / "mcp-token").read_text().strip()  # generated at first start

        async def main() -> None:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                          timeout=httpx2.Timeout(30, read=300)) as client, \
                    streamable_http_client(url, http_client=client) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=120) as session:
                    await session.initialize()
                    await read_tools(session, served)

        anyio.run(main)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        reader.join(10)
    assert code == 0, "".join(lines)
    assert "Traceback" not in "".join(lines)


def test_sync_requests_coalesce_while_a_sync_runs():
    from synthex.surfaces.mcp_server import SyncWorker

    class App:
        class pipeline:  # noqa: N801 - stands in for the definition
            branch_name = "main"

        def __init__(self) -> None:
            self.calls: list[tuple] = []
            self.release = threading.Event()

        def sync(self, source=None, **kw):
            self.calls.append((source, kw.get("branch")))
            self.release.wait(10)

    app = App()
    worker = SyncWorker(app, "main")
    worker.request("agent")
    deadline = time.monotonic() + 10
    while not app.calls:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    for _ in range(5):  # while the first sync runs
        worker.request("agent")
    app.release.set()
    assert worker.wait_idle(10)
    assert app.calls == [("agent", None), ("agent", None)]
    assert worker.stop(5) == 0

    other = App()
    other.release.set()
    worker = SyncWorker(other, "try-this")  # the branch runs what it owns after main took the new item
    worker.request("agent")
    assert worker.wait_idle(10)
    assert other.calls == [("agent", None), ("agent", "try-this")]
    worker.stop(5)


def test_lineage_is_cut_to_a_node_budget():
    from synthex.surfaces.mcp_server import trim_lineage

    def node(i, children):
        return {"id": f"r{i}", "step": "s", "content": "x" * 1000, "sources": children}

    tree = node(0, [node(1, [node(3, []), node(4, [])]), node(2, [node(5, [])])])
    full, kept, total = trim_lineage(tree)
    assert (kept, total) == (6, 6) and len(full["content"]) == 200
    cut, kept, total = trim_lineage(tree, max_nodes=3)
    assert (kept, total) == (3, 6)
    assert [c["id"] for c in cut["sources"]] == ["r1", "r2"]
    assert cut["sources"][0]["sources_omitted"] == 2 and cut["sources"][1]["sources_omitted"] == 1


def test_the_cli_does_not_import_the_mcp_sdk():
    out = subprocess.run([sys.executable, "-c", "import sys, synthex.surfaces.cli; "
                          "print(sorted(m for m in ('mcp', 'lancedb', 'dagster') if m in sys.modules))"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
