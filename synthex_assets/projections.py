"""Projection outputs: fire ``on_update`` (a callable or a webhook URL) when the projected record changes.

Fired by the op of the projected step, so a run launched from the UI fires them like a CLI run.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from synthex.definition import Output, PipelineDefinition
from synthex.errors import SynthexError
from synthex_resources.record_store import RecordStore


class ProjectionHooks:
    """The hooked projections of one step on some branches: snapshot at creation, ``fire_changed`` after."""

    def __init__(self, pipeline: PipelineDefinition, store: RecordStore, step: str, branches: list[str]) -> None:
        self.pipeline = pipeline
        self.store = store
        self.outputs: list[Output] = [o for o in pipeline.outputs.values()
                                      if o.surface == "projection" and o.on_update is not None and o.from_[0] == step]
        self.before = {(o.name, b): self._current(o, b) for o in self.outputs for b in branches}

    def _current(self, output: Output, branch: str) -> str | None:
        rec = self.store.latest(output.from_[0], branch)
        return rec.id if rec else None

    def fire_changed(self) -> list[str]:
        """Call each hook whose projection now points at another record; returns ``output@branch`` fired."""
        fired = []
        for (name, branch), old_id in self.before.items():
            output = self.pipeline.outputs[name]
            rec = self.store.latest(output.from_[0], branch)
            if rec is None or rec.id == old_id:
                continue
            payload: dict[str, Any] = {"output": name, "pipeline": self.pipeline.name, "branch": branch,
                                       "record": rec.to_dict()}
            deliver(name, output.on_update, payload)
            fired.append(f"{name}@{branch}")
        return fired


def deliver(name: str, hook: Any, payload: dict[str, Any]) -> None:
    try:
        if callable(hook):
            hook(payload)
        elif isinstance(hook, str):
            request = urllib.request.Request(hook, data=json.dumps(payload).encode("utf-8"),
                                             headers={"Content-Type": "application/json"}, method="POST")
            with urllib.request.urlopen(request, timeout=10) as response:
                response.read()
    except Exception as exc:  # noqa: BLE001 - the records are written; report the hook failure clearly
        raise SynthexError(f"output {name!r}: on_update hook failed: {type(exc).__name__}: {exc}") from exc
