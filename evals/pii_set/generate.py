"""Generates the labelled PII set ``evals/pii_set/pii_set.jsonl`` (deterministic: same seed, same file).

    python -m evals.pii_set.generate            # rewrites pii_set.jsonl next to this file

Each line is ``{"id", "text", "spans": [{"type", "start", "end"}], "negatives": [{"kind", "start",
"end"}]}``. Spans are made by construction: a template's slot is filled with a generated value and its
offsets are recorded as the text is built, so no detector is involved. ``negatives`` mark hard negatives
(versions, dates, order ids, hashes, numbers failing a checksum ...) that a detector must not report;
the benchmark attributes each false positive to the kind it overlaps.

Values are synthetic: card numbers are the networks' published test numbers or random numbers with a
computed Luhn digit, IBANs get computed check digits, SSNs are drawn from assignable ranges, phone
numbers follow each country's numbering plan (US 555-01xx and UK Ofcom drama ranges where those are
valid numbers), secrets are random strings in each issuer's format. Names mix cultures and include
names that are also common words, some written in lower case.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import random
import re
import string
import unicodedata
from collections.abc import Callable
from pathlib import Path

from synthex.core.pii.checksums import iban_check_digits, luhn_check_digit

SEED = 20240612
OUT = Path(__file__).with_name("pii_set.jsonl")

FIRST_NAMES = [
    "Amara", "Wei", "Priya", "José", "Siobhán", "Olga", "Hiroshi", "Fatima", "Kwame", "Ingrid", "Mateo",
    "Aiko", "Dmitri", "Lars", "Chiara", "Tariq", "Yuki", "Zanele", "Bjørn", "Aroha", "Rafael", "Leila",
    "Sipho", "Mei", "Arjun", "Camille", "Emeka", "Noa", "Esther", "Thanh", "Ahmed", "Sofia", "Connor",
    "Oluwaseun", "Ana", "Jonas", "Rania", "Kenji", "Margaret", "David",
]
LAST_NAMES = [
    "Okafor", "Zhang", "Patel", "García", "O'Brien", "Ivanova", "Tanaka", "Al-Sayed", "Mensah", "Johansson",
    "Rossi", "Nakamura", "Petrov", "Nguyen", "Kowalski", "Haddad", "Dlamini", "Müller", "Silva", "Kim",
    "Singh", "Cohen", "Novak", "Fernández", "Eze", "Larsen", "Moreau", "Yilmaz", "Sato", "Schmidt",
    "Thompson", "Walsh",
]
# First names that are also everyday words: hard for a name detector either way.
WORD_NAMES = ["Rose", "Will", "Grant", "Mark", "Hope", "Faith", "Dawn", "June", "Bill", "Frank", "Jack",
              "Amber", "Summer", "Joy", "Ray", "Hunter"]
DOMAINS = ["example.com", "example.org", "example.net", "gmail.com", "outlook.com", "proton.me",
           "acme-corp.io", "uni-heidelberg.de", "ox.ac.uk", "company.co.uk", "startup.ai", "mail.example.fr",
           "test.dev", "hospital.example.org", "yahoo.co.jp", "fastmail.fm"]

FILLER = [
    "Thanks for the help earlier.", "Can you keep the tone friendly but short?",
    "I'm putting together notes for next week.", "Let me know if anything is unclear.",
    "Sorry for the long message, it's been a busy day.", "Please keep this between us for now.",
    "I pasted the relevant bit below.", "No rush on this one.", "Happy to clarify anything.",
    "This is for the onboarding doc.", "We discussed this on the call yesterday.",
    "Could you also suggest a subject line?", "I'm not sure the formatting survived the copy-paste.",
    "Here's the context you asked for.", "Following up on my earlier question.",
    "Assistant: Sure, here is a revised version.", "Assistant: Got it. A few suggestions below.",
    "Assistant: I can help with that.", "Quick question before the weekend.",
    "That worked, thank you!", "Ignore the typos, I'm on my phone.",
]


class Builder:
    """Text built piece by piece, with the offsets of every labelled value."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.spans: list[dict] = []
        self.negatives: list[dict] = []

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.length += len(text)

    def label(self, value: str, pii_type: str | None = None, negative: str | None = None) -> None:
        start = self.length
        self.add(value)
        if pii_type:
            self.spans.append({"type": pii_type, "start": start, "end": self.length})
        if negative:
            self.negatives.append({"kind": negative, "start": start, "end": self.length})

    def record(self) -> dict:
        return {"text": "".join(self.parts), "spans": self.spans, "negatives": self.negatives}


def ascii_name(name: str) -> str:
    """A name as it appears in an email address: accents dropped, no apostrophes."""
    plain = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return re.sub(r"[^A-Za-z\-]", "", plain.replace("ø", "o")).lower()


