"""A Synthex project: a folder with ``pipeline.py`` and its data dir ``.synthex/``."""

from __future__ import annotations

import sys
from pathlib import Path

# Loaded beneath the definition (which loads branch files); re-exported here, where callers look for them.
from synthex.core.branch_files import BRANCHES_DIR, branch_module, branch_path, exec_file_module  # noqa: F401
from synthex.core.definition import PipelineDefinition
from synthex.core.errors import BadInputError, PipelineDefinitionError
from synthex.core.importers.formats import collecting_formats
from synthex.core.naming import MAIN, check_branch_name

PIPELINE_FILE = "pipeline.py"
DEMO_EXPORT = Path(__file__).parent / "demo" / "chatgpt_demo.json"


def load_pipeline(project_dir: str | Path = ".") -> PipelineDefinition:
    """Import ``<project>/pipeline.py`` (as module ``pipeline``) and return its Pipeline."""
    root = Path(project_dir).resolve()
    path = root / PIPELINE_FILE
    if not path.exists():
        raise PipelineDefinitionError(f"{path}: no pipeline.py here; create one with `synthex init NAME --from FILE`")
    return pipeline_from_file(path, root)


def project_pipeline(project_dir: str | Path) -> PipelineDefinition:
    """The pipeline a folder holds: its ``pipeline.py``, else the demo (what the UI shows in a folder with
    no pipeline.py). Every door that is given a folder (the code location, ``SearchResource``) opens it so."""
    root = Path(project_dir).resolve()
    return load_pipeline(root) if (root / PIPELINE_FILE).exists() else demo_pipeline(root)


def demo_pipeline(project_dir: str | Path) -> PipelineDefinition:
    """The default template over the bundled demo export (what the UI shows in a folder with no pipeline.py)."""
    root = Path(project_dir).resolve()
    demo = root / ".synthex" / "demo_pipeline.py"
    text = render_template("synthex-demo", [("chatgpt", str(DEMO_EXPORT), "chatgpt-export")], agent="demo")
    demo.parent.mkdir(parents=True, exist_ok=True)
    if not demo.exists() or demo.read_text(encoding="utf-8") != text:
        demo.write_text(text, encoding="utf-8")
    return pipeline_from_file(demo, root)


def pipeline_from_file(path: Path, root: Path) -> PipelineDefinition:
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))  # so prompt functions resolve as "pipeline:fn" (TOML export)
    with collecting_formats() as legacy_formats:  # register_format calls of earlier templates' pipeline.py
        module = exec_file_module("pipeline", path)
    found = getattr(module, "pipeline", None)
    if not isinstance(found, PipelineDefinition):
        found = next((v for v in vars(module).values() if isinstance(v, PipelineDefinition)), None)
    if found is None:
        raise PipelineDefinitionError(f"{path}: defines no Pipeline (expected a variable named `pipeline`)")
    with found.formats.registering_as("register_format in the pipeline file"):
        for name, parse in legacy_formats.items():
            found.format(name, parse)
    found.project_dir = root
    found.module_variable = next((k for k, v in vars(module).items() if v is found), "pipeline")
    found.source_file = (path, path.stat().st_mtime_ns)  # what a long-lived code location runs
    for step in found.steps.values():
        if hasattr(step, "base_dir"):
            step.base_dir = str(root)
    return found


TEMPLATES_DIR = Path(__file__).parent / "templates"
# `synthex init --template NAME`: each a short pipeline.py, synthex/core/templates/NAME.py.tmpl, whose top comment
# says what it is for (README, "Which template").
TEMPLATES = ("hierarchical", "raw", "conversational", "hierarchical-conversational", "enriched", "structured")
DEFAULT_TEMPLATE = "hierarchical"
# Templates whose sources read every export with their own format (defined in the template).
_SOURCE_FORMATS = {"conversational": "chat-turns", "hierarchical-conversational": "chat-turns"}
EXAMPLE_TABLE = Path("data") / "example.sqlite"  # what the structured template reads


def render_template(name: str, sources: list[tuple[str, str, str]], agent: str = "",
                    summarize: str = "summarize_conversation", prelude: str = "",
                    template: str = DEFAULT_TEMPLATE) -> str:
    """A template's pipeline.py over ``sources`` = [(step name, path, format)] (the structured template
    reads its table and takes none).

    The one place the templates are filled in: ``synthex init``, the demo code location, the engine
    benchmark and the tests all render them. ``summarize``/``prelude`` swap in another summary prompt
    function (defined in ``prelude``) in the hierarchical template.
    """
    from string import Template

    if template not in TEMPLATES:
        raise BadInputError(f"unknown template {template!r}; expected one of {', '.join(TEMPLATES)}")
    fmt_of = _SOURCE_FORMATS.get(template)
    lines = [f"pipeline.source({step!r}, file={path!r}, format={fmt_of or fmt!r})" for step, path, fmt in sources]
    names = [step for step, _, _ in sources]
    if len(names) > 1:
        lines.append(f"pipeline.merge(\"unified\", from_={names!r})")
    first = "unified" if len(names) > 1 else (names[0] if names else "")
    text = (TEMPLATES_DIR / f"{template}.py.tmpl").read_text(encoding="utf-8")
    return Template(text).substitute(
        name=name, name_repr=repr(name), agent_repr=repr(agent or name), sources="\n".join(lines) + "\n",
        first=repr(first), summarize=summarize, prelude=("\n" + prelude.strip() + "\n\n") if prelude else "")


