"""Order-invariant ingest, measured on LoCoMo: one batch versus shuffled batches through a stream source.

``python -m evals.invariance`` builds two projects of the ``conversational`` architecture
(``evals/architectures.py``: each turn a record, each turn indexed with the turn it answers, searched
with the ``conversational`` recipe over a stemmed BM25 index), fed through a stream source
(``pipeline.source(..., stream=...)``) and ``sync`` instead of the LoCoMo file:

- arm A: every LoCoMo turn appended to the stream as one batch, then one sync;
- arm B: the same lines shuffled (seed 42), split into 10 batches, each appended and synced.

Each line carries its own identity and date (``id`` = ``<sample_id>/<dia_id>``, ``created_at`` = the
session date plus 30 s per turn, as the ``locomo-turns`` format dates them) and the turn it answers
(``metadata.chat.previous``, from the turn order inside the session), so nothing depends on arrival.
Then, per step, the stored record ids must be the same sets, and for every LoCoMo question the top-10
hit ids of the architecture's search must be the same, as a set and in order. The figures are printed
as a table and written to ``evals/invariance.json`` (``--out``); the exit status is 1 if anything differs.
``turn R@10`` there is the share of a question's evidence turns in arm A's top 10, over one project
holding every conversation (``synthex eval locomo`` searches one conversation per workspace instead).

The arms embed with separate embedders (no shared memo), so equal vectors are computed, not copied.
The Synaptic paper reports 98.5 % (set) / 96.0 % (order) for its streaming experiment; the claim here
is 100 % / 100 % (seed: ``shared/seeds/synaptic-streaming-invariance.md``).
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evals.architectures import Architecture, resolve
from evals.benchmarks.locomo.data import load_locomo, parse_turns
from evals.shared_data import LOCOMO_DEV7, shared_data_file
from synthex.core.sources import append_lines
from synthex_resources.embedder import EmbedderConfig

DEFAULT_DATA = shared_data_file(LOCOMO_DEV7)
STREAM = "turns.jsonl"
ARCHITECTURE = "conversational"


def stream_lines(data: Path, conversations: int | None = None, sessions: int | None = None) -> list[dict[str, Any]]:
    """The architecture's source items (``locomo-turns``: one per turn) as stream lines, in data order.

    ``conversations`` / ``sessions``: only the first N conversations / the first N sessions of each.
    """
    keep = {c.sample_id for c in load_locomo(data)[: conversations or None]}
    lines = []
    for item in parse_turns(data):
        chat = item.metadata["chat"]
        if chat["conversation_id"] not in keep or (sessions and int(chat["session_id"][1:]) > sessions):
            continue
        lines.append({"id": item.key, "text": item.content, "created_at": item.created_at,
                      "metadata": {"chat": chat}})
    return lines


def shuffled_batches(lines: list[dict[str, Any]], batches: int, seed: int) -> list[list[dict[str, Any]]]:
    """``lines`` shuffled with ``seed`` and cut into ``batches`` parts of near-equal size."""
    order = list(lines)
    random.Random(seed).shuffle(order)
    size, extra = divmod(len(order), batches)
    out, start = [], 0
    for i in range(batches):
        end = start + size + (1 if i < extra else 0)
        out.append(order[start:end])
        start = end
    return [b for b in out if b]


@dataclass
class Arm:
    name: str
    root: Path
    arch: Architecture
    pipe: Any = None
    syncs: list[dict[str, Any]] = field(default_factory=list)  # per batch: lines, records created, seconds
    ingest_s: float = 0.0
    search_s: float = 0.0

    def open(self) -> None:
        if self.root.exists():
            shutil.rmtree(self.root)
        self.root.mkdir(parents=True)
        # The architecture's own pipeline, its source reading a stream instead of the LoCoMo file.
        self.pipe = self.arch.build(self.root / STREAM, self.root, "stream")
        self.pipe.open(embedder=EmbedderConfig().create())  # one embedder per arm: vectors are recomputed

    def ingest(self, batches: list[list[dict[str, Any]]], log: Callable[[str], None]) -> None:
        started = time.perf_counter()
        for number, batch in enumerate(batches, start=1):
            t0 = time.perf_counter()
            append_lines(self.root / STREAM, batch)
            report = self.pipe.sync()
            created = report.run.stats.output if report.run.stats else 0
            self.syncs.append({"batch": number, "lines": len(batch), "created": created,
                               "ids": self.ids(), "s": round(time.perf_counter() - t0, 2)})
            log(f"  arm {self.name}: batch {number}/{len(batches)} ({len(batch)} lines) synced, "
                f"{created} records created in {time.perf_counter() - t0:.1f}s")
        self.ingest_s = time.perf_counter() - started

    def ids(self) -> dict[str, set[str]]:
        return {step: {r.id for r in self.pipe.records(step)} for step in self.pipe.steps}

    def contents(self) -> dict[str, str]:
        return {r.id: r.content for step in self.pipe.steps for r in self.pipe.records(step)}

    def top(self, questions: list[str], k: int) -> list[dict[str, float]]:
        """Per question, the top-k hit ids with their scores, best first."""
        started = time.perf_counter()
        out = [{h.id: h.score for h in self.pipe.search(q, step=self.arch.steps, k=k, mode=self.arch.mode,
                                                        branch=self.arch.branch)} for q in questions]
        self.search_s = time.perf_counter() - started
        return out

    def close(self) -> None:
        if self.pipe is not None:
            self.pipe.close()


def run_invariance(data: Path, work_dir: Path, conversations: int | None = None, sessions: int | None = None,
                   batches: int = 10, seed: int = 42, k: int = 10, answerable_only: bool = False,
                   log: Callable[[str], None] = print) -> dict[str, Any]:
    """Both arms, then the comparison (the figures ``main`` prints and writes). ``answerable_only``: only
    the questions whose evidence turns were all ingested (a slice of the data)."""
    lines = stream_lines(data, conversations, sessions)
    convs = load_locomo(data)[: conversations or None]
    ingested = {line["id"] for line in lines}
    questions = [(c.sample_id, i, q) for c in convs for i, q in enumerate(c.questions)
                 if not answerable_only or (q.evidence and {f"{c.sample_id}/{e}" for e in q.evidence} <= ingested)]
    texts = [q.question for _, _, q in questions]
    (arch,) = resolve([ARCHITECTURE], None)
    arms = {"A": Arm("A", work_dir / "arm-a", arch), "B": Arm("B", work_dir / "arm-b", arch)}
    plans = {"A": [lines], "B": shuffled_batches(lines, batches, seed)}
    tops: dict[str, list[dict[str, float]]] = {}
    ids: dict[str, dict[str, set[str]]] = {}
    contents: dict[str, dict[str, str]] = {}
    gold_of: dict[str, str | None] = {}
    features: dict[str, int] = {}
    try:
        for name, arm in arms.items():
            arm.open()
            arm.ingest(plans[name], log)
            ids[name], contents[name] = arm.ids(), arm.contents()
            tops[name] = arm.top(texts, k)
            log(f"  arm {name}: {len(texts)} questions searched in {arm.search_s:.1f}s")
            if name == "A":  # which turn each leaf record is (to score recall), and what the recipe could use
                turns = arm.pipe.records("turns")
                gold_of = {r.id: _chat(r).get("message_id") for r in turns}
                by_id = {r.id: r for r in turns}
                in_context = arm.pipe.records("turns-in-context")
                features = {
                    "turns_paired_with_previous": sum(r.content != by_id[r.source_ids[0]].content for r in in_context),
                    "turns_with_chat_previous": sum(bool(_chat(r).get("previous")) for r in turns),
                    "leaves_with_session_for_adjacency": sum(bool(r.meta("chat.conversation_id")) for r in turns),
                    "leaves_with_speaker_for_name_drop": sum(bool(r.meta("chat.author")) for r in turns)}
            arm.close()
    finally:
        for arm in arms.values():
            arm.close()
    a_ids, b_ids = ids["A"], ids["B"]
    every_a = set().union(*a_ids.values())
    # Records arm B stored at some point that arm A never has: a record computed from arrival order.
    transient = sorted({rid for s in arms["B"].syncs for ids_ in s["ids"].values() for rid in ids_} - every_a)
    per_question = []
    score_diff = 0.0  # the largest score difference of a record both arms returned for a question
    for (sample_id, index, q), scored_a, scored_b in zip(questions, tops["A"], tops["B"], strict=True):
        a, b = list(scored_a), list(scored_b)
        score_diff = max([score_diff, *(abs(scored_a[i] - scored_b[i]) for i in set(a) & set(b))])
        per_question.append({"question_id": f"{sample_id}/q{index}", "question": q.question,
                             "set_identical": set(a) == set(b), "order_identical": a == b,
                             "top1_identical": a[:1] == b[:1], "a": a, "b": b,
                             "recall@10": _recall([gold_of.get(h) for h in a], q.evidence)})
    n = len(per_question)
    same_set = sum(p["set_identical"] for p in per_question)
    same_order = sum(p["order_identical"] for p in per_question)
    with_gold = [p["recall@10"] for p in per_question if p["recall@10"] is not None]
    for arm in arms.values():
        for s in arm.syncs:
            s["ids"] = sum(len(v) for v in s["ids"].values())  # the JSON keeps counts, not the sets
    return {
        "data": str(data), "architecture": arch.name, "mode": arch.mode, "k": k, "seed": seed,
        "conversations": len(convs), "lines": len(lines), "batches_b": len(plans["B"]),
        "questions": n, "set_identical": same_set, "order_identical": same_order,
        "top1_identical": sum(p["top1_identical"] for p in per_question),
        "max_score_difference": score_diff,
        "set_identical_pct": round(100 * same_set / n, 2) if n else 100.0,
        "order_identical_pct": round(100 * same_order / n, 2) if n else 100.0,
        "record_ids_identical": a_ids == b_ids,
        "records_per_step": {s: len(v) for s, v in a_ids.items()},
        "record_id_differences": {s: {"only_a": len(a_ids[s] - b_ids.get(s, set())),
                                      "only_b": len(b_ids.get(s, set()) - a_ids[s])} for s in a_ids},
        "contents_identical": contents["A"] == contents["B"],
        "transient_ids_b": len(transient),
        "recipe_inputs": features,
        "turn_recall@10_a": round(sum(with_gold) / len(with_gold), 4) if with_gold else None,
        "wall_s": {name: {"ingest": round(arm.ingest_s, 1), "search": round(arm.search_s, 1)}
                   for name, arm in arms.items()},
        "syncs": {name: arm.syncs for name, arm in arms.items()},
        "differing_questions": [p for p in per_question if not p["order_identical"]],
    }


def _chat(record: Any) -> dict[str, Any]:
    """The turn's chat fields: where the recipe reads them, else where a stream line's metadata lands."""
    return record.meta("chat.message_id") and record.meta("chat") or record.meta("custom.chat") or {}


def _recall(ranked: list[str | None], evidence: list[str]) -> float | None:
    gold = set(evidence)
    return len(gold & {r for r in ranked if r}) / len(gold) if gold else None


def table(result: dict[str, Any]) -> str:
    a, b = result["wall_s"]["A"], result["wall_s"]["B"]
    rows = [
        ("questions", str(result["questions"])),
        ("top-10 set identical", f"{result['set_identical']} ({result['set_identical_pct']:.1f} %)"),
        ("top-10 order identical", f"{result['order_identical']} ({result['order_identical_pct']:.1f} %)"),
        ("top-1 identical", str(result["top1_identical"])),
        ("max |score A - score B|", f"{result['max_score_difference']:.3g}"),
        ("record ids identical", "yes" if result["record_ids_identical"] else "NO"),
        ("record contents identical", "yes" if result["contents_identical"] else "NO"),
        ("ids B stored that A lacks", str(result["transient_ids_b"])),
        ("records per step", ", ".join(f"{s} {n}" for s, n in result["records_per_step"].items())),
        ("turn R@10 (arm A)", str(result["turn_recall@10_a"])),
        *((name.replace("_", " "), f"{n} / {result['lines']}") for name, n in result["recipe_inputs"].items()),
        ("arm A wall (1 batch)", f"ingest {a['ingest']} s, search {a['search']} s"),
        (f"arm B wall ({result['batches_b']} batches)", f"ingest {b['ingest']} s, search {b['search']} s"),
    ]
    width = max(len(r[0]) for r in rows)
    head = (f"{result['architecture']} ({result['mode']}), {result['conversations']} conversations, "
            f"{result['lines']} stream lines, seed {result['seed']}, top-{result['k']}")
    return "\n".join([head, *(f"  {name.ljust(width)}  {value}" for name, value in rows)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.invariance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--work-dir", type=Path, default=None, help="where the two projects go (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("invariance.json"))
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--sessions", type=int, default=None, help="only the first N sessions of each")
    args = parser.parse_args(argv)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="synthex-invariance-"))
    result = run_invariance(args.data, work, args.conversations, args.sessions, args.batches, args.seed, args.k,
                            log=functools.partial(print, flush=True))
    print(table(result))
    args.out.write_text(json.dumps(result, indent=1))
    print(f"figures: {args.out}")
    if args.work_dir is None:
        shutil.rmtree(work, ignore_errors=True)
    identical = result["record_ids_identical"] and result["set_identical"] == result["order_identical"] == result["questions"]
    return 0 if identical else 1


if __name__ == "__main__":
    from synthex_resources.search.threads import apply_search_threads

    apply_search_threads()  # this process's entry point chooses its BLAS threads (search/threads.py)
    raise SystemExit(main())
