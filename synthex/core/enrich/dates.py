"""Dates a text names, absolute or relative, resolved against the record's own timestamp (the anchor).

Pure functions over strings (standard library only). ``resolve_dates(text, anchor)`` finds each date
expression, resolves it to an inclusive ``[start, end]`` span of calendar days and says how precise it
is (``granularity``). Offsets index ``text`` so that ``text[start_offset:end_offset] == expression``.

Conventions (documented decisions; the labelled cases in ``tests/test_enrich.py`` pin them):

- Weeks run Monday to Sunday (ISO). "last week" / "the week before" is the week before the anchor's
  week; "the week before last" and "two weeks ago" the one before that; "N weeks ago" is the week that
  holds ``anchor - 7N`` days. A weekend is the Saturday and Sunday of a week: "last weekend" is the
  weekend of the week before the anchor's week, "N weekends ago" of the week N weeks back.
- "last Friday", "the Friday before": the latest Friday strictly before the anchor (said on a Friday it
  is 7 days back; said on Saturday it is yesterday). "Friday before last" is 7 days before that.
  "next Friday" / "this coming Friday": the first Friday strictly after the anchor. "this Friday": the
  Friday of the anchor's week (moved a week when the sentence's tense says it must be past/future).
  A bare "Friday" / "on Friday": the next one when the sentence speaks of the future ("will", "going
  to", "'ll", "plan", "can't wait", ...), else the latest one before the anchor (chat reports the past).
  A weekday after "every"/"each", a plural ("Fridays") and "Good/Black Friday"-style names are skipped.
- A month or a day without a year ("in July", "Oct 13", "the 4th of July", "on 9/30", "Christmas")
  takes the year that puts it on the side of the anchor the tense says (future: at or after the anchor;
  past: at or before; "since May" is past); with no tense marker, the nearest occurrence. "last July":
  the latest July strictly before the anchor's month; "next July": the first strictly after. "on the
  15th" is the 15th of the anchor's month or of the month before/after, by the same rule. Tense is read
  from markers in the expression's sentence, the nearest marker winning: future = "will", "'ll",
  "going to", "gonna", "plan to", "can't wait", "next", "tomorrow", the present progressive ("I'm
  meeting ..."); past = "was", "did", "went", "last", "ago", words in -ed, common irregular pasts.
- Month/day numbers without a year count only after "on", "by", "until", "since" ("on 9/30", US
  order), so fractions and scores ("3/4") are not dates. With a year, "10/13/2023" is US order unless
  the first number cannot be a month ("13/10/2023").
- Holidays: Christmas (Eve), New Year's Eve/Day, Halloween, Valentine's Day, Independence Day,
  Thanksgiving (US, 4th Thursday of November), Easter. A holiday name followed by a noun ("a Halloween
  party", "the Christmas magic") is a kind of thing, not a date, and is skipped.
- "May", "March" (verbs) count as months only when capitalized, and, like "April", "June" and
  "August" (also given names), only with a day, a year, or a preposition/modifier before them ("in",
  "since", "by", "last", "early", ...). Other month names count alone.
- A bare year counts only after a preposition or modifier ("in 2022", "since 2016", "late 2021",
  "summer of 2022") or as a subject ("2022 was ..."), so "2000 followers" is not a year.
- Vague counts: "a couple of" is 2 (same granularity as the unit); "a few" is the span 2 to 4 units
  back and "several" 3 to 6, one granularity coarser for days and weeks ("a few days ago" on Monday 8
  May 2023 is 4-6 May 2023, granularity "week"; "a few weeks ago" is a span of weeks, granularity
  "month"). "the past week/month/year" is the rolling span ending on the anchor.
- "a year ago today" (also months, weeks) is that very day (29 February falls back to the 28th).
- "last night" is the day before the anchor; "tonight", "this morning/afternoon/evening", "earlier
  today" are the anchor's day. "earlier this year" runs from 1 January to the anchor day (granularity
  "year"); "later this month" from the anchor to the month's end.
- Seasons are meteorological, northern hemisphere (spring Mar-May, summer Jun-Aug, fall Sep-Nov,
  winter Dec-Feb, a winter belonging to the year of its December), granularity "month". "last summer"
  is the latest one ended before the anchor; "this summer" the one holding the anchor, else the one of
  its year; "in the fall" the one holding the anchor, else the next (past tense: the last) one.
- Durations are not dates: "in a day" is skipped unless the sentence speaks of the future ("in two
  weeks I will ..."), and "for a month now" is not turned into a start date.
- Skipped as too vague to place: "recently", "lately", "the other day", "a while ago", "soon",
  "some time ago", "back then"; and expressions relative to another event rather than to the anchor
  ("two days later", "the day before the wedding", "the week before 9 June").
- Without an anchor only expressions with a full date or a year resolve ("13 October 2023",
  "July 2023", "in 2022"); everything relative is skipped.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from synthex.core.enrich.words import CHATTER, DATE_WORDS, MONTH_NAMES, STOPWORDS, WEEKDAY_NAMES

__all__ = ["ResolvedDate", "resolve_dates", "parse_anchor"]


@dataclass(frozen=True, slots=True)
class ResolvedDate:
    expression: str  # the text as written, text[start_offset:end_offset]
    start: date
    end: date  # inclusive
    granularity: str  # "day" | "week" | "month" | "year"
    start_offset: int
    end_offset: int


# ----------------------------------------------------------------------------------------------- words
_MONTH_NAMES = [m.lower() for m in MONTH_NAMES]
_MONTHS = {name: i + 1 for i, name in enumerate(_MONTH_NAMES)}
_MONTHS |= {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9,
            "oct": 10, "nov": 11, "dec": 12}
_MONTH_FULL = "|".join(_MONTH_NAMES)
_MONTH_ANY = _MONTH_FULL + r"|(?:jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
_CAPITAL_ONLY_MONTHS = {"may", "march"}  # verbs when written in lower case
_NAME_LIKE_MONTHS = {"may", "march", "april", "june", "august"}  # alone they need a preposition

_WEEKDAYS = {name.lower(): i for i, name in enumerate(WEEKDAY_NAMES)}
_WEEKDAY_ABBR = {"mon": 0, "tue": 1, "tues": 1, "wed": 2, "weds": 2, "thu": 3, "thur": 3, "thurs": 3,
                 "fri": 4, "sat": 5, "sun": 6}
_WEEKDAY_FULL = "|".join(_WEEKDAYS)
_WEEKDAY_ANY = _WEEKDAY_FULL + "|" + "|".join(sorted(_WEEKDAY_ABBR, key=len, reverse=True))

_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
            "thirty": 30, "a couple of": 2, "a couple": 2, "couple of": 2, "a pair of": 2}
_VAGUE = {"a few": (2, 4), "few": (2, 4), "several": (3, 6)}
_NUM = (r"(?:\d{1,3}|a\s+couple(?:\s+of)?|couple\s+of|a\s+pair\s+of|a\s+few|several|an?|one|two|three|"
        r"four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty)")

_SEASONS = {"spring": (3, 5), "summer": (6, 8), "fall": (9, 11), "autumn": (9, 11), "winter": (12, 2)}

_DAY = r"(?P<d>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<y>(?:19|20)\d\d)"
_END = r"(?=$|[^\w'’-]|['’]s\b)"  # a word ends here (possessive allowed)

_ADJ_ING = (r"(?:amazing|interesting|exciting|inspiring|relaxing|rewarding|boring|annoying|charming|stunning|"
            r"challenging|surprising|refreshing|fascinating|encouraging|touching|thrilling|confusing|"
            r"terrifying|frustrating|satisfying|calming|heartwarming|everything|something|nothing|anything|"
            r"loving|caring|missing|willing|outstanding|overwhelming|comforting|humbling|motivating)\b")
# the present progressive ("I'm meeting my mentor on Wed") speaks of the future, but not "it's amazing"
_FUTURE = re.compile(
    rf"\b(?:will|won['’]t|shall|gonna|going\s+to|plan(?:s|ned|ning)?\s+(?:to|on)|planning|can['’]?t\s+wait|"
    r"cannot\s+wait|looking\s+forward|look\s+forward|hope\s+to|hoping\s+to|want\s+to|wanna|about\s+to|"
    r"intend|scheduled|upcoming|next|tomorrow|soon|coming\s+up|is\s+coming|"
    rf"(?:am|are|is)\s+(?!{_ADJ_ING})\w+ing)\b|\w['’]ll\b|\w['’](?:m|re|s)\s+(?!{_ADJ_ING})\w+ing\b", re.I)
_PAST = re.compile(
    r"\b(?:was|were|did|had|went|got|made|took|saw|came|met|ran|gave|found|felt|bought|told|said|won|"
    r"lost|left|began|spent|yesterday|ago|last|"
    r"(?!need|feed|seed|speed|indeed|breed|proceed|exceed|succeed|bed|red|shed|wed)\w{2,}ed)\b", re.I)
_SENTENCE_END = re.compile(r"[.!?\n]")


def _tense(text: str, start: int, end: int) -> int:
    """+1 future, -1 past, 0 unknown: the marker nearest the expression inside its sentence wins."""
    left = max(text.rfind(c, 0, start) for c in ".!?\n") + 1
    m = _SENTENCE_END.search(text, end)
    right = m.start() if m else len(text)
    best, best_distance = 0, 1 << 30
    for pattern, sign in ((_FUTURE, 1), (_PAST, -1)):
        for hit in pattern.finditer(text, left, right):
            if start <= hit.start() < end:
                continue
            distance = start - hit.end() if hit.end() <= start else hit.start() - end
            if distance < best_distance:
                best, best_distance = sign, distance
    return best


# ------------------------------------------------------------------------------------- calendar helpers
def _month_span(year: int, month: int) -> tuple[date, date]:
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def _add_months(year: int, month: int, n: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + n
    return index // 12, index % 12 + 1


def _monday(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _unit_back(anchor: date, unit: str, n: int) -> tuple[date, date]:
    """The calendar unit ``n`` units before the anchor's (negative: after)."""
    if unit == "day":
        day = anchor - timedelta(days=n)
        return day, day
    if unit == "week":
        monday = _monday(anchor) - timedelta(weeks=n)
        return monday, monday + timedelta(days=6)
    if unit == "weekend":
        monday = _monday(anchor) - timedelta(weeks=n)
        return monday + timedelta(days=5), monday + timedelta(days=6)
    if unit == "month":
        return _month_span(*_add_months(anchor.year, anchor.month, -n))
    year = anchor.year - n
    return date(year, 1, 1), date(year, 12, 31)