def write_example_table(root: Path) -> Path:
    """data/example.sqlite: a few support tickets over two months, for the structured template (kept if
    it exists: the user may have edited it)."""
    import sqlite3

    path = root / EXAMPLE_TABLE
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tickets = [
        ("Acme", "Login fails after password reset", "After resetting the password the user still gets "
         "'invalid credentials'. The reset token was never marked used; we fixed the token check."),
        ("Globex", "CSV export is empty", "The nightly CSV export has headers but no rows since the timezone "
         "change. The export filtered by local midnight; it now uses UTC."),
        ("Acme", "Invoice shows the wrong VAT rate", "Invoices for Portugal used 21% instead of 23% VAT. "
         "The rate table was stale; finance confirmed the corrected invoices."),
        ("Initech", "Webhook retries flood the endpoint", "A failing endpoint received 400 retries in an hour. "
         "Retries now back off exponentially and stop after ten attempts."),
        ("Globex", "Slow search on the orders page", "Searching orders by customer takes eight seconds. "
         "A composite index on customer and date brought it under 100 ms."),
        ("Umbrella", "Two-factor codes arrive late", "SMS codes arrive after they expire for users in Brazil. "
         "We switched that region to the second SMS provider."),
        ("Acme", "Password reset email lands in spam", "Reset emails from the new domain go to spam. "
         "SPF and DKIM records were missing for the domain; both are published now."),
        ("Initech", "API rate limit too low for batch jobs", "Their nightly batch hits the 100 requests per "
         "minute limit. We raised their plan's limit and suggested the bulk endpoint."),
        ("Umbrella", "Dashboard charts show no data", "Charts are blank after the browser update. "
         "A deprecated canvas call broke rendering; the chart library was upgraded."),
        ("Globex", "Export misses archived orders", "Archived orders are left out of the CSV export. "
         "Archived orders are now included behind an option, off by default."),
        ("Acme", "Login loop on mobile Safari", "Mobile Safari users return to the login page after signing in. "
         "The session cookie lacked SameSite=None; it is set now."),
        ("Initech", "Duplicate webhook deliveries", "Some events were delivered twice after a deploy. "
         "Deliveries now carry an idempotency key the receiver can dedupe on."),
    ]
    with sqlite3.connect(path) as db:
        db.execute("create table tickets (id integer primary key, created_at text, updated_at text, "
                   "customer text, subject text, body text)")
        for i, (customer, subject, body) in enumerate(tickets):
            day = f"2024-{3 + i // 6:02d}-{1 + (i % 6) * 5:02d}T{9 + i % 8:02d}:00:00Z"
            db.execute("insert into tickets values (?, ?, ?, ?, ?, ?)", (i + 1, day, day, customer, subject, body))
    db.close()
    return path


EVALS_LINE = """
# The LoCoMo eval in the Dagster UI (`synthex ui`): asset eval_locomo per branch, job eval_locomo_job and a
# nightly schedule on main; put the benchmark's locomo10.json at data/locomo10.json (relative to this folder).
pipeline.eval_asset("locomo", data="data/locomo10.json", schedule="0 3 * * *",
                    thresholds={"turn/recall_any@10": 0.5})
"""


