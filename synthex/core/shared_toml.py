"""A pipeline shared as TOML (design doc §4.8): the one rule for what loading it may do.

A TOML file is data someone else wrote, so reading one runs nothing it names unless the user says so.
Every door that reads a TOML goes through ``read_shared_toml``: ``PipelineDefinition.from_toml`` (so
``Pipeline.from_toml`` and a ``pipeline.py`` the code location loads that calls it) and
``synthex import-toml``. The rule (docs/architecture.md, "Shared TOML"):

- Code. A ``module:qualname`` (``prompt``, ``fn``, ``by``, a fold ``state``'s ``prompt``) is located
  *before* anything is imported: each package of the dotted path is found by its spec (``find_spec`` on
  the top name, then the package's own search locations; no ``__init__`` runs), and the files found must
  be synthex's own step-function modules (``TRUSTED_SYNTHEX_MODULES``, inside the installed package) or
  the project's own modules (a file under the project folder, not an installed package there). Anything
  else needs ``trust=True`` (``--trust``); Python's standard library and built-in modules are refused even
  then (no prompt function lives there: ``os:system``, ``subprocess:run``). After the import the target
  must be a Python function defined in an allowed file (a project module re-exporting
  ``subprocess.run`` is refused too).
- Effects. ``on_update`` URLs, sources that read outside the project folder (or follow links out of
  it) and eval data outside it are listed and must be allowed: ``allow_effects=True``
  (``--allow-effects``), or a ``confirm`` callable (the CLI asks on a terminal); otherwise the load is
  refused, naming them. What was allowed is kept on the definition (``SharedTomlGrant``): a run checks it
  before it reads a source and the hook delivery checks it before it POSTs, so an effect a TOML-loaded
  definition gained after the load (a branch file pointing a hook elsewhere) is refused there too.

Bad input is one line naming the file, the step or output, the field and the problem.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import inspect
import re
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any

from synthex.core.errors import PipelineDefinitionError
from synthex.core.hashing import stable_hash

# A synthex.core.definition.PipelineDefinition (or subclass): not imported, the definition imports this module.
PipelineDefinition = Any

# synthex's modules whose functions are step functions (prompts, transforms, key functions): what the
# templates and the prompt library export name. Their parent packages are imported on the way.
TRUSTED_SYNTHEX_MODULES = ("synthex.prompts", "synthex.core.prompts", "synthex.core.digest", "synthex.enrich",
                           "synthex.core.enrich", "synthex.core.steps.group_keys")
SYNTHEX_DIR = Path(__file__).resolve().parents[1]  # the installed ``synthex`` package
MAX_TOML_BYTES = 1_000_000  # a pipeline definition is a few KB; a bigger file is not one
MAX_REF_CHARS = 300
EFFECTS_SHOWN = 5  # in a refusal line; the confirm prompt lists them all
_REF = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_INSTALLED = ("site-packages", "dist-packages")
# Confirms the effects of a TOML file: (the file, one line per effect) -> allowed.
Confirm = Callable[[Path, list[str]], bool]


def _stdlib_dirs() -> list[Path]:
    paths = sysconfig.get_paths()
    return [Path(paths[k]).resolve() for k in ("stdlib", "platstdlib") if paths.get(k)]


@dataclass(frozen=True)
class CodeRef:
    """A ``module:qualname`` a TOML names, resolved under the rule; ``value`` is the function."""

    module: str
    qualname: str
    value: Callable[..., Any]

    @property
    def ref(self) -> str:
        return f"{self.module}:{self.qualname}"


@dataclass(frozen=True)
class Effect:
    """Something a loaded pipeline would do outside its project: ``key`` identifies it, ``line`` shows it."""

    key: tuple[str, str, str]
    line: str


@dataclass(frozen=True)
class SharedTomlGrant:
    """What the user allowed when the TOML ``path`` was loaded, and which of the definition's outputs,
    sources and evals it declared (effects of those are checked again where a run first uses them)."""

    path: Path
    allowed: frozenset[tuple[str, str, str]]
    outputs: frozenset[str]
    sources: frozenset[str]
    evals: frozenset[str]

    def unconfirmed(self, definition: PipelineDefinition) -> list[Effect]:
        return [e for e in effects_of(definition, self.outputs, self.sources, self.evals) if e.key not in self.allowed]

    def check(self, definition: PipelineDefinition) -> None:
        """Refuse (one line) when the TOML's outputs or sources now do something that was not allowed."""
        missing = self.unconfirmed(definition)
        if missing:
            raise PipelineDefinitionError(f"{self.path}: not allowed when this TOML was loaded: {_lines(missing)}; "
                                          f"load it again with allow_effects=True (CLI: --allow-effects)")

    def allows_hook(self, output: str, url: str) -> bool:
        return output not in self.outputs or ("hook", output, url) in self.allowed


