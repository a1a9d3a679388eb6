"""The lexical tokenizer: lowercase alphanumeric runs. No stopword removal, no stemming.

Both were measured to hurt on conversational memory (lethe notes, Part 10: regex tokenizer
+3.7pp NDCG@10 over whitespace split; stopword removal and Porter stemming gave back most of it).
LanceDB's FTS index is configured to tokenize the same way (``simple`` tokenizer, lower-case,
no stemming, no stopwords), so queries and documents agree. A project may turn on stemming in the
index (``Pipeline(lexical_stem=True)``); LanceDB then stems our tokens of the query the same way.
"""

from __future__ import annotations

import re

TOKEN = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    return TOKEN.findall(text.lower())
