"""The pipeline definition: a memory architecture as a DAG of steps (design doc §4); pure data.

Nothing here runs, stores or searches: ``synthex.app.Pipeline`` adds that on top. Lower layers take a
``PipelineDefinition``.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from synthex.core.branch_files import branch_module
from synthex.core.errors import PipelineDefinitionError
from synthex.core.hashing import stable_hash
from synthex.core.limits import Limits
from synthex.core.naming import DEFAULT_SEARCH_MODE, MAIN, check_branch_name, check_namespace
from synthex.core.plugins import Registry
from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex.core.steps import (
    AggregateStep,
    FoldStep,
    MergeStep,
    SourceStep,
    Step,
    TransformStep,
    get_step_kind,
)
from synthex.core.steps.base import callable_ref
from synthex.core.steps.fold_state import StateBound

SURFACES = ("projection", "search")
# How often Dagster's daemon ticks each source sensor (`synthex ui`), in seconds: the wait between a change
# and the run that brings it in. Dagster's sensor daemon loops every 5 s, so less than 5 is no faster.
SENSOR_INTERVAL_S = 5
S = TypeVar("S", bound=Step)

if TYPE_CHECKING:
    from synthex.core.importers import SourceItem
    from synthex.core.importers.formats import FormatParser
    from synthex.core.shared_toml import SharedTomlGrant


@dataclass
class Output:
    name: str
    from_: list[str]
    surface: str
    on_update: Callable[[dict[str, Any]], Any] | str | None = None
    mode: str | None = None  # a search output's default search strategy (None: hybrid)


@dataclass
class Plan:
    """What ``run`` would do: steps and (step -> periods) to process, with estimates."""

    branch: str
    steps: list[str]
    partitions: dict[str, list[str]]
    estimates: dict[str, float]
    per_step: dict[str, dict[str, Any]]
    periods: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"branch": self.branch, "steps": self.steps, "estimates": self.estimates,
                "per_step": self.per_step, "partitions": self.partitions, "periods": self.periods}


EVAL_LEVELS = ("turn", "session")
DEFAULT_EVAL_THRESHOLDS = {"turn/recall_any@10": 0.5}


@dataclass(frozen=True)
class EvalDeclaration:
    """``pipeline.eval_asset(...)``: a benchmark this project scores in the Dagster UI (an ``eval_<benchmark>``
    asset per branch, its job and, with ``schedule``, a schedule on main). Plain data: the evals plugin
    builds the assets; core never imports it."""

    benchmark: str
    data: str  # as written; relative paths are relative to the project folder
    schedule: str | None = None  # a cron expression; None: no schedule
    thresholds: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_EVAL_THRESHOLDS))
    blocking: bool = False  # a failing threshold check blocks downstream materializations

    def data_path(self, project_dir: Path) -> Path:
        """The data file, taken from the project (never from where the evals package is installed)."""
        path = Path(self.data).expanduser()
        return path if path.is_absolute() else (project_dir / path).resolve()

    def to_toml_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"benchmark": self.benchmark, "data": self.data, "thresholds": dict(self.thresholds)}
        if self.schedule:
            entry["schedule"] = self.schedule
        if self.blocking:
            entry["blocking"] = True
        return entry


def eval_metric_name(metric: str, where: str) -> str:
    """``turn/recall_all@10`` (the eval asset's metadata keys); ``turn.recall_all@10`` is read the same."""
    level, sep, name = metric.partition("/") if "/" in metric else metric.partition(".")
    if not sep or level not in EVAL_LEVELS or not name:
        raise PipelineDefinitionError(f"{where}: threshold metric {metric!r}: expected '<level>/<metric>' with level "
                                      f"one of {', '.join(EVAL_LEVELS)} (e.g. 'turn/recall_any@10')")
    return f"{level}/{name}"


def _as_list(value: str | list[str] | tuple[str, ...]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


class PipelineDefinition:
    """``PipelineDefinition(name, agent=)`` with ``.source/.transform/.aggregate/.fold/.merge/.output``, and
    ``.step(kind, name, ...)`` for any registered step kind (a plugin's too)."""

    def __init__(
        self,
        name: str,
        agent: str = "",
        description: str = "",
        project_dir: str | Path | None = None,
        store_uri: str | None = None,
        lexical_stem: bool = False,
        limits: Limits | None = None,
        sensor_interval_s: int = SENSOR_INTERVAL_S,
        namespace: str | None = None,
        ingest_workers: int = 1,
    ) -> None:
        self.name = name
        if isinstance(ingest_workers, bool) or not isinstance(ingest_workers, int) or ingest_workers < 1:
            raise PipelineDefinitionError(f"pipeline {name!r}: ingest_workers: {ingest_workers!r} is not a "
                                          f"whole number of processes from 1")
        # The processes that embed and write a first ingest's records in every run that names none: `synthex
        # sync`, the sensors' and the schedule's runs, a UI run without a synthex/workers tag, `synthex run`
        # without --workers. Checked against this machine's cores when a run starts, as --workers is.
        self.ingest_workers = ingest_workers
        # Many memories on one Dagster instance (docs/deploy.md): set, it prefixes this memory's asset keys and
        # names its partitions, jobs, sensors and schedules (synthex_assets.naming.DagsterNames); None: the
        # names of a project alone on its instance.
        self.namespace = check_namespace(namespace)
        if isinstance(sensor_interval_s, bool) or not isinstance(sensor_interval_s, int) or sensor_interval_s <= 0:
            raise PipelineDefinitionError(f"pipeline {name!r}: sensor_interval_s: {sensor_interval_s!r} is not a "
                                          f"positive whole number of seconds")
        # Live memory: the source sensors' minimum interval (synthex_assets.sensors; docs/architecture.md).
        self.sensor_interval_s = sensor_interval_s
        self.steps: dict[str, Step] = {}
        # Bounds on what enters memory (synthex.core.limits): sources, remember and the MCP server read them.
        self.limits = limits if limits is not None else Limits()
        # This pipeline's own file formats (``format``), shared with its branches; plugins add theirs
        # through the ``register_formats`` hook (synthex.core.hookspecs).
        self.formats: Registry[FormatParser] = Registry("file format")
        # English stemming in the BM25 index ("cooked" finds "cooking"): it lost on LongMemEval in the
        # lethe notes and won on LoCoMo here (docs/benchmarks.md), so each project chooses.
        self.lexical_stem = lexical_stem
        self.agent = agent
        self.description = description
        self.project_dir = Path(project_dir).resolve() if project_dir else Path.cwd()
        self._store_uri = store_uri
        self.outputs: dict[str, Output] = {}
        # Benchmarks scored in the Dagster UI (opt-in: no declaration, no eval assets, jobs or schedules).
        self.evals: dict[str, EvalDeclaration] = {}
        # Branching (docs/architecture.md, "Branches"): a branch is a copy of its parent's definition
        # that may override steps; steps it leaves as they are read the parent's records.
        self.branch_name = MAIN
        self.parent: PipelineDefinition | None = None
        self.applied_branches: list[str] = []  # branches promoted into this definition
        self._overriding = False
        # Loaded from a shared TOML: what the user allowed it to do (a run checks it again before it starts).
        self.shared_toml: SharedTomlGrant | None = None

    @property
    def limits(self) -> Limits:
        """Bounds on what enters memory (``synthex.core.limits``); every step has them (source steps read
        within them), including steps added before they were set."""
        return self._limits

    @limits.setter
    def limits(self, value: Limits) -> None:
        if not isinstance(value, Limits):
            raise PipelineDefinitionError(f"pipeline {self.name!r}: limits= takes a synthex.Limits, "
                                          f"not {type(value).__name__}")
        self._limits = value
        for step in self.steps.values():
            step.use_limits(value)

    # -- where things live ----------------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        return self.project_dir / ".synthex"

    @property
    def store_uri(self) -> str:
        """LanceDB URI: a local folder by default; any LanceDB URI (s3://, gs://...) works."""
        return self._store_uri or str(self.data_dir / "lancedb")

    @store_uri.setter
    def store_uri(self, value: str) -> None:
        self._store_uri = value

    @property
    def dagster_home(self) -> Path:
        return self.data_dir / "dagster"

    @property
    def instance_home(self) -> Path:
        """The Dagster instance's folder: ``SYNTHEX_DAGSTER_HOME`` when set (a shared deployment's folder,
        docs/deploy.md), else the project's own ``dagster_home``."""
        return Path(os.environ.get("SYNTHEX_DAGSTER_HOME") or self.dagster_home).resolve()

    # -- definition -----------------------------------------------------------------------------
    def add_step(self, step: S) -> S:
        """Add a step built elsewhere (any ``Step`` subclass); on a branch, override the step of that name."""
        return self._add(step)

    def step(self, kind: str, name: str, **args: Any) -> Step:
        """A step of the registered ``kind`` (``synthex.core.steps.step_kinds()``: source, transform, aggregate,
        fold, merge, and the kinds of installed plugins) from keyword arguments: ``from_``, ``pii`` and the
        kind's own (``pipeline.step("transform", "t", from_="s", fn=f)`` is ``pipeline.transform(...)``)."""
        try:
            step_class = get_step_kind(kind)
        except PipelineDefinitionError as exc:
            raise PipelineDefinitionError(f"step {name!r}: {exc}") from None
        return self._add(step_class.build(name, base_dir=str(self.project_dir), **args))

    def _add(self, step: S) -> S:
        if (self.parent is not None or self._overriding) and step.name in self.steps:
            return self._override(step)
        if self.parent is not None:
            raise PipelineDefinitionError(
                f"branch {self.branch_name!r}: step {step.name!r} is not a step of its parent; a branch "
                f"overrides existing steps (same name and inputs), new steps are added on main")
        if not step.name or step.name in self.steps or step.name in self.outputs:
            raise PipelineDefinitionError(f"step name {step.name!r} is empty or already used")
        for upstream in step.from_:
            if upstream not in self.steps:
                raise PipelineDefinitionError(
                    f"step {step.name!r}: from_ names {upstream!r}, which is not defined (yet); "
                    f"defined steps: {', '.join(self.steps) or 'none'}"
                )
        step.use_limits(self.limits)
        step.use_formats(self.formats)
        self.steps[step.name] = step
        return step

    def _override(self, step: S) -> S:
        current = self.steps[step.name]
        if list(step.from_) != list(current.from_):
            raise PipelineDefinitionError(
                f"branch {self.branch_name!r}: step {step.name!r} reads {step.from_}, its parent's reads "
                f"{current.from_}; an override keeps the step's inputs (every branch shares one asset graph)")
        step.use_limits(self.limits)
        step.use_formats(self.formats)
        self.steps[step.name] = step
        return step

    # -- branches -------------------------------------------------------------------------------
    def branch(self, name: str) -> PipelineDefinition:
        """A branch of this definition: O(1), nothing copied in the store. Override steps on it with
        the usual builders (same step names and inputs); everything it does not override is read
        from this definition's records."""
        check_branch_name(name)
        if name == MAIN:
            raise PipelineDefinitionError("'main' is the trunk, not a branch name")
        child = copy.copy(self)
        child.steps, child.outputs, child.evals = dict(self.steps), dict(self.outputs), dict(self.evals)
        child.branch_name, child.parent, child._overriding = name, self, False
        child.applied_branches = list(self.applied_branches)
        return child

    def apply_branch(self, name: str, pipeline_file: str | Path | None = None) -> None:
        """Apply the overrides of ``branches/<name>.py`` to this definition (what ``promote`` writes
        into pipeline.py, passing its ``__file__``: the project folder is not known yet while
        pipeline.py runs): the same prompt functions, so the same step versions as on the branch."""
        root = Path(pipeline_file).resolve().parent if pipeline_file else self.project_dir
        module = branch_module(root, name)
        self._overriding = True
        try:
            module.overrides(self)
        finally:
            self._overriding = False
        self.applied_branches.append(name)

    def root(self) -> PipelineDefinition:
        return self if self.parent is None else self.parent.root()

    def for_branch(self, name: str) -> PipelineDefinition:
        """The definition that branch ``name`` runs: this one, an ancestor, or ``branches/<name>.py``."""
        node: PipelineDefinition | None = self
        while node is not None:
            if node.branch_name == name:
                return node
            node = node.parent
        # Loaded each time (the module itself is imported once per version of its file), so an edit
        # of the branch file or a promote into main is seen at once.
        return self.root().branch_from_file(name)

    def branch_from_file(self, name: str) -> PipelineDefinition:
        """Branch ``name`` of this (main) definition, from ``branches/<name>.py``: its parent's definition
        with the file's ``overrides`` applied."""
        module = branch_module(self.project_dir, name)
        parent_name = str(getattr(module, "PARENT", MAIN))
        chain, ancestor = [name], parent_name
        while ancestor != MAIN:  # a PARENT cycle would recurse forever: one line instead
            if ancestor in chain:
                raise PipelineDefinitionError(f"branch {name!r}: PARENT cycle {' -> '.join([*chain, ancestor])}")
            chain.append(ancestor)
            ancestor = str(getattr(branch_module(self.project_dir, ancestor), "PARENT", MAIN))
        parent = self if parent_name == MAIN else self.for_branch(parent_name)
        child = parent.branch(name)
        try:
            module.overrides(child)
        except PipelineDefinitionError as exc:
            raise PipelineDefinitionError(f"{module.__file__}: {exc}") from exc
        except Exception as exc:
            raise PipelineDefinitionError(f"{module.__file__}: overrides() failed: {type(exc).__name__}: {exc}") from exc
        return child

    def effective_versions(self) -> dict[str, str]:
        """step -> hash of its version and its inputs' effective versions (the definition all the way up)."""
        out: dict[str, str] = {}
        for name in self.order():
            step = self.steps[name]
            # A source's file is not in its version (moving an export must not reprocess it), but a
            # branch reading another export does not read its parent's records.
            out[name] = stable_hash("effective/v1", step.version_hash(), step.location(), [out[u] for u in step.from_])[:24]
        return out

    def serving_branches(self) -> dict[str, str]:
        """step -> the branch whose records this branch reads for it (copy-on-write): the parent's for
        every step whose effective version is the parent's, this branch for the others."""
        if self.parent is None:
            return {name: self.branch_name for name in self.steps}
        parent_view, parent_eff = self.parent.serving_branches(), self.parent.effective_versions()
        return {name: parent_view[name] if eff == parent_eff.get(name) else self.branch_name
                for name, eff in self.effective_versions().items()}

    def scope(self, branch: str | None = None) -> BranchScope:
        """The read/write scope of ``branch`` (this definition's own branch when None): the branch and
        which branch serves each of its steps. Every door resolves its scope here, once per command."""
        definition = self.for_branch(branch) if branch is not None else self
        return BranchScope.of(definition.branch_name, definition.serving_branches())

    def owned_steps(self) -> list[str]:
        """Steps that have records of their own on this branch (the others are read through its parent)."""
        return [s for s, b in self.serving_branches().items() if b == self.branch_name]

    def source(self, name: str, file: str | Path | None = None, format: str | None = None, *,
               kind: str | None = None, pii: str | None = None, **args: Any) -> SourceStep:
        """A source (design doc §3.1) of one source kind (``synthex.core.sources.source_kinds()``), chosen by
        its keyword, exactly one of: ``file`` (an export; ``format`` or auto), ``folder`` (notes dated by
        front matter, file name, else mtime), ``table`` in ``dsn`` (``duckdb:///x.duckdb`` /
        ``sqlite:///x.sqlite``) keyed by ``pk``, changes found by the ``updated_at`` watermark or else a
        per-row hash (``created_at``, ``text``: which columns date it and make its text), ``stream`` (an
        append-only JSONL file read from its last offset; ``remember`` appends to it) or ``api``
        (``fetch(cursor)`` yielding pages); or ``kind=`` a plugin's kind by name, with its own arguments."""
        step = SourceStep.build(name, base_dir=str(self.project_dir), pii=pii, source_kind=kind, file=file,
                                format=format, **args)
        return self._add(step)

    def format(self, name: str, parse: Callable[[Path], list[SourceItem]], version: str | None = None) -> None:
        """A file format of this pipeline's own: ``pipeline.source(..., file=F, format=name)`` reads ``F`` with
        ``parse(path) -> list[SourceItem]`` (a plugin's formats are every project's: the ``register_formats``
        hook, docs/extending.md). A built-in format's name is taken. ``version``: what the parser makes; part
        of the version of the sources reading the format, so changing it (with the parser) rewrites their
        records (``VersionedParser``); None: the sources' versions ignore the parser."""
        from synthex.core.importers.formats import BUILTIN_PARSERS, VersionedParser

        if name in BUILTIN_PARSERS:
            raise PipelineDefinitionError(f"format {name!r} is a built-in format; name yours otherwise")
        if version is not None and (not isinstance(version, str) or not version):
            raise PipelineDefinitionError(f"format {name!r}: version must be a non-empty string, not {version!r}")

        def read(path: Path, _intake: object) -> list[SourceItem]:
            return parse(path)

        self.formats.register(name, VersionedParser(read, version) if version else read,
                              by=f"pipeline.format({name!r})")

    def source_steps(self, only: list[str] | None = None) -> list[str]:
        """The source steps (``only``: these, each checked to be one)."""
        known = list(self.sources())
        for name in only or []:
            if name not in known:
                raise PipelineDefinitionError(f"unknown source {name!r}; sources: {', '.join(known)}")
        return list(only) if only else known

    def sources(self) -> dict[str, SourceStep]:
        """The source steps by name (the steps that bring data in), in definition order."""
        return {s: st for s, st in self.steps.items() if isinstance(st, SourceStep)}

    def stream_sources(self) -> list[str]:
        """Source steps an agent can append to (``remember``)."""
        return [s for s, st in self.sources().items() if st.origin_kind == "stream"]

    def transform(
        self,
        name: str,
        from_: str,
        prompt: Callable[[Record], str] | None = None,
        model: str | None = None,
        temperature: float = 0.0,
        fn: Callable[[Record], str] | None = None,
        pii: str | None = None,
        *,
        group: str | None = None, owners: Sequence[str] = (), automation: str | None = None,
    ) -> TransformStep:
        """``group`` / ``owners`` / ``automation`` (every builder takes them): the step's asset group and owners
        in the Dagster UI (emails or ``team:name``) and ``"eager"`` for Dagster to materialize it on its own
        when its inputs change (``synthex.core.steps.base.check_step_options``); none changes its version."""
        return self._add(TransformStep.build(name, from_=from_, prompt=prompt, fn=fn, model=model,
                                             temperature=temperature, pii=pii).with_options(group, owners, automation))

    def aggregate(
        self,
        name: str,
        from_: str | list[str],
        period: str | None = None,
        prompt: Callable[[list[Record], Any], str] | None = None,
        model: str | None = None,
        temperature: float = 0.0,
        pii: str | None = None,
        *,
        by: str | Callable[[Record], str | Iterable[str] | None] | None = None,
        fn: Callable[[list[Record], Any], str] | None = None,
        group: str | None = None, owners: Sequence[str] = (), automation: str | None = None,
    ) -> AggregateStep:
        """One record per group of ``from_``'s records, made by ``prompt(records, group)`` (a model) or
        ``fn(records, group)`` (plain Python). Without ``by``: groups by ``period`` (default "month"), and
        ``group`` is the period label. With ``by`` (a key function ``record -> key | keys | None``, or the
        name of one: speaker, conversation, session, entity, topic; ``synthex.core.steps.group_keys``): one
        group per key, ``group`` a ``KeyGroup``; per key and ``period`` group when ``period`` is given,
        otherwise spanning every period (the step's records live in the period partition "all")."""
        return self._add(AggregateStep.build(name, from_=from_, period=period, prompt=prompt, model=model,
                                             temperature=temperature, pii=pii, by=by, fn=fn)
                         .with_options(group, owners, automation))

    def fold(
        self,
        name: str,
        from_: str | list[str],
        prompt: Callable[[Record, str], str] | None = None,
        model: str | None = None,
        temperature: float = 0.0,
        initial_state: str = "",
        pii: str | None = None,
        *,
        fn: Callable[[Record, str], str] | None = None,
        state: StateBound | dict[str, Any] | None = None,
        group: str | None = None, owners: Sequence[str] = (), automation: str | None = None,
    ) -> FoldStep:
        """The state after each period, folded input by input with ``prompt(record, state)`` (a model) or
        ``fn(record, state)`` (plain Python). ``state``: ``TruncateState(tokens=N)``, ``CompressState(every=K)``
        or ``WindowState(inputs=N)`` (``synthex.core.steps.fold_state``) keeps it bounded."""
        return self._add(FoldStep.build(name, from_=from_, prompt=prompt, model=model, temperature=temperature,
                                        initial_state=initial_state, pii=pii, fn=fn, state=state)
                         .with_options(group, owners, automation))

    def merge(self, name: str, from_: list[str], *, group: str | None = None, owners: Sequence[str] = (),
              automation: str | None = None) -> MergeStep:
        return self._add(MergeStep.build(name, from_=from_).with_options(group, owners, automation))

    def output(
        self,
        name: str,
        from_: str | list[str],
        surface: str = "search",
        on_update: Callable[[dict[str, Any]], Any] | str | None = None,
        mode: str | None = None,
    ) -> Output:
        """``mode``: the search strategy a search that names none uses (a name of the strategy registry,
        e.g. ``"hierarchical"``; checked when a search runs: the registry lives above the core)."""
        if surface not in SURFACES:
            raise PipelineDefinitionError(f"output {name!r}: surface={surface!r}; expected one of {SURFACES}")
        if name in self.outputs or name in self.steps:
            raise PipelineDefinitionError(f"output name {name!r} is already used")
        sources = _as_list(from_)
        for s in sources:
            if s not in self.steps:
                raise PipelineDefinitionError(f"output {name!r}: from_ names unknown step {s!r}")
        if surface == "projection" and len(sources) != 1:
            raise PipelineDefinitionError(f"output {name!r}: a projection reads exactly one step")
        if isinstance(on_update, str) and not on_update.lower().startswith(("http://", "https://")):
            raise PipelineDefinitionError(f"output {name!r}: on_update={on_update!r}: a hook is a callable or an "
                                          f"http(s) URL")
        if mode is not None and (surface != "search" or not isinstance(mode, str) or not mode.strip()):
            raise PipelineDefinitionError(f"output {name!r}: mode={mode!r}: a search output's mode is the name of a "
                                          f"search strategy")
        out = Output(name=name, from_=sources, surface=surface, on_update=on_update, mode=mode)
        self.outputs[name] = out
        return out

    def eval_asset(self, benchmark: str, data: str | Path, schedule: str | None = None,
                   thresholds: dict[str, float] | None = None, blocking: bool = False) -> EvalDeclaration:
        """Score this pipeline on ``benchmark`` in the Dagster UI: an ``eval_<benchmark>`` asset partitioned by
        branch over ``data`` (relative to the project folder), a job, and with ``schedule`` (cron) a
        schedule on main; ``thresholds`` (metric -> minimum, e.g. ``{"turn/recall_all@10": 0.7}``; default
        turn recall_any@10 >= 0.5) become an asset check that fails below them."""
        where = f"pipeline {self.name!r}: eval_asset({benchmark!r})"
        if not isinstance(benchmark, str) or not benchmark.strip() or not benchmark.replace("_", "").replace("-", "").isalnum():
            raise PipelineDefinitionError(f"{where}: the benchmark is a registered name such as 'locomo'")
        if benchmark in self.evals:
            raise PipelineDefinitionError(f"{where}: already declared; one eval_asset per benchmark")
        if not isinstance(data, (str, Path)) or not str(data).strip():
            raise PipelineDefinitionError(f"{where}: data= names the benchmark's data file (relative to the project)")
        if schedule is not None and (not isinstance(schedule, str) or len(schedule.split()) not in (5, 6)):
            raise PipelineDefinitionError(f"{where}: schedule={schedule!r}: expected a cron expression such as "
                                          f"'0 3 * * *'")
        checked: dict[str, float] = {}
        for metric, minimum in (DEFAULT_EVAL_THRESHOLDS if thresholds is None else thresholds).items():
            if isinstance(minimum, bool) or not isinstance(minimum, (int, float)):
                raise PipelineDefinitionError(f"{where}: threshold {metric!r}={minimum!r}: expected a number")
            checked[eval_metric_name(str(metric), where)] = float(minimum)
        declaration = EvalDeclaration(benchmark, str(data), schedule, checked, bool(blocking))
        self.evals[benchmark] = declaration
        return declaration

    # -- graph ----------------------------------------------------------------------------------
    def order(self) -> list[str]:
        """Steps in dependency order (definition order is already topological: from_ must exist)."""
        return list(self.steps)

    def downstream(self, name: str) -> list[str]:
        found = {name}
        for step in self.order():
            if any(u in found for u in self.steps[step].from_):
                found.add(step)
        return [s for s in self.order() if s in found]

    def upstream(self, name: str) -> list[str]:
        found = {name}
        for step in reversed(self.order()):
            if step in found:
                found.update(self.steps[step].from_)
        return [s for s in self.order() if s in found]

    def select(self, step: str | None = None, from_: str | None = None) -> list[str]:
        for s in (step, from_):
            if s is not None and s not in self.steps:
                raise PipelineDefinitionError(f"unknown step {s!r}; steps: {', '.join(self.steps)}")
        if step is not None:
            return self.upstream(step)
        if from_ is not None:
            return self.downstream(from_)
        return self.order()

    def leaf_steps(self) -> list[str]:
        return [s for s, st in self.steps.items() if st.is_source]

    # -- search surfaces ----------------------------------------------------------------------------
    def search_steps(self) -> list[str]:
        """The steps of the ``surface="search"`` outputs (every step when there is none)."""
        steps = [s for o in self.outputs.values() if o.surface == "search" for s in o.from_]
        return list(dict.fromkeys(steps)) or self.order()

    def search_mode(self) -> str:
        """The search strategy a search that names none (and no step) uses: the first search output's
        ``mode``, else hybrid. At a named step a drill-down default gives way to surface search there
        (``StrategyRegistry.resolve``)."""
        return next((o.mode for o in self.outputs.values() if o.surface == "search" and o.mode), DEFAULT_SEARCH_MODE)

    def projection_step(self, name: str) -> str:
        """The step a ``surface="projection"`` output reads (e.g. the world model)."""
        out = self.outputs.get(name)
        if out is None or out.surface != "projection":
            known = [o.name for o in self.outputs.values() if o.surface == "projection"]
            raise PipelineDefinitionError(f"no projection output {name!r}; projections: {', '.join(known) or 'none'}")
        return out.from_[0]

    # -- sharing (design doc §4.8) ------------------------------------------------------------
    def to_toml_dict(self) -> dict[str, Any]:
        steps = []
        for step in self.steps.values():
            entry: dict[str, Any] = {"name": step.name, "kind": step.kind}
            entry.update(step.toml_config())
            entry.update(step.options_toml())
            for attr in ("prompt", "fn"):
                ref = callable_ref(getattr(step, attr, None))
                if ref:
                    entry[attr] = ref
            for attr in ("model", "temperature", "period", "initial_state", "pii"):
                value = getattr(step, attr, None)
                if value not in (None, ""):
                    entry[attr] = value
            steps.append(entry)
        outputs = [{"name": o.name, "from": o.from_, "surface": o.surface}
                   | ({"on_update": o.on_update} if isinstance(o.on_update, str) else {})
                   | ({"mode": o.mode} if o.mode else {})
                   for o in self.outputs.values()]
        head = {"name": self.name, "agent": self.agent, "description": self.description}
        if self.lexical_stem:
            head["lexical_stem"] = True
        if self.limits.to_dict():
            head["limits"] = self.limits.to_dict()
        if self.sensor_interval_s != SENSOR_INTERVAL_S:
            head["sensor_interval_s"] = self.sensor_interval_s
        if self.namespace is not None:
            head["namespace"] = self.namespace
        if self.ingest_workers != 1:
            head["ingest_workers"] = self.ingest_workers
        out: dict[str, Any] = {"pipeline": head, "steps": steps, "outputs": outputs}
        if self.evals:
            out["evals"] = [e.to_toml_dict() for e in self.evals.values()]
        return out

    def to_toml(self, path: str | Path | None = None) -> str:
        import tomli_w

        text = tomli_w.dumps(self.to_toml_dict())
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    @classmethod
    def from_toml(cls, path: str | Path, project_dir: str | Path | None = None, *, trust: bool = False,
                  allow_effects: bool | Callable[[Path, list[str]], bool] = False) -> PipelineDefinition:
        """The pipeline a shared TOML describes (``to_toml``), under the rule of ``synthex.core.shared_toml``:
        the modules its ``prompt``/``fn``/``by`` paths name are located before any import, and only
        synthex's prompt modules and the project's own are imported unless ``trust=True``; its ``on_update``
        URLs and sources outside the project are refused unless ``allow_effects`` is True (or a callable
        that is shown them and returns True). The project is ``project_dir``, else the TOML's folder."""
        from synthex.core.shared_toml import TomlTrust, load_shared_toml

        return load_shared_toml(cls, path, project_dir, TomlTrust(code=trust, effects=allow_effects))[1]
