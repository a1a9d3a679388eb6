"""Word-neighbour query expansion: step 6 of drill-down search (``expansion_weight``; issue 22).

A list question ("What outdoor activities has Andrew done?", "Which cities has John been to?") is
answered by turns that name instances of what it asks for (rock climbing, fishing; Seattle, Chicago)
and often share no word with it: on LoCoMo dev7, 205 of the 259 multi-hop evidence turns that ranked
21st or lower shared no content word with their question (docs/benchmarks.md). Expanding a query's
words with their nearest neighbours in the collection's own vocabulary, by word embeddings, is the
classic remedy (Kuzi, Shtok and Kurland, CIKM 2016; Roy et al., Neu-IR 2016); here the embedder is the
store's own (MiniLM offline), so no model is added.

How it scores: every content word of the scope's leaves (3 to ``MAX_WORD_LENGTH`` letters, not a
stopword) is a column of the scope's word index. For a query, each content word that is not a speaker's
name or a question word (at most ``MAX_QUERY_WORDS``) is compared with those columns by cosine; a leaf
takes, per query word, the best ``cosine x idf`` (idf ``log(1 + leaves / df)``) among its own words whose
cosine reaches ``expansion_similarity`` (the word itself counts), summed over the query words. Drill-down
multiplies the turn scores by ``1 + weight x this / its max``, so it reorders what the other legs found.

The scope's word index and the store's word vectors are search/indexes/word_index.py's (saved beside the
table; bounds there). At most ``MAX_QUERY_WORDS`` words of a query.
"""

from __future__ import annotations

import numpy as np

from synthex_resources.search.indexes.word_index import WordIndex, content_words

MAX_QUERY_WORDS = 32
# Words that say what form a question has, not what it is about.
QUESTION_WORDS = frozenset("""what which when where who whom whose why how many much kind kinds type types sort
does did do has have had ever mention mentioned mentions name names""".split())


def query_words(query: str, participants: set[str]) -> list[str]:
    """The words of ``query`` the expansion looks for (at most ``MAX_QUERY_WORDS``): content words, not a
    speaker's name, not a question word ("what", "kind", "mention")."""
    found = dict.fromkeys(w for w in content_words(query) if w not in participants and w not in QUESTION_WORDS)
    return list(found)[:MAX_QUERY_WORDS]


def expansion_scores(index: WordIndex, word_vectors: np.ndarray, similarity: float) -> np.ndarray:
    """Per leaf: the sum over the query words (rows of ``word_vectors``) of the best ``cosine x idf``
    among its words at cosine >= ``similarity`` (a word's cosine with itself may round below 1)."""
    n = index.leaf_words.shape[0]
    out = np.zeros(n)
    if not len(word_vectors) or not index.words:
        return out
    idf = np.log1p(n / np.maximum(index.df, 1))
    sims = np.asarray(word_vectors, dtype=np.float32) @ index.vectors.T  # query words x vocabulary
    cols = index.columns
    for row in sims:
        best = np.zeros(n)
        for j in np.flatnonzero(row >= similarity - 1e-6):
            leaves = cols.indices[cols.indptr[j]:cols.indptr[j + 1]]
            best[leaves] = np.maximum(best[leaves], float(row[j]) * idf[j])
        out += best
    return out