@dataclass(frozen=True)
class TomlTrust:
    """What the user lets a TOML do: import code outside the allow-list (``code``), and the effects it
    lists (``effects``: True, or a ``Confirm`` asked with them)."""

    code: bool = False
    effects: bool | Confirm = False


# -- resolving code without running it --------------------------------------------------------------
class _Refused(Exception):
    """A reference the rule refuses (the message is the problem; the caller adds where)."""


def _origin_files(spec: ModuleSpec) -> list[Path]:
    if spec.origin and spec.has_location:
        return [Path(spec.origin).resolve()]
    return [Path(p).resolve() for p in (spec.submodule_search_locations or [])]


def _place(files: list[Path], project: Path) -> str:
    """Where module files are: "synthex", "project", "stdlib" or "other"."""
    if not files:
        return "stdlib"  # built-in or frozen: compiled into the interpreter
    stdlib = _stdlib_dirs()

    def one(path: Path) -> str:
        if path.is_relative_to(SYNTHEX_DIR):
            return "synthex"
        if path.is_relative_to(project) and not set(path.relative_to(project).parts) & set(_INSTALLED):
            return "project"
        if any(path.is_relative_to(d) for d in stdlib) and not set(path.parts) & set(_INSTALLED):
            return "stdlib"
        return "other"

    places = {one(p) for p in files}
    return places.pop() if len(places) == 1 else "other"


def _trusted_synthex_name(name: str) -> bool:
    return any(name == m or m.startswith(name + ".") or name.startswith(m + ".") for m in TRUSTED_SYNTHEX_MODULES)


def _check_place(name: str, files: list[Path], project: Path, trust: TomlTrust, label: str = "") -> None:
    """Refuse module ``name`` (its files ``files``) unless the rule allows it; ``label`` says what it is."""
    place = _place(files, project)
    shown = f"{label or 'module ' + repr(name)}" + (f" ({files[0]})" if files else "")
    if place == "stdlib":
        raise _Refused(f"{shown} is part of Python itself, not a step function; refused")
    if place == "synthex" and _trusted_synthex_name(name):
        return
    if place == "project":
        return
    if not trust.code:
        raise _Refused(f"{shown} is neither one of synthex's prompt modules nor in the project "
                       f"{project}; importing it would run its code: refused without trust "
                       f"(from_toml(..., trust=True), `synthex import-toml --trust`)")


def _locate(module: str, project: Path, trust: TomlTrust) -> list[ModuleSpec]:
    """The spec of each package on the path to ``module`` and of the module, checked, nothing imported
    (``find_spec`` of a dotted name would import its parents: each level is found by its parent's
    search locations instead)."""
    parts, specs = module.split("."), []
    for i in range(len(parts)):
        name = ".".join(parts[: i + 1])
        loaded = sys.modules.get(name)
        spec: ModuleSpec | None = getattr(loaded, "__spec__", None) if loaded is not None else None
        if spec is None and i == 0:
            spec = importlib.util.find_spec(name) or importlib.machinery.PathFinder.find_spec(name, [str(project)])
        elif spec is None:
            locations = specs[-1].submodule_search_locations
            if locations is None:
                raise _Refused(f"{'.'.join(parts[:i])!r} is a module, not a package: no {name!r}")
            spec = importlib.machinery.PathFinder.find_spec(name, list(locations))
        if spec is None:
            raise _Refused(f"no module {name!r} (looked on the import path and in the project {project})")
        _check_place(name, _origin_files(spec), project, trust)
        specs.append(spec)
    return specs


