"""Phone numbers in international and common national formats.

A loose pattern finds digit runs with phone punctuation; each run is cut at its groups and the longest
part that has a phone's shape (international ``+CC ...``, North American ``(415) 555-0132``, or a
trunk-prefixed national number ``020 7946 0958``) is kept. Bare digit runs count only after a word like
"call" or "mobile": on their own they are far more often ids, timestamps or amounts.

When Google's libphonenumber port (``phonenumbers``) is importable, a shaped candidate must also be a
valid number in its numbering plan (``evals/bench/pii.py`` measures both ways).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

try:
    import phonenumbers
except ImportError:  # the shape rules alone still work; precision is lower (see the benchmark)
    phonenumbers = None

# Not glued to a word, a decimal or version, a path, a time, a currency amount or an id like ORD-123.
# Nor the continuation of a word ending in a digit ('DE29 0805 7783 ...' is an IBAN's tail).
# ('tel:+1...' is the one place a colon may come right before.) The first character is matched before
# the look-behinds so that the regex engine can skip ahead to candidate characters: 5x faster.
_CANDIDATE = re.compile(
    r"(?:([(+])|[0-9])"
    r"(?:(?<=tel:[+(0-9])|(?<![\w+.\-/:#$€£%,][(+0-9])(?<![0-9][ \-][(+0-9]))"
    r"(?(1)[+(]?[0-9])"
    r"[0-9 ().\-]{5,24}[0-9](?![\w\-/%]|[.,:][0-9])", re.ASCII)
_DIGIT_GROUP = re.compile(r"[0-9]+")
# A gap between two digit groups that one phone number can contain.
_GAP = re.compile(r"(?:[ .\-]|\) ?| ?\(|\)[ .\-]|[ .\-]\(|[ .\-]?\(0\)[ .\-]?)?")

# '+' or the '00' international prefix, the country code (maybe in parentheses), an optional '(0)'.
_INTERNATIONAL = re.compile(r"(?:\(\+[0-9]{1,3}\)|\+[0-9]{1,3}|00[1-9][0-9]{0,2})(?:[ .\-]?\(0\))?"
                            r"(?:[ .\-]?\(?[0-9]+\)?)*")
_NORTH_AMERICAN = re.compile(r"(?:1[ .\-]?)?(?:\([2-9][0-9]{2}\) ?|[2-9][0-9]{2}[ .\-])[2-9][0-9]{2}[ .\-][0-9]{4}")
_TRUNK_NATIONAL = re.compile(r"\(?0[0-9]{1,4}\)?(?:[ .\-][0-9]{2,8}){1,4}")
_BARE_NATIONAL = re.compile(r"1?[2-9][0-9]{2}[2-9][0-9]{6}|0[1-9][0-9]{8,9}")
_PHONE_CONTEXT = re.compile(r"(?i)\b(?:phone|tel|telephone|mobile|cell|call|whatsapp|fax|sms|text me)\b"
                            r"[^0-9\n.!?]{0,20}$")

# Regions tried for a number written with a national trunk 0: the plans where that writing is common.
_TRUNK_REGIONS = ("GB", "FR", "DE", "IT", "NL", "AU", "IN", "JP")


class PhoneDetector:
    """Finds phone numbers; ``use_libphonenumber`` adds the numbering-plan check (default: when installed)."""

    def __init__(self, use_libphonenumber: bool | None = None) -> None:
        if use_libphonenumber and phonenumbers is None:
            raise ImportError("phonenumbers is not installed")
        self.use_libphonenumber = phonenumbers is not None if use_libphonenumber is None else use_libphonenumber

    def find(self, text: str) -> Iterator[tuple[int, int]]:
        """``(start, end)`` of each phone number in ``text``."""
        for match in _CANDIDATE.finditer(text):
            yield from self._best_parts(text, match.start(), match.end())

    def _best_parts(self, text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
        groups = [m.span() for m in _DIGIT_GROUP.finditer(text, start, end)]
        # Groups that cannot belong to one number (a double space, a comma) split the run into sections.
        sections, current = [], [groups[0]]
        for previous, group in zip(groups, groups[1:], strict=False):
            if _GAP.fullmatch(text, previous[1], group[0]):
                current.append(group)
            else:
                sections.append(current)
                current = [group]
        sections.append(current)
        for section in sections:
            yield from self._search(text, section)

    def _search(self, text: str, groups: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
        """The longest valid run of consecutive groups, then the same on what is left either side. A run
        is cut from a longer one only at a space: '025-3655882' inside '025-3655882-2700348' is an id's part."""
        if not groups:
            return
        before = [0]  # digits in groups[:i]
        for start, end in groups:
            before.append(before[-1] + end - start)
        for size in range(len(groups), 0, -1):
            for first in range(len(groups) - size + 1):
                last = first + size - 1
                digits = before[last + 1] - before[first]
                if not 7 <= digits <= 17:
                    continue
                if first and " " not in text[groups[first - 1][1]:groups[first][0]]:
                    continue
                if last + 1 < len(groups) and " " not in text[groups[last][1]:groups[last + 1][0]]:
                    continue
                span = self._valid_span(text, groups[first][0], groups[last][1], digits)
                if span:
                    yield from self._search(text, groups[:first])
                    yield span
                    yield from self._search(text, groups[last + 1:])
                    return

    def _valid_span(self, text: str, start: int, end: int, digits: int) -> tuple[int, int] | None:
        # A leading '+', '(' or '(+' belongs to the number.
        for prefix in ("(+", "+", "("):
            if start >= len(prefix) and text.startswith(prefix, start - len(prefix)):
                start -= len(prefix)
                break
        candidate = text[start:end]
        if candidate.count("(") != candidate.count(")") and candidate[0] == "(":
            start, candidate = start + 1, candidate[1:]
        if candidate.count("(") != candidate.count(")"):
            return None
        if candidate.startswith(("+", "(+", "00")):
            national = digits - 2 if candidate.startswith("00") else digits
            if 8 <= national <= 15 and _INTERNATIONAL.fullmatch(candidate) and self._plan_valid(candidate, None):
                return start, end
            return None
        if digits > 11:
            return None
        if " " not in candidate and "-" not in candidate and "." not in candidate and "(" not in candidate:
            if _BARE_NATIONAL.fullmatch(candidate) and _PHONE_CONTEXT.search(text, max(0, start - 40), start):
                return (start, end) if self._national_valid(candidate) else None
            return None
        if _NORTH_AMERICAN.fullmatch(candidate) or (_TRUNK_NATIONAL.fullmatch(candidate) and 10 <= digits <= 11):
            return (start, end) if self._national_valid(candidate) else None
        return None

    def _national_valid(self, candidate: str) -> bool:
        if not self.use_libphonenumber:
            return True
        regions = _TRUNK_REGIONS if candidate.lstrip("(").startswith("0") else ("US",)
        return any(self._plan_valid(candidate, region) for region in regions)

    def _plan_valid(self, candidate: str, region: str | None) -> bool:
        if not self.use_libphonenumber:
            return True
        if candidate.startswith("00"):
            candidate = "+" + candidate[2:]
        try:
            return phonenumbers.is_valid_number(phonenumbers.parse(candidate, region))
        except phonenumbers.NumberParseException:
            return False