_GRANULARITY = {"day": "day", "week": "week", "weekend": "week", "month": "month", "year": "year"}
_COARSER = {"day": "week", "week": "month", "weekend": "month", "month": "month", "year": "year"}


def _count(word: str) -> tuple[int, int] | None:
    word = re.sub(r"\s+", " ", word.lower())
    if word.isdigit():
        return int(word), int(word)
    if word in _VAGUE:
        return _VAGUE[word]
    n = _NUMBERS.get(word)
    return (n, n) if n is not None else None


def _weekday_before(anchor: date, weekday: int) -> date:
    return anchor - timedelta(days=(anchor.weekday() - weekday - 1) % 7 + 1)


def _weekday_after(anchor: date, weekday: int) -> date:
    return anchor + timedelta(days=(weekday - anchor.weekday() - 1) % 7 + 1)


def _easter(year: int) -> date:
    """Gregorian Easter Sunday (the anonymous Gregorian computus)."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = b // 4, b % 4
    g = (8 * b + 13) // 25
    h = (19 * a + b - d - g + 15) % 30
    i, k = c // 4, c % 4
    l_ = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * l_) // 451
    month, day = divmod(h + l_ - 7 * m + 114, 31)
    return date(year, month, day + 1)


def _thanksgiving(year: int) -> date:
    first = date(year, 11, 1)
    return first + timedelta(days=(3 - first.weekday()) % 7 + 21)


_HOLIDAYS: dict[str, Callable[[int], date]] = {
    "christmas eve": lambda y: date(y, 12, 24),
    "christmas day": lambda y: date(y, 12, 25),
    "christmas": lambda y: date(y, 12, 25),
    "xmas": lambda y: date(y, 12, 25),
    "new year's eve": lambda y: date(y, 12, 31),
    "new years eve": lambda y: date(y, 12, 31),
    "new year's day": lambda y: date(y, 1, 1),
    "halloween": lambda y: date(y, 10, 31),
    "valentine's day": lambda y: date(y, 2, 14),
    "valentines day": lambda y: date(y, 2, 14),
    "independence day": lambda y: date(y, 7, 4),
    "the fourth of july": lambda y: date(y, 7, 4),
    "thanksgiving": _thanksgiving,
    "easter": _easter,
    "easter sunday": _easter,
}


def _day_in_year(month: int, day: int, anchor: date, tense: int, modifier: str = "") -> date | None:
    """The year for a day named without one: by tense (or the nearest occurrence)."""
    candidates = []
    for year in (anchor.year - 1, anchor.year, anchor.year + 1):
        try:
            candidates.append(date(year, month, day))
        except ValueError:
            continue
    return _pick(candidates, anchor, tense, modifier)


def _pick(candidates: list[date], anchor: date, tense: int, modifier: str = "") -> date | None:
    if not candidates:
        return None
    if modifier == "last":
        past = [c for c in candidates if c < anchor]
        return past[-1] if past else None
    if modifier == "next":
        future = [c for c in candidates if c > anchor]
        return future[0] if future else None
    if modifier == "this":
        same = [c for c in candidates if c.year == anchor.year]
        return same[0] if same else None
    if tense > 0:
        future = [c for c in candidates if c >= anchor]
        return future[0] if future else None
    if tense < 0:
        past = [c for c in candidates if c <= anchor]
        return past[-1] if past else None
    return min(candidates, key=lambda c: (abs((c - anchor).days), c > anchor))


def _month_in_year(month: int, anchor: date, tense: int, modifier: str = "") -> tuple[date, date] | None:
    firsts = [date(year, month, 1) for year in (anchor.year - 1, anchor.year, anchor.year + 1)]
    this_month = anchor.replace(day=1)
    if modifier in ("last", "next"):
        # strictly before / after the anchor's month
        chosen = _pick(firsts, this_month, 0, modifier)
    elif tense:
        chosen = _pick(firsts, this_month, tense)
    elif modifier == "this":
        chosen = date(anchor.year, month, 1)
    else:
        chosen = min(firsts, key=lambda c: (abs((c.year - anchor.year) * 12 + c.month - anchor.month),
                                            c > this_month))
    return _month_span(chosen.year, chosen.month) if chosen else None


def _season_span(season: str, year: int) -> tuple[date, date]:
    first, last = _SEASONS[season]
    if first > last:  # winter: December of ``year`` to February of the next
        return date(year, 12, 1), _month_span(year + 1, 2)[1]
    return date(year, first, 1), _month_span(year, last)[1]


# ------------------------------------------------------------------------------------------- patterns
# A handler gets (match, text, anchor) and returns (start, end, granularity[, expr_start, expr_end]) or None.
# ``needs``: words of which the text must hold one (as a run of letters), or "digit", for the rule to run.
_Result = tuple
_RULES: list[tuple[re.Pattern, Callable[[re.Match, str, date | None], _Result | None], frozenset[str]]] = []
_MONTH_KEYS = frozenset(_MONTHS)
_WEEKDAY_KEYS = frozenset(_WEEKDAYS) | frozenset(_WEEKDAY_ABBR)
_UNITS = frozenset({"day", "days", "week", "weeks", "weekend", "weekends", "month", "months", "year", "years"})
_SEASON_KEYS = frozenset(_SEASONS)
_DIGIT_ONLY = frozenset({"digit"})


def _rule(pattern: str, needs: frozenset[str] | set[str], flags: int = re.I):
    def register(handler):
        _RULES.append((re.compile(pattern, flags), handler, frozenset(needs)))
        return handler
    return register


def _valid_year(y: int) -> bool:
    return 1900 <= y <= 2099


def _month_ok(word: str, needs_context: bool) -> int | None:
    """The month number, or None when this spelling is not a month here (lower-case "may", ...)."""
    key = word.lower().rstrip(".")
    if key in _CAPITAL_ONLY_MONTHS and not word[0].isupper():
        return None
    if needs_context and key in _NAME_LIKE_MONTHS:
        return None
    return _MONTHS.get(key)


def _full_day(year: int, month: int, day: int) -> _Result | None:
    try:
        d = date(year, month, day)
    except ValueError:
        return None
    return d, d, "day"


@_rule(r"(?<![\d/.-])(?P<y>\d{4})([-/])(?P<m>\d{1,2})\2(?P<d>\d{1,2})(?![\d/-])", _DIGIT_ONLY)
def _iso(m, text, anchor):
    y = int(m["y"])
    return _full_day(y, int(m["m"]), int(m["d"])) if _valid_year(y) else None


@_rule(r"(?<![\d/.-])(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<y>\d{4}|\d{2})(?![\d/-])", _DIGIT_ONLY)
def _slash(m, text, anchor):
    a, b, y = int(m["a"]), int(m["b"]), int(m["y"])
    y = y + 2000 if len(m["y"]) == 2 else y
    if not _valid_year(y):
        return None
    month, day = (a, b) if a <= 12 else (b, a)  # US order unless the first cannot be a month
    return _full_day(y, month, day)


@_rule(r"\b(?:on|by|until|till|since)\s+(?P<x>(?P<a>\d{1,2})/(?P<b>\d{1,2}))(?![\d/-]|\.\d)", _DIGIT_ONLY)
def _slash_no_year(m, text, anchor):
    """"on 9/30": month/day (US order) in the year the tense says; only after "on", "by", "since"."""
    a, b = int(m["a"]), int(m["b"])
    month, day = (a, b) if a <= 12 else (b, a)
    if anchor is None or not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    chosen = _day_in_year(month, day, anchor, _tense(text, m.start(), m.end()))
    return (chosen, chosen, "day") if chosen else None


@_rule(r"(?<![\d/.-])(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?P<y>\d{4})(?![\d.]\d)", _DIGIT_ONLY)
def _dotted(m, text, anchor):
    y = int(m["y"])
    return _full_day(y, int(m["m"]), int(m["d"])) if _valid_year(y) else None


_WD_PREFIX = rf"(?:(?P<wd>{_WEEKDAY_FULL}),?\s+)?"


def _day_month_year(m, text, anchor):
    month = _month_ok(m["mon"], False)
    day = int(m["d"])
    if month is None or not 1 <= day <= 31:
        return None
    if m["y"]:
        return _full_day(int(m["y"]), month, day)
    if anchor is None:
        return None
    chosen = _day_in_year(month, day, anchor, _tense(text, m.start(), m.end()))
    return (chosen, chosen, "day") if chosen else None


_rule(rf"\b{_WD_PREFIX}(?:the\s+)?{_DAY}(?:\s+of)?\s+(?P<mon>{_MONTH_ANY}){_END}(?:,?\s+{_YEAR}\b)?",
      _MONTH_KEYS)(
    _day_month_year)
_rule(rf"\b{_WD_PREFIX}(?P<mon>{_MONTH_ANY})\s+(?:the\s+)?{_DAY}\b(?![:.]?\d|\s*%)(?:,?\s+{_YEAR}\b)?",
      _MONTH_KEYS)(
    _day_month_year)


@_rule(rf"\b(?P<x>(?:(?P<mod>early|mid|late|(?:the\s+)?(?:end|beginning|start|middle)\s+of)[\s-]+)?"
       rf"(?P<mon>{_MONTH_ANY}),?\s+(?:of\s+)?{_YEAR})\b", _MONTH_KEYS)
def _month_year(m, text, anchor):
    month = _month_ok(m["mon"], False)
    if month is None:
        return None
    return (*_month_span(int(m["y"]), month), "month")


_MONTH_PREPOSITIONS = ("in|since|during|until|till|by|from|through|throughout|before|after|around|of|"
                       "for|last|next|this|early|mid|late|(?:the\\s+)?(?:end|beginning|start|middle)\\s+of")


@_rule(rf"\b(?:(?P<pre>{_MONTH_PREPOSITIONS})[\s-]+)?(?P<mon>{_MONTH_FULL})\b(?!,?\s*\d|['’]s\b|-)",
       _MONTH_KEYS)
def _month_alone(m, text, anchor):
    pre = (m["pre"] or "").lower()
    month = _month_ok(m["mon"], needs_context=not pre or pre == "for")
    if month is None or anchor is None:
        return None
    if pre == "for" and m["mon"].lower() in _NAME_LIKE_MONTHS:
        return None
    modifier = pre if pre in ("last", "next", "this") else ""
    tense = -1 if pre == "since" else _tense(text, m.start(), m.end())
    span = _month_in_year(month, anchor, tense, modifier)
    if span is None:
        return None
    keep_pre = pre in ("last", "next", "this", "early", "mid", "late") or pre.endswith("of")
    x0 = m.start() if keep_pre else m.start("mon")
    return (*span, "month", x0, m.end())


@_rule(rf"\b(?:(?P<pre>in|since|during|by|from|until|till|before|after|around|circa|of|"
       rf"early|mid|late|the\s+year|back\s+in|class\s+of)[\s-]+){_YEAR}\b(?![-/.]\d|\s*%|['’]?s\b)",
       _DIGIT_ONLY)
def _year_after_preposition(m, text, anchor):
    y = int(m["y"])
    pre = m["pre"].lower()
    x0 = m.start() if pre in ("early", "mid", "late") else m.start("y")
    return date(y, 1, 1), date(y, 12, 31), "year", x0, m.end()


@_rule(rf"(?:^|(?<=[.!?]\s)|(?<=\n)){_YEAR}(?=\s+(?:was|has\s+been|is|will\s+be)\b)", _DIGIT_ONLY)
def _year_as_subject(m, text, anchor):
    y = int(m["y"])
    return date(y, 1, 1), date(y, 12, 31), "year"


@_rule(r"\b(?:on|by|until|till|since)\s+(?P<x>the\s+(?P<d>[0-3]?\d)(?:st|nd|rd|th))\b"
       r"(?!\s+(?:of\b|floor|time|try|attempt|day|place|grade|round|lap|row|hole|street|st\b|avenue|ave\b|"
       r"birthday|anniversary|century|level|page|chapter|game|one|week|month|year|inning|period|quarter)|-)",
       _DIGIT_ONLY)
def _day_of_month(m, text, anchor):
    """"on the 15th": the 15th of the anchor's month, or of the month before or after, by tense."""
    day = int(m["d"])
    if anchor is None or not 1 <= day <= 31:
        return None
    candidates = []
    for n in (-1, 0, 1):
        year, month = _add_months(anchor.year, anchor.month, n)
        if day <= calendar.monthrange(year, month)[1]:
            candidates.append(date(year, month, day))
    chosen = _pick(candidates, anchor, _tense(text, m.start(), m.end()))
    return (chosen, chosen, "day") if chosen else None


