"""Many memories under one root (issue 38 item 4): the time to open and search one memory among N, that the
search read only that memory's files, and that one memory's MCP token is refused by another memory's server.

    python -m evals.bench.thousand_memories [--memories 1000] [--root DIR] [--searches 50] [--traced 20]
                                            [--servers 10] [--workers 2]

Each memory is a project folder of its own (``<root>/mem-NNNN``: pipeline.py, its export, its data dir with
its store and its MCP token), holding one LongMemEval dev haystack session (memory i: question i mod Q,
session i div Q; ``--data``). They are built by the in-process engine (``RunEngine.IN_PROCESS``, the evals'
path: the records, runs row and ``run_steps`` a ``synthex run`` leaves, no Dagster instance or run), so the
N memories are not each a Dagster run of a deployment. A built memory is skipped on a second invocation.

Then, each in a fresh Python process (``--searches`` memories drawn at random):
- search: the seconds to import Synthex, then to load the memory's pipeline and run its first hybrid search
  (the memory's own LongMemEval question), and the process's wall time seen from outside;
- files: ``--traced`` of those searches again under ``strace -f -y`` (every file-name system call and
  every directory listing): which memory folders under the root the process touched; only its own is the
  pass (the root itself listed counts as touching every memory);
- tokens: ``--servers`` memories' ``synthex mcp --http`` servers; each is sent an ``initialize`` with every
  other memory's token (raw HTTP: 401 expected for each) and with its own (200), and a real MCP client
  (the ``mcp`` SDK over streamable HTTP) opens a session with its own token (tools listed, one search
  called) and is refused with another memory's.

Prints progress with an ETA, p50/p95 (nearest rank) per phase and one JSON line.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from evals.shared_data import LONGMEMEVAL_S_DEV, shared_data_file

DATA = shared_data_file(LONGMEMEVAL_S_DEV)
FORMAT = "longmemeval-turns-any"
MEMORY_PREFIX = "mem-"
BATCH = 20  # memories per build task (one embedder load each)
BUILT_MARK = "built.json"  # in a memory's data dir once its run completed and its token exists
MCP_URL = re.compile(r"http://127\.0\.0\.1:\d+/mcp")

PIPELINE_PY = """\
# One memory of evals/bench/thousand_memories.py: one LongMemEval haystack session, searched as it is.
from synthex import Pipeline

pipeline = Pipeline({name!r}, agent="bench")
pipeline.source("turns", file="haystack.json", format={fmt!r})
pipeline.output("search", from_=["turns"], surface="search")
"""

# Run in a fresh process: argv = project folder, query. Times the import, then load + first search.
SEARCH = """
import json, sys, time
started = time.perf_counter()
from synthex.core.project import load_pipeline
imported = time.perf_counter()
pipe = load_pipeline(sys.argv[1])
hits = pipe.search(sys.argv[2], k=10)
searched = time.perf_counter()
print(json.dumps({"import_s": imported - started, "open_search_s": searched - imported, "hits": len(hits)}))
pipe.close()
"""

INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "thousand-memories", "version": "0"}}})


@dataclass(frozen=True)
class MemorySpec:
    """Memory ``index``: its folder name, its one session (the question dict with the haystack cut to it)
    and the query searched in it (its question)."""

    index: int
    raw: dict
    query: str

    @property
    def name(self) -> str:
        return f"{MEMORY_PREFIX}{self.index:04d}"


def memory_specs(questions: list[dict], count: int) -> list[MemorySpec]:
    """``count`` memories, memory i holding session i div Q of question i mod Q (Q questions): distinct
    sessions while every question has enough."""
    specs = []
    for i in range(count):
        question = questions[i % len(questions)]
        session = (i // len(questions)) % len(question["haystack_sessions"])
        raw = {**question, "question_id": f"{question['question_id']}-m{i}",
               "haystack_sessions": [question["haystack_sessions"][session]],
               "haystack_session_ids": [question["haystack_session_ids"][session]],
               "haystack_dates": [question["haystack_dates"][session]],
               "answer_session_ids": [sid for sid in question["answer_session_ids"]
                                      if sid == question["haystack_session_ids"][session]]}
        specs.append(MemorySpec(i, raw, question["question"]))
    return specs


def read_questions(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def build_memory(root: Path, spec: MemorySpec, embedder: object | None = None) -> float:
    """Write memory ``spec``'s project and run it in-process; its MCP token made as `synthex mcp --http` makes
    it. The seconds taken; 0.0 when it was built before."""
    from synthex.app.facade import RunEngine
    from synthex.core.project import load_pipeline
    from synthex.surfaces.mcp_token import load_or_create_token

    project = root / spec.name
    if (project / ".synthex" / BUILT_MARK).exists():
        return 0.0
    started = time.perf_counter()
    project.mkdir(parents=True, exist_ok=True)
    (project / "haystack.json").write_text(json.dumps([spec.raw]), encoding="utf-8")
    (project / "pipeline.py").write_text(PIPELINE_PY.format(name=spec.name, fmt=FORMAT), encoding="utf-8")
    pipe = load_pipeline(project)
    try:
        pipe.open(embedder=embedder)
        run = pipe.app.run(engine=RunEngine.IN_PROCESS, track_changes=False)
        if run.status.value != "completed":
            raise RuntimeError(f"{project}: run {run.id} is {run.status.value}")
    finally:
        pipe.close()
    load_or_create_token(project / ".synthex", env={})  # the environment's SYNTHEX_MCP_TOKEN would override it
    (project / ".synthex" / BUILT_MARK).write_text(json.dumps({"run": run.id}), encoding="utf-8")
    return time.perf_counter() - started


def _build_batch(args: tuple[Path, list[MemorySpec]]) -> list[float]:
    """A build worker's batch, with one embedder for the batch (the ONNX model loaded once per batch)."""
    from synthex_resources.embedder import MiniLMOnnxEmbedder

    root, specs = args
    embedder = MiniLMOnnxEmbedder()
    return [build_memory(root, spec, embedder) for spec in specs]


