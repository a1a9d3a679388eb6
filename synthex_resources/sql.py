"""The SQL side of a project: DuckDB over the LanceDB tables (through Arrow, no copy) and the eval results.

``SqlConsole`` owns one in-memory DuckDB connection with a view per table of the record store:

- ``records``: every column of the LanceDB ``records`` table but ``vector`` (384 floats a row that
  nobody wants in a ``select *``; a query on ``records`` never reads them). One row per (id, branch):
  a branch's own rows only; the steps a branch inherits from its parent are rows of the parent.
- ``record_vectors``: ``id, branch, step, vector`` (a fixed-size FLOAT array: ``array_cosine_similarity``).
- ``runs``, ``run_steps`` and every other table of a local store (``llm_cache``, ``hook_deliveries``...).
- ``eval_results``: the per-question eval results, when the project has some (``eval_results_path``):
  the DuckDB file the evals plugin writes.
- ``cdc_sources``, ``cdc_items``: the sources' change-data-capture state (``cdc_state.py``, the file
  ``synthex sync`` and the sensors write): what each source held at its last sync.

Sandboxed (issue 20): the connection is made with external access off, extension auto-install and
auto-load off, Python replacement scans off and the configuration locked, so user SQL reads the views and
nothing else: ``read_text('/etc/shadow')``, ``glob``, ``read_csv('https://...')``, ``read_duckdb``,
``ATTACH``, ``COPY ... TO``, ``INSTALL``/``LOAD`` and ``SET`` are refused in one line. The views need no
file access of DuckDB's own: the Lance tables come in as Arrow (scanned by pylance), and the DuckDB files
(eval results, CDC state) are read by a separate short-lived read-only connection into Arrow tables in
memory and closed at once (a snapshot), so a console never holds the lock a sync or an eval needs to
write, however long its query runs.

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

Bounded (issue 32): DuckDB has no statement timeout, a memory limit of 80 % of the machine's RAM and a
temp directory relative to the working directory. ``SqlLimits`` gives the console its own: a statement
runs under a timer that interrupts the connection (``connection.interrupt()``) when ``timeout_s`` passes
and is then one line ("stopped after 30 s"); ``memory_limit`` and ``temp_directory`` (``<data dir>/sql-tmp``,
or no spilling without a data dir, never the working directory) are set with the sandbox, before the
configuration is locked (``LOCKED``), so user SQL cannot raise them. Every door that runs SQL makes its console with
``sql_limits(pipeline.limits, pipeline.data_dir, ...)``: the project's ``Limits`` (``sql_timeout_s``,
``sql_memory_bytes``) unless a caller's flag overrides them.

Read-only: one statement, ``SELECT`` (``FROM``, ``WITH``, ``DESCRIBE``, ``SHOW``, ``SUMMARIZE``,
``VALUES``) or ``EXPLAIN`` of one; anything else is refused in one line before DuckDB runs it. Underneath, the
views over Arrow cannot be written, and the sandbox refuses whatever a statement would reach outside them.
Storage layer: no Dagster here.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from synthex.core.errors import BadInputError, SynthexError
from synthex.core.limits import Limits
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

SQL_TEMP_DIR = "sql-tmp"  # in the project's data dir: where a console's DuckDB spills what exceeds its memory
EVAL_RESULTS_FILE = "eval_results.duckdb"  # in the project's eval dir, ``<project>/.synthex/evals/``
EVAL_RESULTS_TABLE = "eval_results"
CDC_TABLES = ("cdc_sources", "cdc_items")  # cdc_state.SCHEMA's tables, shown under the same names
DECRYPT_FUNCTION = "synthex_decrypt"
ENCRYPTED_COLUMNS = {RECORDS: ("content", "audit"), LLM_CACHE: ("response", "raw")}
RECORD_VECTORS = "record_vectors"
# Tables looked for on an object store (a local store is listed instead, so new tables show up).
KNOWN_TABLES = (RECORDS, RUNS, RUN_STEPS, LLM_CACHE, "hook_deliveries")
READ_STATEMENTS = {"SELECT", "EXPLAIN"}
# The console's DuckDB settings, given when the connection is made (before any view or user SQL) and
# locked: user SQL can neither reach a file, URL or extension nor turn these back on. The views need none
# of it (Arrow scans of pylance datasets; the DuckDB files are read by a separate connection).
SANDBOX = {
    "enable_external_access": False,  # no read_text / glob / read_csv / read_duckdb / ATTACH / COPY TO / INSTALL
    "autoinstall_known_extensions": False,  # read_csv('https://...') would fetch httpfs
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "python_enable_replacements": False,  # `FROM name` never reaches a Python variable of the caller
}
# Given after the sandbox and the console's limits (``SqlLimits.duckdb_config``): SET / RESET / PRAGMA
# cannot undo any of them. (The limits go between: DuckDB refuses a temp_directory given before
# enable_external_access in the same config, and any setting after the lock.)
LOCKED = {"lock_configuration": True}
SANDBOX_REASON = "external access is off in synthex sql: only the project's views can be read"
# Statement kinds that exist to reach outside the views (files, URLs, extensions, settings, databases):
# refused with the sandbox's reason rather than the "records are written by ..." one.
EXTERNAL_STATEMENTS = {"ATTACH", "DETACH", "COPY", "COPY_DATABASE", "EXPORT", "LOAD", "SET", "PRAGMA", "UNKNOWN"}
# How long opening a console waits for a DuckDB file that a writer holds: a sync holds the CDC state for
# its comparison and its commit (milliseconds to seconds), an eval its results for one insert.
SNAPSHOT_WAIT_S = 5.0
_EXPLAIN = re.compile(r"^\s*explain\s+(analyze\s+)?(\([^)]*\)\s*)?", re.IGNORECASE)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LEADING_COMMENTS = re.compile(r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*", re.DOTALL)


@dataclass(frozen=True)
class SqlLimits:
    """What one console's statements may take: ``timeout_s`` per statement, ``memory_bytes`` of DuckDB
    memory, spilling to ``temp_dir`` (None: no spilling; a statement over the memory fails in one line)."""

    timeout_s: float = Limits.sql_timeout_s
    memory_bytes: int = Limits.sql_memory_bytes
    temp_dir: Path | None = None

    def __post_init__(self) -> None:
        if not self.timeout_s > 0 or not self.memory_bytes > 0:
            raise BadInputError(f"SQL limits must be positive (timeout {self.timeout_s!r} s, "
                                f"memory {self.memory_bytes!r} bytes)")

    def duckdb_config(self) -> dict[str, Any]:
        """The DuckDB settings these limits make (given with the sandbox, before ``lock_configuration``)."""
        return {"memory_limit": f"{int(self.memory_bytes)}B",
                "temp_directory": str(self.temp_dir) if self.temp_dir is not None else ""}


def sql_limits(limits: Limits, data_dir: Path | None, timeout_s: float | None = None,
               memory_bytes: int | None = None) -> SqlLimits:
    """A project's SQL limits: its ``Limits.sql_timeout_s`` / ``sql_memory_bytes`` unless the caller gives
    others (a command's flags), spilling under ``<data_dir>/sql-tmp`` (None: no spilling)."""
    return SqlLimits(timeout_s=limits.sql_timeout_s if timeout_s is None else timeout_s,
                     memory_bytes=limits.sql_memory_bytes if memory_bytes is None else memory_bytes,
                     temp_dir=Path(data_dir) / SQL_TEMP_DIR if data_dir is not None else None)


@dataclass(frozen=True)
class DuckDBFileViews:
    """Tables of a DuckDB file that the console shows as views of the same names, read into memory when
    the console opens (a snapshot: the file is open for the read only)."""

    path: Path
    tables: tuple[str, ...]
    what: str  # how messages name it: "the CDC state"
    hint: str  # what a query on a missing view is told: where the rows come from
    schema_sql: str | None = None  # DDL of the tables: empty views when the file does not exist yet


def cdc_state_views(data_dir: Path) -> DuckDBFileViews:
    """The project's CDC state (``<data dir>/cdc.duckdb``) as the views ``cdc_sources`` and ``cdc_items``."""
    from synthex_resources.cdc_state import CDC_FILE, SCHEMA

    return DuckDBFileViews(Path(data_dir) / CDC_FILE, CDC_TABLES, "the CDC state",
                           "run `synthex sync` first", schema_sql=SCHEMA)


def eval_results_views(path: Path) -> DuckDBFileViews:
    """The per-question eval results file as the view ``eval_results`` (none until an eval ran)."""
    return DuckDBFileViews(Path(path), (EVAL_RESULTS_TABLE,), "the eval results",
                           "run `synthex eval locomo ...` first")


def _held_by_writer(exc: Exception) -> bool:
    """A DuckDB file another connection holds: a writer process's lock, or this process's own connection
    made with another configuration (DuckDB keeps one instance per file and process)."""
    text = str(exc).lower()
    return "lock" in text or "different configuration" in text


def read_duckdb_tables(source: DuckDBFileViews, wait_s: float = SNAPSHOT_WAIT_S) -> dict[str, pa.Table]:
    """The tables of ``source`` present in its file, read whole into Arrow through a read-only connection
    that is closed before returning. A read-only connection still takes DuckDB's file lock (shared: a
    writer cannot open the file meanwhile), which is why nothing keeps it open. Raises ``FileBusyError``
    when a writer held the file for ``wait_s``, SynthexError when the file is not a DuckDB database."""
    import duckdb

    path = source.path
    deadline = time.monotonic() + wait_s
    delay = 0.02
    while True:
        try:
            conn = duckdb.connect(str(path), read_only=True)
            break
        except (duckdb.IOException, duckdb.ConnectionException) as exc:
            if not _held_by_writer(exc):
                raise SynthexError(f"{path}: cannot read {source.what} ({one_line(exc)})") from None
            if time.monotonic() > deadline:
                raise FileBusyError(f"{path}: {source.what} was being written by another process for "
                                    f"{wait_s:.0f} s (a sync or an eval): try again") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
        except duckdb.Error as exc:
            raise SynthexError(f"{path}: cannot read {source.what} ({one_line(exc)})") from None
    try:
        present = {r[0] for r in conn.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'")
                   .fetchall()}
        return {t: _fetch_arrow(conn.sql(f"SELECT * FROM {quote_identifier(t)}")) for t in source.tables
                if t in present}
    finally:
        conn.close()


def _empty_tables(source: DuckDBFileViews) -> dict[str, pa.Table]:
    """The tables of ``source`` with no rows, from its DDL (run on a throwaway in-memory database)."""
    if source.schema_sql is None:
        return {}
    import duckdb

    with duckdb.connect(":memory:") as conn:
        conn.execute(source.schema_sql)
        return {t: _fetch_arrow(conn.sql(f"SELECT * FROM {quote_identifier(t)}")) for t in source.tables}


def _fetch_arrow(relation: Any) -> pa.Table:
    """A DuckDB relation as an Arrow table (``to_arrow_table`` since duckdb 1.4, ``arrow`` before)."""
    fetch = getattr(relation, "to_arrow_table", None) or relation.arrow
    return fetch()


def _megabytes(size: float) -> str:
    return f"{size / (1024 * 1024):,.0f} MB"


def _kind(statement: Any) -> str:
    """A parsed statement's kind (``SELECT``, ``COPY``...); ``UNKNOWN`` for one the duckdb module has no
    name for (``UPDATE EXTENSIONS`` in duckdb 2.0: its enum lacks the value)."""
    try:
        return statement.type.name
    except ValueError:
        return "UNKNOWN"


class FileBusyError(SynthexError):
    """A DuckDB file stayed locked by a writer for longer than the console waits."""


class StatementLimitError(SynthexError):
    """A statement stopped by the console's limits (``SqlLimits``): its timeout, or its memory. ``bound``:
    the ``Limits`` field it hit (what a caller tells the user to raise)."""

    def __init__(self, message: str, bound: str) -> None:
        super().__init__(message)
        self.bound = bound


class StatementTimer:
    """Interrupts ``connection`` once ``timeout_s`` passes, unless ``finish`` came first. The interrupt is
    sent under the lock and only while the statement has not finished, and ``finish`` waits for the timer
    thread, so an interrupt never lands on a later statement of the same connection."""

    def __init__(self, connection: Any, timeout_s: float) -> None:
        self._connection = connection
        self._lock = threading.Lock()
        self._finished = False
        self.fired = False
        self._timer = threading.Timer(timeout_s, self._interrupt)
        self._timer.daemon = True

    def _interrupt(self) -> None:
        with self._lock:
            if not self._finished:
                self.fired = True
                self._connection.interrupt()

    def __enter__(self) -> StatementTimer:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._finished = True
        self._timer.cancel()
        self._timer.join()


def eval_results_path(data_dir: Path) -> Path:
    """Where a project's per-question eval results live: ``<project>/.synthex/evals/eval_results.duckdb``
    (beside the eval JSON files; written by ``synthex eval`` and the ``eval_locomo`` asset)."""
    return Path(data_dir) / "evals" / EVAL_RESULTS_FILE


def first_word(sql: str) -> str:
    """The statement's first keyword as the user wrote it, upper-cased, after any leading comments (a
    refusal names ``ATTACH``, not ``/*``)."""
    words = _LEADING_COMMENTS.sub("", sql, count=1).split(maxsplit=1)
    return words[0].upper() if words else "?"


def quote_identifier(name: str) -> str:
    return name if _IDENTIFIER.match(name) else '"' + name.replace('"', '""') + '"'


def one_line(exc: BaseException) -> str:
    """DuckDB's message on one line (without its ``LINE 1: ... ^^^`` context lines)."""
    lines = [ln.strip() for ln in str(exc).splitlines()]
    kept = [ln for ln in lines if ln and not ln.startswith("LINE ") and set(ln) != {"^"}]
    return " ".join(kept) or type(exc).__name__


class SqlConsole:
    """Sandboxed DuckDB views over a record store, the eval results and the CDC state;
    ``query(sql) -> pyarrow.Table``."""

    def __init__(self, store: RecordStore | str, eval_results: Path | None = None,
                 cdc_state: Path | None = None, snapshot_wait_s: float = SNAPSHOT_WAIT_S,
                 limits: SqlLimits | None = None) -> None:
        """``eval_results``: the eval results DuckDB file (``eval_results_path``); ``cdc_state``: the project's
        data dir, whose ``cdc.duckdb`` becomes ``cdc_sources`` / ``cdc_items`` (``cdc_state_views``);
        ``snapshot_wait_s``: how long to wait for a DuckDB file a writer holds (then its views are left out
        and a query naming them is told why); ``limits``: each statement's timeout, the memory and where it
        spills (``sql_limits``; default: ``Limits``' bounds, no spilling)."""
        import duckdb

        self.store = store if isinstance(store, RecordStore) else RecordStore(store)
        self.eval_results = Path(eval_results) if eval_results else None
        self.limits = limits or SqlLimits()
        if self.limits.temp_dir is not None:  # DuckDB makes the directory when it spills, not its parents
            try:
                self.limits.temp_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise SynthexError(f"{self.limits.temp_dir}: cannot make the SQL temp directory "
                                   f"({exc.strerror or exc})") from None
        self.con = duckdb.connect(":memory:", config={**SANDBOX, **self.limits.duckdb_config(), **LOCKED})
        self.views: dict[str, str] = {}  # view name -> where its rows come from
        self.unavailable: dict[str, str] = {}  # view name -> why it is missing (told to a query naming it)
        self.snapshot_wait_s = snapshot_wait_s
        files = [eval_results_views(self.eval_results)] if self.eval_results else []
        files += [cdc_state_views(cdc_state)] if cdc_state is not None else []
        if self.eval_results is None:
            self.unavailable[EVAL_RESULTS_TABLE] = "no eval results file given to this console"
        try:
            self._add_store_views()
            for source in files:
                self._add_file_views(source)
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

    def _add_file_views(self, source: DuckDBFileViews) -> None:
        """Views over the tables of a DuckDB file, copied into memory now (the file is not kept open)."""
        if not source.path.exists():
            tables = _empty_tables(source)
            where = f"(empty: no {source.path} yet)"
        else:
            try:
                tables = read_duckdb_tables(source, self.snapshot_wait_s)
            except FileBusyError as exc:
                for name in source.tables:
                    self.unavailable[name] = str(exc)
                return
            where = f"duckdb file {source.path} (a snapshot read when the console opened)"
        for name in source.tables:
            if name in tables:
                self._view(name, tables[name])
                self.views[name] = where
            else:
                self.unavailable[name] = f"no {name} in {source.path} yet: {source.hint}"

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
            kind = _kind(stmt)
            inner_kinds = [kind]
            if kind == "EXPLAIN":  # EXPLAIN ANALYZE runs what it explains: check that too
                try:
                    inner = self.con.extract_statements(_EXPLAIN.sub("", stmt.query, count=1))
                except duckdb.Error:
                    inner = []
                inner_kinds = [_kind(s) for s in inner]
                kind = ("EXPLAIN" if inner_kinds and set(inner_kinds) <= READ_STATEMENTS
                        else f"EXPLAIN {' '.join(inner_kinds) or '?'}")
            if kind not in READ_STATEMENTS:
                if EXTERNAL_STATEMENTS & set(inner_kinds):
                    # The word the user wrote (INSTALL is a LOAD statement, RESET a SET one): what they read.
                    shown = first_word(stmt.query) if kind in EXTERNAL_STATEMENTS else kind
                    raise BadInputError(f"synthex sql is read-only: {shown} statements are refused ({SANDBOX_REASON})")
                raise BadInputError(f"synthex sql is read-only: {kind} statements are refused (records are written "
                                    f"by `synthex run`, eval results by `synthex eval`)")
        return statements

    def query(self, sql: str) -> pa.Table:
        """The result of ``sql`` (one read statement) as an Arrow table."""
        import duckdb

        [statement] = self.check_read_only(sql)
        timer = StatementTimer(self.con, self.limits.timeout_s)
        try:
            with timer:
                relation = self.con.sql(statement.query)
                if relation is None:  # not a query (cannot happen for the statements let through)
                    return pa.table({})
                return _fetch_arrow(relation)
        except duckdb.InterruptException:
            if not timer.fired:
                raise
            raise StatementLimitError(f"the statement stopped after {self.limits.timeout_s:g} s "
                                      "(the sql_timeout_s bound)", "sql_timeout_s") from None
        except duckdb.OutOfMemoryException:
            spill = (f"spilling to {self.limits.temp_dir}" if self.limits.temp_dir is not None
                     else "with no temp directory to spill to")
            raise StatementLimitError(f"the statement needed more memory than the sql_memory_bytes bound of "
                                      f"{_megabytes(self.limits.memory_bytes)} ({spill})", "sql_memory_bytes") from None
        except duckdb.PermissionException as exc:  # the sandbox: a file, URL or extension out of reach
            raise BadInputError(f"{SANDBOX_REASON} ({one_line(exc)})") from None
        except duckdb.Error as exc:
            message = one_line(exc)
            for name, why in self.unavailable.items():
                if re.search(rf"\b{re.escape(name)}\b", message):
                    message += f" ({why})"
                    break
            raise BadInputError(f"bad SQL: {message}") from None

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> SqlConsole:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
