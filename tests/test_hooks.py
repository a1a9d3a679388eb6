"""on_update hooks are delivered at least once: a failed delivery is kept pending (the records stay
written), retried with backoff, on the next run even when nothing else changed, and by
`synthex hooks retry`; the receiver gets each record's payload with a delivery id to dedupe on."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import PIPELINE_PY, cli, load, write_project

from synthex.core.errors import SynthexError
from synthex.core.record import Record
from synthex_resources.hook_deliveries import FIRST_BACKOFF_S, HOOK_DELIVERIES, HookDeliveries


class Receiver:
    """A local webhook endpoint that answers 500 while ``down`` and records what it accepted."""

    def __init__(self) -> None:
        self.down = True
        self.accepted: list[dict] = []
        self.refused = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if receiver.down:
                    receiver.refused += 1
                    self.send_response(500)
                else:
                    receiver.accepted.append(body)
                    self.send_response(204)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"


@pytest.fixture(autouse=True)
def short_backoff(monkeypatch):
    """A failing delivery is tried 3 times per run, waiting 0.5 s then 1 s: 1.5 s of sleep per failing run
    or `hooks retry` here. Keep the tries, shorten the waits; what the waits are (doubling from the first)
    is checked below with an injected sleep."""
    real_init = HookDeliveries.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        if self.first_backoff_s == FIRST_BACKOFF_S:
            self.first_backoff_s = 0.01

    monkeypatch.setattr(HookDeliveries, "__init__", init)


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()


@pytest.fixture
def hooked(tmp_path, small_export, receiver):
    body = PIPELINE_PY.replace('pipeline.output("context", from_="world-model", surface="projection")',
                               f'pipeline.output("context", from_="world-model", surface="projection", '
                               f'on_update="{receiver.url}")')
    assert body != PIPELINE_PY
    return write_project(tmp_path / "hooked", small_export, body)


def test_a_failed_delivery_is_retried_by_the_next_run_with_nothing_else_to_do(hooked, receiver):
    pipe = load(hooked)
    with pytest.raises(SynthexError, match="hooks_delivered: .*HTTP Error 500.*kept pending"):
        pipe.run()
    assert receiver.refused == 3  # one run: the first try and two retries with backoff
    assert pipe.records("world-model")  # the records are written
    [pending] = pipe.hooks_due()
    assert (pending.output, pending.branch, pending.attempts) == ("context", "main", 1)
    assert pending.pending_record == pipe.projection("context").id
    waits: list[float] = []  # retries back off, doubling
    report = HookDeliveries(pipe, pipe.store(), tries=4, first_backoff_s=0.25, sleep=waits.append).deliver_due()
    assert waits == [0.25, 0.5, 1.0] and len(report.failed) == 1 and report.delivered == []
    assert load(hooked).hooks_due()[0].attempts == 2

    with pytest.raises(SynthexError, match="still fails|kept pending"):  # still down: the next run says so
        load(hooked).run()
    assert load(hooked).hooks_due()[0].attempts == 3

    receiver.down = False
    run = load(hooked).run()  # nothing to recompute, the delivery goes out
    assert run.status == "completed" and run.steps == []
    [payload] = receiver.accepted
    latest = pipe.projection("context")
    assert payload["record"]["id"] == latest.id and payload["output"] == "context" and payload["branch"] == "main"
    assert payload["delivery"] == {"id": f"context@main@{latest.id}", "attempt": 4}
    assert load(hooked).hooks_due() == []
    load(hooked).run()
    assert len(receiver.accepted) == 1  # delivered once, not on every run


def test_hooks_lists_pending_deliveries_and_hooks_retry_delivers_them(hooked, receiver):
    assert cli("run", "--project", str(hooked), check=False).returncode == 1
    listed = cli("hooks", "--project", str(hooked)).stdout
    assert listed.startswith("context@main  record ") and "failed attempts 1" in listed and "HTTP Error 500" in listed
    failed = cli("hooks", "retry", "--project", str(hooked), check=False)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr and "kept pending" in failed.stderr
    receiver.down = False
    assert cli("hooks", "retry", "--project", str(hooked)).stdout.strip() == "delivered context@main"
    assert cli("hooks", "--project", str(hooked)).stdout.strip() == "no hook delivery pending"
    assert len(receiver.accepted) == 1


def test_a_delivery_never_confirmed_is_sent_again(hooked, receiver):
    """At least once: if the process died after the records were written and before the delivery was
    recorded, the cursor has not moved and the next run delivers."""
    receiver.down = False
    pipe = load(hooked)
    pipe.run()
    assert len(receiver.accepted) == 1
    pipe.store().tables.delete(HOOK_DELIVERIES, "id = 'context@main'")  # as if killed before recording it
    load(hooked).run()
    assert len(receiver.accepted) == 2
    assert receiver.accepted[0]["delivery"]["id"] == receiver.accepted[1]["delivery"]["id"]



def test_a_branch_whose_file_is_gone_does_not_block_the_hooks_of_the_others(hooked, receiver):
    """A branch that still has rows of the hooked step but no branch file (deleted by hand, a checkout)
    reads its own rows, as before scopes: main's delivery still goes out and the ghost branch's is listed."""
    receiver.down = False
    pipe = load(hooked)
    pipe.run()
    world = pipe.records("world-model")[0]
    ghost = Record(**{**{f: getattr(world, f) for f in ("id", "content", "step", "source_ids", "materialization_key",
                                                        "run_id", "created_at", "metadata", "audit", "period")},
                      "branch": "ghost"})
    pipe.store().records.upsert([ghost], embed=False)
    due = HookDeliveries(pipe, pipe.store()).due()
    assert [(s.output, s.branch, s.pending_record) for s in due] == [("context", "ghost", world.id)]
    report = HookDeliveries(pipe, pipe.store()).deliver_due()
    assert report.delivered == ["context@ghost"] and report.failed == []
    assert [p["branch"] for p in receiver.accepted] == ["main", "ghost"]
