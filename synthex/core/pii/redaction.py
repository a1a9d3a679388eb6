"""``redact``: findings replaced by typed placeholders, numbered per type, one number per distinct value."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from synthex.core.pii.findings import PII_TYPES, Finding
from synthex.core.pii.scanner import scan

_NOT_DIGIT = re.compile(r"[^0-9]")
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")
_PLACEHOLDER = re.compile(rf"\[({'|'.join(PII_TYPES)})_([0-9]+)\]")
# Passes beyond the first only run when removing a finding exposed another one. Values glued end to end
# with no separator ('a@b.io+44 20 7946 0958+44 20 ...') expose one more per pass (each is refused while
# a digit touches it), so a chain of n values needs n passes: the bound is the chain length redacted in
# full. A pass is one scan of the text, so the bound also caps the work at _MAX_PASSES scans.
_MAX_PASSES = 32


@dataclass(frozen=True)
class Redaction:
    """The redacted text, the findings in the *input* text, and how many values of each type were replaced
    (occurrences, not distinct values)."""

    text: str
    findings: list[Finding] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


def _normalized(pii_type: str, value: str) -> str:
    """The key under which two writings of one value share a placeholder."""
    if pii_type in ("PHONE", "CARD", "SSN"):
        return _NOT_DIGIT.sub("", value)
    if pii_type == "IBAN":
        return _NOT_ALNUM.sub("", value).upper()
    if pii_type == "IP":
        try:
            return ipaddress.ip_address(value).compressed
        except ValueError:
            return value.lower()
    if pii_type == "EMAIL":
        return value.lower()
    return value


def _substitute(text: str, findings: list[Finding], placeholders: dict[tuple[str, str], str],
                numbers: dict[str, int], counts: dict[str, int]) -> str:
    pieces, position = [], 0
    for finding in findings:
        key = (finding.type, _normalized(finding.type, text[finding.start:finding.end]))
        placeholder = placeholders.get(key)
        if placeholder is None:
            numbers[finding.type] = numbers.get(finding.type, 0) + 1
            placeholder = placeholders[key] = f"[{finding.type}_{numbers[finding.type]}]"
        counts[finding.type] = counts.get(finding.type, 0) + 1
        pieces += [text[position:finding.start], placeholder]
        position = finding.end
    pieces.append(text[position:])
    return "".join(pieces)


def _numbers_in_use(text: str) -> dict[str, int]:
    """The highest placeholder number per type already in ``text``: text redacted upstream and then joined
    with new text must not give a new value a number that already stands for another one."""
    numbers: dict[str, int] = {}
    if "[" in text:
        for match in _PLACEHOLDER.finditer(text):
            numbers[match.group(1)] = max(numbers.get(match.group(1), 0), int(match.group(2)))
    return numbers


def redact(text: str) -> Redaction:
    """``text`` with each finding replaced by ``[TYPE_n]``. The same value (emails ignoring case, phones,
    cards and SSNs by their digits) gets the same placeholder throughout the call; text without findings
    is returned as the same object. The result holds no finding, so redacting it again changes nothing."""
    findings = scan(text)
    if not findings:
        return Redaction(text, [], {})
    placeholders: dict[tuple[str, str], str] = {}
    numbers = _numbers_in_use(text)
    counts: dict[str, int] = {}
    redacted = _substitute(text, findings, placeholders, numbers, counts)
    # A value that was rejected only because it touched a finding (an address glued to a token) is
    # valid once the finding becomes a bracketed placeholder: redact until nothing is left to find.
    for _ in range(_MAX_PASSES):
        exposed = scan(redacted)
        if not exposed:
            break
        redacted = _substitute(redacted, exposed, placeholders, numbers, counts)
    return Redaction(redacted, findings, counts)
