"""`synthex mcp` latency: search through a real MCP client session (warm server) against the CLI
(`synthex search`, a cold process each time) and in-process `ProjectApp.search`; and how long a
`remember` takes to become searchable.

    python -m evals.bench.mcp                          # 10k and 100k records, 50 queries per path
    python -m evals.bench.mcp --sizes 10000 --cli-queries 5

Each size is a project folder with a JSONL source of N turns and a stream source for `remember`. Its
records are what a run would store (the source step's own code computes them, so a run has nothing
to do), written without Dagster and without the model: texts and vectors come from
`evals.bench.search.corpus` (Zipf words, random unit vectors; latency does not depend on what the
vectors mean). Queries are 3-word phrases of that vocabulary, embedded by the real offline embedder,
so hybrid latency includes embedding the query. Every path searches the same way (default steps,
k=10). Prints a table per size and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from evals.bench.search import corpus, percentiles

PIPELINE = '''from synthex import Pipeline

pipeline = Pipeline("bench-mcp")
pipeline.source("turns", file="turns.jsonl", format="jsonl")
pipeline.source("agent", stream="inbox.jsonl")
pipeline.output("search", from_=["turns", "agent"], surface="search")
'''


def build_project(root: Path, n: int) -> dict[str, float]:
    """A project whose store holds what a run of it would: N turns with vectors, an FTS index."""
    from synthex.core.project import load_pipeline
    from synthex.core.steps import execute_partition
    from synthex_resources.search import SearchEngine
    from synthex_resources.step_context import SnapshotContext

    t0 = time.perf_counter()
    root.mkdir(parents=True)
    (root / "pipeline.py").write_text(PIPELINE)
    texts = corpus(n, seed=7)
    with (root / "turns.jsonl").open("w") as out:
        for i, rec in enumerate(texts):
            out.write(json.dumps({"id": f"turn-{i}", "content": rec.content,
                                  "created_at": f"2024-{(i % 12) + 1:02d}-15T10:00:00Z"}) + "\n")
    vectors = iter([rec.embedding for rec in texts])  # random: which record gets which does not matter
    pipe = load_pipeline(root)
    store, turns = pipe.app.store, pipe.steps["turns"]
    for period in turns.periods():
        records = execute_partition(turns, SnapshotContext.of([], "main").at(period), set()).new_records
        for rec in records:
            rec.embedding = next(vectors)
        store.records.upsert(records, embed=False)
    SearchEngine(store).ensure_index()
    written = time.perf_counter() - t0
    pipe.app.close()
    return {"build_s": round(written, 1)}


def queries(count: int, seed: int = 99) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(f"w{int(r)}" for r in rng.integers(5, 400, size=3)) for _ in range(count)]


def synthex_exe() -> list[str]:
    exe = shutil.which("synthex")
    return [exe] if exe else [sys.executable, "-m", "synthex.surfaces.cli"]


def cli(root: Path, qs: list[str]) -> dict[str, float]:
    times = []
    for q in qs:
        t0 = time.perf_counter()
        subprocess.run([*synthex_exe(), "search", q, "--project", str(root), "--json"], check=True,
                       capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
    return percentiles(times)


def wait_until_no_run(data_dir: Path, timeout: float = 600) -> None:
    """Until no run holds the branch lock (the server's sync has finished its writes and checks). Only
    probes the lock, never takes it longer than that."""
    import fcntl

    from synthex_resources.branch_lock import lock_path

    path = lock_path(data_dir, "main")
    deadline = time.monotonic() + timeout
    while path.exists():
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise RuntimeError("the server's sync still runs after 600 s") from None
        finally:
            os.close(fd)
        time.sleep(0.1)


async def measure(root: Path, qs: list[str], remembers: int) -> dict:
    """In-process ProjectApp.search and one `synthex mcp` process over stdio, queried alternately (query i
    in-process then over MCP, query i+1 the other way round), so both see the same machine load. Then
    remember -> searchable, each sample started when no sync runs."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from synthex.core.project import load_pipeline

    pipe = load_pipeline(root)
    app = pipe.app
    params = StdioServerParameters(command=synthex_exe()[0], args=[*synthex_exe()[1:], "mcp", "--project", str(root)],
                                   env=dict(os.environ))
    out: dict = {"in_process": {}, "mcp": {}}
    t0 = time.perf_counter()
    async with stdio_client(params, errlog=sys.stderr) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=600) as session:
            await session.initialize()
            out["initialize_s"] = round(time.perf_counter() - t0, 2)
            first = await session.call_tool("search", {"query": qs[0]})
            assert not first.is_error, first.content[0].text
            out["start_to_first_hit_s"] = round(time.perf_counter() - t0, 2)

            async def over_mcp(q: str, mode: str) -> float:
                t1 = time.perf_counter()
                res = await session.call_tool("search", {"query": q, "mode": mode})
                took = time.perf_counter() - t1
                assert not res.is_error and res.structured_content["hits"], res.content[0].text
                return took

            def local(q: str, mode: str) -> float:
                t1 = time.perf_counter()
                assert app.search(q, mode=mode)
                return time.perf_counter() - t1

            for mode in ("hybrid", "bm25"):
                for q in qs[:3]:  # warm both (matrix, FTS, embedder, caches)
                    local(q, mode)
                    await over_mcp(q, mode)
                mine, theirs = [], []
                for i, q in enumerate(qs):
                    if i % 2:
                        theirs.append(await over_mcp(q, mode))
                        mine.append(local(q, mode))
                    else:
                        mine.append(local(q, mode))
                        theirs.append(await over_mcp(q, mode))
                out["in_process"][mode], out["mcp"][mode] = percentiles(mine), percentiles(theirs)
            app.close()
            lags = []
            for i in range(remembers):
                wait_until_no_run(pipe.data_dir)
                word = f"benchnote{int(time.time())}x{i}"
                t1 = time.perf_counter()
                res = await session.call_tool("remember", {"text": f"remember {word} please"})
                assert not res.is_error, res.content[0].text
                while True:
                    found = await session.call_tool("search", {"query": word, "step": "agent", "mode": "bm25"})
                    if found.structured_content["hits"]:
                        break
                    if time.perf_counter() - t1 > 600:
                        raise RuntimeError(f"{word} not searchable after 600 s")
                    await anyio.sleep(0.05)
                lags.append(time.perf_counter() - t1)
            wait_until_no_run(pipe.data_dir)
            if lags:
                out["remember_first_s"] = round(lags[0], 2)
                if len(lags) > 1:
                    out["remember_after_first"] = percentiles(lags[1:])
    return out


