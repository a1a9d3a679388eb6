"""``python -m synthex_assets.dev -w workspace.yaml -p PORT``: ``dagster dev`` with Synthex's daemon.

What ``synthex ui`` runs for a project: Dagster's own ``dagster dev`` (webserver, daemon, code server,
every option of it), whose daemon is ``python -m synthex_assets.daemon`` (a 2 s backfill loop) instead of
Dagster's (30 s).
"""

from __future__ import annotations

import signal
import sys

DAEMON_MODULE = "synthex_assets.daemon"


def main() -> None:
    from synthex_assets.dagster_internals import run_dev

    signal.signal(signal.SIGINT, signal.default_int_handler)
    run_dev(DAEMON_MODULE, sys.argv[1:])


if __name__ == "__main__":
    main()
