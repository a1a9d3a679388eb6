"""Issue 36 item 7: a backfill launched as the UI launches it (GraphQL ``launchPartitionBackfill``) on a real
`synthex ui` (Dagster's webserver, daemon and code server, as processes) runs with the same ``synthex/branch``
and ``synthex/launched_by`` tags as a CLI run. Three processes and a run: marked ``deployment``
(``pytest -n 0 -m deployment tests/test_ui_backfill_tags.py``; Synthex's daemon loops every 2 s, so under a minute)."""

from __future__ import annotations

import pytest
from conftest import cli

from evals.bench.ui_backfill import backfill_timing, launch_asset_backfill, step_selection, wait_backfill
from evals.ui_screenshots import start_ui, stop

# As the Runs list shows them (synthex_assets.run_tags defines them; tests/test_ui_story.py checks they
# agree), spelled out so this module also loads on the code from before issue 36.
BRANCH_TAG, LAUNCHED_BY_TAG, LAUNCHED_BY_BACKFILL = "synthex/branch", "synthex/launched_by", "backfill"


@pytest.mark.deployment
def test_a_ui_backfill_run_carries_the_branch_and_door_tags(project, tmp_path):
    cli("run", "--project", str(project))
    with open(tmp_path / "ui.log", "wb") as log:
        url, server = start_ui(project, log)
        try:
            keys, periods = step_selection(url, ["summaries"])
            assert keys == [{"path": ["summaries"]}] and len(periods) >= 2
            timing = backfill_timing(wait_backfill(url, launch_asset_backfill(url, keys, periods), timeout=300))
        finally:
            stop(server)
    door = (timing.run_tags.get(BRANCH_TAG), timing.run_tags.get(LAUNCHED_BY_TAG))
    assert door == ("main", LAUNCHED_BY_BACKFILL)
    assert timing.run_tags["dagster/backfill"]  # Dagster's own: the run is the backfill's
