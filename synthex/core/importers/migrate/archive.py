"""Synthex's own export (``synthex export``): a project's records as JSONL, read back by ``synthex init
NAME --from export.jsonl`` into an identical memory (``synthex.core.importers.migrate.restore``).

Line 1 is the header: ``{"synthex_export": 1, "project", "exported_at", "view", "steps", "branches",
"outputs"}`` where ``steps`` maps each step to ``{"kind", "from"}`` (the original definition's graph),
``branches`` each exported branch to ``{"parent", "owned"}`` (the steps with rows of its own: copy-on-write),
``outputs`` lists the search / projection outputs (``{"name", "surface", "from", "mode"}``) and ``view``
is the branch a one-branch export was read through (None: every branch, each row as stored). Then one
line per stored row: ``{"type": "record", ...Record.to_dict()}`` (id, content, step, branch, sources,
materialization_key, run_id, created_at, metadata, audit, period). Embeddings are not exported: they are
a function of the content and the embedder, and are made again.

Read as a plain source format (``format="synthex-export"``), each distinct record is one item.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synthex.core.errors import SourceError
from synthex.core.importers.base import Intake, SourceItem, TooLarge, describe, open_regular
from synthex.core.importers.jsonl import row_of
from synthex.core.limits import Limits

FORMAT_NAME = "synthex-export"
VERSION = 1
RECORD_FIELDS: tuple[tuple[str, type], ...] = (
    ("id", str), ("content", str), ("step", str), ("branch", str), ("sources", list), ("materialization_key", str),
    ("run_id", str), ("created_at", str), ("metadata", dict), ("audit", dict), ("period", str))


@dataclass
class Archive:
    """A read export: its header and its rows (``Record.to_dict()`` shape), in file order."""

    path: Path
    header: dict[str, Any]
    rows: list[dict[str, Any]]

    def rows_of(self, step: str, branch: str) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["step"] == step and r["branch"] == branch]


def header_line(project: str, exported_at: str, view: str | None, steps: dict[str, Any], branches: dict[str, Any],
                outputs: list[dict[str, Any]]) -> str:
    return json.dumps({"synthex_export": VERSION, "project": project, "exported_at": exported_at, "view": view,
                       "steps": steps, "branches": branches, "outputs": outputs}, ensure_ascii=False)


def record_lines(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    for row in rows:
        yield json.dumps({"type": "record", **{name: row[name] for name, _ in RECORD_FIELDS}}, ensure_ascii=False)


def _check_header(header: dict[str, Any], where: str) -> dict[str, Any]:
    version = header.get("synthex_export")
    if version != VERSION:
        raise SourceError(f"{where}: 'synthex_export' is {describe(version)}; this Synthex reads version {VERSION}")
    for name, kind in (("steps", dict), ("branches", dict), ("outputs", list)):
        if not isinstance(header.get(name), kind):
            raise SourceError(f"{where}: header field '{name}' is {describe(header.get(name))}; expected "
                              f"{'an object' if kind is dict else 'a list'}")
    for step, spec in header["steps"].items():
        if not isinstance(spec, dict) or not isinstance(spec.get("from"), list) or not all(
                isinstance(u, str) for u in spec["from"]):
            raise SourceError(f"{where}: header steps.{step}: expected {{'kind', 'from': [step names]}}")
    for branch, spec in header["branches"].items():
        if not isinstance(spec, dict) or not isinstance(spec.get("owned"), list):
            raise SourceError(f"{where}: header branches.{branch}: expected {{'parent', 'owned': [step names]}}")
    return header


def _check_row(row: dict[str, Any], where: str, steps: dict[str, Any]) -> dict[str, Any]:
    if row.get("type") != "record":
        raise SourceError(f"{where}: 'type' is {describe(row.get('type'))}; expected 'record'")
    for name, kind in RECORD_FIELDS:
        value = row.get(name)
        if not isinstance(value, kind):
            expected = {str: "a string", list: "a list", dict: "an object"}[kind]
            shown = "missing" if value is None else describe(value)
            raise SourceError(f"{where}: record {row.get('id', '?')!s:.40}: '{name}' is {shown}; expected {expected}")
    if not all(isinstance(s, str) for s in row["sources"]):
        raise SourceError(f"{where}: record {row['id']}: 'sources' holds a non-string id")
    if row["step"] not in steps:
        raise SourceError(f"{where}: record {row['id']}: step {row['step']!r} is not in the header's steps")
    return row


def read_archive(path: Path, limits: Limits | None = None) -> Archive:
    """The export at ``path``, every line checked (one line naming ``file:line``, the record and the field
    on the first that is wrong), read to at most ``limits.source_file_bytes``."""
    cap = (limits or Limits()).source_file_bytes
    try:
        fd, st = open_regular(path)
    except OSError as exc:
        raise SourceError(f"{path}: cannot read file: {exc.strerror or exc}") from exc
    header: dict[str, Any] | None = None
    rows: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    with os.fdopen(fd, "rb") as handle:
        if st.st_size > cap:
            raise TooLarge((limits or Limits()).over("source_file_bytes", f"{path}: skipped: the file", st.st_size))
        read, lineno = 0, 0
        while line := handle.readline(cap + 1 - read):
            read += len(line)
            if read > cap:
                raise TooLarge((limits or Limits()).over("source_file_bytes", f"{path}: skipped: the file", read))
            lineno += 1
            where = f"{path}:{lineno}"
            row = row_of(line, where)
            if row is None:
                continue
            if header is None:
                header = _check_header(row, where)
                continue
            row = _check_row(row, where, header["steps"])
            if (row["id"], row["branch"]) in seen:
                raise SourceError(f"{where}: record {row['id']} on branch {row['branch']!r} appears twice")
            seen.add((row["id"], row["branch"]))
            rows.append(row)
    if header is None:
        raise SourceError(f"{path}: the file is empty; expected a Synthex export (a header line, then records)")
    return Archive(path, header, rows)


def parse(path: Path, intake: Intake | None = None) -> list[SourceItem]:
    """The export's distinct records as plain items (a source reading an export as documents)."""
    archive = read_archive(path, (intake or Intake()).limits)
    items: dict[str, SourceItem] = {}
    for row in archive.rows:
        if row["id"] not in items:
            dated = (row["metadata"].get("time") or {}).get("created_at")
            items[row["id"]] = SourceItem(key=row["id"], content=row["content"],
                                          created_at=dated if isinstance(dated, str) else row["created_at"],
                                          metadata=dict(row["metadata"]))
    return list(items.values())


def sniff(found: Any) -> bool:
    line = found.first_line()
    return isinstance(line, dict) and "synthex_export" in line


def register(registry: Any) -> None:
    from synthex.core.importers.migrate.registry import MigrationFormat

    registry.register(MigrationFormat(
        name=FORMAT_NAME, system="synthex", description="a Synthex export (`synthex export`)",
        sniff=sniff, parse=parse, step="records"))
