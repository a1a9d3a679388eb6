"""`synthex mcp`: one project's memory over the Model Context Protocol (the official ``mcp`` SDK).

One ``ProjectApp`` is opened for the server's lifetime, so the record store, its search caches (FTS,
dense matrix) and the embedder stay warm between calls; it is closed when the server exits. Tools:
``search``, ``get``, ``lineage``, ``projection`` (read-only) and ``remember`` (appends to the project's
stream source, then syncs on one background thread, coalescing). Transport: stdio by default, or
streamable HTTP on 127.0.0.1 (``--http``). A user error (``SynthexError``) is a tool error with its one
line; bad arguments are one line too.

This module is in the CLI layer. ``mcp``, pydantic, LanceDB and Dagster are imported inside the
command, so ``synthex --help`` stays cheap. (No ``from __future__ import annotations`` here: the tool
functions are defined inside ``build_server`` and the SDK reads their annotations as objects.)
"""

import sys
import threading
from enum import Enum
from typing import TYPE_CHECKING, Any

import click

from synthex.core.errors import SynthexError
from synthex.surfaces.mcp_token import TOKEN_ENV, TOKEN_FILE

if TYPE_CHECKING:
    import socket

    from synthex.app.facade import ProjectApp
    from synthex.core.limits import Limits
    from synthex.core.record import Record
    from synthex.surfaces.mcp_token import BearerToken

DEFAULT_PORT = 8765
HOST = "127.0.0.1"  # never another interface (and over HTTP, a bearer token besides)
HTTP_GRACE = 30.0  # seconds a running sync may take to finish when an HTTP server is stopped
STDIO_GRACE = 1.0  # on stdio: the official client SIGTERMs 2 s after closing stdin, SIGKILLs 2 s later
EXCERPT_CHARS = 400  # content shown per search hit (get returns it whole)
LINEAGE_EXCERPT_CHARS = 200  # content shown per lineage node
LINEAGE_MAX_NODES = 500  # a world model's tree can reach every record; the rest is cut and said so
SOURCES_SHOWN = 10  # source ids listed per search hit


def one_line(text: object) -> str:
    """An error message as one line (an agent reads it; tracebacks stay out)."""
    return " ".join(str(text).split()) or "error"


