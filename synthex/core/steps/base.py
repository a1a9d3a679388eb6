"""What every step kind shares: version hashing, work items, prompt calls, partition execution.

A step kind answers two questions for one (branch, period) partition:
- ``work(ctx)``: which outputs should exist (materialization key + deterministic id each), computed
  from the current upstream records without calling any model. The planner and the executor both
  use it, so ``synthex plan`` is exactly what ``synthex run`` will do.
- ``produce(items, ctx)``: make the records for the items whose key is not stored yet.

It also answers what the planner and the executor ask of every kind, so neither tests a step's class:
whether it calls a model (``uses_model``), how many outputs of what size it makes of inputs not stored
yet (``estimate_outputs``) and at how many tokens (``estimate_unstored_tokens``), whether it reads its
own previous period (``sequential_periods``) and whether it brings data in (``is_source``). A kind is a
``Step`` subclass registered by name (``synthex.core.steps.kinds``); ``build`` makes one from keyword
arguments (``pipeline.step(kind, name, ...)``, a TOML file).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol, Self

from synthex.core.errors import PipelineDefinitionError, StepError
from synthex.core.hashing import materialization_key, record_id, stable_hash
from synthex.core.limits import Limits
from synthex.core.llm import Completer, Completion, estimate_unrendered_tokens
from synthex.core.periods import now_iso
from synthex.core.purges import PurgedSet
from synthex.core.record import Record, RunStats


def callable_ref(fn: Callable[..., Any] | None) -> str | None:
    """``module:qualname`` of a function, used by TOML export and in audit trails."""
    if fn is None:
        return None
    return f"{fn.__module__}:{fn.__qualname__}"


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


def callable_source_hash(fn: Callable[..., Any] | None) -> str | None:
    """Hash of a prompt function's source: editing the prompt changes the step version."""
    if fn is None:
        return None
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        source = callable_ref(fn) or repr(fn)
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:32]


class SourceHashes:
    """``callable_source_hash`` of each callable computed once for this object's lifetime (a step's, so a
    loaded definition's). ``inspect.getsource`` re-reads and re-tokenizes the function's module on every
    call: the demo run asked ~1,700 times (each step's version per work item and per record, each audit),
    about a CPU-second (docs/benchmarks.md, issue 24). Keyed by the function object: a reloaded module or a
    step given another function makes a new key, so a shared or copied cache never answers for other code."""

    def __init__(self) -> None:
        self._by_callable: dict[Any, str | None] = {}
        self.computed = 0  # how many hashes were actually computed (what the cache saved is visible in tests)

    def of(self, fn: Callable[..., Any] | None) -> str | None:
        if fn is None:
            return None
        try:
            return self._by_callable[fn]
        except KeyError:
            pass
        except TypeError:  # an unhashable callable object: hashed every time, as before
            return callable_source_hash(fn)
        self.computed += 1
        digest = self._by_callable[fn] = callable_source_hash(fn)
        return digest


