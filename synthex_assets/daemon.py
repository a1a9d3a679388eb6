"""``python -m synthex_assets.daemon run -w workspace.yaml``: Dagster's daemon with a 2 s backfill loop.

The same command line as ``dagster-daemon`` (every subcommand and option), for the daemon of a project's
``synthex ui`` and of a ``synthex deploy init`` deployment. The one difference is the interval of the loops
that read ``DEFAULT_DAEMON_INTERVAL_SECONDS`` (the backfill daemon's, and the asset daemon's when the
instance sets no ``auto_materialize.minimum_interval_seconds``): ``LOOP_INTERVAL_S`` instead of 30 s, so a UI
backfill's run is created and marked COMPLETED within seconds (docs/architecture.md, "UI backfills wait on
Dagster's backfill loop"; its idle cost is measured in docs/benchmarks.md).
"""

from __future__ import annotations

import signal
import sys

# A backfill iteration on an idle instance is a few queries; 2 s keeps a UI backfill's wait at one or two
# seconds per loop while the idle daemon stays a small share of a core (docs/benchmarks.md).
LOOP_INTERVAL_S = 2.0


def main() -> None:
    from synthex_assets.dagster_internals import run_daemon

    # Started from a script with SIGINT ignored, Dagster's interrupt handling would never see Ctrl-C or the
    # parent's shutdown: restore Python's default handler first.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    run_daemon(LOOP_INTERVAL_S, sys.argv[1:])


if __name__ == "__main__":
    main()