def one_size(n: int, work: Path, query_count: int, cli_count: int, remembers: int) -> dict:
    import anyio

    root = work / f"p{n}"
    result: dict = {"records": n, **build_project(root, n)}
    print(f"built {n:,} records in {result['build_s']} s", flush=True)
    qs = queries(query_count)
    result.update(anyio.run(measure, root, qs, remembers))
    print(f"  in-process and MCP done: {result}", flush=True)
    result["cli"] = {"hybrid": cli(root, qs[:cli_count])}
    print(f"  cli done: {result['cli']}", flush=True)
    return result


def table(r: dict) -> str:
    base = r["in_process"]["hybrid"]["p50_ms"]
    rows = [("in-process ProjectApp.search", "hybrid", r["in_process"]["hybrid"]),
            ("MCP call_tool (warm server)", "hybrid", r["mcp"]["hybrid"]),
            ("CLI `synthex search` (cold)", "hybrid", r["cli"]["hybrid"]),
            ("in-process ProjectApp.search", "bm25", r["in_process"]["bm25"]),
            ("MCP call_tool (warm server)", "bm25", r["mcp"]["bm25"])]
    lines = [f"== {r['records']:,} records == (built in {r['build_s']} s)",
             f"  {'path':<30} {'mode':<7} {'p50 ms':>9} {'p95 ms':>9} {'p50 / in-process hybrid':>25}"]
    for name, mode, v in rows:
        lines.append(f"  {name:<30} {mode:<7} {v['p50_ms']:>9} {v['p95_ms']:>9} {v['p50_ms'] / base:>24.1f}x")
    m = r["mcp"]
    lines.append(f"  CLI p50 / MCP p50 (hybrid): {r['cli']['hybrid']['p50_ms'] / m['hybrid']['p50_ms']:.0f}x;"
                 f" MCP minus in-process p50: hybrid {m['hybrid']['p50_ms'] - base:+.1f} ms, "
                 f"bm25 {m['bm25']['p50_ms'] - r['in_process']['bm25']['p50_ms']:+.1f} ms")
    lines.append(f"  MCP server start: initialize answered after {r['initialize_s']} s, first hit after "
                 f"{r['start_to_first_hit_s']} s")
    if "remember_first_s" in r:
        after = r.get("remember_after_first")
        lines.append(f"  remember -> searchable: first {r['remember_first_s']} s"
                     + (f"; then p50 {after['p50_ms'] / 1000:.2f} s, p95 {after['p95_ms'] / 1000:.2f} s" if after else ""))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=50, help="queries per in-process and MCP measurement")
    parser.add_argument("--cli-queries", type=int, default=10, help="`synthex search` processes per size")
    parser.add_argument("--remember", type=int, default=5, help="remember -> searchable samples per size")
    parser.add_argument("--work", type=Path, default=None, help="folder for the projects (default: a temp dir)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="synthex-bench-mcp-"))
    results = []
    for n in (int(s) for s in args.sizes.split(",")):
        results.append(one_size(n, work, args.queries, args.cli_queries, args.remember))
        print("\n" + table(results[-1]) + "\n", flush=True)
    print(f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}, "
          f"peak RSS of this process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
