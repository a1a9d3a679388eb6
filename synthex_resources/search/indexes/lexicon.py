"""The multi-hop lexicon of a leaf-sum scope (search/strategies/conversational_multihop.py reads it): per leaf, its rare terms (words few
turns use, capitalized entities) with their idf, the terms' postings, the leaves' sessions and turn
adjacency; per (table version of the scope, scope filter and ``rare_df``), on the versioned base.

Made from the scope's bookkeeping (search/indexes/leaf_scope.py: leaf ids, order, adjacency) and the leaves'
text, read in one Arrow scan matched by id (``leaf_texts``, which the word index reads too). A scope that
only appended leaves to the one the lexicon was made for gets it padded (the new leaves have no rare terms
until the next full build); one saved by an earlier process for this scope, or for the scope it extends, is
loaded (search/indexes/sidecar.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import sparse

from synthex.core.enrich.words import STOPWORDS
from synthex_resources.encryption import StoreCipher
from synthex_resources.search.indexes.sidecar import Entry, Sidecar
from synthex_resources.search.indexes.versioned import EXTEND, LOAD, VersionedStructure
from synthex_resources.search.tokenize import tokenize
from synthex_resources.search.types import SearchBackend
from synthex_resources.store import filters
from synthex_resources.store.filters import RecordFilter
from synthex_resources.store.pinned import PinnedDataset

if TYPE_CHECKING:  # type hints only: the store builds this structure (no import cycle)
    from synthex_resources.record_store import RecordStore

IDS_READ_BY_ID = 1_000  # leaf_texts filters by id up to this many ids (a scan of the steps above)

_CAPITALIZED = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-zA-Z]+)")


@dataclass
class Lexicon:
    terms: sparse.csr_matrix  # leaves x rare terms, idf weights
    postings: sparse.csc_matrix  # the same, by term (column): which leaves have each rare term
    seed_norm: np.ndarray  # per leaf: sum of the idf of its rare terms
    vocab: dict[str, int]
    session: np.ndarray  # per leaf: session number (runs of adjacent turns)
    adjacency: sparse.csr_matrix  # leaves x leaves: previous/next turn
    leaf_ids: list[str] | None = None  # the scope's leaf list it was made for (an extension checks it)


def _adjacency(nxt: np.ndarray) -> sparse.csr_matrix:
    n = len(nxt)
    a = np.flatnonzero(nxt >= 0)
    b = nxt[a]
    return sparse.csr_matrix((np.ones(2 * len(a)), (np.concatenate([a, b]), np.concatenate([b, a]))), shape=(n, n))


def _padded(old: Lexicon, leaf_ids: list[str], prev: np.ndarray, nxt: np.ndarray) -> Lexicon:
    """``old`` for a scope that appended leaves to its own (search/indexes/leaf_scope.py): the new leaves have no
    rare terms until the next full build (they neither give nor get expansion credit), and the turn
    adjacency and sessions are recomputed from the extended scope. Linear in leaves, no text read."""
    n, t = len(leaf_ids), old.terms.shape[1]
    added = n - old.terms.shape[0]
    indptr = np.concatenate([old.terms.indptr, np.full(added, old.terms.indptr[-1])])
    terms = sparse.csr_matrix((old.terms.data, old.terms.indices, indptr), shape=(n, t))
    postings = sparse.csc_matrix((old.postings.data, old.postings.indices, old.postings.indptr), shape=(n, t))
    return Lexicon(terms=terms, postings=postings, seed_norm=np.concatenate([old.seed_norm, np.zeros(added)]),
                   vocab=old.vocab, session=sessions_of(prev), adjacency=_adjacency(nxt), leaf_ids=leaf_ids)


def sessions_of(prev: np.ndarray) -> np.ndarray:
    """Per leaf: its session number (a run of adjacent turns, from the ``prev`` links)."""
    return np.cumsum(prev < 0) - 1


def leaf_texts(cipher: StoreCipher | None, read: PinnedDataset | None, leaf_ids: list[str],
               leaf_steps: list[str]) -> list[tuple[str, str]]:
    """(content, metadata JSON) of each leaf at ``read``'s version, in ``leaf_ids`` order ("" for a leaf not
    found; an encrypted store's content decrypted, so neither the lexicon nor the word index is made of
    ciphertext): one scan of the leaf steps' rows, matched to the leaves by id in Arrow (any row of an id:
    the same content). The ids looked up in chunks took most of a 1M-leaf build (a filtered query per
    1,000 ids)."""
    if read is None or not leaf_ids:
        return [("", "")] * len(leaf_ids)
    ds = read.dataset
    # A few leaves (an extension's appended ones) are read by id; many, by one scan of their steps.
    by_id = leaf_ids if len(leaf_ids) <= IDS_READ_BY_ID else None
    table = ds.to_table(columns=["id", "content", "metadata"],
                        filter=filters.where(RecordFilter.of(steps=leaf_steps or None, ids=by_id))
                        if leaf_steps or by_id else None)
    at = pc.index_in(pa.array(leaf_ids, type=pa.string()), value_set=table.column("id").combine_chunks())
    picked = table.take(pc.fill_null(at, 0)) if len(table) else None
    found = at.is_valid().to_pylist()
    contents = picked.column("content").to_pylist() if picked is not None else []
    if cipher is not None:  # an encrypted store's text is read in plaintext (in memory only)
        contents = [cipher.decrypt(c) if c else c for c in contents]
    metas = picked.column("metadata").to_pylist() if picked is not None else []
    return [(c or "", m or "") if ok else ("", "") for ok, c, m in zip(found, contents or [None] * len(found),
                                                                   metas or [None] * len(found), strict=True)]


def _build(cipher: StoreCipher | None, read: PinnedDataset | None, leaf_ids: list[str], prev: np.ndarray,
           nxt: np.ndarray, participants: set[str], rare_df: int, leaf_steps: list[str] | None = None) -> Lexicon:
    n = len(leaf_ids)
    per_leaf: list[set[str]] = []
    entities: list[set[str]] = []
    for content, metadata in leaf_texts(cipher, read, leaf_ids, list(leaf_steps or [])):
        text = str(content)
        meta = json.loads(metadata or "{}")
        for name in tokenize(str((meta.get("chat") or {}).get("author", ""))):
            participants.add(name)
        per_leaf.append({t for t in tokenize(text) if len(t) > 2 and not t.isdigit() and t not in STOPWORDS})
        entities.append({m.lower() for m in _CAPITALIZED.findall(text)} - STOPWORDS)
    df: dict[str, int] = {}
    for terms in per_leaf:
        for t in terms:
            df[t] = df.get(t, 0) + 1
    # Rare: a word few turns use (but more than one: a term only one turn has links nothing), or a
    # capitalized entity (a name, a place, a title) that is not among the most common words.
    def key(t: str, ents: set[str]) -> bool:
        if t in participants or df[t] < 2:
            return False
        return df[t] <= rare_df or (t in ents and df[t] <= 4 * rare_df)

    vocab: dict[str, int] = {}
    r_idx, c_idx, vals = [], [], []
    for i, (terms, ents) in enumerate(zip(per_leaf, entities, strict=True)):
        for t in terms:
            if key(t, ents):
                j = vocab.setdefault(t, len(vocab))
                r_idx.append(i)
                c_idx.append(j)
                vals.append(float(np.log(n / df[t])))
    terms = sparse.csr_matrix((vals, (r_idx, c_idx)), shape=(n, max(len(vocab), 1)))
    return Lexicon(terms=terms, postings=terms.tocsc(), seed_norm=np.asarray(terms.sum(axis=1)).ravel(), vocab=vocab,
                   session=sessions_of(prev), adjacency=_adjacency(nxt), leaf_ids=leaf_ids)


def _to_entry(lex: Lexicon, scope_token: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    vocab = sorted(lex.vocab, key=lex.vocab.__getitem__)
    return ({"scope_token": scope_token, "shape": list(lex.terms.shape)},
            {"data": lex.terms.data, "indices": lex.terms.indices, "indptr": lex.terms.indptr,
             "vocab": np.asarray(vocab, dtype=str)})


def _from_entry(entry: Entry, leaf_ids: list[str], prev: np.ndarray, nxt: np.ndarray) -> Lexicon:
    a = entry.arrays
    terms = sparse.csr_matrix((a["data"], a["indices"], a["indptr"]), shape=tuple(entry.meta["shape"]))
    vocab = {t: i for i, t in enumerate(a["vocab"].tolist())}
    return Lexicon(terms=terms, postings=terms.tocsc(), seed_norm=np.asarray(terms.sum(axis=1)).ravel(), vocab=vocab,
                   session=sessions_of(prev), adjacency=_adjacency(nxt), leaf_ids=leaf_ids)


class Lexicons(VersionedStructure[str, Lexicon]):
    """The multi-hop lexicon per (table version of the scope, scope filter and ``rare_df``); the store's
    ``search_state.lexicons``. The context of each ask is (the scope's bookkeeping, ``rare_df``)."""

    kind = "lexicon"

    def __init__(self, sidecar: Callable[[], Sidecar] | None, store: RecordStore) -> None:
        super().__init__(sidecar)
        self.store = store

    def build(self, read: PinnedDataset | None, key: str, context: Any) -> Lexicon:
        scope, rare_df = context
        return _build(self.store.cipher, read, scope.leaf_ids, scope.prev, scope.next, set(scope.participants),
                      rare_df, scope.leaf_steps)

    def extend(self, read: PinnedDataset | None, key: str, previous: Lexicon, context: Any) -> tuple[Lexicon, str] | None:
        """Padded when the scope only appended leaves to the one ``previous`` was made for."""
        scope, _ = context
        if scope.extended_from is not None and previous.leaf_ids is scope.extended_from:
            return _padded(previous, scope.leaf_ids, scope.prev, scope.next), EXTEND
        return None

    def from_entry(self, read: PinnedDataset, key: str, entry: Entry, context: Any) -> tuple[Lexicon, str] | None:
        """Saved for this very scope: as it is; for the scope this one extends: padded."""
        scope, _ = context
        owner = entry.meta.get("scope_token")
        if owner == scope.token and entry.meta["shape"][0] == len(scope.leaf_ids):
            return _from_entry(entry, scope.leaf_ids, scope.prev, scope.next), LOAD
        if owner is not None and owner == scope.base_token and entry.meta["shape"][0] <= len(scope.leaf_ids):
            base_n = entry.meta["shape"][0]
            # the base's own turns only: a link from its last turn of a session to an appended
            # turn points past it (an adjacency of base_n rows cannot hold it)
            base_next = np.where(scope.next[:base_n] < base_n, scope.next[:base_n], -1)
            return _padded(_from_entry(entry, scope.leaf_ids[:base_n], scope.prev[:base_n], base_next),
                           scope.leaf_ids, scope.prev, scope.next), EXTEND
        return None

    def to_entry(self, value: Lexicon, context: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        return _to_entry(value, context[0].token)


def lexicon(engine: SearchBackend, where: str, scope: Any, rare_df: int) -> Lexicon:
    """The scope's lexicon at the table version the scope was made of (``scope.read``: keyed by it, its
    leaves' text read from it, saved with its state): cached, padded when the scope only appended leaves
    to the one it was made for, else loaded from beside the table when an earlier process made it for this
    scope (or padded when for the scope this one extends: search/indexes/sidecar.py), else built from the leaves'
    text."""
    return engine.store.search_state.lexicons.get(scope.read, f"{where}|{rare_df}", (scope, rare_df))
