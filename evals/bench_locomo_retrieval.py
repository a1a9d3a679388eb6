"""LoCoMo retrieval through a Synthex pipeline: each conversation ingested as a source (turn records),
questions searched through the pipeline's search, evidence dia_ids as gold.

    python -m evals.bench_locomo_retrieval [--data ../shared/data/locomo/locomo10_dev7.json] [--limit N]

Prints turn-level and session-level recall_any@k, recall_all@k (k = 1, 5, 10), NDCG@10 and MRR for
bm25, dense and hybrid. Questions without evidence are skipped (they have no gold).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from evals.locomo import CATEGORIES, load_locomo, with_previous_turn
from evals.metrics import dedupe, mean, score
from synthex import Pipeline

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10_dev7.json"


ARCHITECTURES = {"raw": "turns", "contextual": "turns-in-context"}
MODES = tuple(f"{arch}/{mode}" for arch in ARCHITECTURES for mode in ("bm25", "dense", "hybrid"))


def build_pipeline(conv_json: Path, root: Path) -> Pipeline:
    """raw: the turns as imported. contextual: each turn indexed with the turn before it (no model)."""
    pipe = Pipeline("locomo", project_dir=root)
    pipe.source("turns", file=str(conv_json), format="locomo-turns")
    pipe.transform("turns-in-context", from_="turns", fn=with_previous_turn)
    return pipe


def evaluate(data: Path, limit: int | None = None, modes: tuple[str, ...] = MODES, k: int = 10) -> dict:
    conversations = load_locomo(data)[: limit or None]
    raw = json.loads(data.read_text())
    rows: dict[str, dict[str, list]] = {m: {"turn": [], "session": []} for m in modes}
    by_cat: dict[str, dict[str, list]] = {m: defaultdict(list) for m in modes}
    latencies: dict[str, list[float]] = {m: [] for m in modes}
    ingest_s = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for conv in conversations:
            root = Path(tmp) / conv.sample_id
            root.mkdir()
            conv_json = root / "conversation.json"
            conv_json.write_text(json.dumps([s for s in raw if s.get("sample_id") == conv.sample_id]))
            pipe = build_pipeline(conv_json, root)
            t0 = time.perf_counter()
            pipe.run()
            ingest_s += time.perf_counter() - t0
            session_of = {t.dia_id: t.session_id for t in conv.turns}
            for question in conv.questions:
                if not question.evidence:
                    continue
                gold_turns = set(question.evidence)
                gold_sessions = set(question.evidence_sessions)
                for mode in modes:
                    t0 = time.perf_counter()
                    arch, search_mode = mode.split("/")
                    hits = pipe.search(question.question, step=ARCHITECTURES[arch], k=k, mode=search_mode)
                    latencies[mode].append(time.perf_counter() - t0)
                    turns = [h.meta("chat.message_id") for h in hits]
                    sessions = dedupe(session_of.get(t, "?") for t in turns)
                    turn_scores = score(turns, gold_turns)
                    rows[mode]["turn"].append(turn_scores)
                    rows[mode]["session"].append(score(sessions, gold_sessions))
                    by_cat[mode][CATEGORIES.get(question.category, str(question.category))].append(turn_scores)
    report = {"benchmark": "locomo", "data": str(data), "conversations": len(conversations),
              "n_questions": len(rows[modes[0]]["turn"]), "ingest_s": round(ingest_s, 1), "modes": {}}
    for mode in modes:
        lat = sorted(latencies[mode])
        report["modes"][mode] = {
            "turn": mean(rows[mode]["turn"]), "session": mean(rows[mode]["session"]),
            "by_category": {c: mean(v) | {"n": len(v)} for c, v in sorted(by_cat[mode].items())},
            "latency_ms": {"p50": round(1000 * lat[len(lat) // 2], 1), "p95": round(1000 * lat[int(len(lat) * 0.95)], 1)},
        }
    return report


def print_table(report: dict) -> None:
    keys = ["recall_any@1", "recall_any@5", "recall_any@10", "recall_all@1", "recall_all@5", "recall_all@10",
            "ndcg_any@10", "mrr"]
    print(f"LoCoMo {report['conversations']} conversations, {report['n_questions']} questions with evidence")
    for level in ("turn", "session"):
        print(f"\n{level} level          " + "  ".join(f"{k:>13}" for k in keys))
        for mode, res in report["modes"].items():
            print(f"{mode:<22} " + "  ".join(f"{res[level][k]:>13.4f}" for k in keys))
    print("\nturn recall_any@10 by category")
    for mode, res in report["modes"].items():
        print(f"{mode:<22} " + "  ".join(f"{c}={v['recall_any@10']:.3f} (n={v['n']})" for c, v in res["by_category"].items()))
    print("\nquery latency (ms, through Pipeline.search)")
    for m, r in report["modes"].items():
        print(f"{m:<22} p50 {r['latency_ms']['p50']}  p95 {r['latency_ms']['p95']}")
    print(f"ingest (pipeline runs incl. embedding): {report['ingest_s']} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = evaluate(args.data, args.limit)
    print(json.dumps(report) if args.json else "")
    if not args.json:
        print_table(report)


if __name__ == "__main__":
    main()
