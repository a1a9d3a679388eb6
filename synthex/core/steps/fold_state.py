"""Bounded fold state (design doc §10.1): ``pipeline.fold(..., state=...)``.

A fold's state is carried from input to input and period to period; a prompt that appends (or a model
that keeps everything) lets it grow without end. Three bounds, each a small frozen dataclass validated
when it is made (a bad value is one ``PipelineDefinitionError`` line), registered by ``kind`` so a TOML
file names them (``state = {kind = "truncate", tokens = 2000}``):

- ``TruncateState(tokens=N)``: after each input, the state keeps only its last N tokens (the shared token
  model, ``CHARS_PER_TOKEN`` characters a token), cut at a word boundary. No model call.
- ``CompressState(every=K, prompt=None)``: after every K-th input of the chain, the state is rewritten by
  the step's model (the offline stand-in offline) from ``prompt(state)`` (default
  ``synthex.core.prompts.compress_state``). Costs one call per K inputs.
- ``WindowState(inputs=N)``: the state after a period is the fold, from ``initial_state``, of only the last
  N inputs of the chain (earlier periods' inputs included): what fell out of the window is forgotten.
  The state record's sources are the window's inputs. Costs up to N calls per period.

A plugin adds a bound with ``register_fold_states(registry)`` (``synthex.core.plugins``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from synthex.core import hookspecs
from synthex.core.errors import PipelineDefinitionError
from synthex.core.llm import CHARS_PER_TOKEN
from synthex.core.plugins import Registry, populate
from synthex.core.record import Record
from synthex.core.steps.base import callable_ref, callable_source_hash, resolve_callable

BUILTIN_MODULES = ("synthex.core.steps.fold_state",)


def _positive_int(owner: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise PipelineDefinitionError(f"{owner}: {name}={value!r}; expected a positive integer")


@dataclass(frozen=True)
class StateBound:
    """How a fold keeps its state bounded. Subclasses set ``kind`` and override the hooks they need."""

    kind: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        """The TOML form: ``kind`` and the fields (a prompt function as ``module:qualname``)."""
        out: dict[str, Any] = {"kind": self.kind}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = callable_ref(value) if callable(value) else value
        return out

    def config(self) -> dict[str, Any]:
        """Part of the fold's version: a new bound re-folds."""
        return self.to_dict()

    def window(self) -> int | None:
        """How many of the chain's last inputs the state is folded from (None: all, carried in the state)."""
        return None

    def bound(self, state: str, folded: int, compress: Callable[[str], str]) -> str:
        """The state after the ``folded``-th input of the chain; ``compress(state)`` calls the step's model."""
        return state


@dataclass(frozen=True)
class TruncateState(StateBound):
    tokens: int = 2000
    kind: ClassVar[str] = "truncate"

    def __post_init__(self) -> None:
        _positive_int("TruncateState", "tokens", self.tokens)

    def bound(self, state: str, folded: int, compress: Callable[[str], str]) -> str:
        return last_tokens(state, self.tokens)


@dataclass(frozen=True)
class CompressState(StateBound):
    every: int = 10
    prompt: Callable[[str], str] | None = None  # None: synthex.core.prompts.compress_state
    kind: ClassVar[str] = "compress"

    def __post_init__(self) -> None:
        _positive_int("CompressState", "every", self.every)
        if self.prompt is not None and not callable(self.prompt):
            raise PipelineDefinitionError(f"CompressState: prompt={self.prompt!r}; expected a function state -> str")

    def config(self) -> dict[str, Any]:
        return self.to_dict() | {"prompt_source": callable_source_hash(self.prompt)}

    def bound(self, state: str, folded: int, compress: Callable[[str], str]) -> str:
        return compress(state) if folded % self.every == 0 else state


@dataclass(frozen=True)
class WindowState(StateBound):
    inputs: int = 20
    kind: ClassVar[str] = "window"

    def __post_init__(self) -> None:
        _positive_int("WindowState", "inputs", self.inputs)

    def window(self) -> int | None:
        return self.inputs


def last_tokens(text: str, tokens: int) -> str:
    """The end of ``text`` within ``tokens`` tokens (``CHARS_PER_TOKEN`` characters each), starting at a
    word when there is one to start at."""
    limit = tokens * CHARS_PER_TOKEN
    if len(text) <= limit:
        return text
    tail = text[-limit:]
    cut = next((i for i, ch in enumerate(tail) if ch.isspace()), -1)
    return tail[cut + 1:] if 0 <= cut < len(tail) - 1 else tail


def register_fold_states(registry: Registry[type[StateBound]]) -> None:
    for bound in (TruncateState, CompressState, WindowState):
        registry.register(bound.kind, bound)


@functools.cache
def fold_states() -> Registry[type[StateBound]]:
    """The state bounds by kind: the built-ins, then every installed plugin's (loaded once per process)."""
    return populate(Registry[type[StateBound]]("fold state bound"), hookspecs.register_fold_states, builtins=BUILTIN_MODULES)


def state_bound(value: object, where: str) -> StateBound | None:
    """``state=`` as given: a ``StateBound``, its TOML dict (``{"kind": "truncate", "tokens": 500}``) or None."""
    if value is None or isinstance(value, StateBound):
        return value
    if not isinstance(value, dict) or "kind" not in value:
        raise PipelineDefinitionError(f"{where}: state={value!r}; expected TruncateState(tokens=N), "
                                      f"CompressState(every=K) or WindowState(inputs=N) (or a dict with 'kind')")
    args = dict(value)
    try:
        bound_class = fold_states().get(str(args.pop("kind")))
    except PipelineDefinitionError as exc:
        raise PipelineDefinitionError(f"{where}: state: {exc}") from None
    known = {f.name for f in fields(bound_class)}
    unknown = sorted(set(args) - known)
    if unknown:
        raise PipelineDefinitionError(f"{where}: state {bound_class.kind!r}: unknown field {unknown[0]!r}; "
                                      f"fields: {', '.join(sorted(known))}")
    if isinstance(args.get("prompt"), str):
        args["prompt"] = resolve_callable(args["prompt"], where=f"{where}: state")
    try:
        return bound_class(**args)
    except PipelineDefinitionError as exc:
        raise PipelineDefinitionError(f"{where}: {exc}") from None


def window_records(previous: Record | None) -> list[Record]:
    """The inputs of a window fold's previous state (its ``step.window`` ids, read through its resolver)."""
    if previous is None:
        return []
    ids = list(previous.meta("step.window") or [])
    if not ids:
        return []
    found = {r.id: r for r in previous.sources()}
    return [found[i] for i in ids if i in found]
