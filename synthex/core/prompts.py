"""The default prompt functions of the §8.2 template (plain Python functions, design doc §4.3)."""

from __future__ import annotations

from synthex.core.record import Record


def extract_transcript(record: Record) -> str:
    """Deterministic (no model): a dated, titled transcript. Leaf search needs the verbatim text."""
    title = record.meta("chat.title") or "Untitled"
    when = record.meta("time.created_at") or ""
    body = record.content
    if body.startswith("# "):
        body = body.split("\n", 1)[1].lstrip() if "\n" in body else ""
    return f"Conversation: {title}\nDate: {when}\n\n{body}"


def summarize_conversation(record: Record) -> str:
    return f"""Summarize this conversation in 2-3 sentences.

Include:
- Main topic or question
- Key conclusions or decisions
- Any action items mentioned

## Conversation
{record.content}

## Summary
"""


def monthly_reflection(records: list[Record], period: str) -> str:
    summaries = "\n".join(f"- {r.content}" for r in records)
    return f"""Reflect on this month's conversations.

Month: {period}
Conversations: {len(records)}

## Summaries
{summaries}

## Reflection
"""


def world_model_prompt(record: Record, state: str) -> str:
    return f"""Update your understanding based on new information.

Current understanding:
{state or '(nothing yet)'}

New reflection ({record.meta('time.period', 'unknown')}):
{record.content}

## Updated Understanding
"""


def anticipate_questions(record: Record) -> str:
    """Write-time enrichment with a model: a one-line gist of the record and three questions a user
    might later ask that it answers, in the user's words. Use it as ``transform(prompt=...)`` over the
    turns and name that step beside the turns' own index step in the search output: each anticipated
    record's leaf is its turn, so leaf-sum search credits the turn with both texts' scores. The
    offline stand-in returns whole sentences of the record, never these instructions."""
    when = record.meta("time.created_at") or ""
    return f"""Read this message from a conversation.
Write one sentence that says what it is about, then three short questions that someone could ask later
whose answer is in this message. Use plain everyday words.

Date: {when}

## Message
{record.content}

## Gist and questions
"""



# A digest's bounds: each member on one line of at most this many characters, the digest at most this many.
DIGEST_MEMBER_CHARS = 400
DIGEST_CHARS = 20_000


def member_digest(records: list[Record], group: object) -> str:
    """Deterministic (no model; ``fn=`` of an aggregate): the group's name, then its members' texts in time
    order, one line each (whitespace made single spaces, cut at ``DIGEST_MEMBER_CHARS``), the whole cut at
    ``DIGEST_CHARS`` with the number of members left out. Every member stays in the record's provenance."""
    by = getattr(group, "by", "")
    lines = [f"{group}" + (f" ({by}, {len(records)} records)" if by else f" ({len(records)} records)")]
    size = len(lines[0])
    for index, record in enumerate(records):
        line = " ".join(record.content.split())
        if len(line) > DIGEST_MEMBER_CHARS:
            line = line[:DIGEST_MEMBER_CHARS - 3] + "..."
        if size + len(line) + 1 > DIGEST_CHARS:
            lines.append(f"(+{len(records) - index} more)")
            break
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def compress_state(state: str) -> str:
    """The default prompt of ``CompressState``: a fold's running state rewritten shorter by the model."""
    return f"""Rewrite this running summary in at most half its length. Keep every name, date, number and
decision; drop repetition.

## Summary
{state}

## Shorter summary
"""
