"""Generate a synthetic ChatGPT export (official `conversations.json` shape), deterministically.

The demo user drifts from web development to systems programming over the months, so a monthly
level can state a trend no single conversation states. Conversations carry the export's real
quirks: abandoned edit branches, hidden system nodes, multimodal parts, null titles.

    python -m synthex.core.demo.generate OUT.json --conversations 200 --months 14 --seed 7
"""

from __future__ import annotations

import argparse
import json
import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

WEB = [
    ("FastAPI dependency injection", "How do I share a database session across FastAPI routes with Depends?",
     "Use a generator dependency that yields the session and closes it in a finally block."),
    ("React state for a todo app", "My React todo list re-renders everything when one item changes.",
     "Memoize the item component with React.memo and keep a stable key per todo."),
    ("Django migrations conflict", "Two branches both added a migration 0042 in Django.",
     "Run makemigrations --merge to create a merge migration that depends on both."),
    ("CSS grid layout", "How do I make a responsive card grid without media queries?",
     "Use grid-template-columns: repeat(auto-fill, minmax(240px, 1fr))."),
    ("Postgres index for search", "Queries on the orders table filter by customer and date and are slow.",
     "Create a composite btree index on (customer_id, created_at) and check EXPLAIN ANALYZE."),
]
SYSTEMS = [
    ("Rust borrow checker", "The Rust borrow checker rejects my loop that pushes to a vector while iterating it.",
     "Collect the new items into a separate Vec and extend after the loop, or iterate over indices."),
    ("Tokio task cancellation", "How do I cancel a tokio task cleanly when the server shuts down?",
     "Use a CancellationToken from tokio-util and select! on token.cancelled() inside the task."),
    ("Rust lifetimes in structs", "Why does my parser struct need a lifetime parameter in Rust?",
     "It borrows the input string; the lifetime ties the struct to the buffer it points into."),
    ("Writing a memory allocator", "I want to write a bump allocator in Rust for my interpreter.",
     "Keep a pointer into a big arena and implement GlobalAlloc; free everything at once per frame."),
    ("Linux perf profiling", "How do I find the hot loop in my Rust binary on Linux?",
     "Build with debug symbols in release and run perf record -g, then perf report."),
]
LIFE = [
    ("Sourdough starter", "My sourdough starter smells like acetone after three days.",
     "It is hungry: feed it twice a day at a 1:1:1 ratio and keep it warmer."),
    ("Half marathon plan", "I signed up for the Lisbon half marathon and have twelve weeks.",
     "Build to four runs a week with one long run growing by a kilometre each week."),
    ("Trip to Kyoto", "Planning four days in Kyoto in spring: what should I not miss?",
     "Visit Fushimi Inari early morning, walk the Philosopher's Path, and book a kaiseki dinner."),
    ("Houseplant care", "The leaves of my monstera are turning yellow.",
     "Water less often and check the roots for rot; it needs bright indirect light."),
]
DETAILS = ["Project Falcon", "the billing service", "my side project Orbit", "the hackathon demo",
           "the client dashboard", "our Q3 migration", "the open-source crate", "the weekend prototype"]
FOLLOWUPS = [
    ("Can you show a short example?", "Here is a minimal example that compiles and shows the idea."),
    ("What are the trade-offs?", "It is simpler to read, but costs an extra allocation per request."),
    ("Does this scale to production?", "Yes, with connection pooling and proper timeouts it holds up."),
    ("Thanks, that fixed it.", "Glad it worked; consider adding a regression test for it."),
]


def _node(node_id: str, role: str | None, text: Any, ts: float | None, parent: str | None,
          hidden: bool = False, content_type: str = "text") -> dict[str, Any]:
    message = None
    if role is not None:
        parts = text if isinstance(text, list) else [text]
        message = {
            "id": node_id,
            "author": {"role": role, "name": None, "metadata": {}},
            "create_time": ts,
            "update_time": None,
            "content": {"content_type": content_type, "parts": parts},
            "status": "finished_successfully",
            "metadata": {"is_visually_hidden_from_conversation": True} if hidden else {},
        }
    return {"id": node_id, "message": message, "parent": parent, "children": []}


def conversation(rng: random.Random, index: int, when: datetime, topic_pool: list[tuple[str, str, str]]) -> dict[str, Any]:
    title, question, answer = rng.choice(topic_pool)
    detail = rng.choice(DETAILS)
    ids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(16)]
    mapping: dict[str, Any] = {}
    root = ids[0]
    mapping[root] = _node(root, None, None, None, None)
    system = ids[1]
    mapping[system] = _node(system, "system", "", None, root, hidden=True)
    mapping[root]["children"].append(system)
    parent, ts = system, when.timestamp()
    turns = [(f"{question} This is for {detail} (ticket #{1000 + index}).", answer)]
    for follow in rng.sample(FOLLOWUPS, rng.randint(1, 3)):
        turns.append(follow)
    k = 2
    for t_index, (user_text, assistant_text) in enumerate(turns):
        user_id, asst_id = ids[k], ids[k + 1]
        k += 2
        if t_index == 0 and rng.random() < 0.25:
            # An edited first question: the abandoned branch stays in the mapping, off the current path.
            old_user, old_asst = ids[14], ids[15]
            mapping[old_user] = _node(old_user, "user", "ABANDONED DRAFT: " + user_text, ts, parent)
            mapping[old_asst] = _node(old_asst, "assistant", "ABANDONED ANSWER that must not be imported.", ts + 5, old_user)
            mapping[old_user]["children"].append(old_asst)
            mapping[parent]["children"].append(old_user)
        parts: Any = user_text
        content_type = "text"
        if t_index == 0 and rng.random() < 0.1:
            content_type = "multimodal_text"
            parts = [{"content_type": "image_asset_pointer", "asset_pointer": "file-service://file-demo",
                      "width": 640, "height": 480}, user_text]
        mapping[user_id] = _node(user_id, "user", parts, ts, parent, content_type=content_type)
        mapping[parent]["children"].append(user_id)
        ts += rng.randint(20, 90)
        mapping[asst_id] = _node(asst_id, "assistant", assistant_text, ts, user_id)
        mapping[user_id]["children"].append(asst_id)
        parent = asst_id
        ts += rng.randint(60, 600)
    return {
        "title": None if rng.random() < 0.03 else f"{title} ({detail})",
        "create_time": when.timestamp(),
        "update_time": ts,
        "mapping": mapping,
        "moderation_results": [],
        "current_node": parent,
        "plugin_ids": None,
        "conversation_id": str(uuid.UUID(int=rng.getrandbits(128))),
        "id": None,
    }


def generate(conversations: int = 200, months: int = 14, seed: int = 7,
             start: datetime = datetime(2023, 9, 1, tzinfo=UTC)) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    span = timedelta(days=30.4 * months)
    out = []
    for index in range(conversations):
        when = start + span * (index / conversations) + timedelta(minutes=rng.randint(0, 600))
        progress = index / max(1, conversations - 1)
        # The trend: web topics fade out, systems topics take over.
        r = rng.random()
        pool = LIFE if r < 0.25 else (WEB if rng.random() > progress else SYSTEMS)
        conv = conversation(rng, index, when, pool)
        conv["id"] = conv["conversation_id"]
        out.append(conv)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--months", type=int, default=14)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    data = generate(args.conversations, args.months, args.seed)
    args.out.write_text(json.dumps(data), encoding="utf-8")
    print(f"wrote {len(data)} conversations to {args.out}")


if __name__ == "__main__":
    main()
