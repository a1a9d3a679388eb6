"""The one place that turns a typed filter into the SQL dialect Lance and LanceDB take.

Callers say *what* rows they want (``RecordFilter``: a branch scope, steps, ids, periods, ...); this module
says how that reads in SQL, as dagster-duckdb builds a partition's WHERE clause in one function. Nothing
above the storage layer builds or sees a SQL string. Long id lists are split into chunks here too
(``chunks``): a filter with tens of thousands of ids is slow to parse and to plan.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from synthex.core.scope import BranchScope

ID_CHUNK = 500  # ids per IN (...) list: larger lists cost more to parse than a second query


def quote(value: str) -> str:
    """A SQL string literal."""
    return "'" + str(value).replace("'", "''") + "'"


def in_list(column: str, values: Iterable[str]) -> str:
    return f"{column} IN (" + ",".join(quote(v) for v in values) + ")"


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def scope_sql(scope: BranchScope, steps: Sequence[str] | None = None) -> str:
    """The rows a read of ``scope`` (and ``steps``) sees: each serving branch's rows of the steps it serves."""
    parts = []
    for served_by, names in scope.groups(steps).items():
        clause = f"branch = {quote(served_by)}"
        if names:
            clause += " AND " + in_list("step", names)
        parts.append(f"({clause})")
    return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"


@dataclass(frozen=True)
class RecordFilter:
    """Rows of the records table. Every field narrows; an unset field does not filter.

    ``scope``: the rows a branch reads (copy-on-write); ``branch``: one branch's own rows, whatever it
    inherits (writes, promote, purge). ``metadata``: dotted key -> value; a prefilter on the stored JSON
    text, which callers verify exactly on the decoded records (``SearchEngine`` does).
    """

    scope: BranchScope | None = None
    branch: str | None = None
    steps: tuple[str, ...] | None = None
    ids: tuple[str, ...] | None = None
    periods: tuple[str, ...] | None = None
    period_before: str | None = None
    id_prefix: str | None = None
    fingerprints: tuple[str, ...] | None = None
    without_vector: bool = False
    with_vector: bool = False
    run_id: str | None = None
    run_id_not: str | None = None
    metadata: tuple[tuple[str, Any], ...] = ()
    content_contains: str | None = None  # case-insensitive substring (already lower-cased by the caller)

    @classmethod
    def of(cls, scope: BranchScope | None = None, *, steps: Iterable[str] | None = None,
           ids: Iterable[str] | None = None, periods: Iterable[str] | None = None,
           metadata: dict[str, Any] | None = None, **rest: Any) -> RecordFilter:
        return cls(scope=scope, steps=tuple(steps) if steps is not None else None,
                   ids=tuple(ids) if ids is not None else None,
                   periods=tuple(periods) if periods is not None else None,
                   metadata=tuple((metadata or {}).items()), **rest)

    def with_ids(self, ids: Iterable[str]) -> RecordFilter:
        return replace(self, ids=tuple(ids))


def where(f: RecordFilter) -> str | None:
    """The SQL of a records filter (None: every row)."""
    clauses = []
    if f.scope is not None:
        # Steps are part of the scope clause: a branch's inherited steps read another branch's rows.
        clauses.append(scope_sql(f.scope, f.steps))
    elif f.steps is not None:
        clauses.append(in_list("step", f.steps) if f.steps else "FALSE")
    if f.branch is not None:
        clauses.append(f"branch = {quote(f.branch)}")
    if f.periods is not None:
        clauses.append(in_list("period", f.periods) if f.periods else "FALSE")
    if f.period_before is not None:
        clauses.append(f"period < {quote(f.period_before)}")
    if f.ids is not None:
        clauses.append(in_list("id", f.ids) if f.ids else "FALSE")
    if f.id_prefix is not None:
        clauses.append(f"id LIKE {quote(_like_escape(f.id_prefix) + '%')}")
    if f.fingerprints is not None:
        clauses.append(in_list("fingerprint", f.fingerprints) if f.fingerprints else "FALSE")
    if f.without_vector:
        clauses.append("vector IS NULL")
    if f.with_vector:
        clauses.append("vector IS NOT NULL")
    if f.run_id is not None:
        clauses.append(f"run_id = {quote(f.run_id)}")
    if f.run_id_not is not None:
        clauses.append(f"run_id != {quote(f.run_id_not)}")
    for dotted, value in f.metadata:
        # The stored JSON text (keys sorted, ", "/": " separators) holds the leaf key and its value.
        fragment = f"{json.dumps(dotted.split('.')[-1])}: {json.dumps(value, ensure_ascii=False)}"
        clauses.append(f"metadata LIKE {quote('%' + _like_escape(fragment) + '%')}")
    if f.content_contains is not None:
        clauses.append(f"strpos(lower(content), {quote(f.content_contains)}) > 0")
    return " AND ".join(clauses) if clauses else None


def chunks(values: Iterable[str], size: int = ID_CHUNK) -> Iterator[list[str]]:
    """``values`` (deduplicated, in order) in lists of at most ``size``."""
    wanted = list(dict.fromkeys(values))
    for start in range(0, len(wanted), size):
        yield wanted[start:start + size]


def key_where(column: str, keys: Sequence[str]) -> str:
    """Rows of a bookkeeping table whose ``column`` is one of ``keys`` (callers chunk long lists)."""
    return in_list(column, keys) if keys else "FALSE"


def equals(**columns: str) -> str:
    """Rows whose columns equal these values, e.g. ``equals(status="running", branch="main")``."""
    return " AND ".join(f"{c} = {quote(v)}" for c, v in columns.items())


def runs_where(status: str, branch: str | None = None, except_id: str | None = None) -> str:
    """Runs in ``status`` (of ``branch``; other than ``except_id``)."""
    where = equals(status=status, **({"branch": branch} if branch is not None else {}))
    return where + (f" AND id != {quote(except_id)}" if except_id is not None else "")
