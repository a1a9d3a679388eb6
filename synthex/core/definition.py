"""The pipeline definition: a memory architecture as a DAG of steps (design doc §4); pure data.

Nothing here runs, stores or searches: ``synthex.app.Pipeline`` adds that on top. Lower layers take a
``PipelineDefinition``.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synthex.core.errors import PipelineDefinitionError
from synthex.core.hashing import stable_hash
from synthex.core.naming import MAIN, check_branch_name
from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex.core.steps import AggregateStep, FoldStep, MergeStep, SourceStep, Step, TransformStep
from synthex.core.steps.base import callable_ref
from synthex.core.steps.privacy import check_pii_mode

SURFACES = ("projection", "search")


@dataclass
class Output:
    name: str
    from_: list[str]
    surface: str
    on_update: Callable[[dict[str, Any]], Any] | str | None = None


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


def _as_list(value: str | list[str] | tuple[str, ...]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


class PipelineDefinition:
    """``PipelineDefinition(name, agent=)`` with ``.source/.transform/.aggregate/.fold/.merge/.output``."""

    def __init__(
        self,
        name: str,
        agent: str = "",
        description: str = "",
        project_dir: str | Path | None = None,
        store_uri: str | None = None,
        lexical_stem: bool = False,
    ) -> None:
        self.name = name
        # English stemming in the BM25 index ("cooked" finds "cooking"): it lost on LongMemEval in the
        # lethe notes and won on LoCoMo here (docs/benchmarks.md), so each project chooses.
        self.lexical_stem = lexical_stem
        self.agent = agent
        self.description = description
        self.project_dir = Path(project_dir).resolve() if project_dir else Path.cwd()
        self._store_uri = store_uri
        self.steps: dict[str, Step] = {}
        self.outputs: dict[str, Output] = {}
        # Branching (docs/architecture.md, "Branches"): a branch is a copy of its parent's definition
        # that may override steps; steps it leaves as they are read the parent's records.
        self.branch_name = MAIN
        self.parent: PipelineDefinition | None = None
        self.applied_branches: list[str] = []  # branches promoted into this definition
        self._overriding = False

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

    # -- definition -----------------------------------------------------------------------------
    def _add(self, step: Step) -> Step:
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
        self.steps[step.name] = step
        return step

    def _override(self, step: Step) -> Step:
        current = self.steps[step.name]
        if list(step.from_) != list(current.from_):
            raise PipelineDefinitionError(
                f"branch {self.branch_name!r}: step {step.name!r} reads {step.from_}, its parent's reads "
                f"{current.from_}; an override keeps the step's inputs (every branch shares one asset graph)")
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
        child.steps, child.outputs = dict(self.steps), dict(self.outputs)
        child.branch_name, child.parent, child._overriding = name, self, False
        child.applied_branches = list(self.applied_branches)
        return child

    def apply_branch(self, name: str, pipeline_file: str | Path | None = None) -> None:
        """Apply the overrides of ``branches/<name>.py`` to this definition (what ``promote`` writes
        into pipeline.py, passing its ``__file__``: the project folder is not known yet while
        pipeline.py runs): the same prompt functions, so the same step versions as on the branch."""
        from synthex.core.project import branch_module

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
        from synthex.core.project import load_branch

        # Loaded each time (the module itself is imported once per version of its file), so an edit
        # of the branch file or a promote into main is seen at once.
        return load_branch(self.root(), name)

    def effective_versions(self) -> dict[str, str]:
        """step -> hash of its version and its inputs' effective versions (the definition all the way up)."""
        out: dict[str, str] = {}
        for name in self.order():
            step = self.steps[name]
            # A source's file is not in its version (moving an export must not reprocess it), but a
            # branch reading another export does not read its parent's records.
            data = step.describe() if isinstance(step, SourceStep) else ""
            out[name] = stable_hash("effective/v1", step.version_hash(), data, [out[u] for u in step.from_])[:24]
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

    def source(self, name: str, file: str | Path | None = None, format: str = "auto", *,
               folder: str | Path | None = None, table: str | None = None, dsn: str | None = None,
               pk: str | None = None, updated_at: str | None = None, created_at: str | None = None,
               text: list[str] | None = None, stream: str | Path | None = None,
               api: Callable[[Any], Any] | None = None, pii: str | None = None) -> SourceStep:
        """A source (design doc §3.1), exactly one of: ``file`` (an export; ``format`` or auto),
        ``folder`` (notes dated by front matter, file name, else mtime), ``table`` in ``dsn``
        (``duckdb:///x.duckdb`` / ``sqlite:///x.sqlite``) keyed by ``pk``, changes found by the
        ``updated_at`` watermark or else a per-row hash, ``stream`` (an append-only JSONL file read
        from its last offset; ``remember`` appends to it) or ``api`` (``fetch(cursor)`` yielding pages)."""
        given = {k: v for k, v in (("file", file), ("folder", folder), ("table", table), ("stream", stream),
                                   ("api", api)) if v is not None}
        if len(given) != 1:
            raise PipelineDefinitionError(f"source {name!r}: give exactly one of file=, folder=, table=, stream=, "
                                          f"api= (got {', '.join(given) or 'none'})")
        if table is None and any(v is not None for v in (dsn, pk, updated_at, created_at, text)):
            raise PipelineDefinitionError(f"source {name!r}: dsn=, pk=, updated_at=, created_at= and text= "
                                          f"belong to a table= source")
        check_pii_mode(name, pii)
        base = str(self.project_dir)
        if folder is not None:
            return self._add(SourceStep(name=name, file=str(folder), format="folder", base_dir=base, pii=pii))
        if file is not None:
            return self._add(SourceStep(name=name, file=str(file), format=format, base_dir=base, pii=pii))
        if stream is not None:
            return self._add(SourceStep(name=name, file=str(stream), format="stream", base_dir=base, pii=pii))
        if api is not None:
            if not callable(api):
                raise PipelineDefinitionError(f"source {name!r}: api= must be a callable fetch(cursor) yielding pages")
            return self._add(SourceStep(name=name, format="api", api=api, base_dir=base, pii=pii))
        from synthex.core.importers.tables import TableSpec

        if not dsn or not pk:
            raise PipelineDefinitionError(f"source {name!r}: a table= source needs dsn= and pk=")
        spec = TableSpec(dsn=dsn, table=str(table), pk=pk, updated_at=updated_at, created_at=created_at,
                         text=tuple(text) if text else None)
        return self._add(SourceStep(name=name, format="table", table=spec, base_dir=base, pii=pii))

    def source_steps(self, only: list[str] | None = None) -> list[str]:
        """The source steps (``only``: these, each checked to be one)."""
        known = [s for s, st in self.steps.items() if isinstance(st, SourceStep)]
        for name in only or []:
            if name not in known:
                raise PipelineDefinitionError(f"unknown source {name!r}; sources: {', '.join(known)}")
        return list(only) if only else known

    def stream_sources(self) -> list[str]:
        """Source steps an agent can append to (``remember``)."""
        return [s for s, st in self.steps.items() if isinstance(st, SourceStep) and st.format == "stream"]

    def transform(
        self,
        name: str,
        from_: str,
        prompt: Callable[[Record], str] | None = None,
        model: str | None = None,
        temperature: float = 0.0,
        fn: Callable[[Record], str] | None = None,
        pii: str | None = None,
    ) -> TransformStep:
        check_pii_mode(name, pii)
        return self._add(TransformStep(name=name, from_=_as_list(from_), prompt=prompt, fn=fn,
                                       model=model, temperature=temperature, pii=pii))

    def aggregate(
        self,
        name: str,
        from_: str | list[str],
        period: str = "month",
        prompt: Callable[[list[Record], str], str] | None = None,
        model: str | None = None,
        temperature: float = 0.0,
        pii: str | None = None,
    ) -> AggregateStep:
        check_pii_mode(name, pii)
        return self._add(AggregateStep(name=name, from_=_as_list(from_), period=period, prompt=prompt,
                                       model=model, temperature=temperature, pii=pii))

    def fold(
        self,
        name: str,
        from_: str | list[str],
        prompt: Callable[[Record, str], str] | None = None,
        model: str | None = None,
        temperature: float = 0.0,
        initial_state: str = "",
        pii: str | None = None,
    ) -> FoldStep:
        check_pii_mode(name, pii)
        return self._add(FoldStep(name=name, from_=_as_list(from_), prompt=prompt, model=model,
                                  temperature=temperature, initial_state=initial_state, pii=pii))

    def merge(self, name: str, from_: list[str]) -> MergeStep:
        return self._add(MergeStep(name=name, from_=_as_list(from_)))

    def output(
        self,
        name: str,
        from_: str | list[str],
        surface: str = "search",
        on_update: Callable[[dict[str, Any]], Any] | str | None = None,
    ) -> Output:
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
        out = Output(name=name, from_=sources, surface=surface, on_update=on_update)
        self.outputs[name] = out
        return out

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
        return [s for s, st in self.steps.items() if isinstance(st, SourceStep)]

    # -- search surfaces ----------------------------------------------------------------------------
    def search_steps(self) -> list[str]:
        """The steps of the ``surface="search"`` outputs (every step when there is none)."""
        steps = [s for o in self.outputs.values() if o.surface == "search" for s in o.from_]
        return list(dict.fromkeys(steps)) or self.order()

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
            if isinstance(step, SourceStep):
                entry.update(step.toml_config())
            else:
                entry["from"] = list(step.from_)
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
                   for o in self.outputs.values()]
        head = {"name": self.name, "agent": self.agent, "description": self.description}
        if self.lexical_stem:
            head["lexical_stem"] = True
        return {"pipeline": head,
                "steps": steps, "outputs": outputs}

    def to_toml(self, path: str | Path | None = None) -> str:
        import tomli_w

        text = tomli_w.dumps(self.to_toml_dict())
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    @classmethod
    def from_toml(cls, path: str | Path, project_dir: str | Path | None = None) -> PipelineDefinition:
        import tomllib

        p = Path(path)
        data = tomllib.loads(p.read_text(encoding="utf-8"))
        head = data.get("pipeline", {})
        if "name" not in head:
            raise PipelineDefinitionError(f"{p}: [pipeline] needs a name")
        pipe = cls(head["name"], agent=head.get("agent", ""), description=head.get("description", ""),
                   project_dir=project_dir or p.parent, lexical_stem=bool(head.get("lexical_stem", False)))
        builders = {"source": pipe.source, "transform": pipe.transform, "aggregate": pipe.aggregate,
                    "fold": pipe.fold, "merge": pipe.merge}
        for entry in data.get("steps", []):
            entry = dict(entry)
            kind = entry.pop("kind", None)
            if kind not in builders:
                raise PipelineDefinitionError(f"{p}: step {entry.get('name')!r} has unknown kind {kind!r}")
            if "from" in entry:
                entry["from_"] = entry.pop("from")
            for attr in ("prompt", "fn"):
                if attr in entry:
                    entry[attr] = resolve_callable(entry[attr], where=f"{p}: step {entry.get('name')!r}")
            builders[kind](**entry)
        for out in data.get("outputs", []):
            pipe.output(out["name"], from_=out["from"], surface=out.get("surface", "search"),
                        on_update=out.get("on_update"))
        return pipe


def resolve_callable(ref: str, where: str = "") -> Callable[..., Any]:
    """Import ``module:qualname``."""
    module_name, _, qualname = ref.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise PipelineDefinitionError(f"{where}: cannot import prompt function {ref!r}: {exc}") from exc
    return obj
