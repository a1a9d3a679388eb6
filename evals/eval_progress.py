"""Progress of an eval with an ETA: one event per conversation scored, per architecture.

``evaluate`` times each architecture's conversations (an ``EtaClock`` per architecture) and hands a
``ConversationDone`` to its ``progress`` callback after each one; ``synthex eval`` draws it on stderr with a
``ProgressLine`` (redrawn in place on a TTY, one line per event otherwise), so ``--json`` stdout stays clean.
The ETA is the architecture's mean time per conversation so far times the conversations left.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO


def duration_text(seconds: float) -> str:
    """``41 s``, ``1 m 10 s``, ``1 h 2 m``: whole seconds, the two largest units."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} m {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} m"


@dataclass(frozen=True)
class ConversationDone:
    """One conversation of one architecture ingested, searched and scored."""

    benchmark: str
    architecture: str
    index: int  # 1-based, among this architecture's conversations
    total: int
    key: str  # the conversation's id (its workspace name)
    questions: int
    elapsed_s: float  # since this architecture started
    eta_s: float  # until this architecture is done

    @property
    def last(self) -> bool:
        return self.index >= self.total

    def line(self) -> str:
        """``[locomo conversational] conv 3/7 (conv-26) 41 s, ETA 1 m 10 s`` (``done`` on the last one)."""
        when = "done" if self.last else f"ETA {duration_text(self.eta_s)}"
        return (f"[{self.benchmark} {self.architecture}] conv {self.index}/{self.total} ({self.key}) "
                f"{duration_text(self.elapsed_s)}, {when}")


@dataclass
class EtaClock:
    """Times one architecture's pass over ``total`` conversations (``clock``: seconds, monotonic)."""

    benchmark: str
    architecture: str
    total: int
    clock: Callable[[], float] = time.monotonic
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def done(self, index: int, key: str, questions: int) -> ConversationDone:
        elapsed = self.clock() - self.started
        eta = elapsed / index * (self.total - index) if index else 0.0
        return ConversationDone(self.benchmark, self.architecture, index, self.total, key, questions, elapsed, eta)


class ProgressLine:
    """Draws ``ConversationDone`` events on ``stream`` (stderr): on a TTY one line redrawn in place (each
    architecture's last event stays), elsewhere one line per event (logs and pipes keep every line)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()

    def __call__(self, event: ConversationDone) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K" + event.line() + ("\n" if event.last else ""))
        else:
            self.stream.write(event.line() + "\n")
        self.stream.flush()
