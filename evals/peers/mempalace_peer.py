"""MemPalace as a peer in the same LongMemEval run (``--compare mempalace``): each question's haystack its own
palace (ChromaDB, MemPalace's default backend), scored by the run's protocol like every architecture
(``evals.peers.haystacks``).

- ``--protocol official`` / ``any``: one drawer per turn of the protocol (its id the turn id), searched with
  MemPalace's own ``search_memories`` (vector candidates re-ranked with BM25, its default "hybrid" search).
- ``--protocol mempalace``: MemPalace's own LongMemEval benchmark (benchmarks/longmemeval_bench.py of
  MemPalace/mempalace, "raw" mode, the configuration of its published 96.6 % recall_any@5 on S): one drawer
  per session holding a user turn (its user turns joined), ranked by the collection's vector query, scored by
  its metrics (``evals.benchmarks.longmemeval.data.mempalace_metrics``) on every question.

The embedder is Synthex's: MemPalace's ``openai-compat`` embedding model pointed at the loopback endpoint over
the eval's embedder (the same MiniLM vectors, from the eval's memo and disk cache; MemPalace's own MiniLM would
be downloaded from the hub, which is not reachable here). MemPalace reads that setting from
``MEMPALACE_CONFIG_DIR`` only, so it runs in a child process (``evals.peers.mempalace_worker``) whose
environment alone has it: neither the user's ``~/.mempalace`` nor the eval's process is touched.
Optional: ``pip install -e ".[mempalace]"``, or MemPalace in a venv of its own (its ChromaDB and numpy pins need
not agree with Synthex's) named by ``SYNTHEX_MEMPALACE_PYTHON`` (that venv's interpreter): the worker imports
nothing of Synthex, so it runs there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from evals.peers import PeerUnavailable
from evals.peers.local_embeddings import LocalEmbeddingServer
from synthex.core.errors import SynthexError

MISSING = "the mempalace peer needs mempalace: pip install -e '.[mempalace]'"
WORKER = Path(__file__).with_name("mempalace_worker.py")
PYTHON_VARIABLE = "SYNTHEX_MEMPALACE_PYTHON"  # read, never set: the interpreter of a venv that has MemPalace


def worker_python() -> str:
    """The interpreter the worker runs under: ``SYNTHEX_MEMPALACE_PYTHON`` if set, else the eval's own."""
    return os.environ.get(PYTHON_VARIABLE) or sys.executable


def mempalace_available() -> bool:
    """Whether the worker's interpreter can import MemPalace (asked of that interpreter when it is another)."""
    python = worker_python()
    if python == sys.executable:
        try:
            import mempalace  # noqa: F401
        except ImportError:
            return False
        return True
    try:  # find_spec, not an import: the answer without loading ChromaDB
        done = subprocess.run([python, "-c", "import importlib.util, sys; "
                               "sys.exit(importlib.util.find_spec('mempalace') is None)"],
                              capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def missing_message() -> str:
    """The one line saying why the peer cannot run, naming the other interpreter when one is set."""
    python = worker_python()
    if python == sys.executable:
        return MISSING
    return f"the mempalace peer needs mempalace in {PYTHON_VARIABLE}={python}: {python} -m pip install mempalace==3.11.0"


class PalaceWorker:
    """The child process that holds MemPalace (``evals.peers.mempalace_worker``), its configuration folder
    ``config`` in its environment only; its stderr goes to ``config / "worker.log"``."""

    def __init__(self, config: Path) -> None:
        self.log = config / "worker.log"
        self._stderr: IO[bytes] = self.log.open("wb")
        self.process = subprocess.Popen([worker_python(), str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self._stderr, text=True,
                                        env=os.environ | {"MEMPALACE_CONFIG_DIR": str(config)})

    def call(self, **request: Any) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # the child has exited: the empty answer below says so
        line = self.process.stdout.readline()
        if not line:
            raise SynthexError(f"mempalace: its process ended during {request['op']!r} (see {self.log})")
        answer = json.loads(line)
        if "error" in answer:
            raise SynthexError(f"mempalace {request['op']} failed: {answer['error']}")
        return answer

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._stderr.close()

    def __enter__(self) -> PalaceWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Palace:
    """One haystack's palace (``evals.peers.haystacks.PeerMemory``) in the worker: a drawer per document, its id
    the document's (a turn id, or a session id under the mempalace protocol); ``how``: the worker's search."""

    def __init__(self, worker: PalaceWorker, root: Path, how: str) -> None:
        self.worker, self.how = worker, how
        worker.call(op="open", root=str(root))

    def add(self, texts: Sequence[str], turn_ids: Sequence[str]) -> None:
        self.worker.call(op="add", texts=list(texts), ids=list(turn_ids))

    def search(self, query: str, depth: int) -> list[str]:
        return self.worker.call(op="search", query=query, depth=depth, how=self.how)["ids"]

    def close(self) -> None:
        self.worker.call(op="close")


def evaluate_mempalace_longmemeval(benchmark: Any, data: Path, work_dir: Path, limit: int | None = None, k: int = 10,
                                   log: Callable[[str], None] = print, embedder: Any = None) -> dict[str, Any]:
    """MemPalace on LongMemEval with the eval's embedder (module docstring)."""
    from evals.peers.haystacks import evaluate_peer_haystacks

    if not mempalace_available():
        raise PeerUnavailable(missing_message())
    config = work_dir / benchmark.work_subdir / "mempalace-config"
    config.mkdir(parents=True, exist_ok=True)
    own = benchmark.protocol == "mempalace"
    with LocalEmbeddingServer(embedder) as server, PalaceWorker(config) as worker:
        (config / "config.json").write_text(json.dumps({
            "embedding_model": "openai-compat", "embedding_api_url": server.base_url,
            "embedding_api_model": "synthex-minilm"}))
        return evaluate_peer_haystacks(
            benchmark, data, work_dir, "mempalace", lambda root: _Palace(worker, root, "query" if own else "memories"),
            limit=limit, k=k, log=log, embedder=embedder, granularity="session" if own else "turn",
            mode="dense" if own else "hybrid",
            pipeline=("mempalace (its LongMemEval benchmark's raw mode: a drawer per session, vector query)" if own
                      else "mempalace (a drawer per turn, search_memories: vector + BM25)"))


def run_longmemeval(benchmark: Any, data: Path, work_dir: Path, *, limit: int | None, k: int,
                    log: Callable[[str], None], embedding_cache: Path | None = None) -> dict[str, Any]:
    """The ``evals.peers.PEERS`` runner: the eval's embedder and its disk cache (the same vectors)."""
    from evals.shared_embedder import MemoEmbedder

    if not mempalace_available():  # before the embedder loads
        raise PeerUnavailable(missing_message())
    return evaluate_mempalace_longmemeval(benchmark, data, work_dir, limit=limit, k=k, log=log,
                                          embedder=MemoEmbedder.with_disk_cache(embedding_cache, warn=log))
