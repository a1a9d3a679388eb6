"""Other memory systems fed the same data as Synthex's architectures (``synthex eval <benchmark> --compare
<peer>``). ``PEERS`` is the one list of them: the architectures' resolver skips these names, each benchmark's
``peers`` and ``evaluate_peer`` read it, and ``--help`` lists it.

A runner is ``"module:function"``, imported only when the peer runs (a peer's package is an optional extra),
called as ``function(benchmark, data, work_dir, *, limit, k, log, embedding_cache)`` and returning a result
like ``evals.benchmarks.evaluate``'s.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from synthex.core.errors import SynthexError


class PeerUnavailable(SynthexError):
    """A peer cannot run here (its package is not installed): one line naming the extra that installs it."""


@dataclass(frozen=True)
class Peer:
    name: str
    runners: Mapping[str, str]  # benchmark name -> "module:function"


PEERS: Mapping[str, Peer] = {
    "mem0": Peer("mem0", {"locomo": "evals.peers.mem0_peer:run_locomo",
                          "longmemeval": "evals.peers.mem0_peer:run_longmemeval"}),
    "mempalace": Peer("mempalace", {"longmemeval": "evals.peers.mempalace_peer:run_longmemeval"}),
}
PEER_NAMES = tuple(PEERS)


def peers_of(benchmark: str) -> tuple[str, ...]:
    """The peers that run on ``benchmark``, in ``PEERS`` order."""
    return tuple(name for name, peer in PEERS.items() if benchmark in peer.runners)


def peer_runner(peer: str, benchmark: str) -> Callable[..., dict[str, Any]]:
    """``peer``'s runner on ``benchmark`` (a ``KeyError`` if it has none: callers check ``peers_of`` first)."""
    module, _, function = PEERS[peer].runners[benchmark].partition(":")
    return getattr(importlib.import_module(module), function)
