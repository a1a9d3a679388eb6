"""Graphiti (getzep/graphiti, the engine of Zep): a graph as graphiti_core's models serialize it.

``graphiti``: a JSON object whose lists hold ``model_dump(mode="json")`` of the models that
``get_by_group_ids`` returns (graphiti_core ``nodes.py``: ``EpisodicNode``, ``EntityNode``,
``CommunityNode``; ``edges.py``: ``EpisodicEdge``, ``EntityEdge``, ``CommunityEdge``)::

    {"episodes": [...], "entity_nodes": [...], "episodic_edges": [...], "entity_edges": [...],
     "community_nodes": [...], "community_edges": [...]}     (any of them; nothing else)

Items, each with its ``group_id`` as scope and every time axis apart (``created_at``, ``valid_at``,
``invalid_at``, ``expired_at``, ``reference_time``; Graphiti keeps event time and system time apart, so
``expired_at`` is not merged into ``invalid_at``):

- an episode: kind ``episode`` (its ``content``; dated by ``valid_at``, when the original happened);
- an entity node: kind ``entity`` (``name (labels)`` and its ``summary``; ``attributes`` as ``custom``),
  derived from the episodes that mention it (its ``MENTIONS`` edges);
- an entity edge: kind ``fact`` (its ``fact``; ``attributes`` as ``custom``), derived from its
  ``episodes`` (its provenance in Graphiti) then its two entities. An edge Graphiti invalidated or
  expired (``invalid_at`` or ``expired_at`` set) is history instead: kind ``expired-fact``,
  ``source.current`` False, ``source.about`` its source entity; it is not searched as a current fact and
  shows in the lineage of that entity's record. Its key differs from a current fact's, so a fact expired
  since the last import leaves the searched facts on re-import;
- a community node: kind ``community``, derived from its members (its ``HAS_MEMBER`` edges);
- an episodic or community edge: kind ``mention`` / ``member`` (not searched: links, kept whole).

Embeddings (``name_embedding``, ``fact_embedding``) are the old embedder's vectors: left out of
``source.raw`` (their length is ``source.embedding_dim``) and the text is embedded again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synthex.core.errors import SourceError
from synthex.core.importers.base import Intake, SourceItem, describe, expect_object, read_json
from synthex.core.importers.migrate.items import id_of, item_key, migration_item, text_of, times, where_of
from synthex.core.importers.migrate.registry import MigrationFormat, Sniff, unwrap_json_string

FORMAT_NAME = "graphiti"
SYSTEM = "graphiti"
# The file's lists, in the order they are read, and what one entry of each is called in messages.
LISTS = {"episodes": "episode", "entity_nodes": "entity node", "episodic_edges": "episodic edge",
         "entity_edges": "entity edge", "community_nodes": "community node", "community_edges": "community edge"}
TIMES = ("created_at", "valid_at", "invalid_at", "expired_at", "reference_time")
EMBEDDINGS = ("name_embedding", "fact_embedding")


def _strings(obj: dict[str, Any], name: str, where: str) -> list[str]:
    value = obj.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SourceError(f"{where}: '{name}' is {describe(value)}; expected a list of strings")
    return value


def _object(obj: dict[str, Any], name: str, where: str) -> dict[str, Any] | None:
    value = obj.get(name)
    if value is not None and not isinstance(value, dict):
        raise SourceError(f"{where}: '{name}' is {describe(value)}; expected an object")
    return value or None


def _without_embedding(obj: dict[str, Any], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the raw record without its vectors, ``{"embedding_dim": n}`` when it had one)."""
    extra: dict[str, Any] = {}
    for name in EMBEDDINGS:
        value = obj.get(name)
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(v, (int, float)) for v in value):
            raise SourceError(f"{where}: '{name}' is {describe(value)}; expected a list of numbers")
        extra["embedding_dim"] = len(value)
    return {k: v for k, v in obj.items() if k not in EMBEDDINGS}, extra