def init_project(target: str | Path, name: str, sources: list[str], agent: str = "",
                 template: str = DEFAULT_TEMPLATE, with_evals: bool = False) -> Path:
    """Write ``pipeline.py`` from ``template`` over ``sources`` (the structured template: over the
    example table it writes, and no sources); ``with_evals`` adds the LoCoMo eval declaration."""
    from synthex.core.importers import detect_format

    if not str(name).strip() or not str(target).strip():
        raise BadInputError("a project needs a name: `synthex init NAME`")
    if template not in TEMPLATES:
        raise BadInputError(f"unknown template {template!r}; expected one of {', '.join(TEMPLATES)}")
    if template == "structured" and sources:
        raise BadInputError("the structured template reads a database table (dsn=, table= in pipeline.py), "
                            "not export files: drop --from, then point pipeline.py at your table")
    if template != "structured" and not sources:
        raise BadInputError(f"the {template} template reads exports: give --from FILE (repeatable) or --demo")
    root = Path(target).resolve()
    if root.exists() and not root.is_dir():
        raise BadInputError(f"{root}: a file is in the way; choose another name or --dir")
    blocking = next((p for p in root.parents if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise BadInputError(f"{root}: {blocking} is a file, not a folder")
    from synthex.core.importers.migrate.init import write_migration_project

    detected = [(Path(src).expanduser().resolve(), detect_format(Path(src).expanduser().resolve())) for src in sources]
    if (migrated := write_migration_project(root, name, detected, agent, PIPELINE_FILE)) is not None:
        return migrated  # other memory systems' files, or a Synthex export to restore
    path = root / PIPELINE_FILE
    chosen: list[tuple[str, str, str]] = []
    for i, src in enumerate(sources):
        src_path = Path(src).expanduser().resolve()
        fmt = detect_format(src_path)
        base = {"chatgpt-export": "chatgpt", "claude-export": "claude"}.get(fmt, "documents")
        step = base if base not in [c[0] for c in chosen] else f"{base}{i + 1}"
        chosen.append((step, str(src_path), fmt))
    text = render_template(name, chosen, agent=agent, template=template)
    if with_evals:
        text = text.rstrip("\n") + "\n" + EVALS_LINE
    if path.exists():
        if path.read_text(encoding="utf-8") == text:
            return path  # the same init again: nothing to do
        raise PipelineDefinitionError(f"{path} already exists (and differs); not overwriting it")
    root.mkdir(parents=True, exist_ok=True)
    if template == "structured":
        write_example_table(root)
    path.write_text(text, encoding="utf-8")
    return path


# -- branches: branches/<name>.py beside pipeline.py (docs/architecture.md, "Branches") --------------
CURRENT_BRANCH_FILE = "current_branch"
BRANCH_TEMPLATE = '''"""Branch {name!r} of this project's pipeline (written by `synthex branch create`).

The steps `overrides` changes get records of their own on this branch, and so does everything
downstream of them; every other step reads the parent's records (copy-on-write, nothing recomputed).
An override keeps the step's name and inputs. `synthex branch diff {name}` compares it with its
parent, `synthex branch promote {name}` makes these overrides and their records main's.
"""

PARENT = {parent!r}


def overrides(pipeline):
    """Change steps of the parent's pipeline, e.g.

    pipeline.transform("summaries", from_="transcripts", prompt=my_summarize, model="gpt-4o")
    """
'''


def branch_names(root: str | Path) -> list[str]:
    """Branches that have a definition file, by name."""
    folder = Path(root) / BRANCHES_DIR
    if not folder.is_dir():
        return []
    return sorted(str(p.relative_to(folder).with_suffix("")) for p in folder.rglob("*.py")
                  if not p.name.startswith("_"))


def create_branch_file(root: str | Path, name: str, parent: str = MAIN) -> Path:
    path = branch_path(root, name)
    if name == MAIN:
        raise PipelineDefinitionError("'main' is the trunk, not a branch name")
    if path.exists():
        raise PipelineDefinitionError(f"branch {name!r} exists already ({path})")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(BRANCH_TEMPLATE.format(name=name, parent=parent), encoding="utf-8")
    return path


def load_branch(main: PipelineDefinition, name: str) -> PipelineDefinition:
    """Branch ``name`` of project ``main``: its parent's definition with ``overrides`` applied."""
    return main.branch_from_file(name)


def current_branch(definition: PipelineDefinition) -> str:
    """The branch commands act on by default (`synthex branch switch`), ``main`` unless switched."""
    path = definition.data_dir / CURRENT_BRANCH_FILE
    return path.read_text(encoding="utf-8").strip() if path.exists() else MAIN


def set_current_branch(definition: PipelineDefinition, name: str) -> None:
    definition.data_dir.mkdir(parents=True, exist_ok=True)
    (definition.data_dir / CURRENT_BRANCH_FILE).write_text(check_branch_name(name) + "\n", encoding="utf-8")


def write_promotion(main: PipelineDefinition, name: str, when: str) -> Path:
    """Make pipeline.py apply branch ``name``'s overrides (what promote does to main's definition)."""
    path = main.project_dir / PIPELINE_FILE
    variable = getattr(main, "module_variable", "pipeline")
    line = f"{variable}.apply_branch({name!r}, __file__)"
    text = path.read_text(encoding="utf-8")
    if line not in text:
        from synthex.core.atomic_file import write_file_atomic

        text = text.rstrip("\n") + (f"\n\n# Promoted from branch {name!r} by `synthex branch promote` on {when}: main "
                                    f"runs the overrides in branches/{name}.py.\n{line}\n")
        # Whole or not at all: a promote killed here leaves pipeline.py as it was or as promoted.
        write_file_atomic(path, text, fsync=True, mode=path.stat().st_mode & 0o7777)
        if getattr(main, "source_file", None):
            main.source_file = (path, path.stat().st_mtime_ns)  # main is updated in memory as well
    return path


def promotion_journal(main: PipelineDefinition, name: str) -> Path:
    """Steps a promote of ``name`` is moving, kept until it finishes (a re-run resumes from it)."""
    return main.data_dir / PROMOTIONS_DIR / f"{check_branch_name(name).replace('/', '__')}.json"


def promotion_journals(main: PipelineDefinition) -> list[Path]:
    """The journals of promotes that have not finished (``promotion_journal``), by file name."""
    return sorted((main.data_dir / PROMOTIONS_DIR).glob("*.json"))


PROMOTIONS_DIR = "promotions"  # in the data dir