class Progress:
    """One line every ``every`` items (and at the end): done/total, rate and the time left at that rate."""

    def __init__(self, what: str, total: int, every: int = 25) -> None:
        self.what, self.total, self.every = what, total, every
        self.done, self.started = 0, time.monotonic()

    def step(self, n: int = 1) -> None:
        before, self.done = self.done, self.done + n
        if before // self.every == self.done // self.every and self.done != self.total:
            return
        elapsed = time.monotonic() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else float("nan")
        print(f"  {self.what}: {self.done}/{self.total}, {elapsed:.0f} s, ETA {eta:.0f} s", file=sys.stderr, flush=True)


def build_all(root: Path, specs: list[MemorySpec], workers: int) -> list[float]:
    """Build every memory (``workers`` processes, each its own embedder); the seconds of each one built now."""
    import multiprocessing

    progress = Progress("build", len(specs))
    seconds: list[float] = []
    if workers <= 1:
        from synthex_resources.embedder import MiniLMOnnxEmbedder

        embedder = MiniLMOnnxEmbedder()
        for spec in specs:
            took = build_memory(root, spec, embedder)
            seconds += [took] if took else []
            progress.step()
        return seconds
    batches = [(root, specs[i:i + BATCH]) for i in range(0, len(specs), BATCH)]
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        for took in pool.imap_unordered(_build_batch, batches):
            seconds += [t for t in took if t]
            progress.step(len(took))
    return seconds


