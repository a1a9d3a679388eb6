"""Progress reporting: steps report records done; the CLI draws one bar per step.

A reporter is an object handed down explicitly (a run's resources carry it to the step assets);
``NullProgress`` is the default where nobody watches (a run launched from the Dagster UI).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import Protocol, TextIO


class ProgressReporter(Protocol):
    def start(self, totals: dict[str, int]) -> None: ...

    def advance(self, step: str, n: int) -> None: ...

    def finish(self) -> None: ...


class NullProgress:
    """Reports nowhere."""

    def start(self, totals: dict[str, int]) -> None:
        pass

    def advance(self, step: str, n: int) -> None:
        pass

    def finish(self) -> None:
        pass


class TerminalProgress:
    """``[2/5] summaries ████████░░░░ 120/487`` per step; redrawn in place on a TTY."""

    def __init__(self, steps: Iterable[str], stream: TextIO | None = None, width: int = 24) -> None:
        self.steps = list(steps)
        self.stream = stream or sys.stderr
        self.width = width
        self.totals: dict[str, int] = {}
        self.done: dict[str, int] = {s: 0 for s in self.steps}
        self.started = time.monotonic()
        self._drawn = 0
        self._last = 0.0
        self.tty = self.stream.isatty()

    def start(self, totals: dict[str, int]) -> None:
        self.totals = dict(totals)
        self._draw(force=True)

    def advance(self, step: str, n: int) -> None:
        self.done[step] = self.done.get(step, 0) + n
        self._draw()

    def finish(self) -> None:
        self._draw(force=True, final=True)

    def _line(self, index: int, step: str) -> str:
        total = max(self.totals.get(step, 0), self.done.get(step, 0))
        done = self.done.get(step, 0)
        filled = self.width if total == 0 else int(self.width * done / total)
        bar = "█" * filled + "░" * (self.width - filled)
        note = "up to date" if total == 0 else f"{done}/{total}"
        return f"[{index}/{len(self.steps)}] {step:<16} {bar} {note}"

    def _draw(self, force: bool = False, final: bool = False) -> None:
        now = time.monotonic()
        if not self.tty:
            if final:
                for i, s in enumerate(self.steps, 1):
                    print(self._line(i, s), file=self.stream)
            return
        if not force and now - self._last < 0.1:
            return
        self._last = now
        if self._drawn:
            self.stream.write(f"\x1b[{self._drawn}F")
        for i, s in enumerate(self.steps, 1):
            self.stream.write("\x1b[2K" + self._line(i, s) + "\n")
        self._drawn = len(self.steps)
        self.stream.flush()
