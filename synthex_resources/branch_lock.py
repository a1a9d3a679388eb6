"""One writer per (project, branch): an exclusive lock file in the project's data dir.

A run holds its branch's lock from planning to the end of its writes; a second run on the same branch
waits for it or is refused in one line naming the holder. Runs on other branches and every reader
(search, stats, the UI) never take it. It is an OS file lock (``flock``): released by the kernel when
the holder dies, so a killed run never leaves a stale lock behind. It guards writers on one machine;
a team deployment serializes runs per branch with Dagster's run queue (docs/architecture.md).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from pathlib import Path

from synthex.core.errors import SynthexError
from synthex.core.periods import now_iso


class BranchBusyError(SynthexError):
    pass


def lock_path(data_dir: Path, branch: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", branch)  # branch names may hold '/'
    return data_dir / "locks" / f"branch-{safe}.lock"


class BranchLock:
    def __init__(self, data_dir: Path, branch: str, run_id: str) -> None:
        self.path = lock_path(data_dir, branch)
        self.branch = branch
        self.run_id = run_id
        self._fd: int | None = None

    def holder(self) -> dict[str, str]:
        """Who holds (or last held) the lock: run id, pid, since."""
        try:
            return json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            return {}

    def acquire(self, wait: bool = False, timeout: float | None = None, on_wait=None) -> BranchLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = None if timeout is None else time.monotonic() + timeout
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                held = self.holder()
                about = (f"branch {self.branch!r} is being written by run {held.get('run_id', '?')} "
                         f"(pid {held.get('pid', '?')}, since {held.get('since', '?')})")
                if not wait or (deadline is not None and time.monotonic() > deadline):
                    os.close(fd)
                    raise BranchBusyError(f"{about}; wait for it to finish, or run with --wait") from None
                if on_wait is not None and not told:
                    on_wait(f"waiting: {about}")
                    told = True
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"run_id": self.run_id, "pid": str(os.getpid()), "since": now_iso()}).encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> BranchLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def held_by_run(data_dir: Path, branch: str, run_id: str) -> bool:
    """Whether ``run_id`` is the run that holds the branch's lock right now (a CLI run executing its
    own Dagster run in-process holds it already)."""
    lock = BranchLock(data_dir, branch, run_id)
    if lock.holder().get("run_id") != run_id or not lock.path.exists():
        return False
    fd = os.open(lock.path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True  # locked, by the run the file names
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class PurgeLock:
    """One purge at a time per project (``locks/purge.lock``, an OS ``flock`` like a branch's): held for
    the whole purge, its journal included, so a run that finds an unfinished purge journaled finishes it
    only when no live purge is doing so."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "locks" / "purge.lock"
        self._fd: int | None = None

    def acquire(self, wait: bool = True) -> bool:
        """Take the lock (waiting when ``wait``); False when another process holds it and ``wait`` is off."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": str(os.getpid()), "since": now_iso()}).encode())
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> PurgeLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
