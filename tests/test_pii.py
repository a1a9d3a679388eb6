"""synthex.core.pii: detection per type, hard negatives, redaction placeholders, and properties over generated text."""

from __future__ import annotations

import json
import string
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evals.bench.pii import SET, evaluate, load_set
from evals.pii_set.generate import generate
from synthex.core.pii import PII_MODES, PII_TYPES, Finding, Redaction, redact, scan
from synthex.core.pii.checksums import iban_check_digits, iban_valid, luhn_check_digit, luhn_valid, ssn_valid
from synthex.core.pii.scanner import Scanner

JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwiaWF0IjoxNzAwMDAwMDAwfQ."
       "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")

POSITIVES = [
    ("EMAIL", "Write to {} about it.", "Amara.Okafor@Example.COM"),
    ("EMAIL", "cc <ops+alerts@mail.example.co.uk>, thanks", "ops+alerts@mail.example.co.uk"),
    ("PHONE", "Call me on {} after six.", "+44 20 7946 0958"),
    ("PHONE", "Office: {}.", "+1 (415) 555-0132"),
    ("PHONE", "UK landline {} works", "020 7946 0958"),
    ("PHONE", "US cell {} works", "415-555-0132"),
    ("PHONE", "Paris office {}", "+33 1 23 45 67 89"),
    ("PHONE", "Dial {} from Germany", "0044 20 7946 0958"),
    ("PHONE", "my cell is {} if the link fails", "4155550132"),
    ("CARD", "Card {} was declined", "4111 1111 1111 1111"),
    ("CARD", "amex {} ok", "3782 822463 10005"),
    ("CARD", "use {} in test mode", "5555-5555-5555-4444"),
    ("IBAN", "Pay to {} by Friday", "GB82 WEST 1234 5698 7654 32"),
    ("IBAN", "iban: {}", "DE89370400440532013000"),
    ("IBAN", "typed lower: {}.", "de89 3704 0044 0532 0130 00"),
    ("SSN", "SSN {} on the form", "123-45-6789"),
    ("SSN", "my social security number is {}", "123 45 6789"),
    ("IP", "server at {} refuses ssh", "192.168.1.10"),
    ("IP", "curl http://{}:8080/health", "10.0.0.5"),
    ("IP", "host {} is up", "2001:db8:85a3::8a2e:370:7334"),
    ("IP", "binds to [{}]:443", "::1"),
    ("SECRET", "OPENAI_API_KEY={}", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXyZ0"),
    ("SECRET", "export GITHUB_TOKEN={}", "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"),
    ("SECRET", "key id {} leaked", "AKIAIOSFODNN7EXAMPLE"),
    ("SECRET", "decode {} please", JWT),
    ("SECRET", "Authorization: Bearer {}", "x9Kf2LmQ8rT1vW4yZ7aB3cD6"),
    ("SECRET", "SLACK_BOT_TOKEN={}", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"),
]


@pytest.mark.parametrize(("pii_type", "template", "value"), POSITIVES)
def test_each_type_is_found_with_exact_offsets(pii_type, template, value):
    text = template.format(value)
    findings = scan(text)
    assert [(f.type, text[f.start:f.end]) for f in findings] == [(pii_type, value)]


NEGATIVES = [
    "Card 4111 1111 1111 1112 fails Luhn",
    "IBAN GB82 WEST 1234 5698 7654 33 has a bad checksum",
    "IBAN DE89370400440532013001 bad checksum",
    "SSN 000-12-3456 is not assignable", "SSN 666-12-3456 neither", "SSN 912-34-5678 neither",
    "SSN 123-00-4567 has group 00", "SSN 123-45-0000 has serial 0000",
    "numpy 1.26.4, node v20.11.0, v2.10.1 and 1.2.3",
    "Windows build 10.0.19041.1 and Chrome 120.0.6099.109",
    "released in version 1.2.3.4", "pip install pkg==2.4.1.3",
    "request 550e8400-e29b-41d4-a716-446655440000 failed",
    "commit a1b2c3d and 3f786850e387550fdab836ed7e6dc881de23001b",
    "meeting on 2024-01-15 at 14:30:00, or 15/01/2024, or 15.01.2024",
    "logged at 2024-01-15T10:30:00Z and unix 1700000000",
    "Order #112-7463528-1234567 and ORD-2024-00123, invoice INV-2024-0042",
    "It costs $1,299.99 or €2.499,00 or 1 234 567,89 €",
    "ISBN 978-3-16-148410-0 and 0-306-40615-2",
    "tracking 1Z999AA10123456784 and 9400 1000 0000 0000 0000 00",
    "Use logo@2x.png and clone git@github.com:acme/infra.git",
    "My IMEI is 352099001761481",
    "scikit is sk-learn; placeholder AKIAXXXXXXXXXXXXXXXX",
    "the MAC is 00:1A:2B:3C:4D:5E and std::vector, dead::beef",
    "Bearer tokens are explained in the docs",
    "prose like sk-this-is-not-a-real-key-at-all and Bearer authentication-without-any-digits",
    "Amazon order 025-3655882-2700348 is late",
]


@pytest.mark.parametrize("text", NEGATIVES)
def test_hard_negatives_are_not_reported(text):
    assert scan(text) == []


def test_api_constants():
    assert PII_MODES == ("redact", "detect", "flag")
    assert set(PII_TYPES) == {"EMAIL", "PHONE", "CARD", "IBAN", "SSN", "IP", "SECRET"}
    assert all(t == t.upper() for t in PII_TYPES)


def test_findings_are_sorted_frozen_and_non_overlapping():
    text = "a@b.io, +44 20 7946 0958, 4111111111111111, 10.0.0.1 and b@c.io"
    findings = scan(text)
    assert [f.type for f in findings] == ["EMAIL", "PHONE", "CARD", "IP", "EMAIL"]
    assert all(a.end <= b.start for a, b in zip(findings, findings[1:], strict=False))
    with pytest.raises(AttributeError):
        findings[0].start = 3


def test_overlaps_go_to_the_longer_more_specific_finding():
    # A JWT after 'Bearer' is matched by two secret patterns; an email whose local part holds a phone
    # number, and an IBAN whose digits could be read as a card, stay one finding each.
    for text, expected in [(f"Authorization: Bearer {JWT}", [("SECRET", JWT)]),
                           ("mail 4155550132@example.com", [("EMAIL", "4155550132@example.com")]),
                           ("IBAN GB82 WEST 1234 5698 7654 32", [("IBAN", "GB82 WEST 1234 5698 7654 32")])]:
        assert [(f.type, text[f.start:f.end]) for f in scan(text)] == expected


def test_redact_numbers_placeholders_per_type_and_reuses_them_for_the_same_value():
    text = ("Mail Ana@Example.com or ana@example.com, call +1 415-555-0132 or (415) 555-0132 "
            "or 020 7946 0958; bob@example.org too.")
    result = redact(text)
    assert result.text == ("Mail [EMAIL_1] or [EMAIL_1], call [PHONE_1] or [PHONE_2] "
                           "or [PHONE_3]; [EMAIL_2] too.")
    assert result.counts == {"EMAIL": 3, "PHONE": 3}
    assert [text[f.start:f.end] for f in result.findings][:2] == ["Ana@Example.com", "ana@example.com"]


def test_new_values_in_already_redacted_text_get_fresh_numbers():
    result = redact("[EMAIL_1] and [EMAIL_3] wrote to bob@example.org about [PHONE_1]")
    assert result.text == "[EMAIL_1] and [EMAIL_3] wrote to [EMAIL_4] about [PHONE_1]"


def test_phones_with_the_same_digits_share_a_placeholder():
    result = redact("call 415-555-0132, or 415.555.0132 if that fails")
    assert result.text == "call [PHONE_1], or [PHONE_1] if that fails"


def test_redaction_is_idempotent_and_leaves_nothing_to_find():
    text = f"key {JWT} from 10.0.0.1 for a@b.io, card 4111 1111 1111 1111, SSN 123-45-6789"
    once = redact(text)
    assert scan(once.text) == []
    assert redact(once.text).text == once.text
    assert redact(once.text).counts == {}


def test_a_value_exposed_by_redacting_its_neighbour_is_redacted_too():
    # '2001:db8::' is not an address while glued to '1x.y@example.com' (that email's local part takes
    # the '1'); once the email is a placeholder the address stands alone, and a second pass takes it.
    text = "2001:db8::1x.y@example.com"
    assert [f.type for f in scan(text)] == ["EMAIL"]
    result = redact(text)
    assert result.text == "[IP_1][EMAIL_1]"
    assert result.findings == [Finding("EMAIL", 10, 26)] and result.counts == {"EMAIL": 1, "IP": 1}


def test_text_without_findings_is_returned_as_the_same_object():
    text = "".join(["Nothing to see here: version 1.2.3, ", "order ORD-2024-00123."])
    result = redact(text)
    assert result.text is text
    assert result == Redaction(text, [], {})


def test_checksums():
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert luhn_valid("79927398713") and not luhn_valid("")
    assert luhn_valid("7992739871" + luhn_check_digit("7992739871"))
    assert iban_valid("GB82WEST12345698765432") and not iban_valid("GB82WEST12345698765433")
    assert not iban_valid("GB82WEST1234569876543")  # a character short for GB
    assert iban_valid("NL" + iban_check_digits("NL", "ABNA0417164300") + "ABNA0417164300")
    assert ssn_valid("123", "45", "6789")
    assert not any(ssn_valid(*parts) for parts in [("000", "12", "3456"), ("666", "12", "3456"),
                                                    ("900", "12", "3456"), ("123", "00", "4567"),
                                                    ("123", "45", "0000")])


def test_phones_without_libphonenumber_use_shape_rules_only():
    # '+1 555 555 5555' has a phone's shape but no valid plan (area code 555 is not assigned).
    text = "call +1 555 555 5555 now"
    assert [f.type for f in Scanner(use_libphonenumber=False).scan(text)] == ["PHONE"]
    assert Scanner(use_libphonenumber=True).scan(text) == []


def test_the_package_stays_in_the_core_layer():
    probe = ("import sys, synthex.core.pii; bad = [m for m in ('dagster', 'lancedb', 'lance', 'pyarrow', "
             "'synthex_resources', 'synthex_assets', 'synthex.app') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---- the labelled set and what the detectors score on it ---------------------------------------------

def test_shipped_set_is_what_the_generator_makes_and_is_consistent():
    shipped = load_set(SET)
    made = generate()
    assert [(r["text"], r["spans"], r["negatives"]) for r in shipped] == \
           [(r["text"], r["spans"], r["negatives"]) for r in made]
    per_type: dict[str, int] = {}
    for record in shipped:
        labelled = sorted((s["start"], s["end"]) for s in record["spans"] + record["negatives"])
        assert all(0 <= a < b <= len(record["text"]) for a, b in labelled)
        assert all(first[1] <= second[0] for first, second in zip(labelled, labelled[1:], strict=False))
        for span in record["spans"]:
            per_type[span["type"]] = per_type.get(span["type"], 0) + 1
    assert sum(per_type.values()) >= 300
    assert all(per_type.get(t, 0) >= 30 for t in PII_TYPES)
    assert json.loads(SET.read_text().splitlines()[0])["id"]


def test_detectors_keep_their_scores_on_the_labelled_set():
    result = evaluate(load_set(SET), lambda text: [(f.type, f.start, f.end) for f in scan(text)], PII_TYPES)
    for pii_type in PII_TYPES:
        counts = result["exact"][pii_type]
        assert counts["tp"] / counts["gold"] >= 0.95, pii_type
        # IP loses precision on bare 4-part version numbers (measured in evals/bench/pii.py).
        assert counts["tp"] / counts["pred"] >= (0.75 if pii_type == "IP" else 0.95), pii_type


def test_scan_is_fast_enough_for_every_record_of_a_step():
    texts = [r["text"] for r in load_set(SET)]
    best = min(_timed(texts) for _ in range(3))
    assert len(texts) / best > 1000  # records/s on one core; typically 5-10x this


def _timed(texts: list[str]) -> float:
    # CPU time of this process: other jobs on a shared CI machine do not count against it.
    started = time.process_time()
    for text in texts:
        scan(text)
    return time.process_time() - started


# ---- properties ------------------------------------------------------------------------------------

NO_DIGIT_NO_AT = st.text(alphabet=st.characters(blacklist_categories=("Nd", "Cs"), blacklist_characters="@"),
                         max_size=300)
FILLER = st.text(alphabet=string.ascii_letters + " ,;!?'\"()\n", max_size=60)
FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(NO_DIGIT_NO_AT)
def test_text_without_digits_or_at_signs_is_never_changed(text):
    assert scan(text) == []
    assert redact(text).text is text


@st.composite
def cards(draw) -> str:
    prefix = draw(st.sampled_from(["4", "51", "55", "34", "37", "6011", "3528"]))
    length = 15 if prefix in ("34", "37") else 16
    payload = prefix + "".join(draw(st.lists(st.sampled_from(string.digits), min_size=length - len(prefix) - 1,
                                             max_size=length - len(prefix) - 1)))
    digits = payload + luhn_check_digit(payload)
    if draw(st.booleans()) and length == 16:
        return draw(st.sampled_from([" ", "-"])).join(digits[i:i + 4] for i in range(0, 16, 4))
    return digits


@st.composite
def ibans(draw) -> str:
    country, length = draw(st.sampled_from([("DE", 18), ("FR", 23), ("ES", 20), ("NL", 14), ("BE", 12)]))
    bban = "".join(draw(st.lists(st.sampled_from(string.digits), min_size=length, max_size=length)))
    if country == "NL":
        bban = "ABNA" + bban[4:]
    compact = country + iban_check_digits(country, bban) + bban
    return " ".join(compact[i:i + 4] for i in range(0, len(compact), 4)) if draw(st.booleans()) else compact


LOWER = st.sampled_from(string.ascii_lowercase)
EMAILS = st.builds(lambda a, local, b, c, domain, d, tld: f"{a}{local}{b}@{c}{domain}{d}.{tld}",
                   LOWER, st.text(string.ascii_lowercase + string.digits + "._+", max_size=15), LOWER,
                   LOWER, st.text(string.ascii_lowercase + string.digits + "-", max_size=12), LOWER,
                   st.sampled_from(["com", "org", "io", "co.uk", "de"]))


@FAST
@given(FILLER, FILLER, st.one_of(cards().map(lambda v: ("CARD", v)), ibans().map(lambda v: ("IBAN", v)),
                                 EMAILS.map(lambda v: ("EMAIL", v))))
def test_a_value_embedded_in_filler_is_found_at_its_offsets(before, after, typed_value):
    pii_type, value = typed_value
    text = f"{before} {value} {after}"
    start = len(before) + 1
    assert scan(text) == [Finding(pii_type, start, start + len(value))]


PIECES = st.sampled_from(["a@b.io", "x.y@example.com", "4111 1111 1111 1111", "+44 20 7946 0958", "415-555-0132",
                          "GB82 WEST 1234 5698 7654 32", "123-45-6789", "10.0.0.1", "::1", "2001:db8::1", JWT,
                          "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t", "Bearer x9Kf2LmQ8rT1vW4yZ7aB3cD6", "1.2.3", "2024-01-15",
                          "[EMAIL_1]", "[PHONE_12]", "7", "-", ".", ":", "@", " ", "_", "(", ")", "+", "/", "x", "0"])


@FAST
@given(st.lists(PIECES, max_size=14).map("".join))
def test_redacted_text_holds_no_finding_and_redacting_again_changes_nothing(text):
    once = redact(text)
    assert scan(once.text) == []
    assert redact(once.text).text == once.text
    for finding in once.findings:
        assert 0 <= finding.start < finding.end <= len(text)
    assert sum(once.counts.values()) >= len(once.findings)


@FAST
@given(st.text(alphabet=string.printable, max_size=200))
def test_findings_are_in_bounds_sorted_and_disjoint_on_any_text(text):
    findings = scan(text)
    assert all(f.type in PII_TYPES and 0 <= f.start < f.end <= len(text) for f in findings)
    assert all(a.end <= b.start for a, b in zip(findings, findings[1:], strict=False))


def test_values_glued_end_to_end_are_all_redacted():
    # Found by the property above: each glued phone is refused while a digit touches it, so every pass
    # exposes one more; five after an address needed more passes than the redactor made.
    text = "a@b.io" + "+44 20 7946 0958" * 12
    once = redact(text)
    assert scan(once.text) == []
    assert once.text == "[EMAIL_1]" + "[PHONE_1]" * 12
