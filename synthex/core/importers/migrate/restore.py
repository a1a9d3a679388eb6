"""Restoring a Synthex export (``synthex.core.importers.migrate.archive``) as a project whose records are
the exported ones: same ids, steps, branches, sources, times, metadata and audit.

``synthex init NAME --from export.jsonl`` writes a ``pipeline.py`` with one ``restored`` step per exported
step (the original's graph: same names, same ``from_``), reading its rows of main from the export, the
original outputs, and for every exported branch a ``branches/<name>.py`` whose overrides make the steps
that branch owned read that branch's rows. ``synthex run`` then materializes them: a restored step's work
items carry the exported materialization keys and ids, so the run writes exactly the exported rows, and
a second run has nothing to do. What is not restored: the original run ids (the restore's run writes the
rows; the original runs' history is not in the export), embeddings (made again from the content), and
hooks (``on_update`` callables are code, not data).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

from synthex.core.errors import PipelineDefinitionError
from synthex.core.importers.migrate.archive import VERSION, Archive, read_archive
from synthex.core.limits import Limits
from synthex.core.naming import MAIN
from synthex.core.periods import ALL_PERIODS
from synthex.core.record import Record
from synthex.core.steps.base import Step, StepContext, WorkItem


@dataclass
class RestoredStep(Step):
    """The exported rows of step ``name`` on branch ``rows``, as they were (a step with inputs)."""

    file: str = ""
    rows: str = MAIN
    base_dir: str = ""
    kind: ClassVar[str] = "restored"
    limits: Limits = field(default_factory=Limits, init=False, repr=False, compare=False)
    _archive: tuple[tuple[int, int, int], Archive] | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def build(cls, name: str, *, base_dir: str = "", from_: str | list[str] = (), pii: str | None = None,
              **config: Any) -> Self:
        if not isinstance(config.get("file"), str) or not config["file"]:
            raise PipelineDefinitionError(f"{cls.kind} {name!r}: file= names the Synthex export to restore from")
        if pii is not None:
            raise PipelineDefinitionError(f"{cls.kind} {name!r}: restored records are restored as they were (no pii=)")
        step = super().build(name, from_=from_, **config)
        step.base_dir = base_dir
        return step

    def use_limits(self, limits: Limits) -> None:
        self.limits = limits

    def path(self) -> Path:
        p = Path(self.file).expanduser()
        return p if p.is_absolute() or not self.base_dir else Path(self.base_dir) / p

    def archive(self) -> Archive:
        """The export, read again only when its file changed (size, mtime, inode)."""
        path = self.path()
        try:
            st = os.stat(path)
        except OSError as exc:
            from synthex.core.errors import SourceError

            raise SourceError(f"{path}: cannot read the export: {exc.strerror or exc}") from exc
        stamp = (st.st_size, st.st_mtime_ns, st.st_ino)
        if self._archive is None or self._archive[0] != stamp:
            self._archive = (stamp, read_archive(path, self.limits))
        return self._archive[1]

    def _rows(self) -> list[dict[str, Any]]:
        return self.archive().rows_of(self.name, self.rows)

    def config(self) -> dict[str, Any]:
        # The file's place is not in the version (moving the export must not restore again): its location is.
        return {"from": list(self.from_), "rows": self.rows, "export": VERSION}

    def location(self) -> str:
        return str(self.path())

    def toml_config(self) -> dict[str, Any]:
        return {"from": list(self.from_), "file": self.file, "rows": self.rows}

    def periods(self) -> list[str]:
        return sorted({r["period"] for r in self._rows()} - {ALL_PERIODS})

    def single_partition_period(self) -> str | None:
        periods = {r["period"] for r in self._rows()}
        return ALL_PERIODS if periods == {ALL_PERIODS} else None

    def output_chars(self, items: list[WorkItem]) -> int | None:
        return sum(len(i.payload["content"]) for i in items)

    def work(self, ctx: StepContext) -> list[WorkItem]:
        return [WorkItem(key=r["materialization_key"], id=r["id"], group_key=r["id"], payload=r)
                for r in self._rows() if r["period"] == ctx.period]

    def produce(self, items: list[WorkItem], ctx: StepContext) -> tuple[list[Record], int]:
        out = []
        for item in items:
            row = item.payload
            out.append(Record(id=row["id"], content=row["content"], step=self.name, branch=ctx.branch,
                              source_ids=list(row["sources"]), materialization_key=row["materialization_key"],
                              run_id=ctx.run_id, created_at=row["created_at"], metadata=row["metadata"],
                              audit=row["audit"], period=row["period"]))
            ctx.progress(1)
        return out, 0


@dataclass
class RestoredSourceStep(RestoredStep):
    """A restored step that read no steps (the original was a source): a leaf of the graph."""

    kind: ClassVar[str] = "restored-source"
    is_source: ClassVar[bool] = True


def register_step_kinds(registry: Any) -> None:
    registry.register(RestoredStep.kind, RestoredStep)
    registry.register(RestoredSourceStep.kind, RestoredSourceStep)
    from synthex.core.importers.migrate.step import MigratedStep

    registry.register(MigratedStep.kind, MigratedStep)


# -- the project a restore writes ---------------------------------------------------------------------------

def _step_line(indent: str, name: str, spec: dict[str, Any], branch: str) -> str:
    kind = RestoredStep.kind if spec["from"] else RestoredSourceStep.kind
    inputs = f", from_={spec['from']!r}" if spec["from"] else ""
    return f"{indent}pipeline.step({kind!r}, {name!r}, file=EXPORT, rows={branch!r}{inputs})"


def restored_pipeline(name: str, export: Path, archive: Archive) -> tuple[str, dict[str, str]]:
    """(pipeline.py, {branch: branches/<branch>.py}) of the project restoring ``archive``."""
    header = archive.header
    steps: dict[str, Any] = header["steps"]
    view = header.get("view")
    rows_branch = view or MAIN  # a one-branch export: that branch's view becomes the new project's main
    lines = [f'"""Restored from the Synthex export {export.name} (project {header.get("project")!r}, exported '
             f'{header.get("exported_at")}).',
             "",
             "Every step reads its exported records back as they were (`synthex run` writes them; same ids, sources,",
             'times, metadata and audit). Replace a step with your own to rebuild from here on a branch."""',
             "",
             "from synthex import Pipeline",
             "",
             f"EXPORT = {str(export)!r}",
             f"pipeline = Pipeline({name!r})",
             ""]
    lines += [_step_line("", step, spec, rows_branch) for step, spec in steps.items()]
    for output in header["outputs"]:
        mode = f", mode={output['mode']!r}" if output.get("mode") else ""
        lines.append(f"pipeline.output({output['name']!r}, from_={list(output['from'])!r}, "
                     f"surface={output.get('surface', 'search')!r}{mode})")
    branches: dict[str, str] = {}
    if view is None:
        for branch, spec in header["branches"].items():
            if branch == MAIN:
                continue
            owned = [s for s in steps if s in spec["owned"]]
            body = [f'"""Branch {branch!r}, restored from {export.name}: the steps it owned read its rows."""', "",
                    f"EXPORT = {str(export)!r}", f"PARENT = {spec.get('parent') or MAIN!r}", "", "",
                    "def overrides(pipeline):"]
            body += [_step_line("    ", step, steps[step], branch) for step in owned] or ["    pass"]
            branches[branch] = "\n".join(body) + "\n"
    return "\n".join(lines) + "\n", branches


def write_restored_project(root: Path, name: str, export: Path, pipeline_file: str) -> Path:
    """Write the restoring project for ``export`` into ``root`` (pipeline.py and branches/), refusing to
    overwrite a pipeline.py that differs."""
    from synthex.core.branch_files import BRANCHES_DIR

    archive = read_archive(export)
    pipeline_text, branches = restored_pipeline(name, export, archive)
    path = root / pipeline_file
    if path.exists() and path.read_text(encoding="utf-8") != pipeline_text:
        raise PipelineDefinitionError(f"{path} already exists (and differs); not overwriting it")
    root.mkdir(parents=True, exist_ok=True)
    for branch, text in branches.items():
        target = root / BRANCHES_DIR / f"{branch}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    path.write_text(pipeline_text, encoding="utf-8")
    return path