@dataclass(frozen=True)
class Audit:
    """How a record was made: ``record.audit`` is ``Audit(...).to_dict()`` for every step kind.

    Keys (always all of them, ``AUDIT_KEYS``):
    - ``prompt_template_hash``: hash of the prompt (or ``fn=``) function's source; "" when there is none
    - ``prompt_function``: ``module:qualname`` of that function; "" when there is none
    - ``rendered_prompt_hash``: sha256 of the prompt text sent to the model; "" when no model was called
    - ``model``: what made the record: the model that answered (or the offline stand-in's label),
      ``python:module:fn`` for ``fn=`` transforms, ``importer:<version>`` for sources,
      ``merge:exact-fingerprint`` for merges
    - ``temperature``: sampling temperature of the call (0.0 without a model)
    - ``raw_response``: the raw model response body ("" without a model)
    - ``tokens_in`` / ``tokens_out``: tokens of the call (0 without a model)
    - ``cached``: whether the response came from the LLM cache
    """

    model: str
    prompt_template_hash: str = ""
    prompt_function: str = ""
    rendered_prompt_hash: str = ""
    temperature: float = 0.0
    raw_response: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of_completion(cls, prompt_fn: Callable[..., Any] | None, rendered: str, completion: Completion,
                      temperature: float, hashes: SourceHashes | None = None) -> Audit:
        """A record made by a model call: ``rendered`` is the prompt text that was sent. ``hashes``: the
        step's ``source_hashes`` (the prompt's source hashed once, not once per record)."""
        return cls(
            model=completion.model,
            prompt_template_hash=(hashes.of(prompt_fn) if hashes is not None else callable_source_hash(prompt_fn)) or "",
            prompt_function=callable_ref(prompt_fn) or "",
            rendered_prompt_hash=hashlib.sha256(rendered.encode("utf-8")).hexdigest(),
            temperature=temperature,
            raw_response=completion.raw,
            tokens_in=completion.tokens_in,
            tokens_out=completion.tokens_out,
            cached=completion.cached,
        )

    @classmethod
    def of_python(cls, fn: Callable[..., Any], hashes: SourceHashes | None = None) -> Audit:
        """A record made by a plain Python function: no model, nothing to replay."""
        return cls(model=f"python:{callable_ref(fn)}",
                   prompt_template_hash=(hashes.of(fn) if hashes is not None else callable_source_hash(fn)) or "",
                   prompt_function=callable_ref(fn) or "")


AUDIT_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Audit))


class StepContext(Protocol):
    """What a step sees of the world while planning or executing one partition."""

    branch: str
    period: str
    run_id: str
    completer: Completer | None

    def upstream(self, step: str) -> list[Record]: ...

    def previous_state(self, step: str) -> Record | None: ...

    def progress(self, n: int) -> None: ...


@dataclass
class WorkItem:
    key: str
    id: str
    group_key: str
    inputs: list[Record] = field(default_factory=list)
    payload: Any = None  # kind-specific (source item, previous state, ...)


@dataclass(frozen=True)
class Volume:
    """How many records, of how many characters in all: what the planner knows or assumes of a partition."""

    records: int
    chars: int