def excerpt(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def record_dict(rec: "Record") -> dict[str, Any]:
    return rec.to_dict()


def hit_dict(hit: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": hit.id, "step": hit.step, "branch": hit.branch, "score": round(hit.score, 6),
                           "period": hit.period, "content": excerpt(hit.content, EXCERPT_CHARS),
                           "content_chars": len(hit.content)}
    if hit.created_at:
        out["created_at"] = hit.created_at
    if hit.source_ids:
        out["sources"] = hit.source_ids[:SOURCES_SHOWN]
        out["sources_total"] = len(hit.source_ids)
    if hit.collapsed:
        out["collapsed"] = len(hit.collapsed)
    if getattr(hit, "via", None):  # a leaf the search drilled down to: the searched records it was reached through
        out["via"] = [v.to_dict() for v in hit.via]
    return out


def trim_lineage(tree: dict[str, Any], max_nodes: int = LINEAGE_MAX_NODES) -> tuple[dict[str, Any], int, int]:
    """The tree of ``Record.lineage()`` with excerpts, breadth-first up to ``max_nodes`` nodes; a node
    whose sources were cut says how many (``sources_omitted``). Returns (tree, nodes kept, nodes total)."""
    total = 0
    stack = [tree]
    while stack:
        node = stack.pop()
        total += 1
        stack.extend(node["sources"])
    root = {"id": tree["id"], "step": tree["step"], "content": excerpt(tree["content"], LINEAGE_EXCERPT_CHARS),
            "sources": []}
    kept = 1
    queue = [(tree, root)]
    while queue:
        src, dst = queue.pop(0)
        for child in src["sources"]:
            if kept >= max_nodes:
                dst["sources_omitted"] = len(src["sources"]) - len(dst["sources"])
                break
            node = {"id": child["id"], "step": child["step"],
                    "content": excerpt(child["content"], LINEAGE_EXCERPT_CHARS), "sources": []}
            dst["sources"].append(node)
            kept += 1
            queue.append((child, node))
        else:
            continue
        # Budget spent: every node still queued keeps its sources unexpanded.
        for rest_src, rest_dst in queue:
            if rest_src["sources"]:
                rest_dst["sources_omitted"] = len(rest_src["sources"])
        break
    return root, kept, total


class SyncWorker:
    """Runs ``app.sync(source)`` on one background thread. Requests made while a sync runs coalesce into
    one more sync after it, so an agent remembering ten things in a row costs at most two syncs."""

    def __init__(self, app: "ProjectApp", branch: str | None = None, log: Any = None) -> None:
        self.app = app
        # A stream source is read by main (a branch inherits source steps from it); the server's own
        # branch, when another, then runs what it owns downstream.
        self.branches = [None] + ([branch] if branch and branch != app.pipeline.branch_name else [])
        self.log = log or (lambda line: click.echo(line, err=True))
        self._cond = threading.Condition()
        self._pending: list[str | None] = []
        self._running = False
        self._stopped = False
        self._thread: threading.Thread | None = None
        self.completed = 0
        self.last_error: str | None = None

    def request(self, source: str | None) -> None:
        with self._cond:
            if self._stopped:
                raise SynthexError("the server is shutting down; `synthex run` will sync what was remembered")
            if source not in self._pending:
                self._pending.append(source)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="synthex-mcp-sync", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until nothing runs or is pending (tests, benchmarks)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._running and not self._pending, timeout)

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._stopped)
                if self._stopped:
                    return
                sources, self._pending = self._pending, []
                self._running = True
            error = None
            try:
                for source in ([None] if None in sources else sources):
                    for branch in self.branches:
                        self.app.sync(source=source, **({"branch": branch} if branch else {}))
            except SynthexError as exc:
                error = one_line(exc)
            except Exception as exc:  # noqa: BLE001 - the server keeps serving; the error is reported
                import traceback

                error = one_line(f"{type(exc).__name__}: {exc}")
                traceback.print_exc(file=sys.stderr)
            with self._cond:
                self._running = False
                self.completed += 1
                self.last_error = error
                self._cond.notify_all()
            if error:
                self.log(f"synthex mcp: sync failed: {error}")

    def stop(self, timeout: float = 120.0) -> int:
        """Let a running sync finish (up to ``timeout``); drop pending ones. Returns how many were dropped
        (what they would have synced is in the stream file already: the next start syncs it)."""
        with self._cond:
            self._stopped = True
            dropped = len(self._pending)
            self._pending = []
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return dropped

    def busy(self) -> bool:
        """A sync is still running (after ``stop``: it did not finish within the grace)."""
        with self._cond:
            return self._running

    def recover(self) -> None:
        """At start, on the worker thread: close the runs a dead process left "running" on the server's
        branches and resume with a whole sync (that is what they were doing); else sync the stream
        sources whose lines changed since their last completed sync (a sync this server's predecessor
        stopped before it finished, or requests it dropped). Nothing to resume costs one read of the
        streams and of the CDC state."""
        with self._cond:
            if self._thread is not None:
                return
            self._running = True  # wait_idle waits for the recovery too
            self._thread = threading.Thread(target=self._recover_then_loop, name="synthex-mcp-sync", daemon=True)
            self._thread.start()

    def _recover_then_loop(self) -> None:
        resume: list[str | None] = []
        try:
            for branch in self.branches:
                for run in self.app.close_abandoned_runs(branch, found_by="synthex mcp at start"):
                    self.log(f"synthex mcp: run {run.id} of branch {run.branch!r} was left running by a process "
                             "that died; marked failed, syncing to finish its work")
                    resume = [None]
            streams = self.app.pipeline.stream_sources()
            if not resume and streams:
                resume = list(self.app.unsynced_sources(streams))
                if resume:
                    self.log(f"synthex mcp: {', '.join(str(s) for s in resume)} changed since the last completed "
                             "sync; syncing")
        except Exception as exc:  # noqa: BLE001 - the server serves anyway; `synthex doctor` finds a stuck run
            self.log(f"synthex mcp: could not check for unfinished syncs: {one_line(exc)}")
        with self._cond:
            self._running = False
            for source in resume:
                if source not in self._pending and not self._stopped:
                    self._pending.append(source)
            self._cond.notify_all()
        self._loop()


