"""Proper-noun phrases from capitalization, without a tagger ("Caroline", "New York City", "Dr. Patel",
"LGBTQ support group", "The Lord of the Rings").

Heuristics, in order:

1. A title in quotes that starts with a capital ("The Lord of the Rings", "Nothing Is Impossible") is
   one entity, up to eight words.
2. A run of capitalized words, joined by single spaces or hyphens, may hold one or two connectors
   ("of", "the", "de", "van", "von", "la", "du", "&") before a capitalized word ("University of
   Michigan", "Lord of the Rings") and end in a short number ("The Witcher 3"). A title abbreviation
   keeps its period ("Dr. Patel", "St. Louis"); dotted initials ("J.K. Rowling") too.
3. Calendar words (dates are extracted separately), "I" and its contractions, interjections and chat
   acronyms ("Hey", "OMG", "LOL") and family words ("Mom") are never part of an entity; a run is cut
   around them ("Hey Mel" gives "Mel"). A run made only of common words ("It", "Just") is dropped.
4. The first word of a sentence (after . ! ? : ; a quote, a bracket, a dash or an emoji) is capitalized
   anyway. It starts an entity when the same word is capitalized inside a sentence of the text;
   otherwise only when it is not a common word (``words.STOPWORDS``/``CHATTER``/``SENTENCE_OPENERS``),
   not written in lower case elsewhere in the text, not a contraction, not an -ing/-ly/-ed/-ness/-tion
   (...) form and not a plural in -s (names like "James" excepted). "The" opening a sentence is dropped
   ("The Grand Canyon" gives "Grand Canyon"); a capitalized "The" inside a sentence stays (a title).
5. An acronym ("LGBTQ", "LGBTQ+", "NYC") takes up to two following lower-case content words as the
   thing it qualifies ("LGBTQ support group", "LGBTQ community").
6. A trailing possessive is dropped ("Caroline's" gives "Caroline"). Entities are deduplicated without
   regard to case, first spelling kept, in order of appearance.

Known limits: names written in lower case are missed; a capitalized common noun inside a sentence
("my Pottery class") is taken; a name that opens a sentence and is also a common word ("Will", "Grace")
or looks like a plural ("Jules") is missed there, and an uncommon noun opening a sentence ("Clarinet
is fun") is taken; nationalities and languages ("Italian") count as entities; acronym extension can
take a verb missing from the word lists ("NYC rocks").
"""

from __future__ import annotations

import re

from synthex.core.enrich.words import ACRONYM_NOISE, CHATTER, DATE_WORDS, SENTENCE_OPENERS, STOPWORDS

__all__ = ["entities"]

_TOKEN = re.compile(r"(?:[A-Z]\.){2,}|\w(?:[\w'’&-]*\w)?\+?")
_QUOTED = re.compile(r"[\"“]([A-Z][^\"“”\n]{0,80}?)[\"”]")
_CONNECTORS = frozenset({"of", "the", "de", "del", "della", "da", "van", "von", "la", "le", "du", "&", "al"})
_TITLES = frozenset({"dr", "mr", "mrs", "ms", "prof", "st", "sr", "jr", "mt", "capt", "gen", "rev", "lt",
                     "sgt"})
_NEVER = (DATE_WORDS | ACRONYM_NOISE | {"i", "i'm", "i've", "i'll", "i'd", "im", "ive", "mom", "mum", "dad",
                                        "mommy", "daddy", "grandma", "grandpa", "hey", "hi", "hello",
                                        "omg", "lol", "haha", "thanks", "wow", "oh", "ok", "okay", "yay",
                                        "yeah", "yes", "no", "bye", "congrats", "dear"})
_COMMON = STOPWORDS | CHATTER | DATE_WORDS
_OPENERS = _COMMON | SENTENCE_OPENERS
# Names ending in -s that the plural rule would drop at the start of a sentence.
_S_NAMES = frozenset("""james chris charles thomas nicholas lucas marcus douglas agnes frances doris lois
iris dolores carlos luis jesus andreas elias jonas silas tobias matthias texas paris athens vegas
brooks hayes wales""".split())
_NOUN_SUFFIXES = ("ing", "ly", "ed", "ness", "tion", "sion", "ment", "ity", "ship", "ance", "ence", "ful",
                  "ous", "ive", "able", "ible", "ism", "ist")
# a sentence starts after terminal punctuation, a colon, quotes, brackets, a dash, or any symbol (emoji)
_SENTENCE_GAP = re.compile(r"[^\s,'’&-]|\s[-–—]\s")
_TERMINAL = re.compile(r"[.!?…;]\s|\n")
_POSSESSIVE = re.compile(r"['’]s?$")


def _key(word: str) -> str:
    return word.lower().replace("’", "'")


def _is_acronym(word: str) -> bool:
    core = word.rstrip("+")
    letters = [c for c in core if c.isalpha()]
    return len(letters) >= 2 and all(c.isupper() for c in letters) and _key(core) not in ACRONYM_NOISE


