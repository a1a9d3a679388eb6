"""Door parity (issue 19): the same operation through every door into one project gives the same answer.

Doors: ``cli`` (click's CliRunner on ``synthex.surfaces.cli.main``, ``--json``), ``python`` (the ``synthex.Pipeline``
that ``load_pipeline`` returns), ``dagster`` (``SearchResource``), ``mcp`` (one session of the official
SDK's stdio client against a ``synthex mcp`` subprocess) and ``sensor`` (a source sensor evaluated on the
project's Dagster instance, then the runs it requests, executed).

The project (built once per module): a ChatGPT export and a 2-row DuckDB table on main
(chats -> transcripts -> summaries, tickets -> ticket-digest), a branch ``exp`` that overrides
``summaries`` and inherits every other step, and a branch ``same`` that overrides nothing; main and
``exp`` have run.

Read operations (search in every mode on every branch, get, lineage, stats) are one parametrized test per
case x door, compared with the CLI's answer; the CLI's own cell checks that answer against the branch's
scope. Deletions are one test per door (`synthex sync` / `synthex run`, ``Pipeline.sync`` / ``.run``, the
sensor), each on the project as built: a row deleted from the table must be deleted through every door
(the memory then equals a fresh build of the table as it now is), and an emptied export must be refused
by every door in the same one line, deleting nothing.

Doors that do not offer an operation are listed in NOT_OFFERED (the matrix skips those cells).
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import cli, env_without_openai, go_offline

from synthex.core.demo.generate import generate
from synthex.core.errors import SynthexError
from synthex.core.project import load_pipeline
from synthex.surfaces.mcp_server import LINEAGE_EXCERPT_CHARS, excerpt

# One build per module: the suite runs `--dist loadfile` (pyproject), so its cells stay on one worker (under
# the default `load`, each worker that got some built its own). The mark says the same for `--dist loadgroup`.
pytestmark = pytest.mark.xdist_group("door-parity")

PIPELINE = '''
from synthex import Pipeline
from synthex.core.prompts import extract_transcript

pipeline = Pipeline("parity", agent="tester")
pipeline.source("chats", file="exports/conversations.json", format="chatgpt-export")
pipeline.source("tickets", table="tickets", dsn="duckdb:///crm.duckdb", pk="id", created_at="opened_at",
                text=["subject"])
pipeline.transform("transcripts", from_="chats", fn=extract_transcript)


def summarize(record):
    return "Summarize this conversation.\\n\\n" + record.content


def digest(records, period):
    tickets = "\\n\\n".join(r.content for r in records)
    return f"Month: {period}\\nWrite a short digest of these support tickets.\\n\\n{tickets}"


pipeline.transform("summaries", from_="transcripts", prompt=summarize)
pipeline.aggregate("ticket-digest", from_="tickets", period="month", prompt=digest)
pipeline.output("search", from_=["transcripts", "summaries", "tickets"], surface="search")
'''
EXP_BRANCH = '''
PARENT = "main"


def short_summary(record):
    return "In short: " + record.content[:80]


def overrides(pipeline):
    pipeline.transform("summaries", from_="transcripts", fn=short_summary)
'''
SAME_BRANCH = '''
PARENT = "main"


def overrides(pipeline):
    pass
'''
TICKETS = [(1, "printer on floor 3 is jammed", "2023-10-02 09:00:00"),
           (2, "vpn drops every hour", "2023-10-05 10:00:00")]
DELETED_TICKET = 2
BRANCHES = ("main", "exp", "same")  # main; a branch overriding one step; a branch overriding none
QUERY = "slow Postgres queries and a jammed printer"  # hits chats and tickets, at several steps
K = 5


def search_modes() -> tuple[str, ...]:
    """The search modes: the names of the strategies' registry, which every door lists its modes from."""
    from synthex_resources.search.strategies.registry import load_search_strategies

    return tuple(load_search_strategies().names())


def write_project(root: Path, tickets: list[tuple[int, str, str]] = TICKETS) -> Path:
    root.mkdir(parents=True)
    (root / "pipeline.py").write_text(textwrap.dedent(PIPELINE))
    (root / "exports").mkdir()
    # Four conversations on four different topics, over two months.
    (root / "exports" / "conversations.json").write_text(json.dumps(generate(conversations=4, months=2, seed=1)))
    with duckdb.connect(str(root / "crm.duckdb")) as db:
        db.execute("CREATE TABLE tickets (id INTEGER, subject VARCHAR, opened_at TIMESTAMP)")
        db.executemany("INSERT INTO tickets VALUES (?, ?, ?)", tickets)
    (root / "branches").mkdir()
    (root / "branches" / "exp.py").write_text(EXP_BRANCH)
    (root / "branches" / "same.py").write_text(SAME_BRANCH)
    return root