@_rule(r"\b(?P<w>the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|yesterday|today|tomorrow|"
       r"tonight|last\s+night|this\s+(?:morning|afternoon|evening)|earlier\s+today)\b",
       {"yesterday", "today", "tomorrow", "tonight", "night", "morning", "afternoon", "evening"})
def _relative_day(m, text, anchor):
    if anchor is None:
        return None
    w = re.sub(r"\s+", " ", m["w"].lower())
    offset = {"the day before yesterday": -2, "the day after tomorrow": 2, "yesterday": -1, "tomorrow": 1,
              "last night": -1}.get(w, 0)
    day = anchor + timedelta(days=offset)
    return day, day, "day"


_WEEKDAY_MODS = "last|next|this\\s+past|this\\s+coming|this|past|coming|on|the"


@_rule(rf"\b(?:(?P<mod>{_WEEKDAY_MODS})\s+)?(?P<wd>{_WEEKDAY_ANY})\b"
       r"(?:\s+(?P<post>before\s+last|before)(?=\s*(?:$|[.,!?;:)\-–—]|and\b|but\b|so\b)))?", _WEEKDAY_KEYS)
def _weekday(m, text, anchor):
    word = m["wd"]
    key = word.lower()
    mod = re.sub(r"\s+", " ", (m["mod"] or "").lower())
    abbreviated = key not in _WEEKDAYS
    if abbreviated and (mod in ("", "the") or not word[0].isupper()):
        return None  # "sun", "sat", "wed" alone are words
    if anchor is None:
        return None
    before = text[max(0, m.start() - 12):m.start()].lower()
    if re.search(r"\b(?:every|each)\s+$", before):
        return None
    if not mod and re.search(r"(?:good|black|cyber|super|ash|palm|holy|easter)\s+$", before):
        return None
    after = text[m.end("wd"):m.end("wd") + 8].lower()
    if re.match(r"\s+(?:school|best|paper|brunch)\b", after):
        return None
    weekday = _WEEKDAYS.get(key, _WEEKDAY_ABBR.get(key))
    post = re.sub(r"\s+", " ", (m["post"] or "").lower())
    if post and mod not in ("", "the"):
        post = ""  # "last Friday before ..." : keep the modifier's reading
    if mod == "the" and not post:
        return None  # "the Friday" alone refers to some other time
    tense = _tense(text, m.start(), m.end())
    if post == "before last":
        day = _weekday_before(anchor, weekday) - timedelta(days=7)
    elif post == "before" or mod in ("last", "past", "this past"):
        day = _weekday_before(anchor, weekday)
    elif mod in ("next", "coming", "this coming"):
        day = _weekday_after(anchor, weekday)
    elif mod == "this":
        day = _monday(anchor) + timedelta(days=weekday)
        if tense > 0 and day < anchor:
            day += timedelta(days=7)
        elif tense < 0 and day > anchor:
            day -= timedelta(days=7)
    else:
        day = _weekday_after(anchor, weekday) if tense > 0 else _weekday_before(anchor, weekday)
    end = m.end() if post else m.end("wd")
    start = m.start() if mod not in ("on", "the") else (m.start() if post else m.start("wd"))
    return day, day, "day", start, end


