"""At-least-once ``on_update`` hooks: a durable "last delivered" cursor per (output, branch).

A projection's hook is due whenever the record the projection points at (the latest record of its
step on the branch) is not the record last delivered. Due hooks are delivered after the step's op
writes (so UI-launched runs deliver too), at the start of every ``synthex run`` (so a failed delivery
is retried even when nothing else changed), and by ``synthex hooks retry``. The cursor advances only
after the receiver accepted the payload, so a kill or an outage at any moment means a later
delivery, never none: receivers may see a payload twice and should dedupe on ``delivery.id``.
Deliveries coalesce: after an outage the hook gets the current record, not each intermediate one.

Payload (JSON for a webhook, a dict for a callable)::

    {"output": "context", "pipeline": "my-memory", "branch": "main",
     "record": {...Record.to_dict()...},
     "delivery": {"id": "context@main@<record id>", "attempt": 1}}
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from synthex.core.definition import Output, PipelineDefinition
from synthex.core.errors import PipelineDefinitionError
from synthex.core.periods import now_iso
from synthex.core.record import Record
from synthex.core.redact import redact
from synthex.core.scope import BranchScope
from synthex_resources.record_store import RecordStore
from synthex_resources.store.schemas import HOOK_DELIVERIES  # noqa: F401 - re-exported

TRIES_PER_DELIVERY = 3  # in one process: first try, then backoff before each retry
FIRST_BACKOFF_S = 0.5
TIMEOUT_S = 10


class HookDeliveryError(Exception):
    pass


def send(hook: Callable[[dict[str, Any]], Any] | str, payload: dict[str, Any]) -> None:
    """One delivery: call the callable, or POST the JSON to the URL (http(s) only, checked at definition)."""
    if callable(hook):
        hook(payload)
        return
    request = urllib.request.Request(hook, data=json.dumps(payload).encode("utf-8"),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        response.read()


@dataclass
class HookState:
    output: str
    branch: str
    delivered_record: str = ""
    pending_record: str = ""  # the record due, when it is not the delivered one
    attempts: int = 0  # failed attempts at the pending record
    last_error: str = ""
    updated_at: str = ""

    @property
    def key(self) -> str:
        return f"{self.output}@{self.branch}"

    def row(self) -> dict[str, Any]:
        return {"id": self.key, "output": self.output, "branch": self.branch,
                "delivered_record": self.delivered_record, "pending_record": self.pending_record,
                "attempts": self.attempts, "last_error": self.last_error, "updated_at": self.updated_at}


@dataclass
class DeliveryReport:
    delivered: list[str] = field(default_factory=list)  # output@branch
    failed: list[str] = field(default_factory=list)  # one line each: which hook and why


class HookDeliveries:
    """The hooked projection outputs of one pipeline over one store."""

    def __init__(self, pipeline: PipelineDefinition, store: RecordStore, tries: int = TRIES_PER_DELIVERY,
                 first_backoff_s: float = FIRST_BACKOFF_S, sleep: Callable[[float], None] = time.sleep) -> None:
        self.pipeline = pipeline
        self.store = store
        self.tries = tries
        self.first_backoff_s = first_backoff_s
        self.sleep = sleep
        self.outputs: list[Output] = [o for o in pipeline.outputs.values()
                                      if o.surface == "projection" and o.on_update is not None]
        self._scopes: dict[str, BranchScope] = {}

    def _outputs(self, step: str | None) -> list[Output]:
        return [o for o in self.outputs if step is None or o.from_[0] == step]

    def states(self) -> dict[str, HookState]:
        return {key: HookState(**fields) for key, fields in self.store.hook_cursors.all().items()}

    def _branches(self, step: str) -> list[str]:
        return sorted(self.store.records.branches(step))

    def _scope(self, branch: str) -> BranchScope:
        """The branch's scope, resolved once per branch for this object's use (it hashes every step's
        definition); a branch whose file is gone (it still has rows) reads its own rows, as before scopes:
        its hooks stay listable and retryable, and other branches' deliveries are not blocked."""
        if branch not in self._scopes:
            try:
                self._scopes[branch] = self.pipeline.scope(branch)
            except PipelineDefinitionError:
                self._scopes[branch] = BranchScope.own(branch)
        return self._scopes[branch]

    def due(self, step: str | None = None, branches: list[str] | None = None) -> list[HookState]:
        """Hooks whose projection points at a record not delivered yet (oldest state kept for attempts)."""
        states = self.states()
        out = []
        for output in self._outputs(step):
            for branch in branches if branches is not None else self._branches(output.from_[0]):
                latest = self.store.records.latest(self._scope(branch), output.from_[0])
                state = states.get(f"{output.name}@{branch}") or HookState(output.name, branch)
                if latest is not None and latest.id != state.delivered_record:
                    if state.pending_record != latest.id:
                        state.pending_record, state.attempts, state.last_error = latest.id, 0, ""
                    out.append(state)
        return out

    def deliver_due(self, step: str | None = None, branches: list[str] | None = None) -> DeliveryReport:
        report = DeliveryReport()
        for state in self.due(step, branches):
            record = self.store.records.get(state.pending_record, self._scope(state.branch))
            if record is None:  # superseded since it was found due: the next check finds the new one
                continue
            error = self._deliver(state, record)
            state.updated_at = now_iso()
            if error:
                state.attempts += 1
                state.last_error = error
                report.failed.append(f"output {state.output!r} on branch {state.branch!r}: on_update hook failed "
                                     f"({state.attempts} run(s) so far): {error}; kept pending, retried on the "
                                     f"next run or by `synthex hooks retry`")
            else:
                state.delivered_record, state.pending_record, state.attempts, state.last_error = (
                    state.pending_record, "", 0, "")
                report.delivered.append(state.key)
            self.store.hook_cursors.save(state.row())
        return report

    def _deliver(self, state: HookState, record: Record) -> str:
        """Try the delivery up to ``tries`` times with doubling backoff; the error text, or "" when delivered."""
        output = self.pipeline.outputs[state.output]
        payload = {"output": output.name, "pipeline": self.pipeline.name, "branch": state.branch,
                   "record": record.to_dict(),
                   "delivery": {"id": f"{state.key}@{record.id}", "attempt": state.attempts + 1}}
        grant = self.pipeline.shared_toml  # a TOML-loaded pipeline POSTs only to the URLs allowed at its load
        if isinstance(output.on_update, str) and grant is not None and not grant.allows_hook(output.name,
                                                                                          output.on_update):
            return (f"{grant.path}: on_update {output.on_update} was not allowed when the TOML was loaded; "
                    f"nothing was sent (load it with allow_effects=True)")
        delay, error = self.first_backoff_s, ""
        for attempt in range(self.tries):
            if attempt:
                self.sleep(delay)
                delay *= 2
            try:
                send(output.on_update, payload)  # type: ignore[arg-type]
                return ""
            except Exception as exc:  # noqa: BLE001 - any failure of the receiver keeps the delivery pending
                error = redact(f"{type(exc).__name__}: {exc}")
        return error