def build(root: Path, warm: bool = True) -> None:
    """Main through a sync (so the sources' CDC state is committed, as after any live use), then ``exp``;
    with ``warm``, one search per branch, so what a first search creates exists before doors read at once."""
    pipe = load_pipeline(root)
    try:
        assert pipe.sync().run.status == "completed"
        assert pipe.run(branch="exp").status == "completed"
        for branch in BRANCHES if warm else ():
            assert pipe.search(QUERY, branch=branch, k=1)
    finally:
        pipe.close()


Memory = dict[str, dict[str, list[str]]]


def memory(root: Path) -> Memory:
    """branch -> step -> the ids of the records that branch reads, sorted (ids are content addresses)."""
    pipe = load_pipeline(root)
    try:
        return {b: {s: sorted(r.id for r in pipe.records(s, branch=b)) for s in pipe.order()} for b in BRANCHES}
    finally:
        pipe.close()


@pytest.fixture(scope="module")
def offline_module() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:  # module fixtures run before the autouse offline_env
        go_offline(mp)
        yield


@dataclass
class Built:
    root: Path  # the project the read cases ask (a copy of ``home``)
    home: Path  # where the project was built; the deletion tests work here (see restored)
    pristine: Path  # ``home`` as built
    memory: Memory
    ids: dict[str, str]  # named records the read cases ask for

    def restored(self) -> Path:
        """``home`` as built, for a test that changes it. Always at the same path: the CDC state of a file
        source is keyed by the file's absolute path, so a copy elsewhere would see every item as new."""
        shutil.rmtree(self.home)
        shutil.copytree(self.pristine, self.home, symlinks=True)
        return self.home


@pytest.fixture(scope="module")
def built(tmp_path_factory, offline_module) -> Built:
    base = tmp_path_factory.mktemp("parity")
    home = write_project(base / "proj")
    build(home)
    pristine = shutil.copytree(home, base / "pristine", symlinks=True)
    root = shutil.copytree(home, base / "readers" / "proj", symlinks=True)
    pipe = load_pipeline(root)
    try:
        def first(step: str, branch: str = "main") -> str:
            return sorted(r.id for r in pipe.records(step, branch=branch))[0]

        ids = {"summary@main": first("summaries"), "summary@exp": first("summaries", "exp"),
               "transcript": first("transcripts"), "ticket": first("tickets"), "digest": first("ticket-digest")}
        assert ids["summary@main"] != ids["summary@exp"]  # the override made records of its own
    finally:
        pipe.close()
    return Built(root, home, pristine, memory(root), ids)


# -- read operations -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    op: str  # search | get | lineage | stats
    name: str
    args: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def id(self) -> str:
        return f"{self.op}-{self.name}"


# ``record``: a key of Built.ids; ``prefix``: look it up by its first 8 characters (what search prints).
READ_CASES = tuple(
    [Case("search", f"{mode}-on-{branch}", {"mode": mode, "branch": branch}) for mode in search_modes()
     for branch in BRANCHES]
    + [Case("get", "summary-on-main", {"record": "summary@main", "branch": "main"}),
       Case("get", "own-summary-on-exp-by-prefix", {"record": "summary@exp", "branch": "exp", "prefix": True}),
       Case("get", "inherited-transcript-on-exp", {"record": "transcript", "branch": "exp"}),
       Case("get", "inherited-transcript-on-same-by-prefix", {"record": "transcript", "branch": "same", "prefix": True}),
       Case("get", "ticket-any-branch", {"record": "ticket", "branch": None}),
       Case("lineage", "own-summary-on-exp", {"record": "summary@exp", "branch": "exp"}),
       Case("lineage", "summary-any-branch", {"record": "summary@main", "branch": None}),
       Case("lineage", "inherited-digest-on-same", {"record": "digest", "branch": "same"})]
    + [Case("stats", branch, {"branch": branch}) for branch in BRANCHES])

class Refused(Exception):
    """A door refused a case (an error line, a tool error, a non-zero exit)."""