@_rule(r"\b(?:(?P<mod>last|this\s+past|this\s+coming|this|next|past|coming|over\s+the|on\s+the|"
       r"the|during\s+the)\s+)weekend\b(?!s)(?:\s+(?P<post>before\s+last|after\s+next|before)"
       r"(?=\s*(?:$|[.,!?;:)\-–—]|and\b|but\b|so\b)))?", {"weekend"})
def _weekend(m, text, anchor):
    if anchor is None:
        return None
    mod = re.sub(r"\s+", " ", m["mod"].lower())
    post = re.sub(r"\s+", " ", (m["post"] or "").lower())
    if post == "before last":
        back = 2
    elif post == "after next":
        back = -2
    elif post == "before" or mod in ("last", "this past", "past"):
        back = 1
    elif mod in ("next", "coming", "this coming"):
        back = -1
    else:
        tense = _tense(text, m.start(), m.end())
        if mod == "this":
            back = 1 if tense < 0 and anchor.weekday() < 5 else 0
        else:  # "over the weekend", "on the weekend": reported unless the sentence is in the future
            back = 0 if tense > 0 or anchor.weekday() >= 5 else 1
            if mod == "the" and not tense:
                return None
    start, end = _unit_back(anchor, "weekend", back)
    x0 = m.start("mod") + (len(m["mod"]) - 3 if mod in ("over the", "on the", "during the") else 0)
    return start, end, "week", x0, m.end()


