"""Synthex's daemon (`python -m synthex_assets.daemon`): Dagster's daemon whose backfill loop runs every 2 s,
and `synthex ui`'s `dagster dev` (`python -m synthex_assets.dev`) starting that daemon instead of Dagster's."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster._cli.dev as dagster_dev
import dagster._daemon.controller as daemon_controller

from evals.bench.processes import descendants
from synthex_assets import daemon, dev
from synthex_assets import dagster_internals as daemon_internals
from synthex_assets.instance import INSTANCE_YAML

BACKFILL_ITERATION = "No backfill jobs in progress"  # the backfill daemon's debug line on an idle instance


def test_the_dagster_names_relied_on_still_exist():
    """A Dagster upgrade that renames these turns the 2 s loop back into 30 s silently: fail here instead."""
    assert isinstance(getattr(daemon_controller, daemon_internals.DAEMON_INTERVAL_NAME), int | float)
    assert callable(getattr(dagster_dev, daemon_internals.DEV_SPAWN_NAME))
    source = Path(dagster_dev.__file__).read_text(encoding="utf-8")
    assert f'"{daemon_internals.DAGSTER_DAEMON_MODULE}"' in source  # `dagster dev` spawns python -m dagster._daemon
    backfill = Path(daemon_controller.__file__).with_name("backfill.py").read_text(encoding="utf-8")
    assert daemon_internals.DAEMON_INTERVAL_NAME in backfill
    assert BACKFILL_ITERATION in backfill


def test_dev_starts_our_daemon_and_everything_else_as_asked():
    started = []
    spawn = daemon_internals.spawner_with_daemon(lambda args, **kwargs: started.append((args, kwargs)), dev.DAEMON_MODULE)
    spawn([sys.executable, "-m", "dagster._daemon", "run", "--shutdown-pipe", "7", "-w", "w.yaml"], pass_fds=[7])
    spawn([sys.executable, "-m", "dagster_webserver", "-p", "3000"], pass_fds=[8])
    assert started == [
        ([sys.executable, "-m", "synthex_assets.daemon", "run", "--shutdown-pipe", "7", "-w", "w.yaml"], {"pass_fds": [7]}),
        ([sys.executable, "-m", "dagster_webserver", "-p", "3000"], {"pass_fds": [8]}),
    ]


def test_importing_the_entry_points_changes_no_dagster_setting():
    """Only running them does: the modules are imported by tests and tools without touching Dagster's loop."""
    assert daemon_internals.daemon_loop_interval() == 30
    assert getattr(dagster_dev, daemon_internals.DEV_SPAWN_NAME).__module__ != daemon_internals.__name__


def _backfill_iterations(module: str, home: Path, window_s: float) -> int:
    """How many backfill iterations a real daemon process (``python -m module run``) logs in ``window_s``
    seconds after its first one, then stopped with SIGINT as a terminal would."""
    (home / "dagster.yaml").write_text(INSTANCE_YAML, encoding="utf-8")
    log = home / "daemon.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", module, "run", "--empty-workspace", "--log-level", "debug"],
                                env=dict(os.environ, DAGSTER_HOME=str(home)), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while BACKFILL_ITERATION not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
            assert time.monotonic() < deadline, "the daemon's backfill loop never ran"
            time.sleep(0.2)
        time.sleep(window_s)
        count = len(re.findall(BACKFILL_ITERATION, log.read_text(errors="replace")))
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) is not None  # stops on Ctrl-C
        return count
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_synthex_daemon_loops_every_two_seconds_and_dagsters_every_thirty(tmp_path):
    """In 9 s after the first iteration: about 5 iterations at 2 s; Dagster's own daemon does 1 (at 30 s)."""
    (tmp_path / "ours").mkdir()
    (tmp_path / "dagsters").mkdir()
    assert daemon.LOOP_INTERVAL_S == 2.0
    assert _backfill_iterations("synthex_assets.daemon", tmp_path / "ours", 9.0) >= 3
    assert _backfill_iterations("dagster._daemon", tmp_path / "dagsters", 9.0) == 1


def _descendants(pid: int) -> dict[int, str]:
    """Live descendants of ``pid`` and their command lines."""
    found = {}
    for child in descendants(pid):
        try:
            found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text(errors="replace")
    except OSError:
        return False


def test_synthex_ui_runs_our_daemon_and_stops_with_it_on_sigterm(project, tmp_path):
    """`synthex ui` started as a background script starts it (SIGINT ignored): its daemon is Synthex's, and
    one SIGTERM to the process stops the webserver, the daemon and the code server."""
    from evals.ui_screenshots import free_port, wait_until_loaded

    port = free_port()
    with open(tmp_path / "ui.log", "wb") as log:
        server = subprocess.Popen([sys.executable, "-m", "synthex.surfaces.cli", "ui", "--port", str(port),
                                   "--project", str(project)], stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        wait_until_loaded(f"http://127.0.0.1:{port}", server)
        children = _descendants(server.pid)
        assert any("-m synthex_assets.daemon run" in cmd for cmd in children.values()), children
        assert not any("-m dagster._daemon" in cmd for cmd in children.values()), children
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        # dagster dev's code server exits on its own once its parent is gone (its heartbeat, up to 45 s; seen
        # here within 10 s on this code and before it): wait for every child, then none may be left.
        deadline = time.monotonic() + 60
        while (left := {pid: cmd for pid, cmd in children.items() if _alive(pid)}) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert left == {}
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