def describe_project(app: "ProjectApp", branch: str) -> str:
    """Server instructions: what this memory holds, so an agent knows the steps and outputs to ask for."""
    pipe = app.pipeline
    steps = ", ".join(f"{name} ({pipe.steps[name].kind})" for name in pipe.order())
    projections = [o.name for o in pipe.outputs.values() if o.surface == "projection"]
    return (f"Synthex memory of pipeline {pipe.name!r} (branch {branch!r}). Records flow through steps, "
            f"from raw sources up to summaries: {steps}. Every record keeps its provenance (sources). "
            f"Use `search` to find records at any step (default steps: {', '.join(pipe.search_steps())}; "
            f"exact=True for verbatim text in {', '.join(pipe.leaf_steps()) or 'the source steps'}), `get` for "
            f"a whole record by id or 8-character prefix, `lineage` to drill down to the raw sources, "
            f"`projection` for the latest state of a projection output"
            + (f" ({', '.join(projections)})" if projections else "")
            + (", and `remember` to add what you learn to this memory (it is processed like any other data)."
               if pipe.stream_sources() else
               ". (`remember` needs a stream source, e.g. pipeline.source(\"inbox\", stream=\"inbox.jsonl\"); "
               "this pipeline has none.)"))


def _server_class() -> type:
    """The SDK's MCPServer, with user errors and bad arguments answered in one line."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError

    class SynthexMCP(MCPServer):
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            """User errors and bad arguments come back as one line (the SDK would say only
            "Error executing tool X" for the first and print pydantic's multi-line report for the second)."""
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                cause = exc.__cause__
                if isinstance(cause, SynthexError):
                    raise ToolError(one_line(cause)) from None
                if isinstance(cause, ValidationError):
                    problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                                         for err in cause.errors())
                    raise ToolError(one_line(f"invalid arguments for {name}: {problems}")) from None
                raise

        async def run_stdio_async(self) -> None:
            """The SDK's stdio transport (``stdio_server``) and server loop, with every line it cannot read
            answered (``MalformedLinesAnswered``) instead of dropped, so a client never waits on one."""
            from mcp.server.stdio import stdio_server

            lowlevel = self._lowlevel_server  # what the SDK's own run_stdio_async serves; no public accessor
            async with stdio_server() as (read_stream, write_stream):
                await lowlevel.run(MalformedLinesAnswered(read_stream, write_stream), write_stream,
                                   lowlevel.create_initialization_options())

    return SynthexMCP


class MalformedLinesAnswered:
    """The read stream of the SDK's stdio transport, answering the lines it could not read.

    ``stdio_server`` parses each line and, when that fails, puts the exception in the read stream,
    which the server loop logs at debug level and drops: the client of a line that was not JSON (or
    held a raw NUL) never got an answer and waited forever. Here each such item is answered on the
    write stream as JSON-RPC 2.0 says: -32700 "Parse error" (id null) for text that is not JSON,
    -32600 "Invalid Request" for JSON that is not a JSON-RPC message (under its id when it has a usable
    one), the parser's one line as ``data`` (never the line itself, up to ``mcp_request_bytes``). A
    blank line is no message and gets no answer. Everything else passes as it is, with the sender
    context the server reads (``last_context``)."""

    def __init__(self, inner: Any, write_stream: Any) -> None:
        self._inner = inner
        self._write = write_stream
        self.answered = 0

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            reply = malformed_line_reply(item)
            if reply is not None:
                from mcp.shared.message import SessionMessage

                await self._write.send(SessionMessage(reply))
                self.answered += 1

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> "MalformedLinesAnswered":
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> "MalformedLinesAnswered":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def malformed_line_reply(error: Exception) -> Any:
    """The JSON-RPC error answering a line the stdio transport could not read (``error``: what parsing
    it raised), or None for a blank line."""
    from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
    from pydantic import ValidationError

    problems = error.errors() if isinstance(error, ValidationError) else []
    first = problems[0] if problems else {}
    line = first.get("input")
    if first.get("type") == "json_invalid" and isinstance(line, str) and not line.strip():
        return None
    if problems and first.get("type") != "json_invalid":
        found = line.get("id") if isinstance(line, dict) else None
        request_id = found if isinstance(found, str | int) and not isinstance(found, bool) else None
        return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(
            code=INVALID_REQUEST, message="Invalid Request",
            data="not a JSON-RPC 2.0 message (a request needs jsonrpc \"2.0\", a method and, to be answered, an id)"))
    detail = str(first.get("msg", "")).removeprefix("Invalid JSON: ") if problems else f"{type(error).__name__}: {error}"
    return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(
        code=PARSE_ERROR, message="Parse error", data=one_line(f"the request line is not JSON ({detail})")))


