"""Ablation of the ``hierarchical`` strategy on LoCoMo (issue 22): each altitude alone, all of them, and
the choices around them, on the ``hierarchical-conversational`` architecture's ingested workspaces.

Every variant searches the same records (turns, turns in context, key aggregates by speaker, entity and
topic: evals/architectures.py) through the real search engine; only the strategy and the searched steps
change. The first row is the turn leg alone (the ``conversational`` recipe over the turns in context),
so each row says what its altitude adds. A missing workspace is ingested (as ``synthex eval locomo
--compare hierarchical-conversational`` does); an existing one is re-opened by its incremental run.
Tables (turn and session level, by category; wall time; index on disk and in memory) as
evals/ablations/conversational.py prints them; ``--json`` rows feed ``python -m evals.ablations.chart``.

    python -m evals.ablations.hierarchical --data ../shared/data/locomo/locomo10_dev7.json \\
        --work-dir <project>/.synthex/evals/work/locomo --json hier.json --markdown hier.md [--limit 2]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

from evals.ablations.conversational import _add, ablation_row, disk_bytes, memory_bytes
from evals.ablations.conversational import main as ablation_main
from evals.architectures import HIERARCHY_KEYS, ranked_leaf_keys, resolve
from evals.benchmarks.locomo.benchmark import add_question, ingest_conversation
from evals.benchmarks.locomo.data import load_locomo
from evals.scoring import Tally
from synthex_resources.embedder import EmbedderConfig
from synthex_resources.search import SearchEngine
from synthex_resources.search.strategies.base import SearchStrategy
from synthex_resources.search.strategies.builtin import (
    CONVERSATIONAL,
    HIERARCHICAL,
    HIERARCHICAL_EXPANDED,
    HIERARCHICAL_SPEAKER,
)

ARCHITECTURE = "hierarchical-conversational"
TURNS = ["turns-in-context"]
ALTITUDES = [f"by-{key}" for key in HIERARCHY_KEYS]


class Variant(NamedTuple):
    config: SearchStrategy
    steps: list[str]


VARIANTS: dict[str, Variant] = {
    "turn leg alone (conversational)": Variant(CONVERSATIONAL, TURNS),
    **{f"+ {step[3:]} aggregates": Variant(HIERARCHICAL, TURNS + [step]) for step in ALTITUDES},
    "hierarchical: speaker + entity + topic (kept)": Variant(HIERARCHICAL, TURNS + ALTITUDES),
    "kept, altitude weight 0.5": Variant(HIERARCHICAL.with_(altitude_weight=0.5), TURNS + ALTITUDES),
    "kept, + key match 1.0": Variant(HIERARCHICAL.with_(key_weight=1.0), TURNS + ALTITUDES),
    "aggregates in leaf-sum (no drill-down fusion)": Variant(CONVERSATIONAL, TURNS + ALTITUDES),
    # Multi-hop (issue 22): the named speaker's turns x (1 + w); w = 0.15 chosen on dev7 conversations 1-4.
    **{f"kept, + named speaker x {1 + w:g}{' (hierarchical-speaker)' if w == 0.15 else ''}":
       Variant(HIERARCHICAL_SPEAKER.with_(speaker_weight=w), TURNS + ALTITUDES) for w in (0.05, 0.15, 0.25)},
    # Word-neighbour expansion (search/strategies/hierarchical_expanded.py); similarity 0.4, weight 0.5 chosen on conversations 1-4.
    "kept, + word neighbours (no named speaker)": Variant(HIERARCHICAL.with_(expansion_weight=0.5), TURNS + ALTITUDES),
    "kept, + named speaker + word neighbours (hierarchical-expanded)": Variant(HIERARCHICAL_EXPANDED,
                                                                               TURNS + ALTITUDES),
    "kept, + named speaker + own words only (similarity 0.999)": Variant(
        HIERARCHICAL_EXPANDED.with_(expansion_similarity=0.999), TURNS + ALTITUDES),
    # The grid the expansion's two parameters were chosen on (dev7 conversations 1-4: --limit 4 --only grid).
    **{f"grid: similarity {tau:g}, weight {lam:g}": Variant(
        HIERARCHICAL_EXPANDED.with_(expansion_similarity=tau, expansion_weight=lam), TURNS + ALTITUDES)
       for tau in (0.35, 0.4, 0.45, 0.5, 0.55) for lam in (0.25, 0.5, 1.0)},
}


def run(data: Path, work_dir: Path, limit: int | None = None, k: int = 10, offset: int = 0,
        only: list[str] | None = None, log=print) -> list[dict]:
    chosen = {name: v for name, v in VARIANTS.items() if not only or any(o.lower() in name.lower() for o in only)}
    raw = json.loads(data.read_text(encoding="utf-8"))
    conversations = load_locomo(data)[offset:][: limit or None]
    embedder = EmbedderConfig().create()
    arch = resolve([ARCHITECTURE], None)[0]
    started = time.perf_counter()
    pipes = {c.sample_id: ingest_conversation(arch, c.sample_id, raw, work_dir, embedder) for c in conversations}
    print(f"# {arch.name}: {len(conversations)} workspaces under {work_dir / arch.work_key} opened in "
          f"{time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    rows = []
    try:
        for name, variant in chosen.items():
            rows.append(_run_variant(name, variant, conversations, pipes, k))
            log(json.dumps({key: value for key, value in rows[-1].items() if key != "questions"}))
    finally:
        for pipe in pipes.values():
            pipe.close()
    return rows


def _run_variant(name: str, variant: Variant, conversations: list, pipes: dict[str, Any], k: int) -> dict:
    tally = Tally()
    searching = cold_s = 0.0
    disk: dict[str, int] = {}
    memory: dict[str, int] = {}
    for conv in conversations:
        store = pipes[conv.sample_id].app.store
        store.close()  # each variant builds (and is measured with) its own caches
        engine = SearchEngine(store)
        session_of = {t.dia_id: t.session_id for t in conv.turns}
        questions = [(i, q) for i, q in enumerate(conv.questions) if q.evidence]
        if questions:
            started = time.perf_counter()
            engine.search(questions[0][1].question, steps=variant.steps, k=k, strategy=variant.config)
            cold_s += time.perf_counter() - started
        for index, question in questions:
            started = time.perf_counter()
            hits = engine.search(question.question, steps=variant.steps, k=k, strategy=variant.config)
            searching += time.perf_counter() - started
            turns = ranked_leaf_keys(hits, question.question, lambda r: r.meta("chat.message_id"), k)
            add_question(tally, question, turns, session_of, question_id=f"{conv.sample_id}/q{index}")
        _add(disk, disk_bytes(store))
        _add(memory, memory_bytes(store))
    return ablation_row(tally, {"variant": name, "architecture": ARCHITECTURE, "steps": variant.steps},
                        searching=searching, index_s=0.0, cold_s=cold_s, disk=disk, memory=memory)


def main() -> None:
    ablation_main(run, "the eval's work dir: holds the hierarchical-conversational workspaces",
                  description=__doc__.splitlines()[0])


if __name__ == "__main__":
    from synthex_resources.search.threads import apply_search_threads

    apply_search_threads()  # this process's entry point chooses its BLAS threads (search/threads.py)
    main()