class _Graph:
    """The file's lists, checked, with the links between them (who mentions whom)."""

    def __init__(self, path: Path, data: Any) -> None:
        self.path = path
        if not isinstance(data, dict):
            raise SourceError(f"{path}: expected a Graphiti graph (a JSON object of {', '.join(LISTS)}), found "
                              f"{describe(data)}")
        unknown = sorted(set(data) - set(LISTS))
        if unknown:
            raise SourceError(f"{path}: '{unknown[0]}' is not a Graphiti list this reads ({', '.join(LISTS)})")
        self.rows: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}  # list -> (where, uuid, object)
        for name, what in LISTS.items():
            value = data.get(name)
            if value is None:
                value = []
            if not isinstance(value, list):
                raise SourceError(f"{path}: '{name}' is {describe(value)}; expected a list of {what}s")
            seen: dict[str, int] = {}
            rows = []
            for index, obj in enumerate(value):
                where = where_of(path, what, index, obj.get("uuid") if isinstance(obj, dict) else None)
                obj = expect_object(obj, where)
                uuid = id_of(obj, "uuid", where)
                if uuid in seen:
                    raise SourceError(f"{where}: 'uuid' repeats {what} #{seen[uuid]}")
                seen[uuid] = index
                id_of(obj, "group_id", where)
                rows.append((where, uuid, obj))
            self.rows[name] = rows
        # MENTIONS (episode -> entity) and HAS_MEMBER (community -> entity): the entity's / community's origins.
        self.mentioned_by: dict[str, list[str]] = {}
        for where, _, edge in self.rows["episodic_edges"]:
            episode, entity = id_of(edge, "source_node_uuid", where), id_of(edge, "target_node_uuid", where)
            self.mentioned_by.setdefault(entity, []).append(item_key("episode", episode))
        self.names = {uuid: obj.get("name") for rows in self.rows.values() for _, uuid, obj in rows
                      if isinstance(obj.get("name"), str)}  # to say what a link joins
        self.members: dict[str, list[str]] = {}
        for where, _, edge in self.rows["community_edges"]:
            community, entity = id_of(edge, "source_node_uuid", where), id_of(edge, "target_node_uuid", where)
            self.members.setdefault(community, []).append(item_key("entity", entity))

    def item(self, *, kind: str, uuid: str, obj: dict[str, Any], where: str, content: str, dated: str | None,
             derived_from: list[str], current: bool = True, extra: dict[str, Any] | None = None,
             chat: dict[str, Any] | None = None) -> SourceItem:
        axes = times(obj, TIMES, where)
        created = dated or axes.get("created_at")
        if created is None:
            raise SourceError(f"{where}: missing required field 'created_at'")
        raw, vectors = _without_embedding(obj, where)
        return migration_item(
            path=self.path, fmt=FORMAT_NAME, system=SYSTEM, kind=kind, original_id=uuid, content=content,
            created_at=created, time_axes=axes, scope={"group_id": str(obj["group_id"])}, raw=raw,
            derived_from=derived_from, current=current, custom=_object(obj, "attributes", where), where=where,
            chat=chat, extra={**vectors, **(extra or {})})

    def items(self) -> list[SourceItem]:
        out: list[SourceItem] = []
        for where, uuid, episode in self.rows["episodes"]:
            valid = times(episode, ("valid_at",), where).get("valid_at")
            _object(episode, "episode_metadata", where)
            out.append(self.item(
                kind="episode", uuid=uuid, obj=episode, where=where, content=text_of(episode, "content", where),
                dated=valid, derived_from=[], extra={"name": text_of(episode, "name", where, False),
                                                    "entity_edges": _strings(episode, "entity_edges", where)},
                chat={"conversation_id": str(episode["group_id"]), "title": text_of(episode, "name", where, False),
                      "message_id": uuid}))
        for where, uuid, node in self.rows["entity_nodes"]:
            name, labels = text_of(node, "name", where), _strings(node, "labels", where)
            shown = [label for label in labels if label != "Entity"]
            heading = f"{name} ({', '.join(shown)})" if shown else name
            summary = text_of(node, "summary", where, False)
            out.append(self.item(
                kind="entity", uuid=uuid, obj=node, where=where, content="\n".join(t for t in (heading, summary) if t),
                dated=None, derived_from=list(dict.fromkeys(self.mentioned_by.get(uuid, []))),
                extra={"name": name, "labels": labels}, chat={"title": name}))
        for where, uuid, edge in self.rows["entity_edges"]:
            source, target = id_of(edge, "source_node_uuid", where), id_of(edge, "target_node_uuid", where)
            axes = times(edge, TIMES, where)
            current = "invalid_at" not in axes and "expired_at" not in axes
            episodes = [item_key("episode", e) for e in _strings(edge, "episodes", where)]
            out.append(self.item(
                kind="fact" if current else "expired-fact", uuid=uuid, obj=edge, where=where,
                content=text_of(edge, "fact", where), dated=axes.get("valid_at"), current=current,
                derived_from=[*episodes, item_key("entity", source), item_key("entity", target)],
                extra={"relation": text_of(edge, "name", where), "source_node": source, "target_node": target,
                       **({} if current else {"about": item_key("entity", source)})}))
        for where, uuid, node in self.rows["community_nodes"]:
            name, summary = text_of(node, "name", where), text_of(node, "summary", where, False)
            out.append(self.item(
                kind="community", uuid=uuid, obj=node, where=where, content="\n".join(t for t in (name, summary) if t),
                dated=None, derived_from=list(dict.fromkeys(self.members.get(uuid, []))), extra={"name": name}))
        for name, kind, link in (("episodic_edges", "mention", "mentions"), ("community_edges", "member", "has member")):
            for where, uuid, edge in self.rows[name]:
                source, target = id_of(edge, "source_node_uuid", where), id_of(edge, "target_node_uuid", where)
                origin = "episode" if kind == "mention" else "community"
                text = f"{self.names.get(source, source)} {link} {self.names.get(target, target)}"
                out.append(self.item(
                    kind=kind, uuid=uuid, obj=edge, where=where, content=text,
                    dated=None, derived_from=[item_key(origin, source), item_key("entity", target)]))
        return out


def parse(path: Path, intake: Intake | None = None) -> list[SourceItem]:
    data = unwrap_json_string(read_json(path, (intake or Intake()).limits.source_file_bytes))
    return _Graph(path, data).items()


def sniff(found: Sniff) -> bool:
    if found.head.lstrip()[:1] not in (b"{", b'"'):
        return False
    data = found.json()
    if not isinstance(data, dict) or not data or not set(data) <= set(LISTS):
        return False
    first = next((v[0] for v in data.values() if isinstance(v, list) and v), None)
    return isinstance(first, dict) and "uuid" in first and "group_id" in first


def register(registry: Any) -> None:
    registry.register(MigrationFormat(
        name=FORMAT_NAME, system=SYSTEM,
        description="a Graphiti / Zep graph: episodes, entity nodes and edges as graphiti_core serializes them",
        sniff=sniff, parse=parse, step="graphiti", turn_kind="episode",
        views=(("facts", ("fact",), True), ("entities", ("entity",), True), ("episodes", ("episode",), True),
               ("communities", ("community",), True))))