@_rule(r"\b(?P<mod>last|this\s+past|this\s+coming|this|next|coming|earlier\s+this|later\s+this|"
       r"the\s+past|the\s+last|past)\s+(?P<unit>week|month|year)\b(?!s\b)", {"week", "month", "year"})
def _unit_relative(m, text, anchor):
    if anchor is None:
        return None
    mod = re.sub(r"\s+", " ", m["mod"].lower())
    unit = m["unit"].lower()
    back = {"last": 1, "this past": 1, "this": 0, "next": -1, "this coming": -1, "coming": -1}.get(mod)
    if back is not None:
        return (*_unit_back(anchor, unit, back), unit)
    start, end = _unit_back(anchor, unit, 0)
    if mod == "earlier this":
        return start, anchor, unit
    if mod == "later this":
        return anchor, end, unit
    # "the past week", "past year": the rolling span ending on the anchor
    if unit == "week":
        return anchor - timedelta(days=6), anchor, unit
    if unit == "month":
        y, mo = _add_months(anchor.year, anchor.month, -1)
        day = min(anchor.day, calendar.monthrange(y, mo)[1])
        return date(y, mo, day) + timedelta(days=1), anchor, unit
    return _shift_year(anchor, -1) + timedelta(days=1), anchor, unit


def _shift_year(day: date, n: int) -> date:
    try:
        return day.replace(year=day.year + n)
    except ValueError:  # 29 February
        return day.replace(year=day.year + n, day=28)