def build_server(app: "ProjectApp", branch: str, sync: SyncWorker, token: "BearerToken | None" = None,
                 url: str | None = None) -> Any:
    """The MCPServer with the five tools over ``app`` (``branch``: the default branch of every tool). With
    ``token`` (HTTP), every request must carry it as a bearer token: the SDK's own token verification
    (``TokenVerifier``) answers a missing or wrong one with 401 before any tool or session is reached."""
    pipe = app.pipeline
    auth: dict[str, Any] = {}
    if token is not None:
        from mcp.server.auth.settings import AuthSettings

        # The server is its own issuer (the token is generated into the project); no OAuth routes or
        # resource metadata are served, so the URLs only fill the settings' required fields.
        auth = {"token_verifier": StaticTokenVerifier(token),
                "auth": AuthSettings(issuer_url=url or f"http://{HOST}", resource_server_url=None)}
    server = _server_class()("synthex", title=f"Synthex memory: {pipe.name}",
                             instructions=describe_project(app, branch), log_level="WARNING", **auth)
    _add_read_tools(server, app, branch)
    _add_remember_tool(server, app, sync)
    return server


class StaticTokenVerifier:
    """The SDK's ``TokenVerifier`` protocol over the one token of this server: accepted (as an access token
    of client ``synthex-mcp``) when it matches in constant time, else None (the SDK answers 401)."""

    CLIENT_ID = "synthex-mcp"

    def __init__(self, token: "BearerToken") -> None:
        self._token = token

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        if not self._token.matches(token):
            return None
        return AccessToken(token=token, client_id=self.CLIENT_ID, scopes=[])


