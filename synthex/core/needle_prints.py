"""How an unfinished purge recognizes the text it removes without keeping that text.

A purge looks for pieces of the purged text (its "needles": the purged source lines, a ``--match``
text) in every file of the data directory, and must still do so after a kill, when the records that
held the text are gone: so its journal must name the pieces. It names each one's byte forms (UTF-8, and
as a JSON string stores it) by a ``NeedlePrint``: the form's length, its SHA-256, and a 20-bit print of
its first ``ANCHOR`` bytes. A finder (``synthex_resources.residue.Needles``) computes the same print
at every position of the bytes it searches, which leaves about one position in 2**20 per form to check
against the SHA-256.

What the journal then tells a reader of the disk: the length and the SHA-256 of each piece (as the LLM
cache digests the purge already keeps), so a piece short or predictable enough to be guessed can be
confirmed by guessing it; nothing more (20 bits of a 12-byte prefix leave about 2**76 candidates).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

ANCHOR = 12  # bytes the print covers (a form shorter than this: all of it)
PRINT_BITS = 20
PRINT_BASE = 0x9E3779B97F4A7C15  # odd: the window hash is a polynomial in it, mod 2**64
MASK64 = (1 << 64) - 1


def byte_forms(needles: list[str]) -> list[bytes]:
    """Each needle as stored: UTF-8, and JSON-escaped (ASCII escapes and raw) where that differs."""
    forms: dict[bytes, None] = {}
    for n in needles:
        forms[n.encode()] = None
        for ascii_only in (True, False):
            forms[json.dumps(n, ensure_ascii=ascii_only)[1:-1].encode()] = None
    return [f for f in forms if f]


def window_print(data: bytes) -> int:
    """The print of ``data`` (at most ``ANCHOR`` bytes): the top ``PRINT_BITS`` bits of
    sum(byte[k] * PRINT_BASE**k) mod 2**64 (the finder computes the same sum over every window)."""
    h = 0
    power = 1
    for byte in data:
        h = (h + byte * power) & MASK64
        power = (power * PRINT_BASE) & MASK64
    return h >> (64 - PRINT_BITS)


@dataclass(frozen=True)
class NeedlePrint:
    length: int  # bytes of the form
    anchor: int  # bytes the print covers: min(ANCHOR, length)
    print: int
    digest: str  # sha256 hex of the form

    def to_list(self) -> list[int | str]:
        return [self.length, self.anchor, self.print, self.digest]

    @classmethod
    def from_list(cls, data: list[int | str]) -> NeedlePrint:
        length, anchor, value, digest = data
        return cls(int(length), int(anchor), int(value), str(digest))


def prints_of(needles: list[str]) -> list[NeedlePrint]:
    """The prints of every byte form of ``needles``."""
    out = []
    for form in byte_forms(needles):
        anchor = min(ANCHOR, len(form))
        out.append(NeedlePrint(len(form), anchor, window_print(form[:anchor]), hashlib.sha256(form).hexdigest()))
    return out