@_rule(r"\bthe\s+(?P<unit>week|month|year)\s+(?P<post>before\s+last|after\s+next|"
       r"before(?!\s+(?:the|a|an|my|your|his|her|our|their|this|that|\d|(?-i:[A-Z]))))",
       {"week", "month", "year"})
def _unit_before(m, text, anchor):
    if anchor is None:
        return None
    back = {"before last": 2, "before": 1, "after next": -2}[re.sub(r"\s+", " ", m["post"].lower())]
    unit = m["unit"].lower()
    return (*_unit_back(anchor, unit, back), unit)


@_rule(rf"\b(?P<n>{_NUM})\s+(?P<unit>day|week|weekend|month|year)s?\s+(?P<dir>ago|back|from\s+now)\b"
       r"(?P<today>\s+(?:today|to\s+the\s+day))?", {"ago", "back", "now"})
def _ago(m, text, anchor):
    if anchor is None:
        return None
    count = _count(m["n"])
    if count is None:
        return None
    sign = -1 if m["dir"].lower().startswith("from") else 1
    unit = m["unit"].lower()
    if m["today"] and count[0] == count[1] and unit in ("week", "month", "year"):
        # "a year ago today": that very day (29 February falls back to the 28th)
        n = sign * count[0]
        if unit == "week":
            day = anchor - timedelta(weeks=n)
        else:
            year, month = _add_months(anchor.year, anchor.month, -n * (12 if unit == "year" else 1))
            day = date(year, month, min(anchor.day, calendar.monthrange(year, month)[1]))
        return day, day, "day"
    return _counted(anchor, unit, count, sign)


