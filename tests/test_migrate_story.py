"""The README's migration story, end to end on the Letta fixture (issue 37): import a Letta agent and its
archival passages, search them as they were, add a Synthex architecture over the imported messages on a
branch (a key aggregate, one record per conversation), `synthex eval` both on a benchmark (its turns fed as
Letta messages through each branch's steps), promote; the imported records stay.

One project serves the story's steps (a module fixture: init, run, branch, run the branch); each test is one
step of the README and reads it, and only the last (promote) changes it. The commands are the CLI's (in this
process); the two runs are executed in-process (``RunEngine.IN_PROCESS``: the records a Dagster run leaves,
tests/test_in_process_runs.py; ``synthex run`` through Dagster on this project's shape is
tests/test_migrate_letta.py's), since a Dagster instance and run each were most of this module's time."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import cli, go_offline, load, locomo_conversation, write_json
from test_migrate_letta import AGENT_FILE_V2, PASSAGES

from synthex.app.facade import RunEngine
from synthex_resources.record_store import RECORDS, open_store

README = Path(__file__).resolve().parent.parent / "README.md"
MARK = "branches/agg.py overrides: "
IMPORTED_STEPS = ("letta", "letta_archival")  # the sources: what was imported, as it was


def readme_line(start: str) -> str:
    """The line of the README's migration section that starts with ``start``."""
    section = README.read_text(encoding="utf-8").split("\n## Migration in and out", 1)[1].split("\n## ", 1)[0]
    return next(line for line in section.splitlines() if line.startswith(start))


def readme_override() -> str:
    """branches/agg.py with the override the README's story shows (so the README cannot drift from this)."""
    call = readme_line("synthex branch create agg").split(MARK, 1)[1].strip()
    return f'PARENT = "main"\n\nfrom synthex.prompts import member_digest\n\n\ndef overrides(pipeline):\n    {call}\n'


def readme_eval(data: Path) -> list[str]:
    """The README's `synthex eval` line (its arguments, `--data` pointed at ``data``)."""
    args = shlex.split(readme_line("synthex eval ").split("#", 1)[0])[2:]
    return [str(data) if args[i - 1] == "--data" else a for i, a in enumerate(args)]


def search(project, query, *more):
    return json.loads(cli("search", query, "--json", *more, cwd=project).stdout)["hits"]


def run_in_process(project: Path, branch: str) -> None:
    pipe = load(project)
    try:
        assert pipe.app.run(branch=branch, engine=RunEngine.IN_PROCESS).status == "completed"
    finally:
        pipe.close()


def imported_ids(project: Path) -> set[str]:
    store = open_store(str(project / ".synthex" / "lancedb"))
    steps = ", ".join(f"'{s}'" for s in IMPORTED_STEPS)
    return {r["id"] for r in store.tables.read(RECORDS, f"branch = 'main' AND step IN ({steps})", ["id"])}


@dataclass
class Story:
    project: Path
    benchmark: Path
    imported: set[str]  # the imported records' ids after the first run
    searched: dict[tuple[str, ...], list[dict]] = field(default_factory=dict)

    def search(self, query: str, *more: str) -> list[dict]:
        """`synthex search` before the promote: one search per query and branch for all the tests (nothing but the
        promote changes the project's records, and the eval test checks that it left them as they were)."""
        key = (query, *more)
        if key not in self.searched:
            self.searched[key] = search(self.project, query, *more)
        return self.searched[key]


def benchmark_file(path: Path) -> Path:
    """One LoCoMo conversation (12 turns, 3 sessions) with a question per session's first turn."""
    conv, turns = locomo_conversation(tag="m")
    qa = [{"question": f"Who {topic}?", "answer": speaker, "evidence": [f"D{s}:{t}"], "category": 4}
          for s, t, speaker, topic in turns if t == 1]
    return write_json(path, [{"sample_id": "conv-m", "conversation": conv, "qa": qa}])


@pytest.fixture(scope="module")
def story(tmp_path_factory) -> Story:
    base = tmp_path_factory.mktemp("story")
    with pytest.MonkeyPatch.context() as mp:  # module fixtures run before the autouse offline_env
        go_offline(mp)
        (base / "sailor.af").write_text(json.dumps(AGENT_FILE_V2))
        (base / "archival.json").write_text(json.dumps(PASSAGES))
        cli("init", "sailor", "--from", "sailor.af", "--from", "archival.json", cwd=base)
        project = base / "sailor"
        run_in_process(project, "main")
        imported = imported_ids(project)
        cli("branch", "create", "agg", cwd=project)
        (project / "branches" / "agg.py").write_text(readme_override())
        run_in_process(project, "agg")
    return Story(project, benchmark_file(base / "locomo10.json"), imported)


def test_the_imported_agent_is_searched_as_it_was(story):
    hits = story.search("sailing")
    assert "I go sailing every Sunday" in [h["content"] for h in hits if h["step"] == "letta_messages"]
    assert {h["sources"][0] for h in hits} <= story.imported  # each searched record came from an imported one
    assert len(story.imported) == 9  # the agent file's 8 items and the passage


def test_the_branch_holds_one_record_per_conversation_and_main_is_untouched(story):
    diff = json.loads(cli("branch", "diff", "agg", "--json", cwd=story.project).stdout)
    assert diff["changed_steps"] == ["letta_messages"]
    threads = [h for h in story.search("sailing", "--branch", "agg") if h["step"] == "letta_messages"]
    assert len(threads) == 1 and "(conversation, " in threads[0]["content"]  # one record for the agent's conversation
    on_main = [h["content"] for h in story.search("sailing") if h["step"] == "letta_messages"]
    assert on_main and on_main != [threads[0]["content"]]


