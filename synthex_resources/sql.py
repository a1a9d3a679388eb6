"""The SQL side of a project: DuckDB over the LanceDB tables (through Arrow, no copy) and the eval results.

``SqlConsole`` owns one in-memory DuckDB connection with a view per table of the record store:

- ``records``: every column of the LanceDB ``records`` table but ``vector`` (384 floats a row that
  nobody wants in a ``select *``; a query on ``records`` never reads them). One row per (id, branch):
  a branch's own rows only; the steps a branch inherits from its parent are rows of the parent.
- ``record_vectors``: ``id, branch, step, vector`` (a fixed-size FLOAT array: ``array_cosine_similarity``).
- ``runs``, ``run_steps`` and every other table of a local store (``llm_cache``, ``hook_deliveries``...).
- ``eval_results``: the per-question eval results, when the project has some (``eval_results_path``):
  the DuckDB file the evals plugin writes, attached read-only as catalog ``evals``.

A LanceDB table is a Lance dataset, which is a ``pyarrow.dataset.Dataset``: DuckDB scans it through
its Arrow scan, pushing projections and filters down to the Lance scanner and streaming record batches,
so nothing is copied into DuckDB (the connection holds no table, only views). Each view is pinned to the
table version current when the console opened: one console answers from one snapshot, a new console
sees later writes.

Encrypted store (``SYNTHEX_ENCRYPTION_KEY``, synthex_resources/encryption.py): the views show plaintext.
``records.content``, ``records.audit``, ``llm_cache.response`` and ``llm_cache.raw`` go through the scalar
function ``synthex_decrypt`` (a vectorized Python UDF on this connection only; nothing decrypted is
written anywhere). A filter on those columns is evaluated after decryption, in DuckDB, so it reads and
decrypts every row in scope (filters on the plaintext columns still reach the Lance scanner first).
Without the key the console refuses to open, like the store.

Read-only: one statement, ``SELECT`` (``FROM``, ``WITH``, ``DESCRIBE``, ``SHOW``, ``SUMMARIZE``,
``VALUES``) or ``EXPLAIN`` of one; anything else is refused in one line before DuckDB runs it. Underneath, the
views over Arrow cannot be written and the eval results are attached ``READ_ONLY``.
Storage layer: no Dagster here.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from synthex.core.errors import BadInputError, SynthexError
from synthex_resources.record_store import RecordStore
from synthex_resources.store.schemas import (
    LLM_CACHE,
    RECORDS,
    RUN_STEPS,
    RUN_STEPS_SCHEMA,
    RUNS,
    RUNS_SCHEMA,
    records_schema,
)

EVAL_RESULTS_FILE = "eval_results.duckdb"  # in the project's eval dir, ``<project>/.synthex/evals/``
EVAL_RESULTS_TABLE = "eval_results"
EVAL_CATALOG = "evals"
DECRYPT_FUNCTION = "synthex_decrypt"
ENCRYPTED_COLUMNS = {RECORDS: ("content", "audit"), LLM_CACHE: ("response", "raw")}
RECORD_VECTORS = "record_vectors"
# Tables looked for on an object store (a local store is listed instead, so new tables show up).
KNOWN_TABLES = (RECORDS, RUNS, RUN_STEPS, LLM_CACHE, "hook_deliveries")
READ_STATEMENTS = {"SELECT", "EXPLAIN"}
_EXPLAIN = re.compile(r"^\s*explain\s+(analyze\s+)?(\([^)]*\)\s*)?", re.IGNORECASE)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def eval_results_path(data_dir: Path) -> Path:
    """Where a project's per-question eval results live: ``<project>/.synthex/evals/eval_results.duckdb``
    (beside the eval JSON files; written by ``synthex eval`` and the ``eval_locomo`` asset)."""
    return Path(data_dir) / "evals" / EVAL_RESULTS_FILE


def quote_identifier(name: str) -> str:
    return name if _IDENTIFIER.match(name) else '"' + name.replace('"', '""') + '"'


def one_line(exc: BaseException) -> str:
    """DuckDB's message on one line (without its ``LINE 1: ... ^^^`` context lines)."""
    lines = [ln.strip() for ln in str(exc).splitlines()]
    kept = [ln for ln in lines if ln and not ln.startswith("LINE ") and set(ln) != {"^"}]
    return " ".join(kept) or type(exc).__name__