def _import(specs: list[ModuleSpec]) -> ModuleType:
    """Import the checked specs in order (the import system's own steps, from the specs found)."""
    module: ModuleType | None = None
    for spec in specs:
        loaded = sys.modules.get(spec.name)
        if loaded is None:
            if spec.loader is None:
                raise _Refused(f"module {spec.name!r} cannot be loaded")
            loaded = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = loaded
            try:
                spec.loader.exec_module(loaded)
            except BaseException as exc:
                sys.modules.pop(spec.name, None)
                if isinstance(exc, Exception):
                    raise _Refused(f"importing {spec.name!r} failed: {type(exc).__name__}: {exc}") from None
                raise
            if module is not None:
                setattr(module, spec.name.rpartition(".")[2], loaded)
        module = loaded
    assert module is not None
    return module


def resolve_code_ref(ref: object, where: str, project: Path, trust: TomlTrust) -> CodeRef:
    """``module:qualname`` from a TOML, located and checked before its module is imported, then checked to
    be a Python function defined in an allowed file; a refusal is one line starting with ``where``."""
    if not isinstance(ref, str) or len(ref) > MAX_REF_CHARS or not _REF.fullmatch(ref):
        shown = repr(ref) if len(repr(ref)) <= 80 else repr(ref)[:77] + "..."
        raise PipelineDefinitionError(f"{where} = {shown}: expected a 'module:function' path")
    module_name, _, qualname = ref.partition(":")
    try:
        obj: Any = _import(_locate(module_name, project, trust))
        for part in qualname.split("."):
            if not hasattr(obj, part):
                raise _Refused(f"{module_name!r} has no {qualname!r}")
            obj = getattr(obj, part)
        if not callable(obj):
            raise _Refused(f"{ref!r} is a {type(obj).__name__}, not a function")
        if not inspect.isfunction(obj):
            raise _Refused(f"{ref!r} is a {type(obj).__name__}, not a Python function")
        _check_place(str(obj.__module__), [Path(obj.__code__.co_filename).resolve()], project, trust,
                     label=f"module {obj.__module__!r}, where {qualname} is defined,")
    except _Refused as exc:
        raise PipelineDefinitionError(f"{where} = {ref!r}: {exc}") from None
    return CodeRef(module_name, qualname, obj)


# -- what a loaded pipeline would do outside its project ------------------------------------------
def _outside(path: Path, project: Path) -> bool:
    """Outside the project folder (links resolved) and not synthex's own bundled data (the demo export)."""
    resolved = path.expanduser().resolve()
    return not resolved.is_relative_to(project) and not resolved.is_relative_to(SYNTHEX_DIR)


def effects_of(definition: PipelineDefinition, outputs: frozenset[str] | None = None,
               sources: frozenset[str] | None = None, evals: frozenset[str] | None = None) -> list[Effect]:
    """The hooks, outside sources and outside eval data of ``definition`` (of the named ones; all when None)."""
    from synthex.core.sources.kinds import get_source_kind

    project = definition.project_dir.resolve()
    found: list[Effect] = []
    for out in definition.outputs.values():
        if (outputs is None or out.name in outputs) and isinstance(out.on_update, str):
            found.append(Effect(("hook", out.name, out.on_update),
                                f"output {out.name!r} on_update POSTs each new record of "
                                f"{', '.join(out.from_)} to {out.on_update}"))
    for name, step in definition.sources().items():
        if sources is not None and name not in sources:
            continue
        paths = get_source_kind(step.origin_kind).local_paths(step)
        if paths is None:
            found.append(Effect(("source", name, step.origin_kind), f"source {name!r} reads a "
                                f"{step.origin_kind} source Synthex cannot place in the project"))
            continue
        for path in paths:
            if _outside(path, project):
                found.append(Effect(("source", name, str(path.expanduser().resolve())),
                                    f"source {name!r} reads {path}, outside the project {project}"))
        if step.options.get("follow_links"):
            found.append(Effect(("source", name, "follow_links"),
                                f"source {name!r} follows links out of its folder (follow_links = true)"))
    for bench, declaration in definition.evals.items():
        if evals is not None and bench not in evals:
            continue
        data = declaration.data_path(project)
        if _outside(data, project):
            found.append(Effect(("eval", bench, str(data)), f"eval {bench!r} reads {data}, outside the project"))
    return found


def _lines(effects: list[Effect]) -> str:
    shown = "; ".join(e.line for e in effects[:EFFECTS_SHOWN])
    more = len(effects) - EFFECTS_SHOWN
    return shown + (f"; and {more} more" if more > 0 else "")


