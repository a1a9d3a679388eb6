"""What ``synthex init NAME --from FILE`` writes for migration formats (``init_project`` asks here first).

- A Synthex export: the restoring project (``restore.write_restored_project``); it must be the only file.
- Other memory systems' files: one source per file (the format's ``step`` name), and the format's views as
  ``migrated`` steps over every source of that system (so a Mem0 ``get_all`` file and its ``history.db``
  link up), the searched views in the search output. History (deletions, superseded versions) stays in
  the sources' records: not searched, visible in lineage.
"""

from __future__ import annotations

from pathlib import Path

from synthex.core.errors import BadInputError
from synthex.core.importers.migrate.archive import FORMAT_NAME as ARCHIVE
from synthex.core.importers.migrate.catalogue import migration_formats
from synthex.core.importers.migrate.registry import MigrationFormat

HEADER = '''"""Memory pipeline for {name} (`synthex init --from` a {systems} file; edit freely, it is plain Python).

Imported as it was: each file a source (every item, history included, its raw record in metadata.source.raw),
and a `migrated` step per kind of current memory, linked to what it came from (`synthex lineage ID`).
Search: synthex search "what does the user prefer"
"""

from synthex import Pipeline

pipeline = Pipeline({name!r}, agent={agent!r})

'''


def migration_sources(sources: list[tuple[Path, str]]) -> list[tuple[Path, MigrationFormat]] | None:
    """The sources as migration formats when every one is (None: none is; a mix is one line)."""
    registry = migration_formats()
    found = [(p, registry.get(fmt)) for p, fmt in sources]
    known = [(p, f) for p, f in found if f is not None]
    if not known:
        return None
    if len(known) != len(found):
        raise BadInputError("a project imports either other memory systems' files or chat exports and notes, not "
                            "both in one init: init one, then add the other source to pipeline.py")
    return known


def write_migration_project(root: Path, name: str, sources: list[tuple[Path, str]], agent: str = "",
                            pipeline_file: str = "pipeline.py") -> Path | None:
    """Write the project for migration-format sources (None: they are not, the templates apply)."""
    from synthex.core.importers.migrate.restore import write_restored_project

    known = migration_sources(sources)
    if known is None:
        return None
    if any(f.name == ARCHIVE for _, f in known):
        if len(known) > 1:
            raise BadInputError("a Synthex export is restored alone: give it as the only --from")
        return write_restored_project(root, name, known[0][0], pipeline_file)
    lines: list[str] = []
    by_system: dict[str, list[tuple[str, MigrationFormat]]] = {}
    taken: set[str] = set()
    for i, (path, fmt) in enumerate(known):
        step = fmt.step if fmt.step not in taken else f"{fmt.step}{i + 1}"
        taken.add(step)
        lines.append(f"pipeline.source({step!r}, file={str(path)!r}, format={fmt.name!r})")
        by_system.setdefault(fmt.system, []).append((step, fmt))
    searched: list[str] = []
    for system, steps in by_system.items():
        views: dict[str, tuple[list[str], bool]] = {}
        for _, fmt in steps:
            for view, kinds, is_searched in fmt.views:
                current = views.setdefault(f"{system.replace('-', '_')}_{view}", ([], is_searched))
                current[0].extend(k for k in kinds if k not in current[0])
        inputs = [s for s, _ in steps]
        for view, (kinds, is_searched) in views.items():
            lines.append(f"pipeline.step('migrated', {view!r}, from_={inputs!r}, kinds={kinds!r})")
            if is_searched:
                searched.append(view)
    lines.append(f"\npipeline.output('search', from_={searched or [s for s in taken]!r}, surface='search')")
    text = HEADER.format(name=name, agent=agent or name, systems=", ".join(by_system)) + "\n".join(lines) + "\n"
    path = root / pipeline_file
    if path.exists():
        if path.read_text(encoding="utf-8") == text:
            return path
        from synthex.core.errors import PipelineDefinitionError

        raise PipelineDefinitionError(f"{path} already exists (and differs); not overwriting it")
    root.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
