"""What a detector reports, and how overlapping reports from different detectors become one answer."""

from __future__ import annotations

from dataclasses import dataclass

PII_TYPES: tuple[str, ...] = ("EMAIL", "PHONE", "CARD", "IBAN", "SSN", "IP", "SECRET")

# Most specific first. On a tie in length the earlier type wins: a key or an address carries structure
# (prefix, '@', checksum) that a phone number, the loosest shape, does not.
_SPECIFICITY = ("SECRET", "EMAIL", "IBAN", "CARD", "SSN", "IP", "PHONE")
_RANK = {name: rank for rank, name in enumerate(_SPECIFICITY)}


@dataclass(frozen=True, slots=True)
class Finding:
    """One piece of PII: its type and the span ``text[start:end]`` it occupies."""

    type: str
    start: int
    end: int


def resolve_overlaps(candidates: list[Finding]) -> list[Finding]:
    """Non-overlapping findings sorted by start: the longer candidate wins an overlap, then the more
    specific type, then the earlier one, so the answer does not depend on detector order."""
    if len(candidates) < 2:
        return list(candidates)
    ordered = sorted(candidates, key=lambda f: (f.start - f.end, _RANK.get(f.type, len(_RANK)), f.start))
    kept: list[Finding] = []
    for finding in ordered:
        if all(finding.end <= other.start or other.end <= finding.start for other in kept):
            kept.append(finding)
    kept.sort(key=lambda f: f.start)
    return kept
