"""Issue 21 "Speed": ``synthex eval`` shows progress with an ETA per architecture and conversation on stderr
(one line per conversation off a TTY, one redrawn line on a TTY), nothing of it on ``--json`` stdout."""

from __future__ import annotations

import io
import json
import re
from functools import partial

from conftest import cli, load, write_json
from test_evalloop import locomo_small

from evals.architectures import LeafCache, unambiguous_records
from evals.eval_progress import ConversationDone, EtaClock, ProgressLine, duration_text

DURATION = r"\d+ [hms](?: \d+ [ms])?"  # duration_text: "59 s", "1 m 10 s" (a loaded machine), "1 h 2 m"
LINE = re.compile(rf"^\[locomo (raw-bm25|raw-dense)\] conv (\d)/2 \((conv-\d)\) {DURATION}, (ETA {DURATION}|done)$")


class FakeClock:
    """Seconds a test sets: the ETA is checked exactly, not against the wall clock."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class TtyBuffer(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_eta_is_the_mean_time_per_conversation_times_those_left():
    clock = FakeClock()
    eta = EtaClock("locomo", "conversational", total=7, clock=clock)
    clock.now += 41
    third = eta.done(3, "conv-26", questions=12)
    assert (third.elapsed_s, round(third.eta_s, 6)) == (41, round(41 / 3 * 4, 6))
    assert third.line() == "[locomo conversational] conv 3/7 (conv-26) 41 s, ETA 55 s"
    clock.now += 59
    assert eta.done(7, "conv-50", questions=9).line() == "[locomo conversational] conv 7/7 (conv-50) 1 m 40 s, done"
    assert [duration_text(s) for s in (0, 59.4, 70, 3725)] == ["0 s", "59 s", "1 m 10 s", "1 h 2 m"]


def test_on_a_tty_the_line_is_redrawn_and_each_architectures_last_line_stays():
    stream = TtyBuffer()
    draw = ProgressLine(stream)
    for index in (1, 2):
        draw(ConversationDone("locomo", "raw-bm25", index, 2, f"conv-{index}", 3, 10.0 * index, 10.0 * (2 - index)))
    assert stream.getvalue() == ("\r\x1b[2K[locomo raw-bm25] conv 1/2 (conv-1) 10 s, ETA 10 s"
                                 "\r\x1b[2K[locomo raw-bm25] conv 2/2 (conv-2) 20 s, done\n")


def test_eval_progress_on_stderr_one_line_per_conversation_and_json_stdout_clean(tmp_path):
    data = write_json(tmp_path / "locomo_small.json", locomo_small())
    out = cli("eval", "locomo", "--data", data, "--compare", "raw-bm25,raw-dense", "--json", cwd=tmp_path)
    parsed = json.loads(out.stdout)  # stdout is the JSON and nothing else
    assert [r["architecture"] for r in parsed["results"]] == ["raw-bm25", "raw-dense"]
    progress = [m.groups() for m in map(LINE.match, out.stderr.splitlines()) if m]
    assert [(arch, index, key) for arch, index, key, _ in progress] == [
        ("raw-bm25", "1", "conv-0"), ("raw-bm25", "2", "conv-1"), ("raw-dense", "1", "conv-0"), ("raw-dense", "2", "conv-1")]
    assert [when == "done" for *_, when in progress] == [False, True, False, True]


def test_leaf_cache_drills_down_to_the_same_leaves_as_the_store_in_the_same_order(tmp_path, ran_project):
    """The second-run speed-up (``LeafCache``: records read once per workspace) leaves the figures unchanged
    because every hit drills down to exactly ``Record.leaves()``, from summaries, monthly and world model."""
    root = ran_project.copy(tmp_path / "proj")
    pipe = load(root)
    try:
        derived = [rec for step in ("summaries", "monthly", "world-model") for rec in pipe.records(step)]
        assert derived and all(rec.source_ids for rec in derived)  # the drill-down is really exercised
        cache = LeafCache(partial(unambiguous_records, pipe))
        for rec in derived + derived:  # the second pass answers from what the first read
            expected = [leaf.id for leaf in rec.leaves()]
            assert expected and [leaf.id for leaf in cache.leaves(rec)] == expected
        hits = pipe.search("python", k=5, mode="hybrid")  # hits of summaries and monthly, drilled down here
        assert hits and all([h.id for h in cache.leaves(hit)] == [h.id for h in (hit.leaves() if hit.source_ids
                                                                                 else [hit])] for hit in hits)
    finally:
        pipe.close()
