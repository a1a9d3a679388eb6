"""Source: brings data into the pipeline, one record per conversation, document, row or stream line.

Where the data comes from is the step's source kind (``synthex.core.sources.kinds``): an export file or
folder, a DuckDB/SQLite table, an append-only stream, an API, or a plugin's kind. The kind checks the
arguments of ``pipeline.source`` and builds the step's ``origin``, which reads the data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

from synthex.core.errors import PipelineDefinitionError
from synthex.core.hashing import fingerprint
from synthex.core.importers import SourceItem
from synthex.core.limits import Limits
from synthex.core.periods import month_of
from synthex.core.record import Record
from synthex.core.sources.base import SourceOrigin
from synthex.core.sources.bounded import BoundedOrigin
from synthex.core.sources.file import IMPORTER_VERSION
from synthex.core.sources.kinds import get_source_kind, resolve_source_kind
from synthex.core.steps.base import OPTION_FIELDS, Audit, Step, StepContext, WorkItem

if TYPE_CHECKING:
    from synthex.core.importers.migrate.turns import TurnsAs


@dataclass
class SourceStep(Step):
    file: str = ""
    format: str = "auto"
    base_dir: str = ""  # relative ``file`` paths resolve against the pipeline's folder
    table: Any = None  # a synthex.core.importers.tables.TableSpec: a DuckDB / SQLite table source
    api: Callable[[Any], Any] | None = field(default=None, repr=False)  # fetch(cursor) yielding pages
    origin_kind: str = "file"  # the source kind (a name in synthex.core.sources.kinds.source_kinds())
    options: dict[str, Any] = field(default_factory=dict)  # a plugin kind's own arguments (checked by it)
    # Set by an eval only (``read_export``): the benchmark's turns read as another system's (an imported project).
    turns_as: TurnsAs | None = None
    # The pipeline's bounds on input (``PipelineDefinition.limits``, bound when the step is added): not an
    # argument of ``pipeline.source`` and not part of the version (they decide which items exist).
    limits: Limits = field(default_factory=Limits, init=False, repr=False, compare=False)
    # The pipeline's own formats (``PipelineDefinition.formats``, bound likewise; not part of the
    # version: the step's ``format`` name is).
    formats: Any = field(default=None, init=False, repr=False, compare=False)
    kind: ClassVar[str] = "source"
    is_source: ClassVar[bool] = True
    _origin: SourceOrigin | None = field(default=None, init=False, repr=False, compare=False)
    _origin_key: tuple = field(default=(), init=False, repr=False, compare=False)
    _by_period: tuple[object, dict[str, list[SourceItem]]] = field(default=(None, {}), init=False, repr=False,
                                                                   compare=False)

    @classmethod
    def build(cls, name: str, *, base_dir: str = "", from_: str | list[str] = (), pii: str | None = None,
              source_kind: str | None = None, **args: Any) -> Self:
        """``pipeline.source(name, ...)``: the kind named ``source_kind``, else the one whose keyword is
        given (``file=``, ``folder=``...), checks its arguments (None is not given)."""
        if from_:
            raise PipelineDefinitionError(f"source {name!r}: a source reads no steps (from_=)")
        options = {k: args.pop(k) for k in OPTION_FIELDS if k in args}
        given = {k: v for k, v in args.items() if v is not None}
        origin_kind, chosen, given = resolve_source_kind(name, given, source_kind)
        if pii is not None:  # the PII detectors only for sources that use them
            from synthex.core.steps.privacy import check_pii_mode

            check_pii_mode(name, pii)
        return cls(name=name, base_dir=base_dir, pii=pii, origin_kind=origin_kind,
                   **chosen.fields(name, given)).with_options(**options)

    def use_limits(self, limits: Limits) -> None:
        self.limits = limits

    def use_formats(self, formats: Any) -> None:
        self.formats = formats

    def read_export(self, file: str, fmt: str, base_dir: str, turns_as: TurnsAs | None = None) -> None:
        """Read the export ``file`` (format ``fmt``) instead of this source's data (evals point a project's
        sources at a benchmark file); ``turns_as``: its items read as another system's turns (the source read
        that system's file: ``synthex.core.importers.migrate.turns``)."""
        self.origin_kind, self.file, self.format, self.base_dir = "file", file, fmt, base_dir
        self.table = self.api = None
        self.options = {}
        self.turns_as = turns_as

    def path(self) -> Path:
        p = Path(self.file).expanduser()
        return p if p.is_absolute() or not self.base_dir else Path(self.base_dir) / p

    def reader(self) -> SourceOrigin:
        """The origin, built by the step's kind from the step's fields and kept (with its parse, offsets
        and caches) while they are unchanged: paths resolve against the project folder, known only once
        it is loaded. It is read through ``BoundedOrigin``: items over the pipeline's bounds (text length,
        a date too far ahead) are left out with a warning, for every kind alike."""
        key = (self.origin_kind, self.file, self.format, self.base_dir, self.table, id(self.api), dict(self.options),
               self.limits, self.turns_as)
        if self._origin is None or key != self._origin_key:
            origin = get_source_kind(self.origin_kind).origin(self)
            if self.turns_as is not None:
                from synthex.core.sources.turns_as import TurnsAsOrigin

                origin = TurnsAsOrigin(origin, self.turns_as)
            self._origin, self._origin_key = BoundedOrigin(origin, self.limits), key
        return self._origin

    def describe(self) -> str:
        """Where the data is (a path; a dsn and table; a stream file; an API callable)."""
        return self.reader().describe()

    def config(self) -> dict[str, Any]:
        return self.reader().config()

    def location(self) -> str:
        return self.describe()

    def toml_config(self) -> dict[str, Any]:
        kind = get_source_kind(self.origin_kind)
        named = {} if kind.keyword else {"source_kind": self.origin_kind}  # a kind without a keyword is named
        return named | kind.toml_config(self)

    def items(self) -> list[SourceItem]:
        """The source's current items (each origin keeps one parse while its data is unchanged)."""
        return self.reader().items()

    def warnings(self) -> list[str]:
        """One line per thing the importer left out or repaired (e.g. a message without text)."""
        return self.reader().warnings()

    def items_by_period(self) -> dict[str, list[SourceItem]]:
        """The items grouped by period, grouped once per parse (origins return the same list while
        their data is unchanged): planning asks for every period of a 100k-row table."""
        items = self.items()
        if self._by_period[0] is not items:
            grouped: dict[str, list[SourceItem]] = {}
            for item in items:
                grouped.setdefault(month_of(item.created_at), []).append(item)
            self._by_period = (items, grouped)
        return self._by_period[1]

    def periods(self) -> list[str]:
        return sorted(self.items_by_period())

    def output_chars(self, items: list[WorkItem]) -> int | None:
        return sum(len(i.payload.content) for i in items)

    def work(self, ctx: StepContext) -> list[WorkItem]:
        items = self.items_by_period().get(ctx.period, [])
        version = self.version_hash()
        return [self.item(ctx, [fingerprint(i.content)], i.key, version, payload=i) for i in items]

    def produce(self, items: list[WorkItem], ctx: StepContext) -> tuple[list[Record], int]:
        out = []
        for item in items:
            src: SourceItem = item.payload
            audit = Audit(model=f"importer:{IMPORTER_VERSION}")
            out.append(self.make_record(ctx, item, src.content, src.metadata, audit, sources=[]))
            ctx.progress(1)
        return out, 0
