"""Encryption at rest (SYNTHEX_ENCRYPTION_KEY): nothing readable on disk, everything readable through Synthex.

Two real runs of one small pipeline (JSONL notes, an LLM summary step against the local fake OpenAI server,
so the LLM cache is written), one with the key and one without: the plaintext run is the positive control
of every raw-bytes scan (the same scan must find the planted token there).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import cli, go_offline, load, write_project
from fake_openai import FakeOpenAI

from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.encryption import KEY_ENV, PREFIX, EncryptionError, StoreCipher, generate_key
from synthex_resources.record_store import RecordStore
from synthex_resources.search.engine import SearchEngine
from synthex_resources.search.indexes.memory_lexical import memory_bm25
from synthex_resources.search.strategies.builtin import BM25, DENSE

TOKEN = "quixotrelwyn"  # planted in one source note; in no other text
SUMMARY_MARK = b"FAKE SUMMARY"  # every fake LLM response (summaries, their audit, the LLM cache) holds it
KEY = generate_key()

PIPELINE = '''
from synthex import Pipeline


def summarize(record):
    return "Summarize this note.\\n\\n" + record.content


pipeline = Pipeline("enc-test")
pipeline.source("notes", file={export!r})
pipeline.transform("summaries", from_="notes", prompt=summarize)
pipeline.output("search", from_=["notes", "summaries"], surface="search")
'''

TOPICS = ["the billing migration", "a flaky integration test", "the quarterly roadmap", "hiring a designer",
          "the search latency budget", "moving the office", "the on-call rotation", "a database upgrade"]


@pytest.fixture(autouse=True)
def no_key(monkeypatch):
    """Every test starts without a key in the environment (a test that wants one sets it)."""
    monkeypatch.delenv(KEY_ENV, raising=False)


def write_notes(path: Path) -> Path:
    lines = [{"id": f"note-{i}", "created_at": f"2024-0{1 + i % 3}-{10 + i}T10:00:00Z",
              "content": f"Meeting note {i}: we talked about {topic} and agreed on the next steps."}
             for i, topic in enumerate(TOPICS)]
    # Alone in its month, so it is the first record of its partition: the preview would show it.
    lines.append({"id": "vault", "created_at": "2024-04-02T09:00:00Z",
                  "content": f"{TOKEN} is the passphrase of the staging vault; keep it out of chat logs."})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def files_holding(root: Path, needle: bytes) -> list[str]:
    """Every file under ``root`` whose raw bytes contain ``needle``."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes())


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Project roots after one run each: ``encrypted`` (with KEY) and ``plain`` (no key, the control)."""
    base = tmp_path_factory.mktemp("encryption")
    export = write_notes(base / "notes.jsonl")
    roots = {}
    with FakeOpenAI() as server, pytest.MonkeyPatch.context() as mp:
        go_offline(mp)
        mp.setenv("OPENAI_BASE_URL", server.base_url)
        mp.setenv("OPENAI_API_KEY", "test-key")
        for name in ("encrypted", "plain"):
            if name == "encrypted":
                mp.setenv(KEY_ENV, KEY)
            else:
                mp.delenv(KEY_ENV, raising=False)
            pipe = load(write_project(base / name, export, PIPELINE))
            try:
                assert pipe.run().status == "completed"
            finally:
                pipe.close()
            roots[name] = base / name
        assert any(TOKEN in p for p in server.prompts)  # the LLM saw the note: its answer is cached
    return roots


def lancedb_dir(root: Path) -> Path:
    path = root / ".synthex" / "lancedb"
    assert (path / "records.lance").is_dir() and (path / "llm_cache.lance").is_dir()
    return path


# -- on disk -----------------------------------------------------------------------------------------
def test_no_plaintext_in_any_lancedb_file(runs):
    enc, plain = lancedb_dir(runs["encrypted"]), lancedb_dir(runs["plain"])
    # Positive control: the same scan finds the token (records) and the LLM's answers (records, audit, cache).
    assert any(f.startswith("records.lance") for f in files_holding(plain, TOKEN.encode()))
    assert any(f.startswith("llm_cache.lance") for f in files_holding(plain, SUMMARY_MARK))
    assert len([p for p in enc.rglob("*") if p.is_file()]) > 10  # the scan below reads real files
    assert files_holding(enc, TOKEN.encode()) == []
    assert files_holding(enc, SUMMARY_MARK) == []
    assert (enc / "encryption.lance").is_dir() and not (plain / "encryption.lance").exists()
    indexes = {name: {i.name for i in RecordStore(str(path), encryption_key=key).records_table().list_indices()}
               for name, path, key in (("enc", enc, KEY), ("plain", plain, None))}
    assert "content_idx" in indexes["plain"] and "content_idx" not in indexes["enc"]  # no FTS over ciphertext


def test_dagster_event_log_holds_no_preview_text(runs):
    enc, plain = (runs[n] / ".synthex" / "dagster" for n in ("encrypted", "plain"))
    assert files_holding(plain, TOKEN.encode())  # control: the plaintext run's preview shows the note
    assert files_holding(enc, b"record text hidden")  # the encrypted run's previews were written
    assert files_holding(enc, TOKEN.encode()) == []
    assert files_holding(enc, SUMMARY_MARK) == []


# -- through Synthex ---------------------------------------------------------------------------------
def test_encrypted_store_is_searchable_and_readable(runs, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    pipe = load(runs["encrypted"])
    try:
        lexical = pipe.search(TOKEN, step="notes", mode="bm25", k=3)
        hybrid = pipe.search(f"what is the {TOKEN} passphrase", step="notes", mode="hybrid", k=3)
        exact = pipe.search(TOKEN.upper(), exact=True, k=3)
        turns = pipe.search(TOKEN, step="notes", mode="conversational", k=3)
        assert [h.id for h in lexical][:1] == [h.id for h in hybrid][:1] == [h.id for h in turns][:1] \
            == [h.id for h in exact] != []
        record = pipe.get(lexical[0].id)
        assert record.content.startswith(TOKEN) and "vault" in record.content
        summary = next(r for r in pipe.records("summaries") if lexical[0].id in r.source_ids)
        assert summary.content.startswith("FAKE SUMMARY") and "FAKE SUMMARY" in summary.audit["raw_response"]
        # The same search on the plaintext store (LanceDB FTS) finds the same record with the same score.
    finally:
        pipe.close()
    monkeypatch.delenv(KEY_ENV)
    plain = load(runs["plain"])
    try:
        fts = plain.search(TOKEN, step="notes", mode="bm25", k=3)
        assert [h.id for h in fts] == [h.id for h in lexical]
        assert math.isclose(fts[0].score, lexical[0].score, rel_tol=1e-4)
    finally:
        plain.close()


def test_sql_console_decrypts(runs, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    out = cli("sql", f"SELECT count(*) AS n FROM records WHERE content LIKE '%{TOKEN}%'", "--json",
              cwd=runs["encrypted"])
    assert json.loads(out.stdout) == [{"n": 1}]
    monkeypatch.delenv(KEY_ENV)
    control = cli("sql", f"SELECT count(*) AS n FROM records WHERE content LIKE '%{TOKEN}%'", "--json",
                  cwd=runs["plain"])
    assert json.loads(control.stdout) == [{"n": 1}]


def test_missing_or_wrong_key_refuses_in_one_line(runs, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    missing = cli("search", TOKEN, "--mode", "bm25", cwd=runs["encrypted"], check=False)
    monkeypatch.setenv(KEY_ENV, generate_key())
    wrong = cli("get", "vault", cwd=runs["encrypted"], check=False)
    monkeypatch.setenv(KEY_ENV, KEY)
    plaintext = cli("search", TOKEN, "--mode", "bm25", cwd=runs["plain"], check=False)
    assert missing.returncode == wrong.returncode == plaintext.returncode == 2
    for result, says in ((missing, "is encrypted"), (wrong, "another key"), (plaintext, "plaintext row")):
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ") and says in result.stderr
        assert TOKEN not in result.stdout + result.stderr and KEY not in result.stderr
    # Control: with the right key the same command works.
    ok = cli("search", TOKEN, "--mode", "bm25", "--step", "notes", cwd=runs["encrypted"])
    assert TOKEN in ok.stdout


# -- the store and its lexical index, without a pipeline ----------------------------------------------
class HashEmbedder:
    name, dim = "hash-test", 8

    def embed(self, texts):
        out = np.stack([np.random.default_rng(abs(hash(t)) % 2**32).normal(size=self.dim) for t in texts])
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def corpus(n: int = 120) -> list[Record]:
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(40)] + ["apple", "banana", "cherry"]
    return [Record(id=f"r{i:03d}", step="a" if i % 3 else "b", period="2024-01",
                   content=" ".join(rng.choice(words, size=int(rng.integers(1, 40)))),
                   audit={"raw_response": f"raw {i}"}) for i in range(n)]


def test_cipher_key_format_and_authentication():
    cipher = StoreCipher.from_text(KEY)
    token = cipher.encrypt("héllo")
    assert token.startswith(PREFIX) and "héllo" not in token and cipher.decrypt(token) == "héllo"
    assert cipher.encrypt("héllo") == token  # deterministic (SIV): the store's content comparisons hold
    assert cipher.fingerprint("x") != StoreCipher.from_text(generate_key()).fingerprint("x")
    with pytest.raises(EncryptionError, match="does not decrypt"):
        StoreCipher.from_text(generate_key()).decrypt(token)
    with pytest.raises(EncryptionError, match="plaintext value"):
        cipher.decrypt("héllo")
    with pytest.raises(EncryptionError, match="not a key") as bad:
        StoreCipher.from_text("hunter2-not-a-key")
    assert "hunter2" not in str(bad.value)


def test_memory_bm25_scores_like_lancedb_fts(tmp_path):
    records = corpus()
    plain = RecordStore(str(tmp_path / "plain"), embedder=HashEmbedder())
    enc = RecordStore(str(tmp_path / "enc"), embedder=HashEmbedder(), encryption_key=KEY)
    for store in (plain, enc):
        store.records.upsert(corpus())
        SearchEngine(store).ensure_index()  # the plaintext store's FTS index holds every row
    assert enc.tables.read("records", columns=["content"], limit=1)[0]["content"].startswith(PREFIX)
    assert plain.tables.read("records", columns=["content"], limit=1)[0]["content"] == records[0].content
    for query in ("apple", "apple banana w3", "cherry cherry w1", "w7 nothinglikethis"):
        for steps in (None, ["a"]):
            a = SearchEngine(plain).search(query, steps=steps, strategy=BM25, k=10)
            b = SearchEngine(enc).search(query, steps=steps, strategy=BM25, k=10)
            assert [h.id for h in a] == [h.id for h in b], (query, steps)
            assert np.allclose([h.score for h in a], [h.score for h in b], rtol=1e-4), (query, steps)
            assert a  # the comparison is not vacuous
    for phrase in ("apple", "w1 w", "CHERRY"):  # exact: the same hits, occurrence counts and order (ties too)
        for k in (3, 200):
            a = SearchEngine(plain).search(phrase, steps=["a"], exact=True, k=k)
            b = SearchEngine(enc).search(phrase, steps=["a"], exact=True, k=k)
            assert [(h.id, h.score) for h in a] == [(h.id, h.score) for h in b] != [], (phrase, k)
    plain.close()
    enc.close()


def test_memory_bm25_follows_writes_and_deletes(tmp_path):
    store = RecordStore(str(tmp_path / "enc"), embedder=HashEmbedder(), encryption_key=KEY)
    store.records.upsert(corpus(30))
    engine = SearchEngine(store)
    assert engine.lexical("apple", engine.where(None, BranchScope.own()), 50)
    index = memory_bm25(store)
    first = index.decrypted
    assert first > 0 and engine.lexical(TOKEN, engine.where(None, BranchScope.own()), 5) == []
    store.records.upsert([Record(id="new", step="a", period="2024-02", content=f"{TOKEN} arrives late")])
    assert [rid for rid, _ in engine.lexical(TOKEN, engine.where(None, BranchScope.own()), 5)] == ["new"]
    assert index.decrypted == first + 1  # only the new text was decrypted
    assert [h.id for h in engine.search(TOKEN, exact=True)] == ["new"]
    assert engine.lexical(TOKEN, engine.where(["b"], BranchScope.own()), 5) == []  # filters still apply
    store.records.delete_ids(["new"])
    assert engine.lexical(TOKEN, engine.where(None, BranchScope.own()), 5) == []
    store.close()


def test_vectors_written_back_to_encrypted_rows(tmp_path):
    """Records written without a vector get one at the first dense search: the write-back matches rows by
    stored content, which holds because the cipher is deterministic (a random-nonce cipher never lands it)."""
    store = RecordStore(str(tmp_path / "enc"), embedder=HashEmbedder(), encryption_key=KEY)
    store.records.upsert(corpus(20), embed=False)
    assert len(store.tables.read("records", "vector IS NULL", ["id"])) == 20
    assert SearchEngine(store).search("apple", steps=["a"], strategy=DENSE, k=3)
    assert store.tables.read("records", "step = 'a' AND vector IS NULL", ["id"]) == []  # the searched step: filled
    assert len(store.tables.read("records", "step = 'b' AND vector IS NULL", ["id"])) == 7  # the other is not

    def row_ids():
        return sorted(store.dataset("records").to_table(columns=["id"], with_row_id=True).column("_rowid").to_pylist())

    before = row_ids()
    store.records.upsert(corpus(20))  # the same texts again: no row is rewritten (equal ciphertext, equal content)
    assert row_ids() == before


def test_llm_cache_round_trip_is_encrypted(tmp_path):
    store = RecordStore(str(tmp_path / "enc"), embedder=HashEmbedder(), encryption_key=KEY)
    store.llm_cache.put_many([{"key": "k", "model": "m", "response": f"answer {TOKEN}", "raw": f'{{"x": "{TOKEN}"}}',
                           "tokens_in": 1, "tokens_out": 2}])
    assert store.llm_cache.get_many(["k"])["k"]["response"] == f"answer {TOKEN}"
    raw = store.tables.read("llm_cache")[0]
    assert raw["response"].startswith(PREFIX) and raw["raw"].startswith(PREFIX)
    assert files_holding(tmp_path / "enc", TOKEN.encode()) == []


def test_plaintext_row_in_an_encrypted_store_is_refused(tmp_path):
    """A row written without the key (another process, another config) is never returned as text."""
    uri = str(tmp_path / "enc")
    store = RecordStore(uri, embedder=HashEmbedder(), encryption_key=KEY)
    store.records.upsert(corpus(3))
    row = store.tables.read("records", "id = 'r000'")[0]
    store.records_table().add([{**row, "id": "sneaky", "content": "plain text", "audit": "{}"}])
    assert store.records.get("r000").content == corpus(3)[0].content
    with pytest.raises(EncryptionError, match="plaintext value"):
        store.records.get("sneaky")


def test_previews_hide_text_when_encrypted(monkeypatch):
    from synthex_assets.preview import preview_markdown

    rec = Record(id="0123456789", step="notes", content=f"{TOKEN} secret")
    monkeypatch.delenv(KEY_ENV, raising=False)
    assert TOKEN in preview_markdown([rec])  # control
    monkeypatch.setenv(KEY_ENV, KEY)
    shown = preview_markdown([rec])
    assert TOKEN not in shown and "`01234567`" in shown and str(len(rec.content)) in shown
