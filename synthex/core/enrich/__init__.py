"""LLM-free enrichment written at index time: entities, noun phrases and resolved dates of a record.

Pure functions, standard library only (core layer: no I/O, no Dagster, LanceDB or PyArrow, nothing from
``synthex_resources``/``synthex_assets``/``synthex.app``).

- ``entities(text)``: proper-noun phrases ("Caroline", "LGBTQ support group", "Dr. Patel").
- ``noun_phrases(text)``: RAKE-style content phrases ("support group", "adoption agency").
- ``resolve_dates(text, anchor)``: date expressions, absolute or relative to the record's timestamp
  ("yesterday", "last Tuesday", "two weeks ago", "13 October 2023"), as ``ResolvedDate`` spans.
- ``enrichment_text(text, created_at)``: one short line to append to the text that is indexed (BM25 and
  embedding); the raw text stays what is shown.

The conventions of each are in the module docstrings (``dates``, ``entities``, ``phrases``).
"""

from __future__ import annotations

from datetime import date, datetime

from synthex.core.enrich.dates import ResolvedDate, parse_anchor, resolve_dates
from synthex.core.enrich.entities import entities
from synthex.core.enrich.phrases import noun_phrases
from synthex.core.enrich.words import MONTH_NAMES, WEEKDAY_NAMES

__all__ = ["ResolvedDate", "entities", "noun_phrases", "resolve_dates", "enrichment_text", "parse_anchor",
           "format_date", "topics"]

MAX_ENTITIES = 8
MAX_DATES = 6
MAX_TOPICS = 5


def _day(d: date, with_year: bool = True) -> str:
    return f"{d.day} {MONTH_NAMES[d.month - 1]}" + (f" {d.year}" if with_year else "")


def format_date(resolved: ResolvedDate) -> str:
    """A resolved span in the words a question would use.

    day: "2023-05-07 Sunday 7 May 2023"; week or other span of days: "1 May to 7 May 2023" (years on both
    sides when they differ); month: "May 2023", a span of months "March to May 2023"; year: "2022",
    a span of years "2019 to 2021".
    """
    start, end = resolved.start, resolved.end
    if resolved.granularity == "year":
        return str(start.year) if start.year == end.year else f"{start.year} to {end.year}"
    if resolved.granularity == "month":
        first, last = MONTH_NAMES[start.month - 1], MONTH_NAMES[end.month - 1]
        if (start.year, start.month) == (end.year, end.month):
            return f"{first} {start.year}"
        first = first if start.year == end.year else f"{first} {start.year}"
        return f"{first} to {last} {end.year}"
    if start == end:
        return f"{start.isoformat()} {WEEKDAY_NAMES[start.weekday()]} {_day(start)}"
    return f"{_day(start, start.year != end.year)} to {_day(end)}"


def topics(text: str, names: list[str] | None = None) -> list[str]:
    """At most ``MAX_TOPICS`` multi-word content phrases of ``text``, leaving out any that shares a word with
    one of ``names`` (its entities; found here when None)."""
    named = {word for name in (entities(text) if names is None else names) for word in name.lower().split()}
    return [p for p in noun_phrases(text) if " " in p and named.isdisjoint(p.split())][:MAX_TOPICS]


def enrichment_text(text: str, created_at: str | datetime | date | None) -> str:
    """One line of entities, resolved dates and topics for the index; "" when there is nothing.

    Example, for "I went to a LGBTQ support group yesterday" said at "1:56 pm on 8 May, 2023":
    "entities: LGBTQ support group | dates: 2023-05-07 Sunday 7 May 2023 (yesterday) | topics: ..."

    Relative dates resolve only when ``created_at`` parses (ISO-8601 with or without time and zone,
    LoCoMo's "1:56 pm on 8 May, 2023", LongMemEval's "2023/05/20 (Sat) 02:21", a datetime or date); with
    None only self-contained dates ("13 October 2023", "in 2022") are written. Kept short on purpose
    (at most 8 entities, 6 dates, 5 multi-word topics; a topic sharing a word with an entity is left out)
    so BM25 length normalization barely moves.
    """
    if not text:
        return ""
    anchor = parse_anchor(created_at)
    names = entities(text)[:MAX_ENTITIES]
    dates: list[str] = []
    seen_spans = set()
    for resolved in resolve_dates(text, anchor):
        span = (resolved.start, resolved.end)
        if span in seen_spans:
            continue
        seen_spans.add(span)
        written = format_date(resolved)
        expression = " ".join(resolved.expression.split())
        dates.append(written if expression.lower() in written.lower() else f"{written} ({expression})")
        if len(dates) == MAX_DATES:
            break
    found_topics = topics(text, names)
    parts = []
    if names:
        parts.append("entities: " + "; ".join(names))
    if dates:
        parts.append("dates: " + "; ".join(dates))
    if found_topics:
        parts.append("topics: " + ", ".join(found_topics))
    return " | ".join(parts)
