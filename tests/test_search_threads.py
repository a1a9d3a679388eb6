"""numpy's BLAS threads are chosen by Synthex's entry points, never by a search (search/threads.py): the
CLI's and the code location's process runs searches on one BLAS thread (its spinning workers cost a core per
query at 1M); a library caller (a notebook, ``Pipeline.search``) keeps the threads it has.

Real LanceDB store in a tmp dir with the bag-of-words embedder of test_conversational_costs; the ran project
of conftest for the Python API; the CLI in a subprocess for the before-numpy path.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import cli, load
from test_conversational_costs import BagEmbedder

from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.record_store import RecordStore
from synthex_resources.search.engine import SearchEngine
from synthex_resources.search.threads import (
    BLAS_ENVIRONMENT,
    SearchThreads,
    apply_search_threads,
    blas_threads,
)

MAIN = BranchScope.own()


@pytest.fixture
def openblas() -> None:
    if not blas_threads():
        pytest.skip("no OpenBLAS loaded in this process (numpy built against another BLAS)")
    yield
    SearchThreads(blas=1).apply()  # as this process's entry point (pytest) would leave them: one thread


def test_blas_threads_set_by_the_entry_point_once_and_never_by_a_search(openblas, tmp_path, monkeypatch):
    monkeypatch.delenv(BLAS_ENVIRONMENT, raising=False)
    store = RecordStore(str(tmp_path / "s"), embedder=BagEmbedder())
    store.records.upsert([Record(id=f"r{i}", content=f"garden tomato {i}", step="turns", materialization_key=f"r{i}")
                          for i in range(4)])
    SearchThreads(blas=2).apply()
    assert set(blas_threads()) == {2}
    first = apply_search_threads()  # numpy is loaded: the loaded libraries are set
    assert set(blas_threads()) == {1}
    assert first["blas"] == 1 and first["libraries"]
    SearchThreads(blas=2).apply()  # a search afterwards does not set them again
    engine = SearchEngine(store)
    engine.search("garden", ["turns"], MAIN, 2)
    engine.search("tomato", ["turns"], MAIN, 2)
    assert set(blas_threads()) == {2}
    store.close()


def test_a_library_search_leaves_the_blas_threads_unchanged(openblas, ran_project, tmp_path):
    pipe = load(ran_project.copy(tmp_path / "proj"))
    try:
        for threads in (2, 1):
            SearchThreads(blas=threads).apply()
            assert pipe.search("budget")  # the first search of the pipeline, then a warm one
            assert set(blas_threads()) == {threads}
    finally:
        pipe.close()


def test_the_cli_chooses_one_blas_thread(openblas):
    """In this process (numpy loaded): the CLI's main sets the loaded libraries, whatever its command."""
    SearchThreads(blas=2).apply()
    cli("--version")  # an eager option: main's body does not run, nothing is set
    assert set(blas_threads()) == {2}
    cli("branch", "list", "--help")
    assert set(blas_threads()) == {1}


def test_before_numpy_loads_the_count_is_left_for_openblas_to_read():
    """A fresh process: the entry point's call does not import numpy (``synthex --help`` stays light), and
    numpy's OpenBLAS starts with the chosen count when it loads."""
    code = ("import sys\n"
            "from synthex_resources.search.threads import apply_search_threads, blas_threads\n"
            "done = apply_search_threads()\n"
            "assert 'numpy' not in sys.modules, 'numpy imported'\n"
            "print(done['environment'], blas_threads())\n")
    env = {k: v for k, v in os.environ.items() if k != BLAS_ENVIRONMENT}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    found = out.stdout.split()
    if found[1:] == ["[]"]:
        pytest.skip("no OpenBLAS in numpy here")
    assert out.stdout.strip() == f"{BLAS_ENVIRONMENT} [1]"
