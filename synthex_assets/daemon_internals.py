"""The Dagster internals Synthex's daemon entry points rely on, in one place (Dagster 1.13.27).

Dagster's backfill daemon sleeps ``DEFAULT_DAEMON_INTERVAL_SECONDS - loop_duration`` between iterations
(``dagster/_daemon/backfill.py`` reads the constant of ``dagster/_daemon/controller.py`` each time its loop
starts); no instance setting or environment variable changes it (``backfills`` takes ``use_threads``,
``num_workers`` and ``num_submit_workers`` only). A UI backfill waits one loop for its run to be created and
another for COMPLETED after the run ended, so with 30 s a backfill of seconds of work takes about a minute.
These functions change that value inside a daemon process Synthex starts for that purpose and nowhere
else: they are called from the entry points ``python -m synthex_assets.daemon`` and
``python -m synthex_assets.dev``, never from library code another program imports.
``tests/test_daemon_loop.py`` fails when a name used here is gone from the installed Dagster.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dagster._cli.dev as dagster_dev
import dagster._daemon.controller as daemon_controller
from dagster._daemon.cli import main as dagster_daemon_main

DAEMON_INTERVAL_NAME = "DEFAULT_DAEMON_INTERVAL_SECONDS"
DAGSTER_DAEMON_MODULE = "dagster._daemon"  # what `dagster dev` runs as its daemon: python -m dagster._daemon run ...
DEV_SPAWN_NAME = "open_ipc_subprocess"  # how `dagster dev` starts the webserver and the daemon


def daemon_loop_interval() -> float:
    """The interval Dagster's backfill loop (and the asset daemon's default) waits between iterations."""
    return getattr(daemon_controller, DAEMON_INTERVAL_NAME)


def run_daemon(loop_interval_s: float, argv: Sequence[str]) -> None:
    """``dagster-daemon`` with ``argv`` (e.g. ``run -w workspace.yaml``) in this process, its loops every
    ``loop_interval_s`` instead of 30 s. Call only from a process's entry point."""
    setattr(daemon_controller, DAEMON_INTERVAL_NAME, loop_interval_s)
    import sys

    sys.argv = ["dagster-daemon", *argv]
    dagster_daemon_main()


def spawner_with_daemon(spawn: Callable[..., Any], daemon_module: str) -> Callable[..., Any]:
    """``spawn`` (Dagster's ``open_ipc_subprocess``) that starts ``python -m daemon_module`` where
    ``dagster dev`` asks for ``python -m dagster._daemon`` (same arguments); every other command as it is."""

    def spawn_with_our_daemon(args: list[str], **kwargs: Any) -> Any:
        if list(args[1:3]) == ["-m", DAGSTER_DAEMON_MODULE]:
            args = [args[0], "-m", daemon_module, *args[3:]]
        return spawn(args, **kwargs)

    return spawn_with_our_daemon


def run_dev(daemon_module: str, argv: Sequence[str]) -> None:
    """``dagster dev`` with ``argv`` in this process, its daemon started as ``python -m daemon_module``
    (same arguments) instead of Dagster's. Call only from a process's entry point."""
    setattr(dagster_dev, DEV_SPAWN_NAME, spawner_with_daemon(getattr(dagster_dev, DEV_SPAWN_NAME), daemon_module))
    dagster_dev.dev_command.main(args=list(argv), prog_name="dagster dev", auto_envvar_prefix="DAGSTER")