def _add_read_tools(server: Any, app: "ProjectApp", branch: str) -> None:
    """search, get, lineage and projection: read-only tools over ``app`` (``branch``: their default)."""
    from typing import Annotated, Literal

    from mcp.types import ToolAnnotations
    from pydantic import Field

    from synthex_resources.search.rerankers import TOP_N_MAX

    pipe = app.pipeline
    step_names = ", ".join(pipe.order())
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)

    def on(branch_arg: str | None) -> str:
        return branch_arg or branch

    # The search modes are the app's strategy registry (built-ins and installed plugins), as for the CLI.
    strategies = app.search_strategies
    for failure in strategies.failures:  # a plugin that did not load: said on stderr (stdout is the protocol)
        click.echo(f"warning: {failure}", err=True)
    SearchModes = Literal[tuple(strategies.names())]  # type: ignore[valid-type]
    Rerankers = Literal[tuple(app.rerankers.names())]  # type: ignore[valid-type]
    default_mode = pipe.search_mode()  # the search output's mode=, else hybrid (StrategyRegistry.resolve)
    Branch = Annotated[str | None, Field(description=f"Branch to read (default: {branch!r}, the server's branch).")]
    RecordId = Annotated[str, Field(description="A record id, or a unique prefix of it (the 8 characters search "
                                                "hits and lineage nodes start with).", min_length=1)]

    @server.tool(annotations=read_only, description=(
        "Search this memory and return the best-matching records (hits), best first. Each hit has the "
        f"record id, its step, score, period (YYYY-MM), a content excerpt (first {EXCERPT_CHARS} characters; "
        "`get` returns the whole record) and the ids of the records it was made from (`lineage` drills "
        "down). A hit the search drilled down to (a conversation or turn found through the summaries or "
        "aggregates that stand for it) names those records, with their step, in `via`. Name a high step "
        "(summaries, reflections) to rank its own records for themes; the source steps with exact=True for "
        "verbatim text."))
    def search(
        query: Annotated[str, Field(description="What to look for (words, a question, or with exact=True a "
                                                "verbatim substring).", min_length=1)],
        step: Annotated[str | list[str] | None, Field(description=(
            f"Step(s) to search; one or a list of: {step_names}. Default: the pipeline's search output steps "
            "(with exact=True: the source steps)."))] = None,
        branch: Branch = None,
        # Omitted: None, resolved by the app (the default depends on whether a step is named); typed as the
        # names alone so the schema enumerates them (pydantic does not validate a default).
        mode: Annotated[SearchModes, Field(description=(  # type: ignore[valid-type]
            f"Search strategy (default: {default_mode} when no step is named; a step named without a mode "
            f"ranks that step's own records, by hybrid if {default_mode} drills down). "
            f"{strategies.describe()}."))] = None,
        k: Annotated[int, Field(description="How many hits to return (at least 1).",
                                json_schema_extra={"minimum": 1})] = 10,
        exact: Annotated[bool, Field(description="Case-insensitive verbatim substring match instead of ranking.")]
            = False,
        rerank: Annotated[Rerankers | None, Field(description=(  # type: ignore[valid-type]
            f"A second stage that reorders the top hits (default: none). {app.rerankers.describe()}."))] = None,
        # Rerankers' own bound (checked again where a reranker is built), so the schema states it.
        rerank_top_n: Annotated[int | None, Field(description=(
            "How many first-stage hits the reranker reorders (default: that reranker's own, 20); "
            "only with rerank."), ge=2, le=TOP_N_MAX)] = None,
    ) -> dict[str, Any]:
        if not query.strip():
            raise SynthexError("the query is empty")
        hits = app.search(query, step=step, exact=exact, branch=on(branch), k=k, mode=mode, rerank=rerank,
                          rerank_top_n=rerank_top_n)
        return {"branch": on(branch), "mode": hits.mode, "hits": [hit_dict(h) for h in hits]} | (
            {"warnings": [str(w) for w in hits.warnings]} if hits.warnings else {})

    @server.tool(annotations=read_only, description=(
        "Get one whole record by id (or unique id prefix): content, step, branch, period, source ids, "
        "metadata (times, chat fields) and audit (model, prompt). Without branch: the record on any branch."))
    def get(id: RecordId, branch: Annotated[str | None, Field(  # noqa: A002 - the tool's parameter name
            description="Only the record as this branch reads it (default: any branch).")] = None) -> dict[str, Any]:
        rec = app.get(id, branch)
        if rec is None:
            raise SynthexError(f"no record with id {id!r}" + (f" on branch {branch!r}" if branch else ""))
        return record_dict(rec)

    @server.tool(annotations=read_only, description=(
        "The provenance tree of a record: {id, step, content excerpt, sources: [same shape]}, down to the "
        f"raw source records (leaves). Content is cut to {LINEAGE_EXCERPT_CHARS} characters per node and the "
        f"tree to {LINEAGE_MAX_NODES} nodes (breadth-first; cut nodes say sources_omitted); `get` an id for "
        "the whole text."))
    def lineage(id: RecordId, branch: Annotated[str | None, Field(  # noqa: A002
            description="Follow the record as this branch reads it (default: any branch).")] = None) -> dict[str, Any]:
        rec = app.get(id, branch)
        if rec is None:
            raise SynthexError(f"no record with id {id!r}" + (f" on branch {branch!r}" if branch else ""))
        tree, kept, total = trim_lineage(rec.lineage())
        return {"tree": tree, "nodes": kept, "nodes_total": total}

    projections = [o.name for o in pipe.outputs.values() if o.surface == "projection"]

    @server.tool(annotations=read_only, description=(
        "The latest record of a projection output: the pipeline's current state of mind (e.g. a world "
        "model folded over everything so far). Projections of this pipeline: "
        f"{', '.join(projections) or 'none'}."))
    def projection(
        name: Annotated[str, Field(description=f"Projection output name ({', '.join(projections) or 'none'}).")],
        branch: Branch = None,
    ) -> dict[str, Any]:
        rec = app.projection(name, on(branch))
        if rec is None:
            raise SynthexError(f"projection {name!r} has no record yet on branch {on(branch)!r}; "
                               "run the pipeline (`synthex run`)")
        return record_dict(rec)


def _add_remember_tool(server: Any, app: "ProjectApp", sync: SyncWorker) -> None:
    """remember: append to the project's stream source; the sync worker brings it into memory."""
    from typing import Annotated

    from mcp.types import ToolAnnotations
    from pydantic import Field

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                                             open_world_hint=False), description=(
        "Remember something: append it to this project's stream source, so it flows through the pipeline "
        "(summaries, reflections, search) like any other data. Returns at once with the item's id and the "
        "record_id its source record will have; the pipeline runs in the background, and `search` finds "
        "it when that run is done (usually seconds)."))
    def remember(
        text: Annotated[str, Field(description="What to remember, in plain words.", min_length=1)],
        id: Annotated[str | None, Field(description=(  # noqa: A002
            "Your own id for this item (remembering the same id again replaces it); default: a new one."))] = None,
        created_at: Annotated[str | None, Field(description="When it happened, ISO-8601 (default: now).")] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="Extra fields kept on the record.")] = None,
    ) -> dict[str, Any]:
        out = app.remember(text, id=id, created_at=created_at, metadata=metadata)
        sync.request(out.get("source"))
        result = {"id": out["id"], "record_id": out.get("record_id"), "source": out.get("source"),
                  "status": str(out["status"])}
        if out.get("warnings"):  # e.g. a half line a dead writer left was ended first
            result["warnings"] = out["warnings"]
        if sync.last_error:
            result["last_sync_error"] = sync.last_error
        return result


