"""`evals.ablations.conversational` on a tiny LoCoMo-format file: session level, wall time and index sizes
per variant, the markdown tables, and the chart at both levels."""

import json

import lancedb
from conftest import LOCOMO_TOPICS, locomo_conversation, write_json

from evals.ablations.chart import chart, read_rows
from evals.ablations.conversational import run, table
from evals.metrics import dedupe, recall_all, recall_any

ONLY = ["all parts", "write-time enrichment", "without stemming", "RRF"]


def fixture():
    conv, _ = locomo_conversation()
    qa = [{"question": f"Who {LOCOMO_TOPICS[(s + 1) % len(LOCOMO_TOPICS)]}?", "answer": "Ann",
           "evidence": [f"D{s}:1"], "category": 4} for s in range(1, 4)]
    # evidence in two sessions: recall_all needs both
    qa.append({"question": "Where did Ann travel and what did she bake?", "answer": "Kyoto; sourdough",
               "evidence": ["D1:3", "D3:2"], "category": 1})
    qa.append({"question": "What did Ann never do?", "adversarial_answer": "x", "evidence": [], "category": 5})
    return [{"sample_id": "conv-t", "conversation": conv, "qa": qa}]


def test_ablation_reports_session_level_wall_time_and_index_sizes(tmp_path):
    data = write_json(tmp_path / "locomo.json", fixture())
    rows = run(data, tmp_path / "work", only=ONLY, log=lambda _line: None)
    by = {r["variant"]: r for r in rows}
    assert [name.split(" (")[0] for name in by] == ["conversational", "+ write-time enrichment", "without stemming",
                                                    "RRF hybrid"]
    base, enriched, unstemmed = by["conversational (all parts)"], by["+ write-time enrichment"], by["without stemming"]
    rrf = by["RRF hybrid (k=10) instead of leaf-sum"]
    assert enriched["architecture"] == "conversational-enriched" and base["architecture"] == "conversational"

    # Session level: the sessions of the ranked turns, in order, against the gold turns' sessions.
    session_of = {f"D{s}:{t}": f"S{s}" for s in range(1, 4) for t in range(1, 5)}
    gold = {"conv-t/q0": {"S1"}, "conv-t/q1": {"S2"}, "conv-t/q2": {"S3"}, "conv-t/q3": {"S1", "S3"}}
    for row in rows:
        assert row["n"] == 4 and [q["id"] for q in row["questions"]] == list(gold)
        sessions = {q["id"]: dedupe(session_of[h] for h in q["hits"]) for q in row["questions"]}
        assert row["session"]["recall_any@10"] == round(sum(recall_any(sessions[i], g, 10) for i, g in gold.items()) / 4, 4)
        assert row["session"]["recall_all@10"] == round(sum(recall_all(sessions[i], g, 10) for i, g in gold.items()) / 4, 4)
        assert row["session"]["by_category"]["multi-hop"]["n"] == 1 and row["session"]["by_category"]["single-hop"]["n"] == 3
        assert row["session"]["recall_any@10"] >= row["recall_any@10"]
        # wall time: the whole variant, searches included
        assert 0 < row["ms_per_query"] and row["wall_s"] >= row["search_s"] > 0
    assert base["recall_any@10"] == 1.0  # distinctive wording: every single-hop turn is found
    for workspace in ("contextual-stemmed", "contextual-stemmed-enriched"):  # left stemmed, as ingested
        tbl = lancedb.connect(tmp_path / "work" / workspace / "conv-t" / ".synthex" / "lancedb").open_table("records")
        assert [i.index_details["stem"] for i in tbl.list_indices() if i.name == "content_idx"] == [True]

    # On disk: the stemmed index measured twice (first, and rebuilt after the unstemmed one) is the same.
    assert base["disk_bytes"]["table"] > 0 and base["disk_bytes"]["fts"] > 0
    assert rrf["disk_bytes"] == base["disk_bytes"]
    assert unstemmed["disk_bytes"]["table"] == base["disk_bytes"]["table"]
    assert enriched["disk_bytes"]["table"] > base["disk_bytes"]["table"]  # the index line is stored text
    # In memory: each variant measured with only what it built; RRF has no leaf-sum bookkeeping and no
    # multi-hop lexicon (shared-entity expansion), both of which the full recipe builds.
    assert set(rrf["memory_bytes"]) < set(base["memory_bytes"]) and len(base["memory_bytes"]) >= 3
    assert all(b > 0 for b in base["memory_bytes"].values())

    text = table(rows)
    assert "Session level" in text and "same index" in text
    for row in rows:
        assert text.count(f"| {row['variant']} |") == 3  # turn, session and cost tables

    out = tmp_path / "ablation.png"
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    assert chart(read_rows([tmp_path / "rows.json"]), out, "test") == ["turn", "session"]
    assert out.stat().st_size > 10_000
    turn_only = [{k: v for k, v in r.items() if k != "session"} for r in rows]
    assert chart(turn_only, tmp_path / "turn.png", "test") == ["turn"]
