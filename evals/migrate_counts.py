"""The count table of docs/benchmarks.md ("Migration in"): per format, the items its file holds, the items
(source records) the import makes, and which of each item's fields are kept in its record's metadata
(``source.raw``) or dropped. ``python -m evals.migrate_counts`` over the test fixtures."""

from __future__ import annotations

import csv
import json
import sqlite3
import sys
import tempfile
from pathlib import Path

from synthex.core.importers import load_source

TESTS = Path(__file__).resolve().parent.parent / "tests"


def native_fields(objects: list[dict]) -> set[str]:
    return {k for o in objects for k in o}


def kept(items, kinds: tuple[str, ...]) -> set[str]:
    return {k for i in items if i.metadata["source"]["kind"] in kinds for k in (i.metadata["source"]["raw"] or {})}


def rows() -> list[tuple[str, int, int, set[str], set[str]]]:
    sys.path.insert(0, str(TESTS))
    from test_migrate_export import MCP_LINES
    from test_migrate_letta import AGENT_FILE_V1, AGENT_FILE_V2, PASSAGES

    out = []
    mem0 = TESTS / "data" / "mem0"
    memories = json.loads((mem0 / "memories.json").read_text())["results"]
    items = load_source(mem0 / "memories.json")
    out.append(("mem0 (get_all)", len(memories), len(items), native_fields(memories), kept(items, ("memory",))))
    with sqlite3.connect(mem0 / "history.db") as db:
        db.row_factory = sqlite3.Row
        history = [dict(r) for r in db.execute("select * from history")]
    items = load_source(mem0 / "history.db")
    out.append(("mem0-history (history.db)", len(history), len(items), native_fields(history), kept(items, ("event",))))
    graph_file = TESTS / "data" / "graphiti" / "graph.json"
    graph = json.loads(graph_file.read_text())
    items = load_source(graph_file)
    for name, kinds in (("episodes", ("episode",)), ("entity_nodes", ("entity",)),
                        ("episodic_edges", ("mention",)), ("entity_edges", ("fact", "expired-fact"))):
        made = [i for i in items if i.metadata["source"]["kind"] in kinds]
        out.append((f"graphiti (graph.json: {name})", len(graph[name]), len(made), native_fields(graph[name]),
                    kept(items, kinds)))
    store = TESTS / "data" / "langgraph"
    listed = json.loads((store / "items.json").read_text())
    items = load_source(store / "items.json")
    out.append(("langgraph-store (items.json: Item.dict())", len(listed), len(items), native_fields(listed),
                kept(items, ("item",))))
    with sqlite3.connect(store / "store.db") as db:
        db.row_factory = sqlite3.Row
        rows_ = [dict(r) for r in db.execute("select * from store")]
    items = load_source(store / "store.db")
    out.append(("langgraph-sqlite (store.db: the store table)", len(rows_), len(items), native_fields(rows_),
                kept(items, ("item",))))
    lines = [json.loads(line) for line in (store / "items.jsonl").read_text().splitlines() if line.strip()]
    items = load_source(store / "items.jsonl")
    out.append(("langgraph-jsonl (items.jsonl: Item.dict() a line)", len(lines), len(items), native_fields(lines),
                kept(items, ("item",))))
    with (store / "store.csv").open(newline="") as handle:
        table = list(csv.DictReader(handle))
    items = load_source(store / "store.csv")
    out.append(("langgraph-postgres-csv (store.csv: PostgresStore's store table, COPY csv)", len(table), len(items),
                native_fields(table), kept(items, ("item",))))
    with tempfile.TemporaryDirectory() as tmp:
        for name, data, fmt in (("memory.jsonl", MCP_LINES, "mcp-memory"), ("v2.af", AGENT_FILE_V2, "letta-agent"),
                                ("v1.af", AGENT_FILE_V1, "letta-agent"), ("archival.json", PASSAGES, "letta-passages")):
            path = Path(tmp) / name
            path.write_text("".join(json.dumps(x) + "\n" for x in data) if fmt == "mcp-memory" else json.dumps(data))
            items = load_source(path)
            if fmt == "letta-agent":
                agents = data.get("agents", [data])
                messages = [m for a in agents for m in a["messages"]]
                parts = len(agents) + len(messages) + sum(len(data.get(k) or []) for k in (
                    "blocks", "tools", "sources", "files", "groups", "mcp_servers")) + len(data.get("core_memory") or [])
                native = native_fields(messages)
                keep = kept(items, ("message", "tool-call", "tool-return"))
                out.append((f"letta-agent ({name}: agents, messages, blocks, tools...; message fields)", parts, len(items),
                            native, keep))
            else:
                out.append((f"{fmt} ({name})", len(data), len(items), native_fields(data),
                            kept(items, ("entity", "relation", "passage"))))
    return out


def main() -> None:
    print("| format | items in the file | records made (source) | fields | kept | dropped |")
    print("|---|---|---|---|---|---|")
    for name, native, made, fields, keep in rows():
        dropped = sorted(fields - keep)
        print(f"| {name} | {native} | {made} | {len(fields)} | {len(fields & keep)} | {', '.join(dropped) or 'none'} |")


if __name__ == "__main__":
    main()