def warm_up(app: "ProjectApp", branch: str) -> None:
    """Open LanceDB, the FTS index, the dense matrix and the embedder before the first call needs them;
    with a stream source, import Dagster too, which the first `remember`'s sync would otherwise wait for."""
    try:
        app.search("warm up", branch=branch, k=1)
    except Exception:  # noqa: BLE001 - an empty or never-run project: the first real call says what is wrong
        pass
    if app.pipeline.stream_sources():
        import synthex_assets.launcher  # noqa: F401


def bind(port: int) -> "socket.socket":
    import socket

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise click.ClickException(f"cannot listen on {HOST}:{port} ({exc.strerror or exc}); "
                                   "pick another port with --port") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


class BoundedStdin:
    """Bounds each stdio request to ``limit`` bytes (``Limits.mcp_request_bytes``) before the SDK sees it.

    The SDK's stdio transport reads fd 0 a whole line at a time, however long, and parses it: a 50 MB
    ``remember`` cost the server 330 MB before the tool refused it. So fd 0 becomes the read end of a
    pipe this pump feeds from the client's real stdin (kept on a private, non-inherited descriptor):
    lines within the bound pass as they are; a longer one is drained in 1 MB chunks, never held, and
    replaced by a request of the same id whose method names the problem, which the SDK answers with a
    JSON-RPC error ("Method not found", data = that line), so the client gets an answer, not a hang. A
    notification (no id) over the bound is dropped. The SDK still claims fd 0 as usual (public API only).
    """

    HEAD = 4096  # bytes of an oversized request kept to find its id (clients put it first or last)
    ID_CHARS = 2048  # the longest string id an oversized request is answered under (within HEAD)

    def __init__(self, limit: int, log: Any = None) -> None:
        self.limit = limit
        self.log = log or (lambda line: click.echo(line, err=True))
        self.refused = 0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        import os

        wire = os.dup(0)  # non-inheritable: children never read the client's bytes
        read_end, feed = os.pipe()
        os.dup2(read_end, 0)
        os.close(read_end)
        self._thread = threading.Thread(target=self._pump, args=(wire, feed), name="synthex-mcp-stdin", daemon=True)
        self._thread.start()

    def _pump(self, wire_fd: int, feed_fd: int) -> None:
        import os

        with os.fdopen(wire_fd, "rb") as wire, os.fdopen(feed_fd, "wb") as feed:
            try:
                while line := wire.readline(self.limit + 1):
                    if len(line) > self.limit and not (len(line) == self.limit + 1 and line.endswith(b"\n")):
                        line = self._refusal(line, wire)
                    if line:
                        feed.write(line)
                        feed.flush()
            except (BrokenPipeError, OSError):
                pass  # the transport is gone: the server is stopping

    def _refusal(self, start: bytes, wire: Any) -> bytes:
        import json
        import re

        from synthex.core.limits import Limits

        head, tail, size = start[:self.HEAD], start[-self.HEAD:], len(start)
        chunk = start
        while not chunk.endswith(b"\n"):
            chunk = wire.readline(1 << 20)
            if not chunk:
                break
            size += len(chunk)
            tail = (tail + chunk)[-self.HEAD:]
        self.refused += 1
        message = Limits(mcp_request_bytes=self.limit).over(
            "mcp_request_bytes", "synthex mcp: refused a request: it", size)
        self.log(message)
        # A string id of up to ID_CHARS characters (JSON-RPC sets no limit; one longer goes unanswered).
        id_pattern = rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,%d}"|-?\d{1,30})' % self.ID_CHARS
        params_at = head.find(b'"params"')
        found = re.search(id_pattern, head[:params_at] if params_at >= 0 else head)
        if found is None:  # the id after the params (JavaScript clients): the last one is the top level's
            found = next(reversed(list(re.finditer(id_pattern, tail.rstrip(b"\r\n")[-(self.ID_CHARS + 64):]))),
                         None)
        if found is None:
            return b""  # a notification, or no id to answer to
        request = {"jsonrpc": "2.0", "id": json.loads(found.group(1)), "method": message, "params": {}}
        return json.dumps(request).encode() + b"\n"


async def serve_stdio(server: Any, label: str) -> None:
    click.echo(f"synthex mcp: {label} on stdio", err=True)
    await server.run_stdio_async()  # returns at the end of input (the client went away)


