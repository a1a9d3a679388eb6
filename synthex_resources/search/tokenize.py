"""The lexical tokenizer: lowercase alphanumeric runs. No stopword removal, no stemming.

Both were measured to hurt on conversational memory (lethe notes, Part 10: regex tokenizer
+3.7pp NDCG@10 over whitespace split; stopword removal and Porter stemming gave back most of it).
LanceDB's FTS index is configured to tokenize the same way (``simple`` tokenizer, lower-case,
no stemming, no stopwords), so queries and documents agree. A project may turn on stemming in the
index (``Pipeline(lexical_stem=True)``); LanceDB then stems our tokens of the query the same way.

``IndexAnalyzer``: the terms the FTS index itself holds for our tokens (stemmed, accent-folded, long
tokens dropped), so that BM25 computed here (search/indexes/postings.py) ranks exactly as the index does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

TOKEN = re.compile(r"[a-z0-9]+")

# The index parameters that decide its terms (the rest, e.g. block size or positions, do not).
ANALYZER_PARAMS = ("base_tokenizer", "language", "max_token_length", "lower_case", "stem", "remove_stop_words",
                   "custom_stop_words", "ascii_folding")
# The tokenizer of a project's FTS index (search/engine.py ensure_index builds it with these and ``stem``).
PROJECT_INDEX = {"base_tokenizer": "simple", "language": "English", "max_token_length": 40, "lower_case": True,
                 "remove_stop_words": False, "ascii_folding": True}
_ANCHOR = "0"  # a word every analyzer keeps as it is: positions are counted from the first token kept
ANALYZE_CHUNK = 50_000  # words per call of LanceDB's analyzer (bounds the token objects it returns at once)
WORDS_KEPT = 2_000_000  # words an analyzer remembers: bounds what ever-new query words add in a long-lived server


def tokenize(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


class IndexAnalyzer:
    """The terms of a LanceDB FTS index with ``params`` (its stored parameters), asked of LanceDB's own
    analyzer (``lance.tokenize``: the tokenizer the index and its queries run, Snowball stemmer included), so
    no second stemmer can disagree with it. A word (a ``tokenize`` token) is analyzed once and remembered.

    Only an index whose split our regex reproduces is served (``of_index``): the ``simple`` base tokenizer
    (splits on anything not alphanumeric: on ASCII text the regex's split), lower-case, no stop words. A
    text with non-ASCII characters is split by the analyzer itself (``text_terms``): it keeps ``café``
    whole and folds it to ``cafe`` where the regex splits ``caf``."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.params = {k: params[k] for k in ANALYZER_PARAMS if k in params and params[k] is not None}
        self.stem = bool(self.params.get("stem", False))
        self.max_length = int(self.params.get("max_token_length") or 0)  # 0: no limit
        self._terms: dict[str, str | None] = {}  # word -> its term (None: the index drops it)
        self.analyzed = 0  # words sent to LanceDB's analyzer so far (tests watch it)

    @staticmethod
    def of_index(params: Mapping[str, Any] | None) -> IndexAnalyzer | None:
        """The analyzer of an index with these parameters, or None when its terms cannot be reproduced here."""
        if params is None or params.get("base_tokenizer") != "simple" or not params.get("lower_case"):
            return None
        if params.get("remove_stop_words") or params.get("custom_stop_words"):
            return None
        return IndexAnalyzer(params)

    def key(self) -> str:
        """What decides the terms (a saved index of terms is valid for the same key only)."""
        return repr(sorted(self.params.items()))

    def terms(self, words: Sequence[str]) -> list[str | None]:
        """Each word's term in the index (None: not indexed, e.g. 40 characters or more)."""
        missing = [w for w in dict.fromkeys(words) if w not in self._terms]
        if not missing:
            return [self._terms[w] for w in words]
        if self.stem:
            found = self._analyze(missing)
        else:  # ASCII words: lower-cased already, nothing to fold; only the length limit applies
            found = {w: w if not self.max_length or len(w) < self.max_length else None for w in missing}
        # Remembered up to a bound: a long-lived server asked ever new words (hostile or not) must not grow
        # without limit; past it a new word is analyzed again each time it is asked (a few microseconds).
        room = WORDS_KEPT - len(self._terms)
        if room > 0:
            self._terms.update(found if len(found) <= room else dict(list(found.items())[:room]))
        return [self._terms[w] if w in self._terms else found[w] for w in words]

    def _analyze(self, words: list[str]) -> dict[str, str | None]:
        import lance  # pylance (not lancedb): a search never imports lancedb

        # One call per chunk of words: each is one token of the simple tokenizer, found again by its position
        # (counted from the first token kept: the anchor, which every analyzer keeps as it is).
        terms: dict[str, str | None] = {}
        for start in range(0, len(words), ANALYZE_CHUNK):
            chunk = words[start:start + ANALYZE_CHUNK]
            tokens = lance.tokenize(" ".join([_ANCHOR, *chunk]), **self.params)
            found = {t.position: t.text for t in tokens}
            if found.get(0) != _ANCHOR:
                raise RuntimeError(f"LanceDB's analyzer changed the anchor word {_ANCHOR!r}: {found.get(0)!r}")
            for position, word in enumerate(chunk, start=1):
                terms[word] = found.get(position)
        self.analyzed += len(words)
        return terms

    def text_terms(self, text: str) -> list[str]:
        """The terms of a whole text, split by the index's own tokenizer (texts with non-ASCII characters)."""
        import lance

        return [t.text for t in lance.tokenize(text, **self.params)]
