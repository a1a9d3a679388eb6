"""Source kinds: what ``pipeline.source(name, ...)`` can read, one registry entry each.

A kind knows the keyword of ``pipeline.source`` that selects it (``file=``, ``folder=``, ``table=``,
``stream=``, ``api=``), the other arguments it takes, how to check them, and the ``SourceOrigin`` that
reads its data. The built-in kinds are registered by ``synthex.core.sources.builtin`` through the hook every
plugin may define, ``register_source_kinds(registry)`` (the ``synthex.plugins`` entry-point group,
``synthex.core.plugins``). A kind without a keyword of its own is named: ``pipeline.source(name, kind="x", ...)``.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Protocol

from synthex.core import hookspecs
from synthex.core.errors import PipelineDefinitionError
from synthex.core.limits import Limits
from synthex.core.plugins import Registry, populate
from synthex.core.sources.base import SourceOrigin

BUILTIN_MODULES = ("synthex.core.sources.builtin",)


class SourceFields(Protocol):
    """What a kind reads of its source step (``synthex.core.steps.SourceStep``, which imports this module)."""

    name: str
    file: str
    format: str
    base_dir: str
    table: Any
    api: Callable[[Any], Any] | None
    options: dict[str, Any]
    limits: Limits  # the pipeline's bounds on input (synthex.core.limits)
    formats: Any  # the pipeline's own file formats (a Registry; PipelineDefinition.formats)

    def path(self) -> Path: ...

    def reader(self) -> SourceOrigin: ...


class SourceKind(ABC):
    """One kind of source. ``fields`` turns the arguments of ``pipeline.source`` into the source step's
    fields (``file``, ``format``, ``table``, ``api``, or ``options`` for a plugin's own arguments);
    ``origin`` builds the reader of the step's data from them."""

    keyword: ClassVar[str | None] = None  # pipeline.source(name, <keyword>=value) selects this kind
    options: ClassVar[tuple[str, ...]] = ()  # the other keyword arguments it takes
    # ``file=PATH, format=F`` with F one of these is this kind too (how TOML exports spell folder and stream).
    formats: ClassVar[tuple[str, ...]] = ()

    def takes(self) -> tuple[str, ...]:
        return ((self.keyword,) if self.keyword else ()) + self.options

    @abstractmethod
    def fields(self, source: str, args: dict[str, Any]) -> dict[str, Any]:
        """The step's fields from ``args`` (only arguments this kind takes, none of them None); a bad
        value is a one-line PipelineDefinitionError naming the source ``source``."""

    @abstractmethod
    def origin(self, step: SourceFields) -> SourceOrigin:
        """The reader of the step's data (built once and kept while the step's fields are unchanged)."""

    def toml_config(self, step: SourceFields) -> dict[str, Any]:
        """The step's arguments in a TOML export (what ``fields`` takes back)."""
        return dict(step.options)

    def local_paths(self, step: SourceFields) -> list[Path] | None:
        """The local files or folders the step reads (a shared TOML's sources outside the project must be
        allowed: ``synthex.core.shared_toml``); None when they are not files Synthex can place (an API, a
        plugin kind's own origin), which a shared TOML must have allowed too."""
        return None


@functools.cache
def source_kinds() -> Registry[SourceKind]:
    """The source kinds: the built-ins, then every installed plugin's. Loaded once per process: a read-only
    catalogue (installed plugins do not change while a process runs) that every source step looks up."""
    return populate(Registry[SourceKind]("source kind"), hookspecs.register_source_kinds, builtins=BUILTIN_MODULES)


def get_source_kind(name: str) -> SourceKind:
    """The kind registered as ``name``; an unknown one is one line naming the known kinds and any plugin
    that failed to load."""
    return source_kinds().get(name)


def _listing(args: tuple[str, ...]) -> str:
    names = [f"{a}=" for a in args]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def resolve_source_kind(source: str, args: dict[str, Any], kind: str | None = None
                        ) -> tuple[str, SourceKind, dict[str, Any]]:
    """Which kind ``pipeline.source(source, **args)`` is (``kind``: named, else by its one keyword), with
    the arguments that kind takes. Arguments of no kind, or of another kind, are one-line errors."""
    registry = source_kinds()
    if kind is None:
        keywords = [k.keyword for k in (registry.get(n) for n in registry) if k.keyword]
        given = [a for a in keywords if a in args]
        if len(given) != 1:
            raise PipelineDefinitionError(f"source {source!r}: give exactly one of {', '.join(f'{a}=' for a in keywords)} "
                                          f"(got {', '.join(given) or 'none'})")
        kind = next(n for n in registry if registry.get(n).keyword == given[0])
        fmt = args.get("format")
        spelled = next((n for n in registry if fmt in registry.get(n).formats), None) if given == ["file"] else None
        if spelled is not None and spelled != kind:  # file=PATH, format="stream": a stream source
            kind, args = spelled, {registry.get(spelled).keyword or "file": args["file"],
                                   **{k: v for k, v in args.items() if k not in ("file", "format")}}
    try:
        chosen = get_source_kind(kind)
    except PipelineDefinitionError as exc:
        raise PipelineDefinitionError(f"source {source!r}: {exc}") from None
    extra = [a for a in args if a not in chosen.takes()]
    if extra:
        owner = next((registry.get(n) for n in registry if extra[0] in registry.get(n).options), None)
        if owner is not None and owner.keyword:
            verb = "belongs" if len(owner.options) == 1 else "belong"
            raise PipelineDefinitionError(f"source {source!r}: {_listing(owner.options)} {verb} to a "
                                          f"{owner.keyword}= source")
        takes = ", ".join(f"{a}=" for a in chosen.takes()) or "no arguments"
        raise PipelineDefinitionError(f"source {source!r}: {extra[0]}= is not an argument of a {kind} source "
                                      f"(it takes {takes})")
    return kind, chosen, args
