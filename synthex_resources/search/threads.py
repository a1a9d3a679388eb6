"""The thread counts of the native pools a search runs on, set from this one place.

A query's work is small (a 2,000 x 384 product, one ONNX run of a dozen tokens, one IVF probe), and every
native library sizes its pool to the machine. numpy's BLAS (OpenBLAS in the numpy wheels) is the costly one:
after each product its worker threads busy-wait (OpenBLAS's THREAD_TIMEOUT, ~0.1 s) for the next one, so a
search that did one product keeps a core spinning while it embeds, probes the IVF index and takes rows. On
the 2-core machine here, at 1M records under load ~3.5, that doubled conversational search: p50 / p95
115 / 161 ms with numpy's BLAS at 2 threads, 54 / 69 ms at 1, CPU per query 113 against 56 ms
(docs/benchmarks.md). A product of this size gains nothing from a second thread; the float32 scan of a whole
large scope (``DenseIndex(mode="float32")``) reads memory at the same rate with one.

The settings are process-wide (each library keeps one pool per process), so only the process's owner sets
them: Synthex's entry points (the ``synthex`` CLI, which starts the MCP server too, the Dagster code
location, the evals' ``python -m`` commands) call ``apply_search_threads()`` once, as they start. Library code
never does: a notebook or a Dagster asset that embeds Synthex (``Pipeline.search``, ``SearchEngine.search``)
keeps its BLAS threads unless it calls ``apply_search_threads()`` itself. ONNX's pool is the embedder's
(``MiniLMOnnxEmbedder(threads=)``, synthex_resources/embedder.py); faiss's OpenMP pool is left as it is
(a single-query probe runs on the calling thread; the IVF build uses every core).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# How the BLAS builds numpy ships name the call (threadpoolctl's list): plain OpenBLAS, its 64-bit-integer
# build, and the scipy-openblas wheels numpy 2.x bundles.
_SET_NAMES = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads64_",
              "openblas_set_num_threads")
_GET_NAMES = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads", "openblas_get_num_threads64_",
              "openblas_get_num_threads")


def _loaded_openblas() -> list[Path]:
    """The OpenBLAS libraries this process has loaded (from its memory map; Linux) but faiss's own: numpy's.
    faiss's (an OpenMP build, faiss_cpu.libs) runs the IVF build's k-means, which wants every core."""
    maps = Path("/proc/self/maps")
    if not maps.exists():
        return []
    found: dict[str, None] = {}
    for line in maps.read_text().splitlines():
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        if "openblas" in os.path.basename(path).lower() and path.startswith("/") and "faiss" not in path.lower():
            found[path] = None
    return [Path(p) for p in found]


def _call(lib: Any, names: tuple[str, ...], *args: int) -> int | None:
    for name in names:
        fn = getattr(lib, name, None)
        if fn is not None:
            return int(fn(*args) or 0)
    return None


def blas_threads() -> list[int]:
    """The thread count of each loaded OpenBLAS (empty when none is loaded, or not on Linux)."""
    import ctypes

    import numpy  # noqa: F401 (loads numpy's BLAS, so the map lists it)

    counts = []
    for path in _loaded_openblas():
        count = _call(ctypes.CDLL(str(path)), _GET_NAMES)
        if count is not None:
            counts.append(count)
    return counts


@dataclass(frozen=True)
class SearchThreads:
    """The pool sizes a search process wants. ``blas``: numpy's BLAS threads (None: left as it is)."""

    blas: int | None = 1

    def apply(self) -> dict[str, Any]:
        """Set the pools; returns what it set (the libraries it reached), for the caller to keep."""
        import ctypes  # here, not at the top: an entry point's call before numpy loads needs none (startup)

        import numpy  # noqa: F401 (loads numpy's BLAS, so the map lists it)

        done: list[str] = []
        if self.blas is not None:
            for path in _loaded_openblas():
                lib = ctypes.CDLL(str(path))  # the loaded library's handle (dlopen of a loaded path)
                if _call(lib, _GET_NAMES) == self.blas:
                    done.append(path.name)
                    continue
                for name in _SET_NAMES:
                    fn = getattr(lib, name, None)
                    if fn is not None:
                        fn(ctypes.c_int(self.blas))
                        done.append(path.name)
                        break
        return {"blas": self.blas, "libraries": done}


SEARCH_THREADS = SearchThreads()
BLAS_ENVIRONMENT = "OPENBLAS_NUM_THREADS"  # read by OpenBLAS when it loads (not by faiss's OpenMP build)


def apply_search_threads(settings: SearchThreads = SEARCH_THREADS) -> dict[str, Any]:
    """For a process's entry point only (see the module docstring): ``settings`` applied to this process.
    Before numpy is imported its BLAS is not loaded yet: the count goes in ``OPENBLAS_NUM_THREADS``, which
    OpenBLAS reads when numpy loads it (so ``synthex --help`` does not pay numpy's import; child processes
    inherit it); after, the loaded libraries are set (``SearchThreads.apply``). Returns what it set."""
    if settings.blas is not None and "numpy" not in sys.modules:
        os.environ[BLAS_ENVIRONMENT] = str(settings.blas)
        return {"blas": settings.blas, "libraries": [], "environment": BLAS_ENVIRONMENT}
    return settings.apply()
