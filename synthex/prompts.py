"""The default prompt functions of the §8.2 template (plain Python functions, design doc §4.3)."""

from __future__ import annotations

from synthex.record import Record


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
