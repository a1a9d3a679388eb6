"""Projection outputs: fire ``on_update`` (a callable or a webhook URL) when the projected record changes."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from synthex.errors import SynthexError
from synthex.pipeline import Pipeline


def snapshot(pipeline: Pipeline, branch: str) -> dict[str, str | None]:
    """Current record id of every projection output that has a hook."""
    out: dict[str, str | None] = {}
    for o in pipeline.outputs.values():
        if o.surface == "projection" and o.on_update is not None:
            rec = pipeline.projection(o.name, branch)
            out[o.name] = rec.id if rec else None
    return out


def fire_changed(pipeline: Pipeline, branch: str, before: dict[str, str | None]) -> list[str]:
    """Call each hook whose projection now points at a different record; returns the outputs fired."""
    fired = []
    for name, old_id in before.items():
        rec = pipeline.projection(name, branch)
        if rec is None or rec.id == old_id:
            continue
        payload: dict[str, Any] = {"output": name, "pipeline": pipeline.name, "branch": branch,
                                   "record": rec.to_dict()}
        hook = pipeline.outputs[name].on_update
        try:
            if callable(hook):
                hook(payload)
            elif isinstance(hook, str):
                request = urllib.request.Request(hook, data=json.dumps(payload).encode("utf-8"),
                                                 headers={"Content-Type": "application/json"}, method="POST")
                with urllib.request.urlopen(request, timeout=10) as response:
                    response.read()
        except Exception as exc:  # noqa: BLE001 - the run succeeded; report the hook failure clearly
            raise SynthexError(f"output {name!r}: on_update hook failed: {type(exc).__name__}: {exc}") from exc
        fired.append(name)
    return fired
