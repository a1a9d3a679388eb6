"""Content phrases without a tagger: RAKE-style candidates split at stop words and punctuation.

The text is cut at punctuation, numbers, every word of ``words.STOPWORDS``, ``words.CHATTER`` and
``words.DATE_WORDS``, and words in -ed longer than four letters (past tenses: "dog named Max"); what
remains between cuts are the candidate phrases ("support group", "adoption agency", "pottery class").
A possessive ends a phrase ("Melanie's daughter" gives "melanie", "daughter"). Phrases are lower-cased,
1 to 4 words (a longer run keeps its last four words, where English puts the head noun); a single word
needs three letters and no adjective/adverb ending (-ful, -ous, -ly, -less). Deduplicated, in order.

Known limits: with no part-of-speech tags, a verb or adjective missing from the lists stays in a phrase
("painted sunset" is kept whole); plurals are not folded ("agency" and "agencies" are two phrases).
"""

from __future__ import annotations

import re

from synthex.core.enrich.words import CHATTER, DATE_WORDS, STOPWORDS

__all__ = ["noun_phrases"]

_BREAK = STOPWORDS | CHATTER | DATE_WORDS
_CHUNKS = re.compile(r"[^\w\s'’-]+|_+|\n")  # punctuation and line breaks end every phrase
_ED_NOUNS = frozenset({"hundred", "seed", "speed", "breed", "shed", "greed", "steed", "creed", "weed", "need"})
_ADJECTIVE_ENDINGS = ("ful", "ous", "ly", "less")  # a single word so ending is an adjective or adverb
MAX_WORDS = 4


def noun_phrases(text: str) -> list[str]:
    """Candidate content phrases of ``text`` (lower case, 1-4 words), deduplicated, in order."""
    if not text:
        return []
    out: list[str] = []
    seen: set[str] = set()

    def flush(current: list[str]) -> None:
        words = current[-MAX_WORDS:]
        if len(words) > 1 or (len(words[0]) >= 3 and not words[0].endswith(_ADJECTIVE_ENDINGS)):
            phrase = " ".join(words)
            if phrase not in seen:
                seen.add(phrase)
                out.append(phrase)
        current.clear()

    current: list[str] = []
    for chunk in _CHUNKS.split(text.lower().replace("’", "'")):
        for raw in chunk.split():
            word = raw.strip("'-")
            possessive = word.endswith("'s")
            if possessive:
                word = word[:-2]
            if (not word.replace("-", "").isalpha() or word in _BREAK  # numbers, "don't", a lone dash
                    or (len(word) > 4 and word.endswith("ed") and word not in _ED_NOUNS)):
                if current:
                    flush(current)
                continue
            current.append(word)
            if possessive or raw.endswith("'"):
                flush(current)
        if current:
            flush(current)
    return out