def test_eval_scores_both_branches_through_their_own_steps(story):
    args = readme_eval(story.benchmark)
    assert args[:1] == ["locomo"] and "main,agg" in args, args  # the README evaluates both branches
    out = json.loads(cli("eval", *args, "--json", "--project", story.project).stdout)
    by_branch = {r["branch"]: r for r in out["results"]}
    assert sorted(by_branch) == ["agg", "main"]
    for result in by_branch.values():  # real figures: the benchmark's turns went through each branch's steps
        assert result["n_questions"] == 3, result
        assert result["metrics"]["turn"]["recall_any@10"] > 0 and result["metrics"]["turn"]["mrr"] > 0, result
    workspace = story.project / ".synthex" / "evals" / "work" / "locomo" / "project" / "conv-m"
    store = open_store(str(workspace / ".synthex" / "lancedb"))

    def count(branch: str, step: str) -> int:
        return len(store.tables.read(RECORDS, f"branch = '{branch}' AND step = '{step}'", ["id"]))

    # main's migrated view kept the 12 turns (read as Letta messages); the branch's aggregate made one record
    # of the conversation; the archival source read none of them (it holds no turns).
    assert (count("main", "letta_messages"), count("agg", "letta_messages")) == (12, 1)
    assert (count("main", "letta"), count("main", "letta_archival")) == (12, 0)
    assert imported_ids(story.project) == story.imported  # the eval worked in its workspaces only


def test_the_python_door_points_the_same_sources(story, tmp_path):
    """``pipeline.eval`` (evals/pipeline_eval.py) moves a copy of the definition the CLI's eval builds from
    pipeline.py: on the branch and main alike, the Letta agent's source reads the turns as messages and the
    archival one none; the caller's definition keeps its own files."""
    from evals.pipeline_eval import workspace_definition

    pipe = load(story.project)
    try:
        branch = pipe.for_branch("agg")
        twin = workspace_definition(branch, story.benchmark, tmp_path, "locomo-turns")
        for node in (twin, twin.parent):
            sources = node.sources()
            assert {n: (s.format, s.turns_as.kind) for n, s in sources.items()} == {
                "letta": ("locomo-turns", "message"), "letta_archival": ("locomo-turns", None)}
            assert node.project_dir == tmp_path
        assert {n: (s.format, s.turns_as) for n, s in branch.sources().items()} == {
            "letta": ("letta-agent", None), "letta_archival": ("letta-passages", None)}
    finally:
        pipe.close()


def test_promote_keeps_the_imported_records(story):  # last: the only test that changes the project
    threads = [h for h in story.search("sailing", "--branch", "agg") if h["step"] == "letta_messages"]
    imported = {h["sources"][0] for h in story.search("sailing")}  # main's searched records came from these
    assert imported_ids(story.project) == story.imported  # as the first run left them
    cli("branch", "promote", "agg", cwd=story.project)
    story.searched.clear()
    after = search(story.project, "sailing")
    assert [h["id"] for h in after if h["step"] == "letta_messages"] == [threads[0]["id"]]
    assert imported <= {s for h in after for s in h["sources"]}  # the imported records stayed as they were
    assert imported_ids(story.project) == story.imported  # all of them, same ids


def test_a_benchmarks_turns_enter_one_source_per_system():
    """In an eval, the first source of each system whose format holds turns reads the benchmark's turns as
    that system's items; its other sources read none; a source of no migration format reads them plain."""
    from synthex.core.errors import BadInputError
    from synthex.core.importers import SourceItem
    from synthex.core.importers.migrate.turns import turns_plan

    plan = turns_plan(["letta-passages", "mem0", "mem0-history", "letta-agent", "jsonl"])
    assert [(p.system, p.kind) if p else None for p in plan] == [
        ("letta", None), ("mem0", "memory"), ("mem0", None), ("letta", "message"), None]
    turn = SourceItem(key="conv-0/D1:1", content="Ann: hi", created_at="2023-05-05T13:11:00Z",
                      metadata={"chat": {"message_id": "D1:1"}, "source": {"type": "locomo"}})
    [item] = plan[3].items([turn])
    assert (item.key, item.content, item.metadata["chat"]) == ("message:conv-0/D1:1", "Ann: hi", {"message_id": "D1:1"})
    assert item.metadata["source"] | {"raw": None} == {
        "type": "letta-agent", "system": "letta", "kind": "message", "original_id": "conv-0/D1:1",
        "key": "message:conv-0/D1:1", "scope": {}, "derived_from": [], "current": True, "raw": None}
    assert item.metadata["source"]["raw"] == {"type": "locomo"} and plan[0].items([turn]) == []
    with pytest.raises(BadInputError, match="no source of this pipeline holds conversation turns"):
        turns_plan(["mcp-memory", "letta-passages"])


def test_a_branchs_own_copy_of_a_source_reads_the_turns_as_its_parents(tmp_path):
    """A branch whose definition holds copies of its parent's source steps: each copy reads the turns as the
    parent's step of that name does (else the branch would see its Letta source changed and read nothing)."""
    import copy

    from evals.architectures import into_workspace
    from synthex import Pipeline

    main = Pipeline("copies", project_dir=tmp_path / "project")
    main.source("letta", file="sailor.af", format="letta-agent")
    main.source("letta_archival", file="archival.json", format="letta-passages")
    branch = copy.copy(main)
    branch.parent, branch.steps = main, {name: copy.copy(step) for name, step in main.steps.items()}
    into_workspace(branch, tmp_path / "locomo.json", tmp_path / "workspace", "locomo-turns")
    for node in (branch, main):
        assert {n: s.turns_as.kind for n, s in node.sources().items()} == {"letta": "message", "letta_archival": None}
