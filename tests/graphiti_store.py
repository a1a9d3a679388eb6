"""A real Graphiti graph written offline and read back through graphiti_core's own models: what the
Graphiti import is tested on.

``python tests/graphiti_store.py`` saves episodes, entity nodes, MENTIONS edges and entity edges (facts,
one of them invalidated and expired as Graphiti does when a newer fact contradicts it) to graphiti_core's
embedded Kuzu driver, reads them back with ``get_by_group_ids``, and writes their ``model_dump(mode="json")``
to tests/data/graphiti/graph.json (``{"episodes", "entity_nodes", "episodic_edges", "entity_edges"}``);
``grown.json`` is the same graph after one more episode (a new fact, and an old one expired since).
Embeddings are given (3 numbers), so no embedder and no LLM is called. Needs ``graphiti-core`` and ``kuzu``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).parent / "data" / "graphiti"
GROUP = "household"


def at(day: int, hour: int = 9) -> datetime:
    return datetime(2025, 4, day, hour, tzinfo=UTC)


def uid(name: str) -> str:
    """Fixed uuids, so the fixture's ids do not change when it is written again."""
    import uuid

    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"synthex-graphiti-fixture/{name}"))


def graph(grow: bool) -> tuple[list, list, list, list]:
    from graphiti_core.edges import EntityEdge, EpisodicEdge
    from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode

    vec = [0.1, 0.2, 0.3]
    episodes = [
        EpisodicNode(uuid=uid("ep1"), name="chat 1", group_id=GROUP, source=EpisodeType.message,
                     source_description="support chat", content="user: Dana works at Acme and drinks green tea",
                     valid_at=at(1), created_at=at(2), entity_edges=[uid("works-acme"), uid("drinks-tea")]),
        EpisodicNode(uuid=uid("ep2"), name="chat 2", group_id=GROUP, source=EpisodeType.message,
                     source_description="support chat", content="user: Dana moved from Acme to Beta Corp",
                     valid_at=at(10), created_at=at(11), entity_edges=[uid("works-beta")]),
    ]
    people = {"dana": ("Dana", ["Entity", "Person"], "Dana is a customer", {"tier": "gold"}),
              "acme": ("Acme", ["Entity", "Organization"], "a company", {}),
              "beta": ("Beta Corp", ["Entity", "Organization"], "a company Dana joined", {}),
              "tea": ("green tea", ["Entity"], "a drink", {})}
    nodes = [EntityNode(uuid=uid(k), name=n, group_id=GROUP, labels=labels, summary=s, attributes=attrs,
                        name_embedding=vec, created_at=at(2)) for k, (n, labels, s, attrs) in people.items()]
    mentions = [EpisodicEdge(uuid=uid(f"m-{e}-{n}"), group_id=GROUP, source_node_uuid=uid(e), target_node_uuid=uid(n),
                             created_at=at(2 if e == "ep1" else 11))
                for e, n in (("ep1", "dana"), ("ep1", "acme"), ("ep1", "tea"), ("ep2", "dana"), ("ep2", "beta"))]
    facts = [
        # Contradicted by ep2: Graphiti sets invalid_at (world time: when it stopped being true) and
        # expired_at (system time: when Graphiti stopped believing it) on the old edge.
        EntityEdge(uuid=uid("works-acme"), group_id=GROUP, source_node_uuid=uid("dana"), target_node_uuid=uid("acme"),
                   name="WORKS_AT", fact="Dana works at Acme", episodes=[uid("ep1")], valid_at=at(1),
                   invalid_at=at(10), expired_at=at(11), created_at=at(2), fact_embedding=vec),
        EntityEdge(uuid=uid("works-beta"), group_id=GROUP, source_node_uuid=uid("dana"), target_node_uuid=uid("beta"),
                   name="WORKS_AT", fact="Dana works at Beta Corp", episodes=[uid("ep2")], valid_at=at(10),
                   created_at=at(11), fact_embedding=vec, attributes={"role": "engineer"}),
        EntityEdge(uuid=uid("drinks-tea"), group_id=GROUP, source_node_uuid=uid("dana"), target_node_uuid=uid("tea"),
                   name="DRINKS", fact="Dana drinks green tea", episodes=[uid("ep1")], valid_at=at(1),
                   created_at=at(2), fact_embedding=vec),
    ]
    if grow:  # a third episode: Dana now drinks coffee; the tea fact is expired
        episodes.append(EpisodicNode(uuid=uid("ep3"), name="chat 3", group_id=GROUP, source=EpisodeType.text,
                                     source_description="note", content="Dana switched to coffee",
                                     valid_at=at(20), created_at=at(21), entity_edges=[uid("coffee")]))
        nodes.append(EntityNode(uuid=uid("coffee-node"), name="coffee", group_id=GROUP, labels=["Entity"],
                                summary="a drink", name_embedding=vec, created_at=at(21)))
        mentions.append(EpisodicEdge(uuid=uid("m-ep3-coffee"), group_id=GROUP, source_node_uuid=uid("ep3"),
                                     target_node_uuid=uid("coffee-node"), created_at=at(21)))
        tea = facts[2]
        tea.invalid_at, tea.expired_at = at(20), at(21)
        facts.append(EntityEdge(uuid=uid("coffee"), group_id=GROUP, source_node_uuid=uid("dana"),
                                target_node_uuid=uid("coffee-node"), name="DRINKS", fact="Dana drinks coffee",
                                episodes=[uid("ep3")], valid_at=at(20), created_at=at(21), fact_embedding=vec))
    return episodes, nodes, mentions, facts


async def round_trip(db: Path, grow: bool) -> dict[str, list[dict[str, Any]]]:
    """Save the graph to Kuzu, read it back by group id, and dump every model as JSON."""
    from graphiti_core.driver.kuzu_driver import KuzuDriver
    from graphiti_core.edges import EntityEdge, EpisodicEdge
    from graphiti_core.nodes import EntityNode, EpisodicNode

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Kuzu is deprecated upstream; it is embedded
        driver = KuzuDriver(db=str(db))
    episodes, nodes, mentions, facts = graph(grow)
    for model in [*episodes, *nodes, *mentions, *facts]:
        await model.save(driver)
    read = {"episodes": await EpisodicNode.get_by_group_ids(driver, [GROUP]),
            "entity_nodes": await EntityNode.get_by_group_ids(driver, [GROUP]),
            "episodic_edges": await EpisodicEdge.get_by_group_ids(driver, [GROUP]),
            "entity_edges": await EntityEdge.get_by_group_ids(driver, [GROUP])}
    for edge in read["entity_edges"]:  # get_by_group_ids leaves embeddings out; load them as Graphiti does
        await edge.load_fact_embedding(driver)
    for node in read["entity_nodes"]:
        await node.load_name_embedding(driver)
    return {k: sorted((m.model_dump(mode="json") for m in v), key=lambda d: d["uuid"]) for k, v in read.items()}


def write_fixture(folder: Path = FIXTURE) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, grow in (("graph.json", False), ("grown.json", True)):
        with tempfile.TemporaryDirectory() as tmp:
            dumped = asyncio.run(round_trip(Path(tmp) / "graph.kuzu", grow))
        (folder / name).write_text(json.dumps(dumped, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write_fixture(Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURE)