class Values:
    """Generators of synthetic values, one method per slot kind; all draw from one seeded RNG."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def pick(self, items):
        return self.rng.choice(items)

    def digits(self, n: int) -> str:
        return "".join(self.rng.choice(string.digits) for _ in range(n))

    def chars(self, alphabet: str, n: int) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    # ---- PII ------------------------------------------------------------------------------------
    def person(self) -> str:
        roll = self.rng.random()
        if roll < 0.45:
            return f"{self.pick(FIRST_NAMES)} {self.pick(LAST_NAMES)}"
        if roll < 0.7:
            return self.pick(FIRST_NAMES)
        if roll < 0.85:
            return self.pick(WORD_NAMES)
        return f"{self.pick(WORD_NAMES)} {self.pick(LAST_NAMES)}"

    def person_lower(self) -> str:
        return self.pick(FIRST_NAMES + WORD_NAMES).lower()

    def email(self) -> str:
        first, last = ascii_name(self.pick(FIRST_NAMES + WORD_NAMES)), ascii_name(self.pick(LAST_NAMES))
        domain = self.pick(DOMAINS)
        local = self.pick([f"{first}.{last}", f"{first}{self.digits(2)}", f"{first[0]}{last}",
                           f"{first}_{last}+{self.pick(['news', 'work', 'receipts'])}", first,
                           f"{last}.{first[0]}", f"{first}-{last}"])
        address = f"{local}@{domain}"
        roll = self.rng.random()
        if roll < 0.15:
            return address.title()
        if roll < 0.2:
            return address.upper()
        return address

    def phone(self) -> str:
        r = self.rng
        us_area = self.pick(["212", "213", "310", "312", "415", "510", "617", "646", "702", "718", "805",
                             "917", "206", "303", "404", "512", "602", "713", "202", "305"])
        us_line = f"555-01{self.digits(2)}" if r.random() < 0.5 else f"{r.randint(2, 9)}{self.digits(2)}-{self.digits(4)}"
        us_ex, us_sub = us_line.split("-")
        uk_london = f"7946 0{self.digits(3)}"
        uk_mobile = f"7{self.pick(['400', '507', '700', '800', '911', '958', '825'])} {r.randint(1, 9)}{self.digits(5)}"
        fr_rest = " ".join(self.digits(2) for _ in range(4))
        formats = [
            f"({us_area}) {us_ex}-{us_sub}", f"{us_area}-{us_ex}-{us_sub}", f"{us_area}.{us_ex}.{us_sub}",
            f"+1 {us_area} {us_ex} {us_sub}", f"+1 ({us_area}) {us_ex}-{us_sub}", f"+1-{us_area}-{us_ex}-{us_sub}",
            f"1-{us_area}-{us_ex}-{us_sub}",
            f"+44 20 {uk_london}", f"020 {uk_london}", f"+44 (0)20 {uk_london}", f"+44 {uk_mobile}",
            f"0{uk_mobile}", f"0161 496 0{self.digits(3)}",
            f"+33 1 {fr_rest}", f"01 {fr_rest}", f"+33 6 {fr_rest}", f"06 {fr_rest}",
            f"+49 30 {r.randint(2, 9)}{self.digits(7)}", f"030 {r.randint(2, 9)}{self.digits(7)}",
            f"+49 151 {r.randint(2, 9)}{self.digits(7)}", f"+49 89 {r.randint(2, 9)}{self.digits(6)}",
            f"+91 {r.randint(7, 9)}{self.digits(4)} {self.digits(5)}",
            f"+61 2 {r.randint(8, 9)}{self.digits(3)} {self.digits(4)}", f"+61 4{r.randint(0, 3)}{self.digits(1)} {self.digits(3)} {self.digits(3)}",
            f"+81 3-{r.randint(1, 9)}{self.digits(3)}-{self.digits(4)}", f"+81 90-{r.randint(1, 9)}{self.digits(3)}-{self.digits(4)}",
            f"0044 20 {uk_london}", f"(+44) 20 {uk_london}", f"+44-20-{uk_london.replace(' ', '-')}",
            f"+33 (0)1 {fr_rest}", f"+49 (0) 30 {r.randint(2, 9)}{self.digits(7)}", f"1 (800) {us_ex}-{us_sub}",
            f"0033 6 {fr_rest}",
            f"+34 6{self.digits(2)} {self.digits(3)} {self.digits(3)}", f"+34 91 {self.digits(3)} {self.digits(2)} {self.digits(2)}",
            f"+55 11 9{self.digits(4)}-{self.digits(4)}", f"+31 20 {r.randint(2, 9)}{self.digits(2)} {self.digits(4)}",
            f"+31 6 {r.randint(1, 5)}{self.digits(7)}", f"+39 06 {self.digits(4)} {self.digits(4)}",
            f"+1{us_area}{us_ex}{us_sub}", f"+44{uk_mobile.replace(' ', '')}",
        ]
        return self.pick(formats)

    def phone_bare(self) -> str:
        """Ten digits with no punctuation; labelled only where the text says it is a phone number."""
        return f"{self.pick(['415', '646', '312', '206'])}555{'01' + self.digits(2)}"

    def card(self) -> str:
        r = self.rng
        if r.random() < 0.35:
            digits = self.pick(["4111111111111111", "4242424242424242", "5555555555554444", "5105105105105100",
                                "4012888888881881", "378282246310005", "371449635398431", "6011111111111117",
                                "6011000990139424", "3530111333300000", "30569309025904", "2223003122003222"])
        else:
            prefix, length = self.pick([("4", 16), ("51", 16), ("55", 16), ("2221", 16), ("34", 15), ("37", 15),
                                        ("6011", 16), ("65", 16), ("3528", 16), ("36", 14), ("4", 13), ("62", 19)])
            payload = prefix + self.digits(length - len(prefix) - 1)
            digits = payload + luhn_check_digit(payload)
        return self.format_card(digits)

    def format_card(self, digits: str) -> str:
        style = self.rng.random()
        if style < 0.3:
            return digits
        sep = " " if style < 0.75 else "-"
        if len(digits) in (14, 15):
            return sep.join([digits[:4], digits[4:10], digits[10:]])
        return sep.join(digits[i:i + 4] for i in range(0, len(digits), 4))

    def iban(self) -> str:
        country, make = self.pick(IBAN_FORMATS)
        bban = make(self)
        return self.format_iban(country + iban_check_digits(country, bban) + bban)

    def format_iban(self, compact: str) -> str:
        roll = self.rng.random()
        if roll < 0.05:
            compact = compact.lower()
        if roll < 0.3:
            return compact
        return " ".join(compact[i:i + 4] for i in range(0, len(compact), 4))

    def ssn(self, sep: str = "-") -> str:
        area = self.pick([a for a in range(1, 900) if a != 666])
        return f"{area:03d}{sep}{self.rng.randint(1, 99):02d}{sep}{self.rng.randint(1, 9999):04d}"

    def ssn_spaced(self) -> str:
        return self.ssn(" ")

    def ssn_bare(self) -> str:
        return self.ssn("")

    def ipv4(self) -> str:
        r = self.rng
        return self.pick([f"192.168.{r.randint(0, 255)}.{r.randint(1, 254)}", f"10.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}",
                          f"{r.randint(11, 223)}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}",
                          self.pick(["8.8.8.8", "1.1.1.1", "9.9.9.9", "8.8.4.4", "4.2.2.2"])])

    def ipv6(self) -> str:
        while True:
            address = self.ip()
            if ":" in address:
                return address

    def ip(self) -> str:
        r = self.rng
        roll = r.random()
        if roll < 0.25:
            return f"192.168.{r.randint(0, 255)}.{r.randint(1, 254)}"
        if roll < 0.4:
            return f"10.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}"
        if roll < 0.5:
            return f"172.{r.randint(16, 31)}.{r.randint(0, 255)}.{r.randint(1, 254)}"
        if roll < 0.72:
            return f"{r.randint(11, 223)}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}"
        if roll < 0.78:
            return self.pick(["::1", "fe80::1", "2001:db8::1"])
        groups = [r.randint(0, 0xFFFF) for _ in range(8)]
        groups[0] = self.pick([0x2001, 0x2a02, 0x2600, 0xFE80, 0x2404])
        if roll < 0.9:
            for i in range(r.randint(2, 4), r.randint(5, 7)):
                groups[i] = 0
        address = ipaddress.IPv6Address(b"".join(g.to_bytes(2, "big") for g in groups))
        return address.compressed if r.random() < 0.8 else address.exploded

    def secret(self) -> str:
        alnum = string.ascii_letters + string.digits
        urlsafe = alnum + "-_"
        kind = self.rng.randrange(8)
        if kind == 0:
            return "sk-" + self.chars(alnum, 48)
        if kind == 1:
            return "sk-proj-" + self.chars(urlsafe, self.rng.randint(56, 120))
        if kind == 2:
            return "sk-ant-api03-" + self.chars(urlsafe, 93) + "AA"
        if kind == 3:
            return self.pick(["ghp_", "gho_", "ghs_", "ghu_", "ghr_"]) + self.chars(alnum, 36)
        if kind == 4:
            return "github_pat_" + self.chars(alnum, 22) + "_" + self.chars(alnum, 59)
        if kind == 5:
            return self.pick(["AKIA", "ASIA"]) + self.chars(string.ascii_uppercase + "234567", 16)
        if kind == 6:
            return self.jwt()
        return f"xox{self.pick('bpa')}-{self.digits(12)}-{self.digits(13)}-{self.chars(alnum, 24)}"

    def jwt(self) -> str:
        def part(obj: dict) -> str:
            return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")
        header = part({"alg": self.pick(["HS256", "RS256"]), "typ": "JWT"})
        payload = part({"sub": self.digits(10), "iat": 1700000000 + self.rng.randint(0, 10**7),
                        "scope": self.pick(["read", "write", "admin"])})
        return f"{header}.{payload}.{self.chars(string.ascii_letters + string.digits + '-_', 43)}"

    def opaque_token(self) -> str:
        """What follows 'Bearer': an opaque token, a JWT or an API key."""
        roll = self.rng.random()
        if roll < 0.2:
            return self.jwt()
        if roll < 0.35:
            return self.secret()
        return self.chars(string.ascii_letters + string.digits + "-_.", self.rng.randint(32, 48)).strip(".") + "x"

    # ---- hard negatives ---------------------------------------------------------------------------
    def version(self) -> str:
        r = self.rng
        return self.pick([f"{r.randint(0, 4)}.{r.randint(0, 30)}.{r.randint(0, 20)}",
                          f"v{r.randint(1, 20)}.{r.randint(0, 15)}.{r.randint(0, 12)}",
                          f"10.0.{r.randint(17000, 22631)}.{r.randint(1, 3000)}",
                          f"{r.randint(100, 131)}.0.{r.randint(6000, 6999)}.{r.randint(10, 200)}",
                          f"3.{r.randint(8, 13)}.{r.randint(0, 12)}", f"{r.randint(1, 3)}.{r.randint(0, 9)}"])

    def version4(self) -> str:
        r = self.rng
        return f"{r.randint(1, 9)}.{r.randint(0, 20)}.{r.randint(0, 20)}.{r.randint(0, 99)}"

    def date(self) -> str:
        r = self.rng
        y, m, d = r.randint(2015, 2026), r.randint(1, 12), r.randint(1, 28)
        return self.pick([f"{y}-{m:02d}-{d:02d}", f"{d:02d}/{m:02d}/{y}", f"{m:02d}/{d:02d}/{y}", f"{d:02d}.{m:02d}.{y}",
                          f"{y}/{m:02d}/{d:02d}", f"{y}{m:02d}{d:02d}", f"{d}.{m}.{y % 100:02d}"])

    def time(self) -> str:
        r = self.rng
        h, m, s = r.randint(0, 23), r.randint(0, 59), r.randint(0, 59)
        return self.pick([f"{h:02d}:{m:02d}", f"{h:02d}:{m:02d}:{s:02d}", f"{h:02d}:{m:02d}:{s:02d}.{self.digits(3)}",
                          f"{h:02d}:{m:02d}-{(h + 2) % 24:02d}:{m:02d}", f"{r.randint(1, 12)}:{m:02d} PM"])

    def timestamp(self) -> str:
        r = self.rng
        y, mo, d, h, mi, s = r.randint(2019, 2026), r.randint(1, 12), r.randint(1, 28), r.randint(0, 23), r.randint(0, 59), r.randint(0, 59)
        return self.pick([f"{y}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}Z", f"{y}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}",
                          str(r.randint(1_500_000_000, 1_800_000_000)), str(r.randint(1_500_000_000_000, 1_800_000_000_000)),
                          f"{y}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}.{self.digits(3)}+02:00"])

    def order_id(self) -> str:
        return self.pick([f"{self.digits(3)}-{self.digits(7)}-{self.digits(7)}", f"ORD-{self.rng.randint(2019, 2026)}-{self.digits(5)}",
                          f"#{self.rng.randint(1, 9)}{self.digits(8)}", f"{self.rng.randint(1, 9)}{self.digits(9)}",
                          f"A{self.digits(2)}-{self.digits(7)}-{self.digits(7)}", f"SO{self.digits(8)}"])

    def invoice(self) -> str:
        return self.pick([f"INV-{self.rng.randint(2019, 2026)}-{self.digits(4)}", f"{self.rng.randint(2019, 2026)}-{self.digits(6)}",
                          f"{self.rng.randint(1, 9)}{self.digits(7)}", f"F{self.digits(3)}/{self.rng.randint(2019, 2026)}",
                          f"INV{self.digits(9)}"])

    def git_hash(self) -> str:
        full = self.chars("0123456789abcdef", 40)
        return full if self.rng.random() < 0.4 else full[: self.pick([7, 8, 10, 12])]

    def uuid(self) -> str:
        h = self.chars("0123456789abcdef", 32)
        value = f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"
        return value.upper() if self.rng.random() < 0.2 else value

    def price(self) -> str:
        r = self.rng
        return self.pick([f"${r.randint(1, 9)},{self.digits(3)}.{self.digits(2)}", f"€{r.randint(1, 9)}.{self.digits(3)},{self.digits(2)}",
                          f"£{r.randint(1, 999)}.{self.digits(2)}", f"{r.randint(1, 9)} {self.digits(3)} {self.digits(3)},{self.digits(2)} €",
                          f"USD {r.randint(10, 99)},{self.digits(3)}.00", f"¥{r.randint(1, 99)},{self.digits(3)}"])

    def isbn(self) -> str:
        return self.pick(["978-3-16-148410-0", "978-0-306-40615-7", "0-306-40615-2", "9780306406157", "978-1-4028-9462-6",
                          "979-10-90636-07-1", "0-19-852663-6", "978-0-596-52068-7", "1-56619-909-3"])

    def tracking(self) -> str:
        return self.pick([f"1Z{self.chars(string.ascii_uppercase + string.digits, 6)}{self.digits(10)}",
                          f"9400 {self.digits(4)} {self.digits(4)} {self.digits(4)} {self.digits(4)} {self.digits(2)}",
                          f"{self.digits(4)} {self.digits(4)} {self.digits(4)}", f"JD{self.digits(18)}",
                          f"{self.digits(12)}", f"LX{self.digits(9)}DE", f"RR{self.digits(9)}GB"])

    def bad_luhn(self) -> str:
        while True:
            payload = self.pick(["4", "51", "4242", "37", "6011"]) + self.digits(14)
            digits = payload[:15] if payload.startswith("37") else payload[:16]
            good = luhn_check_digit(digits[:-1])
            if digits[-1] != good:
                return self.format_card(digits)

    def bad_iban(self) -> str:
        country, make = self.pick(IBAN_FORMATS)
        bban = make(self)
        good = iban_check_digits(country, bban)
        bad = f"{(int(good) + self.rng.randint(1, 40)) % 97 + 2:02d}"
        if bad == good:
            bad = f"{(int(good) + 1) % 97 + 2:02d}"
        return self.format_iban(country + bad + bban)

    def bad_ssn(self) -> str:
        r = self.rng
        return self.pick([f"000-{r.randint(10, 99)}-{self.digits(4)}", f"666-{r.randint(10, 99)}-{r.randint(1000, 9999)}",
                          f"9{self.digits(2)}-{r.randint(10, 99)}-{r.randint(1000, 9999)}",
                          f"{r.randint(100, 665)}-00-{r.randint(1000, 9999)}", f"{r.randint(100, 665)}-{r.randint(10, 99)}-0000"])

    def hex_digest(self) -> str:
        digest = self.chars("0123456789abcdef", 64)
        return self.pick([digest, f"sha256:{digest}", self.chars("0123456789abcdef", 32)])

    def mac(self) -> str:
        return ":".join(self.chars("0123456789ABCDEF", 2) for _ in range(6))

    def misc_number(self) -> str:
        r = self.rng
        return self.pick([f"CVE-{r.randint(2015, 2026)}-{r.randint(1000, 49999)}", f"0x{self.chars('0123456789ABCDEF', 8)}",
                          f"{r.uniform(-80, 80):.4f}, {r.uniform(-179, 179):.4f}", f"{r.randint(10000, 99999)}",
                          f"{r.randint(1, 32)}:{r.randint(1, 32)}", f"{r.randint(2, 9)}.{self.digits(5)}",
                          f"+{r.randint(1, 40)}.{r.randint(0, 9)}%", f"{r.randint(1, 9)} {self.digits(3)} {self.digits(3)}"])

    def imei(self) -> str:
        payload = "35" + self.digits(12)
        return payload + luhn_check_digit(payload)

    def long_id(self) -> str:
        return f"{self.rng.randint(1, 9)}{self.digits(self.rng.choice([12, 15, 17]))}"

    def not_email(self) -> str:
        return self.pick([f"logo@{self.rng.randint(2, 3)}x.png", "git@github.com:acme/infra.git", f"react@{self.rng.randint(16, 19)}.2.0",
                          f"@{ascii_name(self.pick(FIRST_NAMES))}_dev", "root@localhost", "icon-large@2x.webp",
                          f"git@gitlab.com:{ascii_name(self.pick(LAST_NAMES))}/notes.git", "lodash@4.17.21"])

    def phone_placeholder(self) -> str:
        """Phone-shaped numbers that no numbering plan assigns: form placeholders and dummies."""
        return self.pick(["555-555-5555", "(999) 999-9999", "+1 555 555 5555", "(555) 555-5555", "+44 0000 000000",
                          "+1 (000) 000-0000", "999-999-9999", "+49 000 0000000"])

    def section(self) -> str:
        r = self.rng
        return f"{r.randint(1, 9)}.{r.randint(1, 9)}.{r.randint(1, 9)}.{r.randint(1, 9)}"

    def word_name_word(self) -> str:
        """A word that is also a first name, used as a word."""
        return self.pick(["will", "grant", "rose", "mark", "hope", "bill", "frank", "may", "joy"])

    def nine_digits(self) -> str:
        return f"{self.rng.randint(100, 899)}{self.digits(6)}"

    def secret_like(self) -> str:
        return self.pick(["sk-learn", "AKIAXXXXXXXXXXXXXXXX", "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                          "sk-...", "eyJhbGciOi...", "xoxb-your-token-here", "sk-your-key-here-please",
                          "github_pat_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"])


def _bban(pattern: str) -> Callable[[Values], str]:
    """A BBAN maker from a pattern: 'n' a digit, 'a' an upper-case letter, 'c' either."""
    def make(values: Values) -> str:
        pools = {"n": string.digits, "a": string.ascii_uppercase, "c": string.ascii_uppercase + string.digits}
        return "".join(values.rng.choice(pools[p]) if p in pools else p for p in pattern)
    return make


IBAN_FORMATS = [
    ("DE", _bban("n" * 18)), ("GB", _bban("aaaa" + "n" * 14)), ("FR", _bban("n" * 10 + "n" * 11 + "nn")),
    ("ES", _bban("n" * 20)), ("IT", _bban("a" + "n" * 10 + "c" * 12)), ("NL", _bban("aaaa" + "n" * 10)),
    ("BE", _bban("n" * 12)), ("CH", _bban("n" * 17)), ("AT", _bban("n" * 16)), ("PL", _bban("n" * 24)),
    ("SE", _bban("n" * 20)), ("IE", _bban("aaaa" + "n" * 14)), ("PT", _bban("n" * 21)), ("NO", _bban("n" * 11)),
    ("DK", _bban("n" * 14)), ("FI", _bban("n" * 14)),
]

# Slot name -> (value maker, PII type or None, negative kind or None).
SLOTS: dict[str, tuple[str, str | None, str | None]] = {
    "PERSON": ("person", "PERSON", None), "person": ("person_lower", "PERSON", None),
    "EMAIL": ("email", "EMAIL", None), "PHONE": ("phone", "PHONE", None), "PHONE_BARE": ("phone_bare", "PHONE", None),
    "CARD": ("card", "CARD", None), "IBAN": ("iban", "IBAN", None), "SSN": ("ssn", "SSN", None),
    "SSN_SPACED": ("ssn_spaced", "SSN", None), "SSN_BARE": ("ssn_bare", "SSN", None),
    "IP": ("ip", "IP", None), "SECRET": ("secret", "SECRET", None), "JWT": ("jwt", "SECRET", None),
    "TOKEN": ("opaque_token", "SECRET", None),
    "version": ("version", None, "version"), "version4": ("version4", None, "version4_context"),
    "version4_bare": ("version4", None, "version4_bare"), "date": ("date", None, "date"),
    "time": ("time", None, "time"), "timestamp": ("timestamp", None, "timestamp"),
    "order": ("order_id", None, "order_id"), "invoice": ("invoice", None, "invoice"),
    "git": ("git_hash", None, "git_hash"), "uuid": ("uuid", None, "uuid"), "price": ("price", None, "price"),
    "isbn": ("isbn", None, "isbn"), "tracking": ("tracking", None, "tracking"),
    "bad_card": ("bad_luhn", None, "bad_luhn"), "bad_iban": ("bad_iban", None, "bad_iban"),
    "bad_ssn": ("bad_ssn", None, "bad_ssn"), "digest": ("hex_digest", None, "hex_digest"),
    "mac": ("mac", None, "mac_address"), "misc": ("misc_number", None, "misc_number"),
    "nine": ("nine_digits", None, "nine_digits"), "fake_secret": ("secret_like", None, "secret_like"),
    "word_name": ("word_name_word", None, "name_word"), "imei": ("imei", None, "imei"),
    "long_id": ("long_id", None, "long_id"), "not_email": ("not_email", None, "not_email"),
    "section": ("section", None, "section_number"), "fake_phone": ("phone_placeholder", None, "phone_placeholder"),
    "IPV4": ("ipv4", "IP", None), "IPV6": ("ipv6", "IP", None),
}


# Templates by what they are about. Slots are {NAME}; everything else is literal text.
TEMPLATES: dict[str, list[str]] = {
    "EMAIL": [
        "Can you draft a polite follow-up to {PERSON} at {EMAIL}? They haven't replied in a week.",
        "My work address is {EMAIL} but please cc {EMAIL} for anything billing related.",
        "The reply-to header says {EMAIL}, is that a phishing sign?",
        "Send the invite to <{EMAIL}> and mention the agenda.",
        "User: who should I contact?\nAssistant: You can reach support at {EMAIL}.",
        "mailto:{EMAIL}?subject=Hello is not opening my mail client, why?",
        "Fix this regex, it fails on {EMAIL}.",
        "Hi, I'm {PERSON}, reach me on {EMAIL}.",
        "Put {EMAIL}, {EMAIL} and {EMAIL} on the distribution list.",
        "git config user.email \"{EMAIL}\" gives me a permission error.",
        "From: {PERSON} <{EMAIL}>\nSubject: quarterly numbers\nCan you summarise this thread?",
        "Is {EMAIL} a valid address format?",
        "Parse this: {{\"name\": \"{PERSON}\", \"email\": \"{EMAIL}\", \"active\": true}}",
        "Email:{EMAIL} Phone: n/a",
        "(cc: {EMAIL}) can you shorten this paragraph?",
    ],
    "PHONE": [
        "Call me on {PHONE} after six.",
        "{PERSON}'s mobile is {PHONE}, can you add it to the contact card?",
        "The clinic number is {PHONE} (reception) if anything changes.",
        "Write a voicemail script; my callback number is {PHONE}.",
        "User: how do I format this for the signature?\n{PERSON}\nTel: {PHONE}",
        "The landlord gave two numbers, {PHONE} and {PHONE}.",
        "WhatsApp me at {PHONE} once you land.",
        "Our office line changed to {PHONE}. Update the footer please.",
        "my cell is {PHONE_BARE} if the link doesn't work",
        "Text me at {PHONE_BARE} when you're outside.",
        "Emergency contact: {PERSON}, {PHONE}.",
        "Can you check whether {PHONE} is a UK or US number?",
        "<a href=\"tel:{PHONE}\">Call us</a> renders weird on iOS.",
        "Numbers to try: {PHONE}; {PHONE}.",
        "Support hotline ({PHONE}) is closed on Sundays.",
    ],
    "CARD": [
        "My card {CARD} keeps getting declined on the checkout page, any idea why?",
        "Test the payment form with {CARD} and an expiry in the future.",
        "I accidentally pasted my card number {CARD} into the chat, please ignore it.",
        "The receipt shows card {CARD} was charged twice.",
        "Stripe's docs say to use {CARD} for successful payments, right?",
        "Update billing: new card {CARD}, exp 09/28.",
        "User: why does validation reject this?\n{CARD}",
        "{PERSON} used the corporate card ({CARD}) for the flights.",
        "card: {CARD}, exp 12/27, cvc 123 - why does the form say invalid?",
        "payment_method = \"{CARD}\"  # TODO remove before commit",
    ],
    "IBAN": [
        "Please wire the deposit to IBAN {IBAN} by Friday.",
        "Our account: {IBAN} (BIC DEUTDEFF).",
        "Can you check the IBAN format {IBAN}? The bank form rejects it.",
        "Refund to {IBAN}, account holder {PERSON}.",
        "Write a payment reminder; bank details are IBAN: {IBAN}",
        "I have two accounts, {IBAN} for savings and {IBAN} for rent.",
        "The invoice footer lists {IBAN} as the payee account.",
    ],
    "SSN": [
        "The form asks for my SSN, which is {SSN}. Is it safe to send by email?",
        "Employee record: {PERSON}, SSN {SSN}, start date pending.",
        "Redact the social security number {SSN} from this letter.",
        "My social security number is {SSN_SPACED} and the portal says it's invalid.",
        "SSN: {SSN_BARE}",
        "Tax form draft: taxpayer {PERSON}, {SSN}, filing jointly.",
        "Why would the IRS reject {SSN} on a W-4?",
        "ssn {SSN} belongs to my dependent, do I list it here?",
    ],
    "IP": [
        "The server at {IP} refuses SSH connections since the update.",
        "nginx logs show repeated requests from {IP}, should I block it?",
        "Set the DNS to {IP} and the gateway to {IP}.",
        "ping {IP} works but curl http://{IPV4}:8080 times out.",
        "Allow only {IP}/32 in the security group.",
        "My home IP is {IP}, can you whitelist it?",
        "The container binds to [{IPV6}]:443 and nothing else.",
        "inet {IPV4}/24 brd {IPV4} scope global eth0",
        "IPv4 Address. . . . . . . . . . . : {IPV4}",
        "X-Forwarded-For: {IP}, {IPV4}",
        "log line: ip={IPV4}, status=200, bytes=5120",
        "The DNS server ({IPV4}) answers slowly.",
        "Failed password for root from {IP} port 22 ssh2",
        "Our VPN assigns {IP} to laptops.",
    ],
    "SECRET": [
        "Here's my config, why does it fail? OPENAI_API_KEY={SECRET}",
        "I committed {SECRET} to the repo by mistake, how do I rotate it?",
        "curl -H \"Authorization: Bearer {TOKEN}\" https://api.example.com/v1/items",
        "The token {SECRET} stopped working yesterday.",
        "export GITHUB_TOKEN={SECRET}",
        "Decode this JWT for me: {JWT}",
        "headers = {{'Authorization': 'Bearer {JWT}'}}",
        "aws configure asked for the key id, I gave it {SECRET}.",
        "Error 401 with key {SECRET}, is it expired?",
        "Authorization: Bearer {TOKEN}",
        "config.json: {{\"api_key\": \"{SECRET}\", \"model\": \"gpt-4o\"}}",
        "The webhook URL is https://hooks.example.com/in?access_token={SECRET}&v=2",
        ".env has SLACK_BOT_TOKEN={SECRET} and DEBUG=1",
        "requests.get(url, headers={{\"Authorization\": f\"Bearer {TOKEN}\"}})",
    ],
    "PERSON": [
        "Can you write a birthday message for {PERSON}?",
        "{PERSON} and {PERSON} will present the roadmap.",
        "I had coffee with {person} yesterday and she suggested a new approach.",
        "Remind me to thank {PERSON} for the review.",
        "Draft an intro between {PERSON} and {PERSON}; both work on search.",
        "my manager {person} wants the report by monday",
        "Summarise what {PERSON} said in the meeting notes below.",
        "ask {person} about the venue",
    ],
    "MIXED": [
        "Contact sheet:\n{PERSON} | {EMAIL} | {PHONE}\n{PERSON} | {EMAIL} | {PHONE}",
        "New hire paperwork for {PERSON}: SSN {SSN}, salary to IBAN {IBAN}, phone {PHONE}.",
        "Incident report: key {SECRET} leaked from host {IP} on {date} at {time}.",
        "Order {order} was paid with card {CARD}; receipt sent to {EMAIL}.",
        "User: I upgraded to {version} and now the client can't reach {IP}.\nAssistant: Check the proxy settings.",
        "Invoice {invoice} ({price}) is due on {date}; pay to {IBAN} or by card.",
        "Ticket from {EMAIL}: my order {order} hasn't shipped, tracking {tracking}. Call {PHONE}.",
        "Deploy log {timestamp}: commit {git} deployed to {IP} by {PERSON}.",
        "request_id={uuid} user={EMAIL} ip={IP} status=403",
        "{PERSON} ({EMAIL}, {PHONE}) asked about refund {invoice}.",
        "The old card {bad_card} was a typo; the right one is {CARD}.",
        "IBAN {bad_iban} bounced, I think it's {IBAN} instead.",
        "Please redact: {PERSON}, born {date}, SSN {SSN}, card {CARD}, email {EMAIL}.",
        "Bearer {JWT} was issued at {timestamp} for {EMAIL}.",
    ],
    "NEGATIVE": [
        "I upgraded numpy from {version} to {version} and pandas {version} now warns about dtypes.",
        "Windows build {version} has the bug, but {version} doesn't.",
        "Released in version {version4}, the regression is gone.",
        "pip install package=={version4} fixes the import error.",
        "We moved from {version4_bare} to {version4_bare} last sprint and the tests got slower.",
        "The firmware on the router is still {version4_bare}, should I update it?",
        "The meeting moved to {date} at {time}.",
        "Logs from {timestamp} to {timestamp} show the spike.",
        "Order {order} hasn't arrived, the tracking number is {tracking}.",
        "Invoice {invoice} for {price} was paid on {date}.",
        "Commit {git} broke the build; revert to {git}.",
        "request id {uuid} failed with a timeout after {time}.",
        "The book is ISBN {isbn}, around {price} new.",
        "My card {bad_card} failed validation, did I mistype a digit?",
        "The bank says IBAN {bad_iban} is invalid.",
        "Is {bad_ssn} even a real social security number format?",
        "The image digest is {digest}.",
        "The device MAC is {mac}, it keeps dropping off wifi.",
        "See {misc} in the report, and the coordinates {misc}.",
        "Reference {nine} is on the parcel label.",
        "The docs show {fake_secret} as an example key, don't paste real ones.",
        "We {word_name} need to {word_name} the budget before Friday.",
        "Our shipment {tracking} left the depot on {date} at {time}.",
        "Patch notes for {version}: fixed crash on startup, see ticket {order}.",
        "The run took {time} and used build {version}.",
        "Error at {timestamp}: connection reset (code {misc}).",
        "Total was {price}, invoice {invoice}, order {order}.",
        "Hash {digest} does not match the published one.",
        "Train leaves {date} {time}, platform 9.",
        "Unix time {timestamp} converts to what?",
        "My phone's IMEI is {imei}, the carrier asked for it.",
        "Transaction id {long_id} shows as pending.",
        "Use {not_email} in the header and {not_email} for the retina version.",
        "Clone it with {not_email} and install {not_email}.",
        "See section {section} of the spec, and also {section}.",
        "The change is described in section {section} of the RFC.",
        "Payment reference {long_id}, booking {long_id}.",
        "The form template says Phone: {fake_phone}, replace it with yours.",
        "Use a dummy like {fake_phone} in the screenshots.",
    ],
    "PLAIN": [
        "Can you explain the difference between a process and a thread?",
        "Write a haiku about autumn rain.",
        "What are good questions to ask at the end of an interview?",
        "Summarise the attached article in three bullet points.",
        "How do I make my sourdough less dense?",
        "Translate 'see you tomorrow' into French and Japanese.",
        "Give me a packing list for a weekend hiking trip.",
        "Why is the sky blue? Explain it like I'm five.",
        "I will grant that the plan is ambitious, but we should mark the risks.",
        "The rose bushes need pruning before the frost.",
    ],
}

# How many records to make from each template group.
COUNTS = {"EMAIL": 50, "PHONE": 70, "CARD": 50, "IBAN": 40, "SSN": 40, "IP": 60, "SECRET": 56, "PERSON": 35,
          "MIXED": 70, "NEGATIVE": 280, "PLAIN": 30}

_SLOT = re.compile(r"\{(\w+)\}")


def fill(template: str, values: Values, builder: Builder) -> None:
    position = 0
    # '{{' in a template is a literal brace (a dict in a code snippet).
    template = template.replace("{{", "\x00").replace("}}", "\x01")
    for match in _SLOT.finditer(template):
        builder.add(template[position:match.start()].replace("\x00", "{").replace("\x01", "}"))
        maker, pii_type, negative = SLOTS[match.group(1)]
        builder.label(getattr(values, maker)(), pii_type, negative)
        position = match.end()
    builder.add(template[position:].replace("\x00", "{").replace("\x01", "}"))


def generate(seed: int = SEED) -> list[dict]:
    rng = random.Random(seed)
    values = Values(rng)
    records = []
    for group, count in COUNTS.items():
        templates = TEMPLATES[group]
        for i in range(count):
            builder = Builder()
            # Chat messages rarely hold just the sentence with the value: some filler before and after.
            for _ in range(rng.choice([0, 0, 1, 2])):
                builder.add(rng.choice(FILLER) + " ")
            fill(templates[i % len(templates)], values, builder)
            for _ in range(rng.choice([0, 1, 1, 2, 3])):
                builder.add(" " + rng.choice(FILLER))
            record = builder.record()
            record["id"] = f"{group.lower()}-{i:03d}"
            records.append(record)
    return records


def main() -> None:
    records = generate()
    with OUT.open("w", encoding="utf-8") as out:
        for record in records:
            ordered = {"id": record["id"], "text": record["text"], "spans": record["spans"],
                       "negatives": record["negatives"]}
            out.write(json.dumps(ordered, ensure_ascii=False) + "\n")
    spans = [s for r in records for s in r["spans"]]
    negatives = [n for r in records for n in r["negatives"]]
    by_type: dict[str, int] = {}
    for span in spans:
        by_type[span["type"]] = by_type.get(span["type"], 0) + 1
    print(f"{len(records)} texts, {len(spans)} PII spans {dict(sorted(by_type.items()))}, "
          f"{len(negatives)} hard negatives -> {OUT}")


if __name__ == "__main__":
    main()
