"""``synthex export``: a project's records out, as a Synthex export (``synthex init --from`` reads it back
into an identical memory) or as the MCP reference memory server's ``memory.jsonl``.

The file is written whole beside its target and renamed over it (``write_file_atomic``): a killed export
leaves the previous file or none, never half of one. Records are decrypted on the way out (an export is
plain text: keep it where the store's key would be kept).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synthex.core.atomic_file import write_file_atomic
from synthex.core.errors import BadInputError
from synthex.core.importers.migrate import archive, mcp_memory
from synthex.core.naming import MAIN, check_branch_name
from synthex.core.periods import now_iso
from synthex.core.project import branch_names
from synthex.core.record import Record
from synthex.core.scope import BranchScope

if TYPE_CHECKING:
    from synthex.app.facade import ProjectApp


class ExportFormat(StrEnum):
    SYNTHEX = "synthex"  # every stored row with its ids, steps, branches, sources, times, metadata, audit
    MCP_MEMORY = "mcp-memory"  # entities and relations for agents that speak only the MCP memory server


@dataclass(frozen=True)
class ExportSummary:
    path: Path
    format: ExportFormat
    branches: list[str]
    records: int  # rows written (synthex), or records read (mcp-memory)
    entities: int = 0
    relations: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "format": str(self.format), "branches": self.branches,
                "records": self.records, "entities": self.entities, "relations": self.relations}


def _ordered(records: list[Record], order: list[str]) -> list[Record]:
    rank = {s: i for i, s in enumerate(order)}
    return sorted(records, key=lambda r: (rank.get(r.step, len(rank)), r.step, r.period, r.id))


def export_project(app: ProjectApp, path: str | Path, branch: str | None = None,
                   fmt: ExportFormat | str = ExportFormat.SYNTHEX) -> ExportSummary:
    """Write ``path``. ``branch`` None: every branch, each row as stored (a restore recreates the branches);
    a branch: the records that branch reads (its own and those it inherits), restored as a project's main."""
    try:
        fmt = ExportFormat(fmt)
    except ValueError:
        raise BadInputError(f"unknown export format {fmt!r}; expected one of "
                            f"{', '.join(f.value for f in ExportFormat)}") from None
    target = Path(path).expanduser()
    if target.is_dir():
        raise BadInputError(f"{target}: a folder; give the file to write")
    main = app.pipeline.root()
    if branch is not None:
        check_branch_name(branch)
    if fmt is ExportFormat.MCP_MEMORY:
        scope = app.scope(branch or MAIN)
        records = app.store.records.list(scope)
        lines, entities, relations = mcp_memory.memory_lines(records)
        write_file_atomic(target, "".join(line + "\n" for line in lines))
        return ExportSummary(target, fmt, [scope.branch], len(records), entities, relations)
    names = [branch] if branch is not None else [MAIN, *(b for b in branch_names(main.project_dir) if b != MAIN)]
    definitions = {b: main.for_branch(b) for b in names}
    steps: dict[str, Any] = {}
    for definition in definitions.values():
        for name in definition.order():
            steps.setdefault(name, {"kind": definition.steps[name].kind, "from": list(definition.steps[name].from_)})
    branches: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    for name, definition in definitions.items():
        order = definition.order()
        if branch is not None:  # one branch's view: what it reads, wherever the rows are stored
            records = app.store.records.list(definition.scope())
            branches[name] = {"parent": None, "owned": order}
        else:
            records = app.store.records.list(BranchScope.own(name))
            parent = definition.parent.branch_name if definition.parent is not None else None
            branches[name] = {"parent": parent, "owned": definition.owned_steps()}
        rows += [r.to_dict() for r in _ordered(records, order)]
    outputs = [{"name": o.name, "surface": o.surface, "from": list(o.from_), "mode": o.mode}
               for o in main.outputs.values()]
    header = archive.header_line(main.name, now_iso(), branch, steps, branches, outputs)
    text = header + "\n" + "".join(line + "\n" for line in archive.record_lines(rows))
    write_file_atomic(target, text)
    return ExportSummary(target, fmt, names, len(rows))
