"""``scan``: every detector over one text, overlaps resolved into one sorted list of findings."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from synthex.core.pii import detectors
from synthex.core.pii.findings import Finding, resolve_overlaps
from synthex.core.pii.phones import PhoneDetector

_DIGIT = re.compile(r"[0-9]")
Detector = Callable[[str], Iterable[tuple[int, int]]]


class Scanner:
    """The detectors to run, by type. ``scan`` uses one built with the defaults; the benchmark builds
    others (phones without libphonenumber) to measure what each choice buys."""

    def __init__(self, use_libphonenumber: bool | None = None) -> None:
        self.phones = PhoneDetector(use_libphonenumber)
        # Detectors that need a digit to report anything; email is the one that needs an '@' instead.
        self.digit_detectors: tuple[tuple[str, Detector], ...] = (
            ("PHONE", self.phones.find),
            ("CARD", detectors.find_cards),
            ("IBAN", detectors.find_ibans),
            ("SSN", detectors.find_ssns),
            ("IP", detectors.find_ips),
            ("SECRET", detectors.find_secrets),
        )

    def scan(self, text: str) -> list[Finding]:
        candidates: list[Finding] = []
        if "@" in text:
            candidates += [Finding("EMAIL", start, end) for start, end in detectors.find_emails(text)]
        if _DIGIT.search(text):
            for pii_type, detect in self.digit_detectors:
                candidates += [Finding(pii_type, start, end) for start, end in detect(text)]
        return resolve_overlaps(candidates) if len(candidates) > 1 else candidates


_DEFAULT = Scanner()


def scan(text: str) -> list[Finding]:
    """The PII in ``text``: non-overlapping findings sorted by start (``text[f.start:f.end]`` is the value)."""
    return _DEFAULT.scan(text)