def _sentence_word_is_name(word: str, lower_words: set[str], inner_words: set[str]) -> bool:
    """May a capitalized word that opens a sentence be a name? (A word also capitalized inside a
    sentence of this text may.)"""
    key = _POSSESSIVE.sub("", _key(word))
    if key in inner_words:
        return True
    if key in _OPENERS or key in lower_words or _key(word) in _OPENERS or "'" in key:
        return False
    if len(key) > 4 and key.endswith(_NOUN_SUFFIXES):
        return False
    if key.endswith("s") and not key.endswith(("ss", "us", "is")) and key not in _S_NAMES:
        return False  # a plural common noun, most likely
    return True


def _after_connectors(tokens, keys, joins, j: int) -> int | None:
    """The index of the capitalized word after one or two connectors starting at ``j``, if any."""
    for k in (j + 1, j + 2):
        if k >= len(tokens) or not joins[k]:
            return None
        if tokens[k][0][0].isupper():
            return k if keys[k] not in _NEVER else None
        if k == j + 2 or keys[k] not in _CONNECTORS:
            return None
    return None


def entities(text: str) -> list[str]:
    """Proper-noun phrases in ``text``, deduplicated (case-insensitive), in order of first appearance."""
    if not text or text.islower():
        return []
    found: list[tuple[int, str]] = []
    quoted_spans: list[tuple[int, int]] = []
    if '"' in text or "“" in text:
        for m in _QUOTED.finditer(text):
            title = m.group(1).strip().rstrip(".,!?;:")
            if title and len(title.split()) <= 8 and not _TERMINAL.search(title):
                found.append((m.start(1), title))
                quoted_spans.append(m.span())

    tokens = [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text)]
    low = text.lower().replace("’", "'")
    if len(low) == len(text):  # keys are slices of it (lower() can lengthen some letters, e.g. "İ")
        keys = [low[s:e] for _, s, e in tokens]
    else:
        keys = [_key(t) for t, _, _ in tokens]
    n = len(tokens)
    # per token: does a sentence start at it; can it join the previous token
    starts = [True] * n
    joins = [False] * n
    for i in range(1, n):
        gap = text[tokens[i - 1][2]:tokens[i][1]]
        if gap == " ":
            starts[i], joins[i] = False, True
            continue
        prev = tokens[i - 1][0]
        if gap[:1] == "." and gap[1:].isspace() and len(gap) <= 3 and (
                keys[i - 1] in _TITLES or (len(prev) == 1 and prev.isupper())):
            starts[i], joins[i] = False, True  # "Dr. Patel", "J. K. Rowling"
            continue
        starts[i] = bool(_SENTENCE_GAP.search(gap)) or not gap
        joins[i] = gap == "-" and not starts[i]
    lower_words = {keys[k] for k in range(n) if tokens[k][0][0].islower()}
    inner_words = {_POSSESSIVE.sub("", keys[k]) for k in range(n)
                   if not starts[k] and tokens[k][0][0].isupper()}
    i = 0
    while i < n:
        word = tokens[i][0]
        if not word[0].isupper() or keys[i] in _NEVER:
            i += 1
            continue
        # the maximal run of capitalized words and inner connectors
        run = [i]
        j = i + 1
        while j < n and joins[j]:
            w = tokens[j][0]
            if w[0].isupper() and keys[j] not in _NEVER:
                run.append(j)
                j += 1
            elif keys[j] in _CONNECTORS and (k := _after_connectors(tokens, keys, joins, j)):
                run += list(range(j, k + 1))  # "Lord of the Rings": connectors, then a capitalized word
                j = k + 1
            elif w.isdigit() and (len(w) <= 2 or (len(w) == 4 and not 1900 <= int(w) <= 2039)):
                run.append(j)  # "The Witcher 3", "Cyberpunk 2077"
                j += 1
                break
            else:
                break
        i = j
        # the first word of a sentence: keep it only if it looks like a name
        while run and starts[run[0]]:
            first = tokens[run[0]][0]
            if _sentence_word_is_name(first, lower_words, inner_words):
                break
            run.pop(0)
        while run and keys[run[0]] in _CONNECTORS and not tokens[run[0]][0][0].isupper():
            run.pop(0)
        if not run or all(keys[k] in _COMMON for k in run):
            continue
        last = run[-1]
        start, end = tokens[run[0]][1], tokens[last][2]
        if any(s <= start < e for s, e in quoted_spans):
            continue
        phrase = text[start:end]
        if _is_acronym(tokens[last][0]):
            extra = 0
            k = last + 1
            while extra < 2 and k < n and joins[k]:
                w = tokens[k][0]
                if not w.isalpha() or not w.islower() or len(w) < 3 or keys[k] in _COMMON:
                    break
                end = tokens[k][2]
                extra += 1
                k += 1
            phrase = text[start:end]
        phrase = _POSSESSIVE.sub("", phrase)
        if len(phrase) > 1 and not phrase.isdigit():
            found.append((start, phrase))

    found.sort(key=lambda f: f[0])
    seen: set[str] = set()
    out = []
    for _, phrase in found:
        key = _key(phrase)
        if key not in seen:
            seen.add(key)
            out.append(phrase)
    return out