# -- the file ------------------------------------------------------------------------------------------
@dataclass
class SharedPipeline:
    """A TOML pipeline read and checked: the calls that build it, with its code as ``CodeRef``s. ``build``
    makes the definition; ``to_python`` writes the ``pipeline.py`` that makes the same calls."""

    path: Path
    project: Path
    head: dict[str, Any]
    steps: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (kind, arguments with name)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    evals: list[dict[str, Any]] = field(default_factory=list)

    def build(self, cls: Any) -> PipelineDefinition:
        from synthex.core.limits import Limits

        p, head = self.path, self.head
        pipe = cls(head["name"], agent=head.get("agent", ""), description=head.get("description", ""),
                   project_dir=self.project, lexical_stem=bool(head.get("lexical_stem", False)),
                   limits=Limits.from_dict(head.get("limits", {}), where=f"{p}: [pipeline.limits]"),
                   **({"sensor_interval_s": head["sensor_interval_s"]} if "sensor_interval_s" in head else {}),
                   **({"namespace": head["namespace"]} if "namespace" in head else {}),
                   **({"ingest_workers": head["ingest_workers"]} if "ingest_workers" in head else {}))
        for kind, args in self.steps:
            _in_file(p, f"step {args['name']!r}", pipe.step, kind, **_values(args))
        for args in self.outputs:
            _in_file(p, f"output {args['name']!r}", pipe.output, **args)
        for args in self.evals:
            _in_file(p, f"eval {args['benchmark']!r}", pipe.eval_asset, **args)
        return pipe

    def to_python(self, allowed: list[str] | None = None) -> str:
        """A ``pipeline.py`` making the same calls (the step graph and versions are the TOML's); ``allowed``:
        the effects the user allowed at import, listed at its top (the file is the user's code now)."""
        imports: dict[str, str] = {}  # ref -> the name it is bound to
        names_from: dict[str, list[str]] = {}  # module -> what is imported from it

        def name_of(code: CodeRef) -> str:
            if code.ref not in imports:
                head, _, rest = code.qualname.partition(".")
                taken = {n.partition(".")[0] for n in imports.values()} | {"Limits", "Pipeline", "pipeline"}
                alias = head if head not in taken else f"{head}_{len(imports)}"
                bound = f"{head} as {alias}" if alias != head else head
                if bound not in names_from.setdefault(code.module, []):
                    names_from[code.module].append(bound)
                imports[code.ref] = alias + (f".{rest}" if rest else "")
            return imports[code.ref]

        def call(head: str, args: list[str]) -> str:
            line = f"{head}({', '.join(args)})"
            return line if len(line) <= 110 else f"{head}(\n" + "".join(f"    {a},\n" for a in args) + ")"

        def render(value: Any) -> str:
            if isinstance(value, CodeRef):
                return name_of(value)
            if isinstance(value, dict):
                return "{" + ", ".join(f"{k!r}: {render(v)}" for k, v in value.items()) + "}"
            if isinstance(value, list):
                return "[" + ", ".join(render(v) for v in value) + "]"
            return repr(value)

        head = self.head
        args = [repr(head["name"])] + [f"{k}={head[k]!r}" for k in ("agent", "description") if head.get(k)]
        if head.get("lexical_stem"):
            args.append("lexical_stem=True")
        if head.get("limits"):
            args.append(f"limits=Limits.from_dict({head['limits']!r})")
        if "sensor_interval_s" in head:
            args.append(f"sensor_interval_s={head['sensor_interval_s']!r}")
        if "namespace" in head:
            args.append(f"namespace={head['namespace']!r}")
        if "ingest_workers" in head:
            args.append(f"ingest_workers={head['ingest_workers']!r}")
        body = [call("pipeline = Pipeline", args), ""]
        for kind, step in self.steps:
            body.append(call("pipeline.step", [repr(kind), repr(step["name"])]
                             + [f"{k}={render(v)}" for k, v in step.items() if k != "name"]))
        for out in self.outputs:
            body.append(call("pipeline.output", [repr(out["name"])]
                             + [f"{k}={render(v)}" for k, v in out.items() if k != "name" and v is not None]))
        for ev in self.evals:
            body.append(call("pipeline.eval_asset", [repr(ev["benchmark"])]
                             + [f"{k}={render(v)}" for k, v in ev.items() if k != "benchmark" and v is not None]))
        top = [f'"""{head["name"]}: written by `synthex import-toml {self.path.name}` (the same steps, outputs and',
               'evals as the TOML; edit freely: this file is the pipeline now)."""', "",
               *([f"# Allowed at import (outside the project): {line}" for line in allowed or []] + (
                   [""] if allowed else [])),
               "from synthex import Limits, Pipeline" if head.get("limits") else "from synthex import Pipeline"]
        imported = [f"from {module} import {', '.join(names)}" for module, names in sorted(names_from.items())]
        return "\n".join(top + imported + ["", ""] + body) + "\n"