def http_server(server: Any, limits: "Limits") -> Any:
    """uvicorn over the SDK's streamable-HTTP app: DNS-rebinding protection for the loopback host, request
    bodies over ``limits.mcp_request_bytes`` refused with 413 (by Content-Length before reading, else once
    the streamed body passes the bound: the SDK's ``RequestBodyLimitMiddleware``). Signals are the
    command's (``ServerStop``), not uvicorn's: uvicorn would restore the previous handlers and raise the
    signal again after its shutdown, which ends the process before a running sync is looked after."""
    import contextlib

    import uvicorn

    class Uvicorn(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Any:
            yield

    starlette_app = server.streamable_http_app(host=HOST, max_request_body_size=limits.mcp_request_bytes)
    # A client holding an event stream open must not keep the server from stopping.
    return Uvicorn(uvicorn.Config(starlette_app, log_level="warning", lifespan="on", timeout_graceful_shutdown=3))


async def serve_http(http: Any, sock: "socket.socket", announce_line: str) -> None:
    """Serve until ``http.should_exit`` (set by ``ServerStop`` on SIGTERM / Ctrl-C); uvicorn shuts down
    gracefully, then this returns."""
    import anyio

    async with anyio.create_task_group() as tg:

        async def announce() -> None:
            while not http.started and not http.should_exit:
                await anyio.sleep(0.02)
            if http.started:
                click.echo(announce_line, err=True)

        tg.start_soon(announce)
        await http.serve([sock])
        tg.cancel_scope.cancel()


class StopPhase(Enum):
    SERVING = "serving"
    WAITING = "waiting"  # for a running sync, up to the grace
    CLOSING = "closing"  # recording what did not finish, closing the app
    CLOSED = "closed"


class ServerStop:
    """How the server stops, whatever stops it (end of input, SIGTERM, SIGINT, a second signal): a running
    sync gets a bounded grace to finish; a run still executing after it is recorded as interrupted
    (failed: ``ProjectApp.interrupt_runs``), so no run stays "running"; then the app is closed. The next
    start (``synthex mcp``, ``synthex run`` / ``sync``) computes what it did not write.

    Signals: on stdio the SDK reads stdin on a thread that cancellation cannot interrupt, so a signal
    stops the server from its handler and leaves with ``os._exit``. Over HTTP the first signal stops
    uvicorn gracefully and the command then stops the server; a second one during the grace stops at
    once. SIGINT is installed explicitly, so a server started with SIGINT ignored (a background job of
    a script) still stops on it. The official stdio client closes stdin, SIGTERMs 2 s later and SIGKILLs
    2 s after that: the stdio grace (1 s) and the signal grace (``SIGNAL_GRACE``) leave time to record."""

    SIGNAL_GRACE = 0.8

    def __init__(self, app: "ProjectApp", sync: SyncWorker, sock: "socket.socket | None" = None,
                 http: Any = None) -> None:
        self.app = app
        self.sync = sync
        self.sock = sock
        self.http = http
        self.phase = StopPhase.SERVING
        self.signal_name = ""  # the signal that asked uvicorn to stop (HTTP)
        self.interrupted: list[str] = []  # ids of runs recorded as interrupted

    def install_signal_handlers(self) -> None:
        import signal

        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self.on_signal)

    def on_signal(self, signum: int, _frame: object) -> None:
        import os
        import signal

        name = signal.Signals(signum).name
        if self.phase in (StopPhase.CLOSING, StopPhase.CLOSED):
            return  # the main thread is finishing the stop already
        if self.http is not None and self.phase is StopPhase.SERVING and not self.http.should_exit:
            self.http.should_exit = True  # graceful: the command stops the server once uvicorn is down
            self.signal_name = name
            return
        # A second signal over HTTP means "now"; on stdio the client's SIGKILL follows within 2 s.
        self.stop(name, grace=0.0 if self.http is not None else self.SIGNAL_GRACE)
        sys.stderr.flush()
        os._exit(0)

    def stop(self, why: str, grace: float) -> None:
        """Give a running sync ``grace`` seconds, record what did not finish, close the app."""
        if self.phase in (StopPhase.CLOSING, StopPhase.CLOSED):
            return
        self.phase = StopPhase.WAITING
        if self.sync.busy():
            click.echo(f"synthex mcp: stopping ({why}): waiting up to {grace:g} s for the running sync"
                       + (" (Ctrl-C again to stop now)" if self.http is not None else ""), err=True)
        dropped = self.sync.stop(grace)
        self.phase = StopPhase.CLOSING
        if self.sync.busy():
            runs = self.app.interrupt_runs(f"interrupted: the MCP server stopped ({why}) before this sync "
                                           "finished; the next `synthex mcp`, `synthex run` or `synthex sync` "
                                           "computes what it did not write")
            self.interrupted = [r.id for r in runs]
            for run in runs:
                click.echo(f"synthex mcp: run {run.id} interrupted ({why}); recorded as failed, "
                           "the next start finishes its work", err=True)
        if dropped:
            click.echo("synthex mcp: stopped with remembered items not synced yet; the next start syncs them",
                       err=True)
        if self.sock is not None:
            self.sock.close()
        self.app.close()
        self.phase = StopPhase.CLOSED


