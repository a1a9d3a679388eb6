"""Check digits that separate real identifiers from look-alike digit runs (order ids, tracking numbers)."""

from __future__ import annotations

# Length of a complete IBAN per country (the SWIFT IBAN registry). A candidate of the wrong length for its
# country is not an IBAN whatever its checksum: mod 97 alone passes about one random string in 97.
IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
    "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
    "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
    "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
    "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22,
    "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25,
    "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25,
    "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}


def luhn_valid(digits: str) -> bool:
    """Whether a string of ASCII digits passes the Luhn check that every payment card number carries."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if position % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return bool(digits) and total % 10 == 0


def luhn_check_digit(payload: str) -> str:
    """The digit that makes ``payload + digit`` pass the Luhn check."""
    for digit in "0123456789":
        if luhn_valid(payload + digit):
            return digit
    raise AssertionError("unreachable: one of ten digits always completes a Luhn sum")


def _iban_number(iban: str) -> int:
    """The integer ISO 13616 checks: country and check digits moved to the end, letters as 10..35."""
    rearranged = iban[4:] + iban[:4]
    return int("".join(str(int(char, 36)) for char in rearranged))


def iban_valid(iban: str) -> bool:
    """Whether a compact upper-case IBAN has its country's length and a valid mod-97 checksum."""
    if IBAN_LENGTHS.get(iban[:2]) != len(iban) or not iban.isalnum() or not iban.isascii():
        return False
    return _iban_number(iban) % 97 == 1


def iban_check_digits(country: str, bban: str) -> str:
    """The two check digits that make ``country + digits + bban`` a valid IBAN."""
    return f"{98 - _iban_number(country + '00' + bban) % 97:02d}"


def ssn_valid(area: str, group: str, serial: str) -> bool:
    """Whether a US SSN's parts were ever assignable: area 000, 666 and 900-999, group 00 and serial 0000
    are never issued, so numbers with them are something else (or deliberately fake)."""
    return area != "000" and area != "666" and area[0] != "9" and group != "00" and serial != "0000"