class SqlConsole:
    """DuckDB views over a record store (and the eval results); ``query(sql) -> pyarrow.Table``."""

    def __init__(self, store: RecordStore | str, eval_results: Path | None = None) -> None:
        import duckdb

        self.store = store if isinstance(store, RecordStore) else RecordStore(store)
        self.eval_results = Path(eval_results) if eval_results else None
        self.con = duckdb.connect(":memory:")
        self.views: dict[str, str] = {}  # view name -> where its rows come from
        try:
            self._add_store_views()
            self._attach_eval_results()
        except BaseException:
            self.con.close()
            raise

    # -- setup ----------------------------------------------------------------------------------
    def _table_names(self) -> list[str]:
        uri = self.store.uri
        if "://" in uri and not uri.startswith("file://"):
            return list(KNOWN_TABLES)
        root = Path(uri.removeprefix("file://"))
        found = sorted(p.name.removesuffix(".lance") for p in root.glob("*.lance")) if root.is_dir() else []
        return sorted(set(found) | {RECORDS, RUNS, RUN_STEPS})

    def _view(self, name: str, source: Any, select: str = "*") -> None:
        """A view named ``name`` over an Arrow source (a Lance dataset is scanned lazily, batch by batch)."""
        self.con.from_arrow(source).project(select).create_view(name, replace=True)

    def _columns(self, name: str, columns: list[str]) -> str:
        """The projection of a view: encrypted columns through ``synthex_decrypt`` when the store is encrypted."""
        secret = ENCRYPTED_COLUMNS.get(name, ()) if self.store.cipher is not None else ()
        return ", ".join(f"{DECRYPT_FUNCTION}({quote_identifier(c)}) AS {quote_identifier(c)}" if c in secret
                         else quote_identifier(c) for c in columns)

    def _register_decrypt(self) -> None:
        cipher = self.store.cipher
        if cipher is None:
            return

        def decrypt(values: pa.Array) -> pa.Array:
            return pa.array([None if v is None else cipher.decrypt(v) for v in values.to_pylist()], pa.string())

        self.con.create_function(DECRYPT_FUNCTION, decrypt, ["VARCHAR"], "VARCHAR", type="arrow",
                                 null_handling="special", side_effects=False)

    def _add_store_views(self) -> None:
        empty = {RECORDS: pa.schema([f for f in records_schema(1) if f.name != "vector"]),
                 RUNS: RUNS_SCHEMA, RUN_STEPS: RUN_STEPS_SCHEMA}
        self._register_decrypt()
        for name in self._table_names():
            ds = self.store.dataset(name)
            if ds is None:
                if name in empty:  # a project not run yet: the views exist, with no rows
                    self._view(name, empty[name].empty_table())
                    self.views[name] = "(empty: no such table yet)"
                continue
            where = f"lance dataset {self.store.uri.rstrip('/')}/{name}.lance (version {ds.version})"
            if name == RECORDS:
                columns = ds.schema.names
                if "vector" in columns:
                    self._view(RECORD_VECTORS, ds, "id, branch, step, vector")
                    self.views[RECORD_VECTORS] = where
                self._view(RECORDS, ds, self._columns(RECORDS, [c for c in columns if c != "vector"]))
            elif name in ENCRYPTED_COLUMNS and self.store.cipher is not None:
                self._view(name, ds, self._columns(name, ds.schema.names))
            else:
                self._view(name, ds)
            self.views[name] = where

    def _attach_eval_results(self) -> None:
        path = self.eval_results
        if path is None or not path.exists():
            return
        import duckdb

        literal = "'" + str(path).replace("'", "''") + "'"
        delay = 0.05
        for attempt in range(8):  # an eval writing its rows holds the file for a moment
            try:
                self.con.execute(f"ATTACH {literal} AS {EVAL_CATALOG} (READ_ONLY)")
                break
            except duckdb.Error as exc:
                locked = isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower()
                if not locked:
                    raise SynthexError(f"{path}: cannot read the eval results ({one_line(exc)})") from None
                if attempt == 7:
                    raise SynthexError(f"{path}: the eval results are being written by another process, try again "
                                       f"({one_line(exc)})") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
        tables = self.con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = ?",
                                  [EVAL_CATALOG]).fetchall()
        if (EVAL_RESULTS_TABLE,) in tables:
            self.con.execute(f"CREATE VIEW {EVAL_RESULTS_TABLE} AS SELECT * FROM {EVAL_CATALOG}.{EVAL_RESULTS_TABLE}")
            self.views[EVAL_RESULTS_TABLE] = f"duckdb file {path} (read-only)"

    # -- queries --------------------------------------------------------------------------------
    def check_read_only(self, sql: str) -> list[Any]:
        """The statement of ``sql`` (a list of one), or BadInputError: not one statement, or not a read."""
        import duckdb

        try:
            statements = self.con.extract_statements(sql)
        except duckdb.Error as exc:
            raise BadInputError(f"bad SQL: {one_line(exc)}") from None
        if len(statements) != 1:
            raise BadInputError(f"bad SQL: give one statement (got {len(statements)})")
        for stmt in statements:
            kind = stmt.type.name
            if kind == "EXPLAIN":  # EXPLAIN ANALYZE runs what it explains: check that too
                try:
                    inner = self.con.extract_statements(_EXPLAIN.sub("", stmt.query, count=1))
                except duckdb.Error:
                    inner = []
                kinds = [s.type.name for s in inner]
                kind = "EXPLAIN" if kinds and set(kinds) <= READ_STATEMENTS else f"EXPLAIN {' '.join(kinds) or '?'}"
            if kind not in READ_STATEMENTS:
                raise BadInputError(f"synthex sql is read-only: {kind} statements are refused (records are written "
                                    f"by `synthex run`, eval results by `synthex eval`)")
        return statements

    def query(self, sql: str) -> pa.Table:
        """The result of ``sql`` (one read statement) as an Arrow table."""
        import duckdb

        [statement] = self.check_read_only(sql)
        try:
            relation = self.con.sql(statement.query)
            if relation is None:  # not a query (cannot happen for the statements let through)
                return pa.table({})
            fetch = getattr(relation, "to_arrow_table", None) or relation.arrow  # duckdb < 1.4: arrow()
            return fetch()
        except duckdb.Error as exc:
            message = one_line(exc)
            if EVAL_RESULTS_TABLE not in self.views and re.search(rf"\b{EVAL_RESULTS_TABLE}\b", message):
                where = self.eval_results or "this project"
                message += f" (no eval results at {where} yet: run `synthex eval locomo ...` first)"
            raise BadInputError(f"bad SQL: {message}") from None

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> SqlConsole:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