@click.command("mcp")
@click.option("--project", "project", default=".", show_default=True, type=click.Path(file_okay=False),
              help="Project folder (holds pipeline.py).")
@click.option("--branch", default=None,
              help="Default branch of every tool (default: the current one, `synthex branch switch`; else main).")
@click.option("--http", "http", is_flag=True,
              help=f"Serve streamable HTTP on {HOST} instead of stdio; clients must send the bearer token "
                   f"(${TOKEN_ENV}, else .synthex/{TOKEN_FILE}, generated on first use).")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535),
              help="Port for --http (0: any free port; the URL is printed to stderr).")
@click.option("--show-token", is_flag=True, help="With --http: print the token itself (default: where it is).")
@click.option("--grace", type=click.FloatRange(0, 3600), default=None,
              help="Seconds a running sync may take to finish when the server stops before it is recorded as "
                   f"interrupted (default: {HTTP_GRACE:g} with --http; {STDIO_GRACE:g} on stdio, whose client "
                   "signals the server 2 s after closing).")
def mcp_command(project: str, branch: str | None, http: bool, port: int, show_token: bool,
                grace: float | None) -> None:
    """Serve this project's memory over the Model Context Protocol (stdio, or --http on 127.0.0.1).

    Tools: search, get, lineage, projection, remember. One project stays open for the server's
    lifetime, so searches after the first are warm. At start, a run a dead process left "running" is
    closed and its sync resumed; at stop, a running sync gets --grace seconds, else it is recorded as
    interrupted and the next start finishes it.
    """
    from synthex.core.project import current_branch, load_pipeline
    from synthex.surfaces.mcp_token import load_or_create_token

    pipe = load_pipeline(project)
    app = pipe.app  # type: ignore[attr-defined]
    branch = app.use_branch(branch or current_branch(pipe)).branch_name  # a missing branch: one line, now
    token = load_or_create_token(pipe.data_dir) if http else None  # a bad token: one line, before binding
    sock = bind(port) if http else None
    sync = SyncWorker(app, branch)
    label = f"serving {pipe.name!r} (branch {branch!r}, project {pipe.project_dir})"
    url = f"http://{HOST}:{sock.getsockname()[1]}/mcp" if sock is not None else None
    server = build_server(app, branch, sync, token=token, url=url)
    http_srv = http_server(server, pipe.limits) if sock is not None else None
    stopper = ServerStop(app, sync, sock, http_srv)
    stopper.install_signal_handlers()
    sync.recover()  # close runs a dead process left running, resume their sync; catch up on the streams
    threading.Thread(target=warm_up, args=(app, branch), name="synthex-mcp-warm-up", daemon=True).start()
    import anyio

    try:
        if http_srv is not None and token is not None:
            told = f"the token {token.value}" if show_token else \
                f"the token in {token.origin}" + (" (generated now, owner-only)" if token.created else "")
            anyio.run(serve_http, http_srv, sock, f"synthex mcp: {label} at {url} (streamable HTTP; clients send "
                                                 f"'Authorization: Bearer <token>' with {told}; Ctrl-C to stop)")
            stopper.stop(stopper.signal_name or "uvicorn stopped", grace=HTTP_GRACE if grace is None else grace)
        else:
            BoundedStdin(pipe.limits.mcp_request_bytes).start()
            anyio.run(serve_stdio, server, label)
            stopper.stop("end of input", grace=STDIO_GRACE if grace is None else grace)
    finally:
        stopper.stop("exit", grace=0)
    # Everything is closed. Leave without the interpreter's finalization: with the warm-up thread still
    # inside a native import (pyarrow, LanceDB) or the sync thread inside an interrupted run, it aborts
    # the process (SIGABRT, exit -6) after a clean stop.
    import os

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