def _values(value: Any) -> Any:
    if isinstance(value, CodeRef):
        return value.value
    if isinstance(value, dict):
        return {k: _values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_values(v) for v in value]
    return value


def _in_file(path: Path, where: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)`` (a builder): its definition error as one line naming the file (a bad type too)."""
    try:
        return call(*args, **kwargs)
    except PipelineDefinitionError as exc:
        message = str(exc)
        raise PipelineDefinitionError(message if message.startswith(str(path)) else f"{path}: {message}") from None
    except (TypeError, ValueError) as exc:
        raise PipelineDefinitionError(f"{path}: {where}: {exc}") from None


def _table(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PipelineDefinitionError(f"{where}: expected a table, got {type(value).__name__}")
    return dict(value)


def read_shared_toml(path: str | Path, project_dir: str | Path | None, trust: TomlTrust) -> SharedPipeline:
    """Read and check the TOML ``path`` (its code located and checked before import, nothing run but the
    allowed modules' import). The project is ``project_dir``, else the TOML's folder."""
    import tomllib

    from synthex.core.steps import step_kinds
    from synthex.core.steps.group_keys import key_functions

    p = Path(path)
    try:
        if p.stat().st_size > MAX_TOML_BYTES:
            raise PipelineDefinitionError(f"{p}: {p.stat().st_size} bytes; a pipeline TOML is at most "
                                          f"{MAX_TOML_BYTES} bytes")
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PipelineDefinitionError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PipelineDefinitionError(f"{p}: not a TOML file: {exc}") from None
    project = Path(project_dir or p.parent).resolve()
    head = _table(data.get("pipeline", {}), f"{p}: [pipeline]")
    if not isinstance(head.get("name"), str) or not head["name"]:
        raise PipelineDefinitionError(f"{p}: [pipeline] needs a name")
    shared = SharedPipeline(p, project, head)
    steps = data.get("steps", [])
    if not isinstance(steps, list):
        raise PipelineDefinitionError(f"{p}: steps: expected [[steps]] tables")
    for index, raw in enumerate(steps):
        entry = _table(raw, f"{p}: [[steps]] #{index + 1}")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise PipelineDefinitionError(f"{p}: [[steps]] #{index + 1} needs a name")
        where = f"{p}: step {name!r}"
        kind = entry.pop("kind", None)
        if kind not in step_kinds():
            raise PipelineDefinitionError(f"{where} has unknown kind {kind!r}")
        if "from" in entry:
            entry["from_"] = entry.pop("from")
        for attr in ("prompt", "fn"):
            if attr in entry:
                entry[attr] = resolve_code_ref(entry[attr], f"{where} {attr}", project, trust)
        # by= is the name of a registered key function, or a key function's module:qualname.
        if isinstance(entry.get("by"), str) and entry["by"] not in key_functions() and ":" in entry["by"]:
            entry["by"] = resolve_code_ref(entry["by"], f"{where} by", project, trust)
        if isinstance(entry.get("state"), dict) and "prompt" in entry["state"]:
            state = dict(entry["state"])
            state["prompt"] = resolve_code_ref(state["prompt"], f"{where} state.prompt", project, trust)
            entry["state"] = state
        shared.steps.append((kind, entry))
    outputs = data.get("outputs", [])
    for index, raw in enumerate(outputs if isinstance(outputs, list) else [outputs]):
        out = _table(raw, f"{p}: [[outputs]] #{index + 1}")
        unknown = set(out) - {"name", "from", "surface", "on_update", "mode"}
        if unknown or "name" not in out or "from" not in out:
            raise PipelineDefinitionError(f"{p}: [[outputs]] #{index + 1} needs name and from (and may have surface, "
                                          f"on_update, mode); unknown: {', '.join(sorted(unknown)) or 'none'}")
        shared.outputs.append({"name": out["name"], "from_": out["from"], "surface": out.get("surface", "search"),
                               "on_update": out.get("on_update"), "mode": out.get("mode")})
    evals = data.get("evals", [])
    for raw in evals if isinstance(evals, list) else [evals]:
        entry = _table(raw, f"{p}: [[evals]]")
        unknown = set(entry) - {"benchmark", "data", "schedule", "thresholds", "blocking"}
        if unknown or "benchmark" not in entry or "data" not in entry:
            raise PipelineDefinitionError(f"{p}: [[evals]] needs benchmark and data (and may have schedule, "
                                          f"thresholds, blocking); unknown: {', '.join(sorted(unknown)) or 'none'}")
        shared.evals.append({"benchmark": entry["benchmark"], "data": entry["data"], "schedule": entry.get("schedule"),
                             "thresholds": entry.get("thresholds"), "blocking": bool(entry.get("blocking", False))})
    return shared


def load_shared_toml(cls: Any, path: str | Path, project_dir: str | Path | None,
                     trust: TomlTrust) -> tuple[SharedPipeline, PipelineDefinition]:
    """The definition a TOML builds, under the rule: its code checked before import, its effects allowed
    (or refused in one line naming them). The grant is kept on the definition for the run's own check."""
    shared = read_shared_toml(path, project_dir, trust)
    pipe = shared.build(cls)
    outputs = frozenset(o["name"] for o in shared.outputs)
    sources = frozenset(args["name"] for kind, args in shared.steps if kind == "source")
    evals = frozenset(e["benchmark"] for e in shared.evals)
    effects = effects_of(pipe, outputs, sources, evals)
    if effects:
        allowed = trust.effects(shared.path, [e.line for e in effects]) if callable(trust.effects) else trust.effects
        if not allowed:
            raise PipelineDefinitionError(
                f"{shared.path}: reaches outside the project, not allowed: {_lines(effects)}; allow with "
                f"from_toml(..., allow_effects=True) or `synthex import-toml --allow-effects`")
    pipe.shared_toml = SharedTomlGrant(shared.path, frozenset(e.key for e in effects), outputs, sources, evals)
    return shared, pipe


def structure_fingerprint(definition: PipelineDefinition) -> str:
    """The step graph and what each step is (its kind, inputs and version hash), the outputs and evals:
    equal for a TOML and the ``pipeline.py`` ``synthex import-toml`` writes from it."""
    steps = [(name, step.kind, list(step.from_), step.version_hash()) for name, step in definition.steps.items()]
    return stable_hash("definition/v1", definition.name, steps, definition.to_toml_dict())[:24]


def _code_refs(value: Any) -> list[CodeRef]:
    if isinstance(value, CodeRef):
        return [value]
    if isinstance(value, dict):
        return [r for v in value.values() for r in _code_refs(v)]
    if isinstance(value, list):
        return [r for v in value for r in _code_refs(v)]
    return []


def import_toml(cls: Any, path: str | Path, out: str | Path, trust: TomlTrust,
                replace: bool = False) -> tuple[Path, str]:
    """``synthex import-toml``: write the ``pipeline.py`` that builds the TOML's pipeline (design doc §4.8),
    under the same rule as ``from_toml``; the project is ``out``'s folder. Returns the file written and the
    definition's ``structure_fingerprint`` (loading the file gives the same). ``cls``: the definition class."""
    from synthex.core.atomic_file import write_file_atomic
    from synthex.core.errors import BadInputError

    target = Path(out).resolve()
    if target.suffix != ".py":
        raise BadInputError(f"{target}: the Python equivalent is a .py file")
    if target.exists() and not replace:
        raise BadInputError(f"{target}: already exists; pass --force to replace it")
    shared, pipe = load_shared_toml(cls, path, target.parent, trust)
    for _kind, args in shared.steps:
        for code in _code_refs(args):
            if Path(code.value.__code__.co_filename).resolve() == target:
                raise PipelineDefinitionError(f"{shared.path}: step {args['name']!r}: {code.ref} is defined in "
                                              f"{target}, the file this would replace; write elsewhere (--out)")
    allowed = effects_of(pipe, pipe.shared_toml.outputs, pipe.shared_toml.sources, pipe.shared_toml.evals)
    write_file_atomic(target, shared.to_python([e.line for e in allowed]))
    return target, structure_fingerprint(pipe)