def _counted(anchor: date, unit: str, count: tuple[int, int], sign: int) -> _Result | None:
    lo, hi = count
    limit = {"day": 4000, "week": 600, "weekend": 600, "month": 1200, "year": 150}[unit]
    if hi > limit:
        return None
    if lo == hi:
        return (*_unit_back(anchor, unit, sign * lo), _GRANULARITY[unit])
    a, b = _unit_back(anchor, unit, sign * hi), _unit_back(anchor, unit, sign * lo)
    if sign < 0:
        a, b = b, a
    return a[0], b[1], _COARSER[unit]


@_rule(rf"\bin\s+(?P<n>{_NUM})\s+(?P<unit>day|week|month|year)s?\b", _UNITS)
def _in_future(m, text, anchor):
    if anchor is None or _tense(text, m.start(), m.end()) <= 0:
        return None  # "I finished it in a day": a duration, not a date
    count = _count(m["n"])
    return _counted(anchor, m["unit"].lower(), count, -1) if count else None


@_rule(r"\b(?P<mod>last|this\s+past|this|next|this\s+coming|past)\s+(?P<s>spring|summer|fall|autumn|winter)\b",
       _SEASON_KEYS)
def _season_relative(m, text, anchor):
    if anchor is None:
        return None
    mod = re.sub(r"\s+", " ", m["mod"].lower())
    season = m["s"].lower()
    spans = [_season_span(season, y) for y in range(anchor.year - 2, anchor.year + 2)]
    if mod in ("last", "this past", "past"):
        chosen = [s for s in spans if s[1] < anchor][-1]
    elif mod in ("next", "this coming"):
        chosen = [s for s in spans if s[0] > anchor][0]
    else:  # "this summer": the one holding the anchor, else the one of the anchor's year
        holding = [s for s in spans if s[0] <= anchor <= s[1]]
        chosen = holding[0] if holding else _season_span(season, anchor.year)
    return chosen[0], chosen[1], "month"


@_rule(r"\b(?:in|during|over|for)\s+(?P<x>the\s+(?P<s>spring|summer|fall|autumn|winter))\b"
       r"(?!\s+(?:of|before|after)\b)",
       _SEASON_KEYS)
def _season_by_tense(m, text, anchor):
    """"in the fall": the season holding the anchor, else the next one (future) or the last one (past)."""
    if anchor is None:
        return None
    season = m["s"].lower()
    spans = [_season_span(season, y) for y in range(anchor.year - 2, anchor.year + 2)]
    holding = [s for s in spans if s[0] <= anchor <= s[1]]
    if holding:
        chosen = holding[0]
    elif _tense(text, m.start(), m.end()) < 0:
        chosen = [s for s in spans if s[1] < anchor][-1]
    else:
        chosen = [s for s in spans if s[0] > anchor][0]
    return chosen[0], chosen[1], "month"


@_rule(rf"\b(?:(?:in|during)\s+(?:the\s+)?)?(?P<x>(?P<s>spring|summer|fall|autumn|winter)\s+(?:of\s+)?{_YEAR})\b",
       _SEASON_KEYS)
def _season_year(m, text, anchor):
    start, end = _season_span(m["s"].lower(), int(m["y"]))
    return start, end, "month", m.start("x"), m.end("x")


_NEXT_WORD = re.compile(r"\s+([a-z][a-z'’]*)")  # a lower-case word right after
_NOT_A_NOUN = STOPWORDS | CHATTER | DATE_WORDS | {"eve", "day"}
_HOLIDAY_RE = "|".join(sorted((re.escape(h).replace("'", "['’]?").replace(r"\ ", r"\s+") for h in _HOLIDAYS),
                              key=len, reverse=True))


@_rule(rf"\b(?:(?P<mod>last|this|next|on|at|over|for)\s+)?(?P<h>{_HOLIDAY_RE})\b(?:,?\s+{_YEAR}\b)?",
       {"christmas", "xmas", "eve", "year", "halloween", "valentine", "valentines", "independence", "fourth",
        "thanksgiving", "easter"})
def _holiday(m, text, anchor):
    key = re.sub(r"\s+", " ", m["h"].lower().replace("’", "'"))
    key = key if key in _HOLIDAYS else key.replace("'", "")
    compute = _HOLIDAYS.get(key) or _HOLIDAYS.get(key.replace("years", "year's").replace("valentines",
                                                                                          "valentine's"))
    if compute is None:
        return None
    follower = _NEXT_WORD.match(text, m.end())
    if not m["y"] and follower and follower[1] not in _NOT_A_NOUN:
        return None  # "a Halloween party", "the Christmas magic": a kind of thing, not a date
    mod = (m["mod"] or "").lower()
    x0 = m.start() if mod in ("last", "this", "next") else m.start("h")
    if m["y"]:
        day = compute(int(m["y"]))
        return day, day, "day", x0, m.end()
    if anchor is None:
        return None
    candidates = [compute(y) for y in (anchor.year - 1, anchor.year, anchor.year + 1)]
    modifier = mod if mod in ("last", "next", "this") else ""
    day = _pick(candidates, anchor, _tense(text, m.start(), m.end()), modifier)
    return (day, day, "day", x0, m.end()) if day else None


