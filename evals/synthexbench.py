"""SynthexBench v0 (design doc §9.3): what flat benchmarks cannot see.

    python -m evals.synthexbench [--conversations 200] [--json]

Builds a synthetic ChatGPT export with planted items, runs the default template pipeline on it and scores:
- provenance completeness: every derived record's sources exist and its leaves are source records (must be 100 %);
- leaf bypass: a verbatim phrase planted only in a conversation's late turn (the summaries drop it)
  is found by ``exact=True`` leaf search;
- multi-altitude retrieval: a planted topic is found at the summary altitude and at the monthly
  altitude, and drilling down from each hit reaches the planted conversation;
- emergent knowledge: the monthly level states the web -> systems trend. Scored only with a real LLM
  (the offline extractive stand-in cannot state what no single input says); reported as skipped offline.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path
from typing import Any

from synthex.core.demo.generate import generate
from synthex.core.project import init_project, load_pipeline
from synthex.core.scope import BranchScope

PLANTED_TOPICS = ["Zanzibar beekeeping cooperative", "quokka photography permit", "Marrakech tannery audit"]


def _active_user_nodes(conv: dict[str, Any]) -> list[dict[str, Any]]:
    """User nodes on the path the export shows (current_node up to the root), first to last."""
    path, node_id = [], conv["current_node"]
    while node_id is not None:
        node = conv["mapping"][node_id]
        path.append(node)
        node_id = node["parent"]
    return [n for n in reversed(path) if n["message"] and n["message"]["author"]["role"] == "user"]


def planted_export(conversations: int, seed: int = 11) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    data = generate(conversations=conversations, months=14, seed=seed)
    rng = random.Random(seed)
    plan: dict[str, Any] = {"phrases": {}, "topics": {}}
    for i, conv in enumerate(rng.sample(data, 6)):
        node = conv["mapping"][conv["current_node"]]  # the last (assistant) turn: summaries rarely keep it
        if i < 3:
            phrase = f"verbatim marker {rng.randrange(10**6, 10**7)} kept only in the transcript"
            node["message"]["content"]["parts"].append(f"PS: {phrase}.")
            plan["phrases"][phrase] = conv["conversation_id"]
        else:
            topic = PLANTED_TOPICS[i - 3]
            first_user = _active_user_nodes(conv)[0]
            first_user["message"]["content"]["parts"] = [f"I need help with the {topic}: what should I plan first?"]
            conv["title"] = f"{topic} planning"
            plan["topics"][topic] = conv["conversation_id"]
    return data, plan


def run(conversations: int = 200, root: Path | None = None) -> dict[str, Any]:
    root = root or Path(tempfile.mkdtemp(prefix="synthexbench-"))
    data, plan = planted_export(conversations)
    export = root / "conversations.json"
    root.mkdir(parents=True, exist_ok=True)
    export.write_text(json.dumps(data))
    project = root / "project"
    if not (project / "pipeline.py").exists():
        init_project(project, "synthexbench", [str(export)])
    pipe = load_pipeline(project)
    pipe.run()
    store = pipe.store()
    source_steps = set(pipe.leaf_steps())

    # Provenance completeness
    derived = [r for s in pipe.order() if s not in source_steps for r in store.records.list(BranchScope.own(), step=s)]
    complete = 0
    for rec in derived:
        sources = rec.sources()
        leaves = rec.leaves()
        if len(sources) == len(rec.source_ids) and leaves and all(leaf.step in source_steps for leaf in leaves):
            complete += 1
    provenance = complete / len(derived) if derived else 1.0

    # Leaf bypass
    bypass_found, dropped_by_summaries = 0, 0
    for phrase, conv_id in plan["phrases"].items():
        hits = pipe.search(phrase, exact=True)
        bypass_found += any(h.meta("chat.conversation_id") == conv_id for h in hits)
        dropped_by_summaries += not any(phrase in r.content for r in store.records.list(BranchScope.own(), step="summaries"))

    # Multi-altitude retrieval with drill-down
    altitude: dict[str, float] = {}
    for step in ("summaries", "monthly"):
        found = 0
        for topic, conv_id in plan["topics"].items():
            hits = pipe.search(topic, step=step, k=5)
            found += any(conv_id in {leaf.meta("chat.conversation_id") for leaf in h.leaves()} for h in hits)
        altitude[step] = found / len(plan["topics"])

    from synthex_resources.llm import LLMConfig

    return {
        "benchmark": "synthexbench-v0", "conversations": conversations, "records": sum(pipe.stats()["steps"][s]["records"] for s in pipe.steps),
        "provenance_completeness": round(provenance, 4),
        "leaf_bypass_recall": bypass_found / len(plan["phrases"]),
        "leaf_bypass_phrases_absent_from_summaries": f"{dropped_by_summaries}/{len(plan['phrases'])}",
        "multi_altitude_recall@5": altitude,
        "emergent_knowledge": "skipped: needs a real LLM" if LLMConfig().is_offline() else "not implemented",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="SynthexBench v0")
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.conversations)
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    from synthex_resources.search.threads import apply_search_threads

    apply_search_threads()  # this process's entry point chooses its BLAS threads (search/threads.py)
    main()