OPTION_FIELDS = ("group", "owners", "automation")
# Declarative automation a step may ask for: Dagster materializes its stale partitions on its own once its
# inputs' are newer (``AutomationCondition.eager()``), no sensor or job needed for it.
AUTOMATIONS = ("eager",)
_GROUP = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s]{1,190}\.[A-Za-z]{2,63}$")
_TEAM = re.compile(r"^team:[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
MAX_OWNERS = 20


def check_step_options(step: str, group: str | None, owners: Sequence[str] | str,
                       automation: str | None) -> tuple[str | None, tuple[str, ...], str | None]:
    """A step's ``group=`` (letters, digits, underscores: a Dagster group name), ``owners=`` (each an email or
    ``team:name``, as Dagster takes them) and ``automation=`` (one of ``AUTOMATIONS``), or one line saying
    which is wrong and why."""
    if group is not None and not (isinstance(group, str) and _GROUP.match(group)):
        raise PipelineDefinitionError(f"step {step!r}: group={group!r}: a group is 1-64 letters, digits or "
                                      f"underscores (e.g. 'memory_core')")
    listed = (owners,) if isinstance(owners, str) else tuple(owners)
    if len(listed) > MAX_OWNERS:
        raise PipelineDefinitionError(f"step {step!r}: owners=: {len(listed)} owners; at most {MAX_OWNERS}")
    for owner in listed:
        if not isinstance(owner, str) or not (_EMAIL.match(owner) or _TEAM.match(owner)):
            raise PipelineDefinitionError(f"step {step!r}: owner {owner!r} is neither an email (ana@example.com) "
                                          f"nor a team (team:memory)")
    if automation is not None and automation not in AUTOMATIONS:
        raise PipelineDefinitionError(f"step {step!r}: automation={automation!r}; expected one of "
                                      f"{', '.join(AUTOMATIONS)} (or None: runs come from sensors, the schedule, "
                                      f"`synthex run`)")
    return group, tuple(dict.fromkeys(listed)), automation


@dataclass
class Step:
    """Base class of every step kind. Subclasses set ``kind`` and implement work/produce."""

    name: str
    from_: list[str] = field(default_factory=list)
    pii: str | None = None  # "redact" | "detect" | "flag" (``synthex.core.steps.privacy``)
    kind: ClassVar[str] = "step"
    # Brings data in from outside the pipeline (the DAG's leaves): its periods are its items' periods.
    is_source: ClassVar[bool] = False
    # Period P reads the step's own output of the period before P (a fold's state): periods run one at a
    # time in order, none may be skipped, and a dirty period makes every later one dirty.
    sequential_periods: ClassVar[bool] = False
    # The source hashes of the step's functions, each computed once while the step lives (version_hash
    # is asked per work item and per record). Not configuration: not in __init__, repr or equality.
    source_hashes: SourceHashes = field(default_factory=SourceHashes, init=False, repr=False, compare=False)
    # How the step shows in the Dagster UI and when Dagster may run it on its own (``StepOptions``). Not part
    # of ``config()``: the step's version, so its record ids, do not depend on them.
    group: str | None = None
    owners: tuple[str, ...] = ()
    automation: str | None = None

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def build(cls, name: str, *, base_dir: str = "", from_: str | Sequence[str] = (), pii: str | None = None,
              **config: Any) -> Self:
        """A step of this kind from keyword arguments (``pipeline.step(kind, name, ...)``, a TOML entry):
        ``from_`` (a step name or several), ``pii`` and the kind's own fields. ``base_dir`` is the project
        folder, for kinds that read files (ignored here)."""
        if pii is not None:  # the PII detectors (their patterns compiled at import) only for steps that use them
            from synthex.core.steps.privacy import check_pii_mode

            check_pii_mode(name, pii)
        options = {k: config.pop(k) for k in OPTION_FIELDS if k in config}
        own = [f.name for f in fields(cls) if f.init and f.name not in ("name", "from_", "pii", *OPTION_FIELDS)]
        unknown = sorted(set(config) - set(own))
        if unknown:
            raise PipelineDefinitionError(f"{cls.kind} {name!r}: unknown argument {unknown[0]}=; a {cls.kind} step "
                                          f"takes from_=, pii=, group=, owners=, automation={''.join(f', {a}=' for a in own)}")
        step = cls(name=name, from_=[from_] if isinstance(from_, str) else list(from_), pii=pii, **config)
        return step.with_options(**options) if options else step

    def with_options(self, group: str | None = None, owners: Sequence[str] | str = (),
                     automation: str | None = None) -> Self:
        """This step with its UI group, owners and automation set, each checked (``check_step_options``)."""
        self.group, self.owners, self.automation = check_step_options(self.name, group, owners, automation)
        if self.automation is not None and self.is_source:
            raise PipelineDefinitionError(f"source {self.name!r}: automation={self.automation!r}: a source is "
                                          f"synced by its sensor; give automation= to the steps downstream of it")
        return self

    def options_toml(self) -> dict[str, Any]:
        """group / owners / automation for a TOML export, the ones that are set."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k in OPTION_FIELDS
                if (v := getattr(self, k)) not in (None, ())}

    def use_limits(self, limits: Limits) -> None:
        """The pipeline's bounds on input (``PipelineDefinition.limits``); steps that read from outside
        the pipeline keep them, the others need none."""

    def use_formats(self, formats: Any) -> None:
        """The pipeline's own file formats (``PipelineDefinition.formats``, ``pipeline.format``); the steps
        that read files keep them, the others need none."""

    # -- identity -----------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """The step's configuration as plain data (TOML export; version hash input)."""
        return {"from": list(self.from_)}

    def version_hash(self) -> str:
        """hash(step type + config + prompt function source + model + temperature), and the PII mode and
        detector version when ``pii=`` is set (steps without it keep the hashes they always had)."""
        if self.pii:
            from synthex.core.steps.privacy import PII_VERSION

            return stable_hash("step/v1", self.kind, self.config(), self._code_hashes(),
                               {"pii": self.pii, "detector": PII_VERSION})[:24]
        return stable_hash("step/v1", self.kind, self.config(), self._code_hashes())[:24]

    def _code_hashes(self) -> dict[str, str | None]:
        return {}

    # -- semantics ----------------------------------------------------------------------------
    def work(self, ctx: StepContext) -> list[WorkItem]:
        raise NotImplementedError

    def produce(self, items: list[WorkItem], ctx: StepContext) -> tuple[list[Record], int]:
        raise NotImplementedError

    def estimate_tokens(self, items: list[WorkItem]) -> int:
        """Tokens the model calls for ``items`` will take (their inputs are stored: prompts are rendered)."""
        return 0

    # -- what the planner and executor ask ----------------------------------------------------------
    def uses_model(self) -> bool:
        """Whether producing calls a model (its tokens are estimated and priced)."""
        return False

    def estimate_outputs(self, inputs: Volume) -> Volume:
        """The outputs of a partition whose inputs are not stored yet, from its inputs' volume (itself an
        estimate). By default one output per input, as long as its input."""
        return inputs

    def estimate_unstored_tokens(self, inputs: Volume, outputs: int) -> int:
        """Tokens for a partition whose inputs are not stored yet (the shared token model, prompts not
        rendered): by default one call per output over the inputs' text."""
        return estimate_unrendered_tokens(inputs.chars, outputs) if self.uses_model() else 0

    def output_chars(self, items: list[WorkItem]) -> int | None:
        """The size of the outputs ``items`` will make when the items already hold it (a source's items
        carry their text); None when it is known only from stored records or an estimate."""
        return None

    def single_partition_period(self) -> str | None:
        """None: one partition per period, each made from its inputs of that period (every kind but one).
        A period label (``ALL_PERIODS``): every record of the step lives in that one period partition of
        its branch, made from its inputs of every period (a key aggregate without ``period=``)."""
        return None

    def periods(self) -> list[str]:
        """The periods of the step's own data (a source's items); other steps get theirs from upstream."""
        return []

    def location(self) -> str:
        """Where the step's own data is (a source's path, dsn and table...), "" for steps that read steps:
        not part of the version, but a branch reading other data does not read its parent's records."""
        return ""

    def toml_config(self) -> dict[str, Any]:
        """The step's entry in a TOML export besides name, kind and the shared fields (prompt, fn, model,
        temperature, period, initial_state, pii): what ``build`` takes back."""
        return {"from": list(self.from_)}

    # -- helpers for subclasses ---------------------------------------------------------------
    def item(self, ctx: StepContext, fingerprints: Sequence[str], group_key: str, version: str | None = None,
             **kw: Any) -> WorkItem:
        """``version``: the step's ``version_hash()``, when the caller makes many items at once (it hashes
        the config and the prompt's source: computed once per partition, not once per record)."""
        key = materialization_key(self.name, version or self.version_hash(), list(fingerprints), group_key)
        return WorkItem(key=key, id=record_id(key), group_key=group_key, **kw)

    def make_record(
        self,
        ctx: StepContext,
        item: WorkItem,
        content: str,
        metadata: dict[str, Any],
        audit: Audit,
        sources: list[str] | None = None,
    ) -> Record:
        meta = {k: (dict(v) if isinstance(v, dict) else v) for k, v in metadata.items()}
        meta.setdefault("step", {})
        meta["step"] = {**meta["step"], "version_hash": self.version_hash(), "kind": self.kind}
        return Record(
            id=item.id,
            content=content,
            step=self.name,
            branch=ctx.branch,
            source_ids=sources if sources is not None else [r.id for r in item.inputs],
            materialization_key=item.key,
            run_id=ctx.run_id,
            created_at=now_iso(),
            metadata=meta,
            audit=audit.to_dict(),
            period=ctx.period,
        )


@dataclass
class ModelStep(Step):
    """A step that sends a prompt function's output to a model (transform, aggregate, fold)."""

    prompt: Callable[..., str] | None = None
    model: str | None = None
    temperature: float = 0.0

    def config(self) -> dict[str, Any]:
        return {"from": self.from_, "model": self.model, "temperature": self.temperature,
                "prompt": callable_ref(self.prompt)}

    def uses_model(self) -> bool:
        return True

    def _code_hashes(self) -> dict[str, str | None]:
        return {"prompt": self.source_hashes.of(self.prompt)}

    def require_prompt(self) -> None:
        if self.prompt is None:
            raise PipelineDefinitionError(f"{self.kind} {self.name!r}: prompt= is required")


def describe_record(record: Record) -> str:
    title = record.meta("chat.title")
    return f"record {record.id}" + (f" ({title!r})" if title else "")


def call_prompt(step: Step, fn: Callable[..., str], args: tuple[Any, ...], about: str) -> str:
    """Call a user prompt function; a raise becomes a StepError naming the step and record."""
    try:
        rendered = fn(*args)
    except Exception as exc:  # noqa: BLE001 - any user error is reported, with context
        raise StepError(
            f"step {step.name!r}: prompt function {callable_ref(fn)} raised "
            f"{type(exc).__name__}: {exc} on {about}", step=step.name
        ) from exc
    if not isinstance(rendered, str):
        raise StepError(
            f"step {step.name!r}: prompt function {callable_ref(fn)} returned "
            f"{type(rendered).__name__}, expected str, on {about}", step=step.name
        )
    return rendered


@dataclass
class PartitionResult:
    """Outcome of one step on one (branch, period): what to write, what to keep, stats."""

    new_records: list[Record]
    keep_ids: set[str]
    stats: RunStats


def visible_work(step: Step, ctx: StepContext, purged: PurgedSet | None = None) -> list[WorkItem]:
    """``step.work(ctx)`` without what ``synthex purge`` removed: a purged record id, or a purged source
    item (by its key), is never produced again (the ledger, ``synthex.core.purges``)."""
    items = step.work(ctx)
    if not purged:
        return items
    return [i for i in items
            if i.id not in purged.ids and not (step.is_source and purged.hides_item(step.name, i.group_key))]


def execute_partition(step: Step, ctx: StepContext, existing_ids: set[str], full: bool = False,
                      reuse: Callable[[list[str]], dict[str, Record]] | None = None,
                      purged: PurgedSet | None = None) -> PartitionResult:
    """Plan the partition, produce only what is missing (everything when ``full``).

    ``reuse`` finds records another branch already holds by id: ids are content addresses (same
    definition, same inputs), so such a record is copied onto this branch instead of recomputed."""
    started = datetime.now(UTC)
    items = visible_work(step, ctx, purged)
    todo = items if full else [i for i in items if i.id not in existing_ids]
    found = reuse([i.id for i in todo]) if reuse is not None and todo and not full else {}
    copies = [replace(found[i.id], branch=ctx.branch, run_id=ctx.run_id, embedding=None)
              for i in todo if i.id in found]
    todo = [i for i in todo if i.id not in found]
    if step.pii == "redact" and todo:
        from synthex.core.steps.privacy import redacted_input

        # Before the prompt function renders anything (and so before any model call).
        todo = [replace(i, inputs=[redacted_input(r) for r in i.inputs]) for i in todo]
    records, tokens = step.produce(todo, ctx) if todo else ([], 0)
    if step.pii and records:
        from synthex.core.steps.privacy import apply_pii

        records = [apply_pii(r, step.pii) for r in records]
    stats = RunStats(
        input=sum(len(i.inputs) or 1 for i in items),
        output=len(records),
        skipped=len(items) - len(todo) - len(copies),
        reused=len(copies),
        tokens=tokens,
        duration=(datetime.now(UTC) - started).total_seconds(),
    )
    return PartitionResult(copies + records, {i.id for i in items}, stats)