def hits(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Hits as (id, step, branch, period, score): ids and order, which branch's row served each, and the
    score to 4 decimals (every door rounds it to 6 first, as the CLI and MCP print it)."""
    return [(h["id"], h["step"], h["branch"], h["period"], round(round(h["score"], 6), 4)) for h in rows]


def plain(data: Any) -> Any:
    """As JSON carries it (what the CLI prints and the MCP client receives)."""
    return json.loads(json.dumps(data, default=str))


def lineage_tree(node: dict[str, Any]) -> dict[str, Any]:
    """A lineage tree with each node's content cut as the MCP tool cuts it (it returns excerpts)."""
    return {"id": node["id"], "step": node["step"], "content": excerpt(node["content"], LINEAGE_EXCERPT_CHARS),
            "sources": [lineage_tree(child) for child in node["sources"]]}


def record_key(built: Built, args: dict[str, Any]) -> str:
    rid = built.ids[args["record"]]
    return rid[:8] if args.get("prefix") else rid


class Door:
    """A way into the project's memory. ``offers``: the read operations it has, a method each taking the
    case's args; ``answer`` gives its normalized answer or raises Refused."""

    offers: frozenset[str] = frozenset()

    def __init__(self, built: Built, workdir: Path) -> None:
        self.built = built

    def answer(self, case: Case) -> Any:
        return getattr(self, case.op)(**case.args)

    def close(self) -> None:
        """Release what the door opened (at the end of the module)."""


class CliDoor(Door):
    """`synthex ... --json` through click's CliRunner: every call loads the project anew, as a shell does."""

    offers = frozenset({"search", "get", "lineage", "stats"})

    def call(self, *args: str) -> Any:
        out = cli(*args, "--project", str(self.built.root), "--json", check=False)
        if out.returncode != 0:
            raise Refused(f"exit {out.returncode}: {out.stderr.strip()}")
        return json.loads(out.stdout)

    def search(self, mode: str, branch: str) -> Any:
        return hits(self.call("search", QUERY, "--mode", mode, "--branch", branch, "-k", str(K))["hits"])

    def get(self, record: str, branch: str | None, prefix: bool = False) -> Any:
        key = record_key(self.built, {"record": record, "prefix": prefix})
        return plain(self.call("get", key, *(["--branch", branch] if branch else [])))

    def lineage(self, record: str, branch: str | None, prefix: bool = False) -> Any:
        key = record_key(self.built, {"record": record, "prefix": prefix})
        return lineage_tree(self.call("lineage", key, *(["--branch", branch] if branch else [])))

    def stats(self, branch: str) -> Any:
        return self.call("stats", "--branch", branch)


class PythonDoor(Door):
    """One ``synthex.Pipeline`` for the module, as a script keeps one."""

    offers = frozenset({"search", "get", "lineage", "stats"})

    def __init__(self, built: Built, workdir: Path) -> None:
        super().__init__(built, workdir)
        self.pipe = load_pipeline(built.root)

    def close(self) -> None:
        self.pipe.close()

    def record(self, record: str, branch: str | None, prefix: bool) -> Any:
        rec = self.pipe.get(record_key(self.built, {"record": record, "prefix": prefix}), branch)
        if rec is None:
            raise Refused(f"no record {record} on branch {branch}")
        return rec

    def search(self, mode: str, branch: str) -> Any:
        return hits([h.to_hit_dict() for h in self.pipe.search(QUERY, branch=branch, mode=mode, k=K)])

    def get(self, record: str, branch: str | None, prefix: bool = False) -> Any:
        return plain(self.record(record, branch, prefix).to_dict())

    def lineage(self, record: str, branch: str | None, prefix: bool = False) -> Any:
        return lineage_tree(self.record(record, branch, prefix).lineage())

    def stats(self, branch: str) -> Any:
        return plain(self.pipe.stats(branch))


class DagsterDoor(Door):
    """``SearchResource`` on the project: built from its ``project_dir``, it resolves each branch's scope
    through ``PipelineDefinition.scope`` as the other doors do."""

    offers = frozenset({"search"})

    def __init__(self, built: Built, workdir: Path) -> None:
        from synthex_resources.resources import SearchResource

        super().__init__(built, workdir)
        self.resource = SearchResource(project_dir=str(built.root))

    def search(self, mode: str, branch: str) -> Any:
        return hits([h.to_hit_dict() for h in self.resource.search(QUERY, branch=branch, mode=mode, k=K)])


class McpDoor(Door):
    """One ``synthex mcp`` server per module, one client session: every MCP cell of the matrix is asked in
    it up front (the answers, or the tool's error line, are then read by the cells)."""

    offers = frozenset({"search", "get", "lineage"})

    def __init__(self, built: Built, workdir: Path) -> None:
        super().__init__(built, workdir)
        self.answers: dict[str, Any] = {}
        self.ask_all(workdir / "mcp-server.err")

    def request(self, case: Case) -> tuple[str, dict[str, Any]]:
        args = dict(case.args)
        if case.op == "search":
            return "search", {"query": QUERY, "mode": args["mode"], "branch": args["branch"], "k": K}
        request = {"id": record_key(self.built, args)}
        if args["branch"]:
            request["branch"] = args["branch"]
        return case.op, request

    @staticmethod
    def normalize(op: str, payload: dict[str, Any]) -> Any:
        if op == "search":
            return hits(payload["hits"])
        if op == "lineage":
            assert payload["nodes"] == payload["nodes_total"], "the MCP lineage cut the tree"
            return lineage_tree(payload["tree"])
        return plain(payload)

    def ask_all(self, errlog: Path) -> None:
        import anyio
        from mcp import ClientSession, StdioServerParameters, stdio_client

        params = StdioServerParameters(command=sys.executable,
                                       args=["-m", "synthex.surfaces.cli", "mcp", "--project", str(self.built.root)],
                                       env=env_without_openai())
        cases = [c for c in READ_CASES if c.op in self.offers]

        async def session() -> None:
            with errlog.open("w") as err:
                async with stdio_client(params, errlog=err) as (read, write):
                    async with ClientSession(read, write, read_timeout_seconds=120) as client:
                        await client.initialize()
                        for case in cases:
                            tool, request = self.request(case)
                            result = await client.call_tool(tool, request)
                            self.answers[case.id] = (Refused(" ".join(b.text for b in result.content))
                                                     if result.is_error else self.normalize(case.op,
                                                                                            result.structured_content))

        anyio.run(session)

    def answer(self, case: Case) -> Any:
        found = self.answers[case.id]
        if isinstance(found, Refused):
            raise found
        return found


# The doors of the read matrix; "cli" is the reference the others are compared with.
DOORS: dict[str, type[Door]] = {"cli": CliDoor, "python": PythonDoor, "dagster": DagsterDoor, "mcp": McpDoor}
# What a door does not offer today (reported, not tested): cells left out of the matrix.
NOT_OFFERED = {("dagster", "get"): "SearchResource only searches", ("dagster", "lineage"): "SearchResource only searches",
               ("dagster", "stats"): "SearchResource only searches", ("mcp", "stats"): "synthex mcp has no stats tool"}
assert all(op not in DOORS[door].offers for door, op in NOT_OFFERED)
READ_MATRIX = [pytest.param(case, door, id=f"{case.id}-{door}") for case in READ_CASES
               for door, kind in DOORS.items() if case.op in kind.offers]


@dataclass
class Doors:
    """The doors of one module, each opened on first use (a -k selection of cells opens only its doors)."""

    built: Built
    workdir: Path
    opened: dict[str, Door] = field(default_factory=dict)
    cli_answers: dict[str, Any] = field(default_factory=dict)

    def door(self, name: str) -> Door:
        if name not in self.opened:
            self.opened[name] = DOORS[name](self.built, self.workdir)
        return self.opened[name]

    def answer(self, door: str, case: Case) -> Any:
        """The door's answer to ``case`` (the CLI's, the reference, is asked once per case); Refused when
        the door refused it."""
        if door != "cli":
            got = self.ask(door, case)
        elif case.id in self.cli_answers:
            got = self.cli_answers[case.id]
        else:
            got = self.cli_answers[case.id] = self.ask(door, case)
        if isinstance(got, Refused):
            raise got
        return got

    def ask(self, door: str, case: Case) -> Any:
        try:
            return self.door(door).answer(case)
        except Refused as exc:
            return exc

    def close(self) -> None:
        for door in self.opened.values():
            door.close()


@pytest.fixture(scope="module")
def doors(built, tmp_path_factory) -> Iterator[Doors]:
    made = Doors(built, tmp_path_factory.mktemp("doors"))
    yield made
    made.close()


def check_reference(built: Built, case: Case, answer: Any) -> None:
    """The CLI's answer is what the branch's scope reads: hits and records come from the branch that serves
    their step, branch cases reach steps the branch inherits, counts are the built project's."""
    pipe = load_pipeline(built.root)
    branch = case.args.get("branch") or "main"
    scope = pipe.scope(branch)
    if case.op == "search":
        assert len(answer) == K, f"the CLI found {len(answer)} hits for {case.name}, expected {K}"
        for rid, step, served_by, _, _ in answer:
            assert served_by == scope.serves(step), f"hit {rid[:8]} of {step} read from {served_by} on {branch}"
        if branch != "main":
            assert any(not scope.owns(step) for _, step, _, _, _ in answer), "no hit from a step the branch inherits"
    elif case.op == "get":
        assert answer["id"] == built.ids[case.args["record"]]
        if case.args["branch"]:
            assert answer["branch"] == scope.serves(answer["step"])
    elif case.op == "lineage":
        assert answer["id"] == built.ids[case.args["record"]]
        leaves, stack = [], [answer]
        while stack:
            node = stack.pop()
            stack.extend(node["sources"])
            leaves += [node["step"]] if not node["sources"] else []
        assert leaves and set(leaves) <= set(pipe.leaf_steps()), f"lineage stops at {leaves}, not at sources"
    else:
        counts = {s: len(ids) for s, ids in built.memory[branch].items()}
        assert {s: v["records"] for s, v in answer["steps"].items()} == counts
        assert {s: v["served_by"] for s, v in answer["steps"].items()} == {s: scope.serves(s) for s in pipe.steps}


@pytest.mark.parametrize(("case", "door"), READ_MATRIX)
def test_read_parity(case: Case, door: str, doors: Doors) -> None:
    try:
        reference = doors.answer("cli", case)
    except Refused as exc:
        pytest.fail(f"the CLI (the reference door) refused {case.id}: {exc}")
    if door == "cli":
        check_reference(doors.built, case, reference)
        return
    try:
        got = doors.answer(door, case)
    except Refused as exc:
        pytest.fail(f"door {door} refused {case.id}: {exc}")
    assert got == reference, f"door {door} differs from the CLI on {case.id}"


# -- deletions: a row deleted from a table, an export emptied ------------------------------------------
@dataclass
class SyncOutcome:
    """What a door said when asked to bring memory up to date: ``failed`` when it refused or a run
    failed; ``lines``: its one-line messages (the error line; for the sensor its skip message, tick log
    lines and failed runs' errors)."""

    failed: bool
    lines: list[str]


def cli_sync(root: Path, command: str) -> SyncOutcome:
    out = cli(command, "--project", str(root), "--json", check=False)
    errors = [line.removeprefix("error: ") for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert "Traceback" not in out.stderr, out.stderr
    if out.returncode != 0:
        assert len(errors) == 1, f"`synthex {command}` failed with {len(errors)} error lines: {out.stderr}"
    return SyncOutcome(out.returncode != 0, errors)


def python_sync(root: Path, method: str) -> SyncOutcome:
    pipe = load_pipeline(root)
    try:
        getattr(pipe, method)()
    except SynthexError as exc:
        assert "\n" not in str(exc), str(exc)
        return SyncOutcome(True, [str(exc)])
    finally:
        pipe.close()
    return SyncOutcome(False, [])


def sensor_sync(root: Path, source: str) -> SyncOutcome:
    """The source's sensor evaluated on the project's own Dagster instance (not entered as a context
    manager: see tests/test_sensors.py), then what the daemon does with its result: register the
    partitions it asks for and execute the runs it requests."""
    from dagster import DagsterEventType, SensorResult, SkipReason, build_sensor_context

    from synthex_assets.definitions import build_definitions
    from synthex_assets.instance import open_instance
    from synthex_assets.launcher import console_config
    from synthex_assets.naming import job_name
    from synthex_assets.sensors import sensor_name

    pipe = load_pipeline(root)
    defs = build_definitions(pipe)
    instance = open_instance(pipe)
    lines: list[str] = []

    class TickLog(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    failed = False
    try:
        context = build_sensor_context(instance=instance, resources={"cdc": defs.resources["cdc"]}, definitions=defs)
        context.log.addHandler(TickLog())
        result = defs.get_sensor_def(sensor_name(source))(context)
        if isinstance(result, SkipReason):
            lines.append(result.skip_message or "")
        if isinstance(result, SensorResult):
            if result.skip_reason:
                lines.append(result.skip_reason.skip_message or "")
            for request in result.dynamic_partitions_requests or []:
                instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
            job = defs.resolve_job_def(job_name(pipe.name))
            for request in result.run_requests or []:
                run = job.execute_in_process(instance=instance, tags=request.tags, raise_on_error=False,
                                             asset_selection=request.asset_selection,
                                             run_config=console_config(verbose=False))
                failed = failed or not run.success
                lines += [e.event_specific_data.error.message for e in run.all_events
                          if e.event_type == DagsterEventType.STEP_FAILURE]
    finally:
        instance.dispose()
        pipe.close()
    return SyncOutcome(failed, [" ".join(line.split()) for line in lines if line])


SYNC_DOORS: dict[str, Callable[[Path, str], SyncOutcome]] = {
    "cli-sync": lambda root, source: cli_sync(root, "sync"),
    "cli-run": lambda root, source: cli_sync(root, "run"),
    "python-sync": lambda root, source: python_sync(root, "sync"),
    "python-run": lambda root, source: python_sync(root, "run"),
    "sensor": sensor_sync,
}


def delete_ticket(root: Path) -> None:
    with duckdb.connect(str(root / "crm.duckdb")) as db:
        db.execute("DELETE FROM tickets WHERE id = ?", [DELETED_TICKET])


def empty_export(root: Path) -> None:
    (root / "exports" / "conversations.json").write_text("[]")


@pytest.fixture(scope="module")
def fresh_memory_without_ticket(tmp_path_factory, offline_module) -> Memory:
    """The memory a fresh build of the project gives when the table holds only the rows that remain."""
    root = write_project(tmp_path_factory.mktemp("fresh") / "proj",
                         [t for t in TICKETS if t[0] != DELETED_TICKET])
    build(root, warm=False)
    return memory(root)


@pytest.mark.parametrize("door", list(SYNC_DOORS))
def test_a_row_deleted_from_a_table_is_deleted_through_every_door(door, built, fresh_memory_without_ticket):
    root = built.restored()
    delete_ticket(root)
    outcome = SYNC_DOORS[door](root, "tickets")
    assert not outcome.failed, f"door {door} did not propagate the deleted row: {outcome.lines}"
    after = memory(root)
    gone = set(built.memory["main"]["tickets"]) - set(after["main"]["tickets"])
    assert len(gone) == 1, f"door {door}: {len(gone)} ticket record(s) deleted, expected 1"
    assert after == fresh_memory_without_ticket, f"door {door}: the memory differs from a fresh build"


@pytest.fixture(scope="module")
def cli_shrink_refusal(built) -> str:
    """The line `synthex sync` refuses an emptied export with (the project's path made generic)."""
    root = built.restored()
    empty_export(root)
    outcome = cli_sync(root, "sync")
    assert outcome.failed and len(outcome.lines) == 1, f"`synthex sync` did not refuse an emptied export: {outcome}"
    assert memory(root) == built.memory, "`synthex sync` refused an emptied export but deleted records"
    return outcome.lines[0].replace(str(root), "<project>")


@pytest.mark.parametrize("door", list(SYNC_DOORS))
def test_an_emptied_export_is_refused_by_every_door_in_the_same_line(door, built, cli_shrink_refusal):
    assert "chats" in cli_shrink_refusal, f"the refusal does not name the source: {cli_shrink_refusal}"
    root = built.restored()
    empty_export(root)
    outcome = SYNC_DOORS[door](root, "chats")
    lines = [line.replace(str(root), "<project>") for line in outcome.lines]
    after = memory(root)
    deleted = {f"{b}/{s}": len(set(ids) - set(after[b][s])) for b in BRANCHES for s, ids in built.memory[b].items()
               if set(ids) - set(after[b][s])}
    assert not deleted, f"door {door} deleted records of an emptied export: {deleted}; it said {lines}"
    if door == "sensor":  # the sensor says it in its tick (skip message or log), or a requested run says it
        assert any(cli_shrink_refusal in line for line in lines), f"the sensor did not say {cli_shrink_refusal!r}: {lines}"
    else:
        assert outcome.failed and lines == [cli_shrink_refusal], f"door {door} said {lines}"
