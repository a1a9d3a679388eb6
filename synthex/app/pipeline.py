"""``synthex.Pipeline``: the pipeline definition users write, with run / plan / get / search attached.

The methods delegate to one ``ProjectApp`` per pipeline object, created on first use, so a script
that defines a pipeline and calls ``run()`` then ``search()`` reuses one store and its caches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synthex.app.facade import ProjectApp
from synthex.core.definition import PipelineDefinition, Plan
from synthex.core.progress import ProgressReporter
from synthex.core.record import Record, Run


class Pipeline(PipelineDefinition):
    """``Pipeline(name, agent=)`` with ``.source/.transform/.aggregate/.fold/.merge/.output`` and
    ``.run/.plan/.get/.records/.stats/.runs/.search/.projection``."""

    _app: ProjectApp | None = None

    @property
    def app(self) -> ProjectApp:
        if self._app is None:
            self._app = ProjectApp(self)
        return self._app

    def open(self, embedder: Any = None, rerankers: Any = None) -> ProjectApp:
        """(Re)open this pipeline's app, e.g. with an embedder and rerankers shared by many small projects
        (evals)."""
        self.close()
        self._app = ProjectApp(self, embedder=embedder, rerankers=rerankers)
        return self._app

    def branch(self, name: str) -> Pipeline:
        """``pipeline.branch("x")``: a branch with run / diff / promote of its own (see PipelineDefinition)."""
        child = super().branch(name)
        child._app = None  # the branch opens its own app (and store handle) on first use
        return child  # type: ignore[return-value]

    def close(self) -> None:
        """Release the store and Dagster instance this pipeline opened (they reopen on demand)."""
        if self._app is not None:
            self._app.close()
            self._app = None

    def run(self, step: str | None = None, from_: str | None = None, full: bool = False, branch: str | None = None,
            progress: ProgressReporter | None = None, wait: bool = False, allow_deletions: bool = False,
            workers: int | None = None) -> Run:
        """``wait=True``: wait for another run on the same branch instead of refusing. ``allow_deletions``:
        apply the deletions the guard holds back (``synthex.core.deletions``: an export emptied or losing more than
        20 % of at least 10 items, a table returning no rows). ``workers`` (1..cores): a first ingest's
        records embedded and written by that many processes (``synthex run --workers``), the same records;
        None: the pipeline's ``ingest_workers`` (``Pipeline(..., ingest_workers=N)``, default 1)."""
        return self.app.run(step=step, from_=from_, full=full, branch=branch, progress=progress, wait=wait,
                            allow_deletions=allow_deletions, workers=workers)

    def plan(self, step: str | None = None, from_: str | None = None, full: bool = False,
             branch: str | None = None) -> Plan:
        return self.app.plan(step=step, from_=from_, full=full, branch=branch)

    def store(self) -> Any:
        return self.app.store

    def get(self, record_id: str, branch: str | None = None) -> Record | None:
        return self.app.get(record_id, branch)

    def records(self, step: str, branch: str | None = None) -> list[Record]:
        return self.app.records(step, branch)

    def stats(self, branch: str | None = None) -> dict[str, Any]:
        return self.app.stats(branch)

    def runs(self, limit: int = 20) -> list[Run]:
        return self.app.runs(limit)

    def search(self, query: str, step: str | list[str] | None = None, exact: bool = False, branch: str | None = None,
               k: int = 10, mode: str | None = None, periods: list[str] | None = None,
               metadata: dict[str, Any] | None = None, as_of: str | None = None, rerank: str | None = None,
               rerank_top_n: int | None = None) -> list[Any]:
        """``as_of``: when the question is asked ("last week" in the query is resolved against it). ``mode``:
        a search strategy's name (default: the search output's ``mode``, else hybrid). ``rerank``: a second
        stage (``"cross-encoder"``, offline; ``"llm"``) reorders the top ``rerank_top_n`` hits."""
        return self.app.search(query, step=step, exact=exact, branch=branch, k=k, mode=mode, periods=periods,
                               metadata=metadata, as_of=as_of, rerank=rerank, rerank_top_n=rerank_top_n)

    def projection(self, name: str, branch: str | None = None) -> Record | None:
        return self.app.projection(name, branch)

    def sync(self, source: str | None = None, branch: str | None = None, progress: ProgressReporter | None = None,
             allow_deletions: bool = False, workers: int | None = None) -> Any:
        """Fetch API pages, detect what the sources gained / changed / lost, run what that makes dirty.
        ``workers``: as ``run``'s (None: the pipeline's ``ingest_workers``)."""
        return self.app.sync(source=source, branch=branch, progress=progress, allow_deletions=allow_deletions,
                             workers=workers)

    def remember(self, text: str, *, id: str | None = None, created_at: str | None = None,
                 metadata: dict[str, Any] | None = None, source: str | None = None) -> dict[str, Any]:
        """Append to the stream source (memory after the next sync)."""
        return self.app.remember(text, id=id, created_at=created_at, metadata=metadata, source=source)

    def purge(self, record_ids: str | list[str] | None = None, *, match: str | None = None, regex: bool = False,
              dry_run: bool = False, cascade: bool = True) -> Any:
        """Remove records and everything made from them, on every branch, with no residue on disk
        (``dry_run``: only list them: ``.affected_records``, ``.cascade.steps``, ``.cascade.branches``)."""
        return self.app.purge(record_ids, match=match, regex=regex, dry_run=dry_run, cascade=cascade)

    def hooks_due(self, branches: list[str] | None = None) -> list[Any]:
        return self.app.hooks_due(branches)

    def deliver_hooks(self, branches: list[str] | None = None) -> Any:
        return self.app.deliver_hooks(branches)

    # -- the experiment loop (design doc §4.5, §8.4) ---------------------------------------------------
    def eval(self, benchmark: str, data: str | Path, **options: Any) -> Any:
        """Score this pipeline as defined in this process (main, or this branch with its overrides) on a
        registered benchmark: ``pipeline.eval("locomo", data="locomo10.json")``. The benchmark's runner comes
        from a plugin (``synthex.core.evaluators``; the evals plugin's returns an ``EvalResult``); ``options``
        are its own (``k``, ``limit``, ``run_id``, ...). An unknown name is one line naming the known ones."""
        from synthex.core.evaluators import get_evaluator

        return get_evaluator(benchmark)(self, data, **options)

    # -- branches (design doc §4.5) -------------------------------------------------------------------
    def export(self, path: str | Path, branch: str | None = None, format: str = "synthex") -> Any:
        """Write this project's records to ``path`` (``synthex export``: ``format`` "synthex" or "mcp-memory")."""
        from synthex.app.export import export_project

        return export_project(self.app, path, branch=branch, fmt=format)

    def diff(self) -> Any:
        """This branch against its parent: changed steps, records added / removed / changed, samples."""
        return self.app.branches.diff(self.branch_name)

    def promote(self) -> dict[str, int]:
        """Main takes this branch's definition and records (copied, no model call)."""
        return self.app.branches.promote(self.branch_name)
