"""One detector per PII type except phones (``phones.py``): a pattern finds candidates, and a checksum or a
rule about the surrounding text keeps the ones that are what they look like.

Every detector needs a digit or an '@' in what it reports, so text with neither is never scanned (and
provably never changed). Patterns use ASCII classes: ``\\d`` would accept other scripts' digits, which
no checksum here is defined on.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from synthex.core.pii.checksums import IBAN_LENGTHS, iban_valid, luhn_valid, ssn_valid

Spans = Iterator[tuple[int, int]]

_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+\-])"
    r"[A-Za-z0-9](?:[A-Za-z0-9._%+\-]{0,62}[A-Za-z0-9_%+\-])?"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}"
    r"(?![A-Za-z0-9\-])", re.ASCII)


# Address-shaped strings that are not mailboxes: retina image names (logo@2x.png) and scp/ssh remotes
# (git@github.com:org/repo.git), where a path follows the colon.
_IMAGE_SCALE = re.compile(r"@[1-4]x\.", re.ASCII)
_REMOTE_PATH = re.compile(r":[\w~/.\-]", re.ASCII)


def find_emails(text: str) -> Spans:
    if "@" not in text:
        return
    for match in _EMAIL.finditer(text):
        if _IMAGE_SCALE.search(match.group()) or _REMOTE_PATH.match(text, match.end()):
            continue
        yield match.span()


# 13 to 19 digits in the groupings cards are printed in: unbroken, fours (the last group shorter), or
# the 4-6-5 / 4-6-4 of American Express and Diners. Other groupings (ISBN 978-3-16-148410-0, tracking
# numbers in fours of 22 digits) are not cards even when Luhn passes by chance.
# (Here and below the first character comes before the look-behinds, which then span it: the regex
# engine skips ahead to that character instead of trying every position.)
_CARD = re.compile(
    r"[0-9](?<![\w\-.,/][0-9])(?<![0-9][ \-][0-9])"  # not the tail of a longer grouped number (an IBAN)
    r"(?:[0-9]{12,18}"
    r"|[0-9]{3}(?P<sep>[ \-])[0-9]{4}(?P=sep)[0-9]{4}(?P=sep)[0-9]{1,4}(?:(?P=sep)[0-9]{3})?"
    r"|[0-9]{3}(?P<sep2>[ \-])[0-9]{6}(?P=sep2)[0-9]{4,5})"
    r"(?![\w\-]|[.,/][0-9]|[ \-][0-9])", re.ASCII)
# Issuer prefixes of the card networks (Visa, Mastercard, Amex, Discover, JCB, Diners, UnionPay,
# Maestro): with Luhn alone one random 16-digit number in ten would pass.
_CARD_ISSUER = re.compile(r"4|5[0-5]|2[2-7]|3[47]|3[0689]|35|6[0-9]")


# Device ids use the Luhn check too: an IMEI (15 digits, often from 35...) is a card only by accident.
_IMEI_BEFORE = re.compile(r"(?i)\b(?:imei|meid|serial)\b[^.!?\n]{0,15}$")


def find_cards(text: str) -> Spans:
    for match in _CARD.finditer(text):
        digits = match.group().replace(" ", "").replace("-", "")
        if 13 <= len(digits) <= 19 and _CARD_ISSUER.match(digits) and luhn_valid(digits):
            if not _IMEI_BEFORE.search(text, max(0, match.start() - 30), match.start()):
                yield match.span()


# Upper case as printed, or all lower case as some people type it (never mixed case: that is prose).
_IBAN_START = re.compile(r"[0-9](?<![A-Za-z0-9][A-Z]{2}[0-9])(?<=[A-Z]{2}[0-9])[0-9](?=[ ]?[A-Z0-9]{4})"
                         r"|[0-9](?<![A-Za-z0-9][a-z]{2}[0-9])(?<=[a-z]{2}[0-9])[0-9](?=[ ]?[a-z0-9]{4})", re.ASCII)


def find_ibans(text: str) -> Spans:
    for match in _IBAN_START.finditer(text):
        start = match.start() - 2
        lower = text[start].islower()
        length = IBAN_LENGTHS.get(text[start:start + 2].upper())
        if length is None:
            continue
        low, high = ("a", "z") if lower else ("A", "Z")
        # Take the country's number of characters, allowing single spaces between them (printed IBANs
        # come in groups of four); what follows must not continue the word.
        chars, position, end = list(text[start:match.end()].upper()), match.end(), len(text)
        while len(chars) < length and position < end:
            char = text[position]
            if low <= char <= high or "0" <= char <= "9":
                chars.append(char.upper())
            elif not (char == " " and position + 1 < end and text[position + 1] != " "):
                break
            position += 1
        if len(chars) == length and (position == end or not text[position].isalnum()):
            if iban_valid("".join(chars)):
                yield start, position


_SSN = re.compile(r"[0-9](?<![\w\-./][0-9])[0-9]{2}-[0-9]{2}-[0-9]{4}(?![\w\-]|[./][0-9])", re.ASCII)
# Nine digits with spaces or none are an SSN only when the text says so just before.
_SSN_IN_CONTEXT = re.compile(
    r"(?i)\b(?:ssn|ss#|social security(?: number| no\.?| #)?)(?:\s*(?:is|was|:|#|number))*\s*"
    r"([0-9]{3})( ?)([0-9]{2})\2([0-9]{4})(?![\w\-]|[./][0-9])", re.ASCII)


def find_ssns(text: str) -> Spans:
    for match in _SSN.finditer(text):
        value = match.group()
        if ssn_valid(value[:3], value[4:6], value[7:]):
            yield match.span()
    if "ss" not in text and "SS" not in text and "ocial" not in text and "Ss" not in text:
        return
    for match in _SSN_IN_CONTEXT.finditer(text):
        if ssn_valid(match.group(1), match.group(3), match.group(4)):
            yield match.start(1), match.end(4)


# Octets are checked in code (0-255, no leading zero): simpler than a regex alternation, and faster.
_IPV4 = re.compile(r"[0-9](?<![\w.\-][0-9])[0-9]{0,2}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(?![\w\-]|\.[0-9A-Za-z])",
                   re.ASCII)
# Four dotted numbers shortly after a version word in the same sentence are a version, not an address
# (an address that follows such a word is lost: the benchmark measures both sides).
_VERSION_BEFORE = re.compile(
    r"(?i)(?:\b(?:v|version|ver|release|build|firmware|driver|patch|rev|section)\b|§|[=<>~]=)"
    r"(?:[^.!?\n]|\.(?! )){0,25}$")
_IPV6 = re.compile(
    r"(?<![\w:.])(?=[0-9A-Fa-f]{0,4}:[0-9A-Fa-f]{0,4}:)[0-9A-Fa-f:]{2,39}"
    r"(?:(?<=:)(?:[0-9]{1,3}\.){3}[0-9]{1,3})?(?![\w:]|\.[0-9])", re.ASCII)


def _octet(part: str) -> bool:
    return int(part) <= 255 and (part == "0" or part[0] != "0")


def find_ips(text: str) -> Spans:
    if "." in text:
        for match in _IPV4.finditer(text):
            if all(_octet(part) for part in match.group().split(".")) and \
                    not _VERSION_BEFORE.search(text, max(0, match.start() - 40), match.start()):
                yield match.span()
    if "::" in text or text.count(":") >= 7:
        for match in _IPV6.finditer(text):
            candidate = match.group()
            # A decimal digit is required: 'dead::beef' and 'add::face' are code, not addresses.
            if not any("0" <= char <= "9" for char in candidate):
                continue
            try:
                ipaddress.IPv6Address(candidate)
            except ValueError:
                continue
            yield match.span()


# Credentials by their issuer's prefix. The token must hold a digit: random keys nearly always do,
# hyphenated prose ('sk-learn-style-names') and documentation placeholders ('AKIAXXXXXXXXXXXXXXXX') don't.
_SECRET = re.compile(
    r"(?<![\w\-])(?:"
    r"sk-(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{30,}"
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"
    r")(?![\w\-])", re.ASCII)
# The token may contain dots (JWTs) but a dot after it ends the sentence, not the token.
_BEARER = re.compile(r"\b[Bb]earer[ \t]+([A-Za-z0-9._~+/\-]{15,}[A-Za-z0-9_~+/\-]=*)(?![\w\-])", re.ASCII)
_HAS_DIGIT = re.compile(r"[0-9]")


# Substrings every credential above contains: most texts hold none, and 'in' is far cheaper than the regex.
_SECRET_HINTS = ("sk-", "gh", "github_pat_", "AKIA", "ASIA", "xox", "eyJ")


def find_secrets(text: str) -> Spans:
    if any(hint in text for hint in _SECRET_HINTS):
        for match in _SECRET.finditer(text):
            if _HAS_DIGIT.search(match.group()):
                yield match.span()
    if "earer" in text:
        for match in _BEARER.finditer(text):
            if _HAS_DIGIT.search(match.group(1)):
                yield match.span(1)
