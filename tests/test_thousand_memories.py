"""evals/bench/thousand_memories.py at N=3: each memory built in-process into a folder of its own, its search
in a fresh process traced to its own folder only, every other memory's MCP token refused by its server (raw
HTTP and the mcp SDK's client) and its own accepted. Real stores, real processes; nothing here is timed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from conftest import write_json

from evals.bench.thousand_memories import (
    MEMORY_PREFIX,
    build_all,
    memories_touched,
    memory_specs,
    read_questions,
    run_bench,
    trace_text,
)


def question(qid: str, sessions: list[list[dict]]) -> dict:
    return {"question_id": qid, "question_type": "single-session-user", "question": "Which city did I fly to?",
            "answer": "Lisbon", "question_date": "2023/06/01 (Thu) 00:58",
            "haystack_dates": ["2023/05/20 (Sat) 02:21"] * len(sessions),
            "haystack_session_ids": [f"{qid}_s{i}" for i in range(len(sessions))],
            "haystack_sessions": sessions, "answer_session_ids": [f"{qid}_s0"]}


def turns(*texts: str) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t, "has_answer": False}
            for i, t in enumerate(texts)]


QUESTIONS = [
    question("qa", [turns("I flew to Lisbon last week for the conference.", "Lisbon is lovely in May."),
                    turns("My sister plays the cello in an orchestra.", "That sounds wonderful.")]),
    question("qb", [turns("We adopted a grey cat called Pixel.", "Pixel is a good name for a cat.")]),
]


def test_memory_specs_give_each_memory_its_own_session():
    specs = memory_specs(QUESTIONS, 3)
    assert [s.name for s in specs] == [f"{MEMORY_PREFIX}0000", f"{MEMORY_PREFIX}0001", f"{MEMORY_PREFIX}0002"]
    sessions = [s.raw["haystack_session_ids"] for s in specs]
    assert sessions == [["qa_s0"], ["qb_s0"], ["qa_s1"]]  # memory 2: the next session of the first question
    assert all(len(s.raw["haystack_sessions"]) == 1 for s in specs)
    assert specs[2].raw["answer_session_ids"] == []  # qa's answer session is memory 0's, not memory 2's


def test_a_trace_naming_another_memory_or_listing_the_root_is_caught(tmp_path):
    root = tmp_path / "memories"
    text = (f'openat(AT_FDCWD</x>, "{root}/mem-0001/.synthex/lancedb/records.lance/_versions", O_RDONLY) = 3\n'
            f'openat(AT_FDCWD</x>, "{root}/mem-0002/pipeline.py", O_RDONLY) = 4\n')
    assert memories_touched(text, root) == ({"mem-0001", "mem-0002"}, False)
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    # a real strace -y log of a process that lists the root: the listing is seen
    root.mkdir()
    (root / "mem-0000").mkdir()
    trace = tmp_path / "ls.strace"
    subprocess.run(["strace", "-f", "-qq", "-y", "-e", "trace=%file,getdents64", "-o", str(trace), sys.executable,
                    "-c", f"import os; os.listdir({str(root)!r})"], check=True, capture_output=True, timeout=60)
    assert memories_touched(trace_text(trace), root)[1] is True


def test_three_memories_searched_alone_and_their_tokens_refused_by_each_other(tmp_path):
    data = write_json(tmp_path / "lme.json", QUESTIONS)
    specs = memory_specs(read_questions(data), 3)
    root = tmp_path / "memories"
    traced = 3 if shutil.which("strace") else 0
    summary = run_bench(root, specs, searches=3, traced=traced, servers=2, workers=1, say=lambda _line: None)
    assert summary["built_now"] == 3 and summary["searches"] == 3 and summary["search_hits_min"] >= 1
    for spec in specs:
        built = json.loads((root / spec.name / ".synthex" / "built.json").read_text())
        assert built["run"]  # the in-process run completed and was recorded
    if traced:
        assert summary["traced"] == summary["traced_only_own"] == 3, summary["details"]["traces"]
    assert summary["servers"] == 2
    assert summary["other_tokens_tried"] == summary["other_tokens_refused"] == 4  # 2 others for each server
    assert summary["own_tokens_accepted"] == summary["client_own_ok"] == summary["client_other_refused"] == 2
    # a second build finds each memory built and builds nothing
    assert build_all(root, specs, workers=1) == []
