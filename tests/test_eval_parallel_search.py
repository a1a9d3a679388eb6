"""Issue 21 "Speed": an eval searches a workspace's questions on two threads (``evals.benchmarks.searched_in_order``).
The first question is searched alone (it may write the workspace's leaf vectors), the rest on worker threads, and
the hits come back in question order, so every figure and per-question row is the one a sequential loop gives
(on a real store: tests/test_eval_warm_rerun.py, ``search_workers=1`` against the default). No timing is asserted."""

from __future__ import annotations

import threading
import time

import pytest

from evals.benchmarks import SEARCH_WORKERS, searched_in_order


class Recorder:
    """A stand-in search that logs when each question starts and ends, and on which thread."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.events: list[tuple[str, int]] = []
        self.threads: dict[int, int] = {}
        self.lock = threading.Lock()
        self.fail_at = fail_at

    def __call__(self, question: int) -> str:
        with self.lock:
            self.events.append(("start", question))
            self.threads[question] = threading.get_ident()
        # later questions finish first where they can: the order of the answers must not follow completion
        time.sleep(0.002 * (question % 3 == 1))
        with self.lock:
            self.events.append(("end", question))
        if question == self.fail_at:
            raise ValueError(f"question {question} failed")
        return f"hits of {question}"


def test_answers_come_in_question_order_and_the_first_is_searched_alone():
    questions = list(range(12))
    search = Recorder()
    assert SEARCH_WORKERS >= 2
    assert list(searched_in_order(questions, search, workers=2)) == [f"hits of {q}" for q in questions]
    assert search.events[:2] == [("start", 0), ("end", 0)]  # nothing else started before the first ended
    caller = threading.get_ident()
    assert search.threads[0] == caller
    assert all(search.threads[q] != caller for q in questions[1:])  # the rest on the pool's threads


def test_one_worker_searches_one_after_another_on_the_callers_thread():
    questions = list(range(6))
    search = Recorder()
    assert list(searched_in_order(questions, search, workers=1)) == [f"hits of {q}" for q in questions]
    assert search.events == [(kind, q) for q in questions for kind in ("start", "end")]
    assert set(search.threads.values()) == {threading.get_ident()}


def test_a_failing_search_raises_at_its_turn_and_leaves_nothing_running():
    questions = list(range(40))
    search = Recorder(fail_at=3)
    got = []
    with pytest.raises(ValueError, match="question 3 failed"):
        for hits in searched_in_order(questions, search, workers=2):
            got.append(hits)
    assert got == [f"hits of {q}" for q in range(3)]  # the ones before it, in order
    starts = [q for kind, q in search.events if kind == "start"]
    ends = [q for kind, q in search.events if kind == "end"]
    assert sorted(starts) == sorted(ends)  # every search begun had ended when the error reached the caller