def nearest_rank(values: Iterable[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (the value at rank ceil(q * n)); NaN for no values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def timed_search(project: Path, query: str, env: dict[str, str], trace: Path | None = None) -> dict:
    """The search script in a fresh process (under strace writing ``trace`` when given)."""
    prefix = ["strace", "-f", "-qq", "-y", "-e", "trace=%file,getdents64", "-o", str(trace)] if trace else []
    started = time.perf_counter()
    proc = subprocess.run([*prefix, sys.executable, "-c", SEARCH, str(project), query], env=env, capture_output=True,
                          text=True, timeout=600)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"search in {project} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "wall_s": wall}


def memories_touched(trace_text: str, root: Path) -> tuple[set[str], bool]:
    """From an ``strace -y`` log: the memory folders under ``root`` whose paths a call named, and whether the
    root itself was listed (a listing reads every memory's name)."""
    root_s = str(root.resolve()).rstrip("/")
    named = re.compile(re.escape(root_s) + r"/(" + re.escape(MEMORY_PREFIX) + r"[^/\"<>]+)")
    listed_root = re.compile(r"getdents64\(\d+<" + re.escape(root_s) + r"/?>")
    return set(named.findall(trace_text)), listed_root.search(trace_text) is not None


def trace_text(trace: Path) -> str:
    """An strace -o log; with -f and several threads it may be one file per pid (``trace.<pid>``)."""
    parts = [trace] if trace.exists() else []
    parts += sorted(trace.parent.glob(trace.name + ".*"))
    return "\n".join(p.read_text(errors="replace") for p in parts)


def start_mcp(project: Path, env: dict[str, str], log: Path) -> tuple[subprocess.Popen, str]:
    """`synthex mcp --http --port 0` for ``project``: the process and its URL, once it printed it."""
    out = open(log, "wb")  # noqa: SIM115 - the server writes to it for its lifetime
    proc = subprocess.Popen([sys.executable, "-m", "synthex.surfaces.cli", "mcp", "--project", str(project), "--http",
                             "--port", "0"], env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)
    out.close()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        found = MCP_URL.search(log.read_text(errors="replace"))
        if found:
            return proc, found.group(0)
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    stop(proc)
    raise RuntimeError(f"the MCP server of {project} printed no URL:\n{log.read_text(errors='replace')[-3000:]}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)


def raw_initialize(client: object, url: str, token: str) -> int:
    """One ``initialize`` POST with ``token``: the HTTP status."""
    response = client.post(url, content=INITIALIZE, headers={  # type: ignore[attr-defined]
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}"})
    return response.status_code


def mcp_client_session(url: str, token: str, query: str) -> dict:
    """A real MCP client session (the ``mcp`` SDK, streamable HTTP) with ``token``: ``{"ok": True, "tools": n,
    "hits": n, "statuses": [...]}`` when it opened and searched; ``{"ok": False, "error": ..., "statuses":
    [...]}`` when it failed. ``statuses``: the HTTP status of every response the client got (the SDK reports a
    refused request as a JSON-RPC error, not by its status)."""
    import anyio
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    answer: dict = {}
    statuses: list[int] = []

    async def seen(response: object) -> None:
        statuses.append(response.status_code)  # type: ignore[attr-defined]

    async def main() -> None:
        with anyio.fail_after(300):
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                          timeout=httpx2.Timeout(30, read=300),
                                          event_hooks={"response": [seen]}) as client, \
                    streamable_http_client(url, http_client=client) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=300) as session:
                    await session.initialize()
                    tools = await session.list_tools()
                    result = await session.call_tool("search", {"query": query, "k": 5})
                    answer.update(ok=not result.is_error, tools=len(tools.tools),
                                  hits=len((result.structured_content or {}).get("hits") or []))

    try:
        anyio.run(main)
    except Exception as exc:  # noqa: BLE001 - a refused session surfaces as the SDK's (grouped) error
        return {"ok": False, "error": f"{type(exc).__name__}: {_leaf_errors(exc)}"[:500], "statuses": statuses}
    return {**answer, "statuses": statuses}


def _leaf_errors(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_leaf_errors(e) for e in exc.exceptions)
    return str(exc)


def token_check(project: Path, others: list[Path], env: dict[str, str], logs: Path, query: str) -> dict:
    """Memory ``project``'s MCP server: every token of ``others`` refused (raw HTTP), its own accepted; a real
    MCP client opens a session with its own token and is refused with the first other's."""
    import httpx2

    from synthex.surfaces.mcp_token import read_token_file, token_path

    own = read_token_file(token_path(project / ".synthex"))
    proc, url = start_mcp(project, env, logs / f"mcp-{project.name}.log")
    try:
        with httpx2.Client(timeout=60) as client:
            statuses = [raw_initialize(client, url, read_token_file(token_path(o / ".synthex"))) for o in others]
            own_status = raw_initialize(client, url, own)
        mine = mcp_client_session(url, own, query)
        theirs = mcp_client_session(url, read_token_file(token_path(others[0] / ".synthex")), query)
    finally:
        stop(proc)
    return {"memory": project.name, "others": len(others), "others_refused": sum(s == 401 for s in statuses),
            "other_statuses": sorted(set(statuses)), "own_status": own_status, "client_own": mine,
            "client_other": theirs}


def run_bench(root: Path, specs: list[MemorySpec], *, searches: int, traced: int, servers: int, workers: int,
              seed: int = 0, say: Callable[[str], None] = print) -> dict:
    """Build ``specs`` under ``root``, then the search, file and token measurements (module docstring)."""
    root = root.resolve()
    env = {k: v for k, v in os.environ.items() if k not in ("SYNTHEX_MCP_TOKEN", "OPENAI_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(Path(__file__).resolve().parents[2]),
                                                    env.get("PYTHONPATH", "")] if p)
    started = time.perf_counter()
    built = build_all(root, specs, workers)
    build_wall = time.perf_counter() - started
    folders = sorted(p.name for p in root.iterdir() if p.name.startswith(MEMORY_PREFIX))
    say(f"built {len(built)} memories now ({len(specs) - len(built)} were built before) in {build_wall:.0f} s; "
        f"{len(folders)} memory folders under {root}")

    rng = random.Random(seed)
    sample = rng.sample(specs, min(searches, len(specs)))
    progress = Progress("search", len(sample), every=10)
    timings = []
    for spec in sample:
        timings.append({"memory": spec.name, **timed_search(root / spec.name, spec.query, env)})
        progress.step()

    traces = []
    with tempfile.TemporaryDirectory(prefix="thousand-memories-") as scratch:
        if traced and shutil.which("strace") is None:
            say("strace is not installed: the files a search touched were not traced")
            traced = 0
        progress = Progress("traced search", min(traced, len(sample)), every=5)
        for spec in sample[:traced]:
            trace = Path(scratch) / f"{spec.name}.strace"
            result = timed_search(root / spec.name, spec.query, env, trace)
            touched, listed_root = memories_touched(trace_text(trace), root)
            traces.append({"memory": spec.name, "hits": result["hits"], "touched": sorted(touched),
                           "listed_root": listed_root, "only_own": touched == {spec.name} and not listed_root})
            progress.step()

        logs = Path(scratch)
        progress = Progress("MCP servers", min(servers, len(sample)), every=1)
        tokens = []
        for spec in sample[:servers]:
            project = root / spec.name
            others = [root / s.name for s in specs if s.name != spec.name]
            rng.shuffle(others)
            tokens.append(token_check(project, others, env, logs, spec.query))
            progress.step()

    summary = {
        "memories": len(specs), "root": str(root), "built_now": len(built), "build_wall_s": round(build_wall, 1),
        "build_s_p50": nearest_rank(built, 0.5), "build_s_p95": nearest_rank(built, 0.95),
        "searches": len(timings),
        **{f"{key}_p{int(q * 100)}": round(nearest_rank([t[key] for t in timings], q), 3)
           for key in ("import_s", "open_search_s", "wall_s") for q in (0.5, 0.95)},
        "search_hits_min": min((t["hits"] for t in timings), default=0),
        "traced": len(traces), "traced_only_own": sum(t["only_own"] for t in traces),
        "traced_other_memories_touched": sorted({m for t in traces for m in t["touched"]} - {t["memory"] for t in traces}),
        "servers": len(tokens),
        "other_tokens_tried": sum(t["others"] for t in tokens),
        "other_tokens_refused": sum(t["others_refused"] for t in tokens),
        "own_tokens_accepted": sum(t["own_status"] == 200 for t in tokens),
        "client_own_ok": sum(bool(t["client_own"].get("ok")) and 401 not in t["client_own"]["statuses"]
                             for t in tokens),
        # refused: the session failed and the server answered 401 (not any other failure of the client)
        "client_other_refused": sum(not t["client_other"].get("ok") and 401 in t["client_other"]["statuses"]
                                    for t in tokens),
        "client_other_errors": sorted({t["client_other"].get("error", "") for t in tokens}),
        "details": {"traces": traces, "tokens": [{k: v for k, v in t.items()} for t in tokens]},
    }
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--root", type=Path, default=None, help="where the memories are (default: a temp dir kept)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--searches", type=int, default=50)
    parser.add_argument("--traced", type=int, default=20)
    parser.add_argument("--servers", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    root = args.root or Path(tempfile.mkdtemp(prefix="synthex-1000-memories-"))
    root.mkdir(parents=True, exist_ok=True)
    specs = memory_specs(read_questions(args.data), args.memories)
    print(f"{args.memories} memories under {root} (load average {os.getloadavg()[0]:.1f})", flush=True)
    summary = run_bench(root, specs, searches=args.searches, traced=args.traced, servers=args.servers,
                        workers=args.workers, seed=args.seed)
    s = summary
    print(f"build: {s['built_now']} memories in {s['build_wall_s']} s (per memory p50 {s['build_s_p50']:.2f} s, "
          f"p95 {s['build_s_p95']:.2f} s, in {args.workers} worker processes)")
    print(f"search one memory among {s['memories']}, fresh process (n={s['searches']}): import p50 "
          f"{s['import_s_p50']} s / p95 {s['import_s_p95']} s; load + first search p50 {s['open_search_s_p50']} s / "
          f"p95 {s['open_search_s_p95']} s; process wall p50 {s['wall_s_p50']} s / p95 {s['wall_s_p95']} s")
    print(f"files: {s['traced_only_own']}/{s['traced']} traced searches touched only their own memory folder "
          f"(other memories touched: {s['traced_other_memories_touched'] or 'none'})")
    print(f"tokens: {s['other_tokens_refused']}/{s['other_tokens_tried']} other memories' tokens refused by "
          f"{s['servers']} servers; own token accepted {s['own_tokens_accepted']}/{s['servers']}; MCP client: own "
          f"session ok {s['client_own_ok']}/{s['servers']}, other's refused {s['client_other_refused']}/{s['servers']}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    print(json.dumps({k: v for k, v in summary.items() if k != "details"}))


if __name__ == "__main__":
    main()