_LETTERS = re.compile(r"[a-z]+")
_DIGIT = re.compile(r"\d")


def resolve_dates(text: str, anchor: datetime | date | None) -> list[ResolvedDate]:
    """Every date expression in ``text`` resolved against ``anchor`` (None: only self-contained dates).

    Overlapping candidates keep the longest ("the day before yesterday" over "yesterday"); the result is
    in text order. Never raises on any text.
    """
    if not text:
        return []
    words = set(_LETTERS.findall(text.lower()))
    if _DIGIT.search(text):
        words.add("digit")
    day_anchor = anchor.date() if isinstance(anchor, datetime) else anchor
    found: list[tuple[int, int, ResolvedDate]] = []
    for pattern, handler, needs in _RULES:
        if needs.isdisjoint(words):
            continue
        for m in pattern.finditer(text):
            try:
                result = handler(m, text, day_anchor)
            except (ValueError, OverflowError, IndexError):
                result = None
            if not result:
                continue
            start, end, granularity = result[:3]
            if len(result) > 3:
                x0, x1 = result[3:5]
            elif "x" in pattern.groupindex and m["x"]:
                x0, x1 = m.span("x")
            else:
                x0, x1 = m.span()
            found.append((m.start(), m.end(), ResolvedDate(text[x0:x1], start, end, granularity, x0, x1)))
    found.sort(key=lambda f: (f[0] - f[1], f[0]))
    taken: list[tuple[int, int]] = []
    kept = []
    for s, e, resolved in found:
        if any(s < te and ts < e for ts, te in taken):
            continue
        taken.append((s, e))
        kept.append(resolved)
    kept.sort(key=lambda r: r.start_offset)
    return kept


# ------------------------------------------------------------------------------------------------ anchor
_LOCOMO_TIME = re.compile(r"^\s*(?P<h>\d{1,2}):(?P<mi>\d{2})\s*(?P<ampm>[ap]\.?m\.?)?\s*(?:on\s+)?(?P<rest>.+)$",
                          re.I)
_LOCOMO_FAST = re.compile(r"^(?P<h>\d{1,2}):(?P<mi>\d\d) (?P<ampm>[ap]m) on (?P<d>\d{1,2}) (?P<mon>[A-Za-z]+),? "
                          r"(?P<y>\d{4})$", re.I)
_LONGMEMEVAL = re.compile(r"^\s*(?P<y>\d{4})/(?P<m>\d{1,2})/(?P<d>\d{1,2})(?:\s*\(\w+\))?"
                          r"(?:\s+(?P<h>\d{1,2}):(?P<mi>\d{2}))?\s*$")


def parse_anchor(created_at: str | datetime | date | int | float | None) -> datetime | None:
    """A record's timestamp as a datetime (wall-clock as written; no time-zone conversion), or None.

    Accepts datetimes, dates, epoch seconds, ISO-8601 with or without time and zone
    ("2023-05-08T13:56:00Z", "2023-05-08"), LoCoMo session times ("1:56 pm on 8 May, 2023"),
    LongMemEval's "2023/05/20 (Sat) 02:21", and any string naming one full date ("May 8, 2023").
    """
    if created_at is None or isinstance(created_at, bool):
        return None
    if isinstance(created_at, datetime):
        return created_at
    if isinstance(created_at, date):
        return datetime(created_at.year, created_at.month, created_at.day)
    if isinstance(created_at, int | float):
        try:
            return datetime.fromtimestamp(created_at, tz=UTC)
        except (ValueError, OverflowError, OSError):
            return None
    if not isinstance(created_at, str):
        return None
    text = created_at.strip()
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        pass
    if m := _LONGMEMEVAL.match(text):
        try:
            return datetime(int(m["y"]), int(m["m"]), int(m["d"]), int(m["h"] or 0), int(m["mi"] or 0))
        except ValueError:
            return None
    if m := _LOCOMO_FAST.match(text):
        hour = int(m["h"]) % 12 + (12 if m["ampm"].lower() == "pm" else 0)
        month = _MONTHS.get(m["mon"].lower())
        if month and int(m["mi"]) <= 59:
            try:
                return datetime(int(m["y"]), month, int(m["d"]), hour, int(m["mi"]))
            except ValueError:
                pass
    hour = minute = 0
    if (m := _LOCOMO_TIME.match(text)) and int(m["h"]) <= 23 and int(m["mi"]) <= 59:
        hour, minute = int(m["h"]), int(m["mi"])
        if m["ampm"]:
            hour = hour % 12 + (12 if m["ampm"][0].lower() == "p" else 0)
        text = m["rest"]
    for found in resolve_dates(text, None):
        if found.granularity == "day":
            return datetime(found.start.year, found.start.month, found.start.day, hour, minute)
    return None
