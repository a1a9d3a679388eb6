"""The LLM resource with the real openai client against a local fake OpenAI-compatible server, and the
offline stand-in used when no model is configured."""

import re

import pytest
from conftest import load
from fake_openai import FakeOpenAI

from synthex.core.errors import StepError
from synthex.core.llm import OFFLINE_LABEL, OfflineExtractiveCompleter, extractive_summary
from synthex.core.prompts import monthly_reflection, summarize_conversation, world_model_prompt
from synthex.core.record import Record
from synthex_resources.llm import LLMConfig


def test_retry_on_429_then_success(tmp_path):
    with FakeOpenAI(fail_first=2, fail_status=429) as server:
        completer = LLMConfig(base_url=server.base_url, api_key="k", backoff_base=0.01).get_completer()
        [c] = completer.complete_many(["hello there"], "test-model", 0.0)
        assert c.text.startswith("FAKE SUMMARY") and c.model == "test-model"
        assert server.calls == 3 and c.tokens_in == 11 and c.tokens_out == 3


def test_gives_up_after_max_retries_with_clear_error():
    with FakeOpenAI(fail_first=100, fail_status=503) as server:
        completer = LLMConfig(base_url=server.base_url, api_key="k", backoff_base=0.0, max_retries=2).get_completer()
        with pytest.raises(StepError, match=r"failed after 3 attempt\(s\)"):
            completer.complete_many(["x"], "m", 0.0)
        assert server.calls == 3


def test_bounded_concurrency():
    with FakeOpenAI(delay=0.05) as server:
        completer = LLMConfig(base_url=server.base_url, api_key="k", max_concurrency=3).get_completer()
        out = completer.complete_many([f"prompt {i}" for i in range(12)], "m", 0.0)
        assert len(out) == 12 and server.max_in_flight <= 3 and server.max_in_flight >= 2


def test_pipeline_uses_real_model_audit_and_cache(project, monkeypatch):
    with FakeOpenAI() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("SYNTHEX_MODEL", "fake-model")
        pipe = load(project)
        plan = pipe.plan()
        assert plan.estimates["offline"] is False
        pipe.run()
        first_calls = server.calls
        assert first_calls > 0
        summary = pipe.records("summaries")[0]
        assert summary.content.startswith("FAKE SUMMARY")
        assert summary.audit["model"] == "fake-model"
        assert summary.audit["raw_response"] and '"chatcmpl-test"' in summary.audit["raw_response"]
        assert len(summary.audit["rendered_prompt_hash"]) == 64
        # A rebuild from scratch with unchanged prompts is answered from the response cache.
        store = pipe.store()
        store.records.delete_ids([r.id for s in ("summaries", "monthly", "world-model") for r in pipe.records(s)])
        pipe.run()
        assert server.calls == first_calls
        assert pipe.records("summaries")[0].audit["cached"] is True


def test_an_error_body_echoing_the_key_stores_no_key_anywhere(project, monkeypatch):
    from synthex.core.errors import StepError
    from synthex.core.redact import redact

    key = "sk-proj-TESTSECRET0123456789abcdef"
    with FakeOpenAI(fail_first=10_000, fail_status=401, echo_key=True) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", key)
        pipe = load(project)
        with pytest.raises(StepError) as err:
            pipe.run()
    assert "[REDACTED]" in str(err.value) and key not in str(err.value)
    assert pipe.runs()[0].status == "failed" and key not in pipe.runs()[0].error
    leaked = [p for p in (project / ".synthex").rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
    assert leaked == []  # not in the runs table, Dagster's event log or compute logs
    assert redact(f"token ghp_{'a' * 30} and AKIA{'B' * 16} and Bearer abc.def-123") == (
        "token [REDACTED] and [REDACTED] and Bearer [REDACTED]")


# -- The offline stand-in: only whole sentences of the material, never the prompt's own wording ------

# Each material is (its text as a record holds it, hard-wrapped; its sentences in order). A chat turn's
# first sentence keeps its speaker.
CHAT = ("""Conversation: Trip to Kyoto (the billing service)
Date: 2024-03-02T10:00:00Z

user: I am planning four days in
Kyoto in spring: what should I not miss? The budget is tight this year.

assistant: Visit Fushimi Inari early in the morning, before the tour groups
arrive. Walk the Philosopher's Path and book one kaiseki dinner.

user: Thanks, that fixed my itinerary.

Caroline: Use the JR pass only if you also visit Osaka, otherwise buy
single tickets.""", [
    "user: I am planning four days in Kyoto in spring: what should I not miss?",
    "The budget is tight this year.",
    "assistant: Visit Fushimi Inari early in the morning, before the tour groups arrive.",
    "Walk the Philosopher's Path and book one kaiseki dinner.",
    "user: Thanks, that fixed my itinerary.",
    "Caroline: Use the JR pass only if you also visit Osaka, otherwise buy single tickets.",
])
NOTE = ("""We moved the ledger from MongoDB to Postgres after the March outage, because
the team needed transactions across accounts. The migration took two weeks
and Dr. Lee ran the cut-over on a Sunday night.

Lesson: test the restore path before the cut-over, not after. The budget
for the new cluster is 400 dollars a month.""", [
    "We moved the ledger from MongoDB to Postgres after the March outage, because the team needed "
    "transactions across accounts.",
    "The migration took two weeks and Dr. Lee ran the cut-over on a Sunday night.",
    "Lesson: test the restore path before the cut-over, not after.",  # the note's own label is material
    "The budget for the new cluster is 400 dollars a month.",
])


def rec(content: str, step: str = "transcripts", period: str = "2024-03") -> Record:
    return Record(id=f"r{abs(hash(content)) % 10_000}", content=content, step=step,
                  metadata={"time": {"period": period, "created_at": f"{period}-02T10:00:00Z"}})


def whole_sentences_of(out: str, sentences: list[str]) -> list[str]:
    """``out`` read as material sentences joined by spaces, in their order: the ones it is made of
    (an AssertionError names the first words that are not a whole material sentence)."""
    normalized = [" ".join(s.split()) for s in sentences]
    rest, at, used = " ".join(out.split()), 0, []
    while rest:
        k = next((k for k in range(at, len(normalized)) if rest == normalized[k]
                  or rest.startswith(normalized[k] + " ")), None)
        assert k is not None, f"not a whole material sentence in material order: {rest[:90]!r}"
        used.append(normalized[k])
        rest, at = rest[len(normalized[k]):].lstrip(), k + 1
    return used


INSTRUCTIONS = re.compile(r"summari[sz]e|list the key|reflect on|update your|week:|month:|conversations?:|date:|"
                          r"include|main topic|key conclusions|action items|understanding|sentences|you are|"
                          r"digest|archivist|nothing yet|\bnotes:|question:|what was decided", re.IGNORECASE)

PROMPTS = {
    # the demo's prompts (synthex/core/prompts.py)
    "summarize_conversation": lambda m: summarize_conversation(rec(m[0][0])),
    "monthly_reflection": lambda m: monthly_reflection([rec(t, "summaries") for t, _ in m], "2024-03"),
    "world_model_prompt": lambda m: world_model_prompt(rec(m[1][0], "monthly"), m[0][0]),
    "world_model_prompt_first_state": lambda m: world_model_prompt(rec(m[0][0], "monthly"), ""),
    # prompts a user writes
    "user_points": lambda m: "List the key decisions and lessons in this note in 2 sentences.\n\n" + m[0][0],
    "user_points_no_blank_line": lambda m: "List the key decisions and lessons in this note in 2 sentences.\n"
                                           + m[0][0],
    "weekly_digest": lambda m: "Week: 2024-W10\nWrite a short digest of the week.\n\n" + "\n\n".join(t for t, _ in m),
    "readme_reflect": lambda m: "Reflect on 2024-03:\n" + "\n".join(t for t, _ in m),
    "system_preamble": lambda m: ("You are a careful archivist. The user keeps notes about work.\n\nNotes:\n"
                                  + m[0][0] + "\n\nAnswer in at most 3 sentences, in plain prose.\n"),
    "trailing_instruction": lambda m: m[0][0] + "\n\nSummarize the conversation above. Be concise.",
    "question_answering": lambda m: "Context:\n" + m[0][0] + "\n\nQuestion: What was decided, and why?\nAnswer:",
}


@pytest.mark.parametrize("materials", [[CHAT], [NOTE], [CHAT, NOTE], [NOTE, CHAT]],
                         ids=["chat", "note", "chat+note", "note+chat"])
@pytest.mark.parametrize("name", list(PROMPTS))
def test_offline_stand_in_outputs_whole_material_sentences_only(name, materials):
    if name.startswith("world_model") and len(materials) == 1:
        materials = materials * 2  # a fold prompt carries a state and one record
    prompt = PROMPTS[name](materials)
    [completion] = OfflineExtractiveCompleter().complete_many([prompt], None, 0.0)
    out = completion.text
    assert completion.model == OFFLINE_LABEL
    assert out and out == out.strip()
    # Only material: every output sentence is a whole sentence of the records, in the records' order
    # (a prompt that carries several records is read in the order it carries them).
    material = [s for _, sentences in (materials[:2] if name.startswith("world_model") else materials)
                for s in sentences]
    used = whole_sentences_of(out, material)
    assert 1 <= len(used) <= 3
    assert all(re.search(r"[.!?]$", s) for s in used)  # sentences end at terminal punctuation
    assert not INSTRUCTIONS.search(out), out  # no instruction, header or field label of the prompt
    assert extractive_summary(prompt) == out  # deterministic


def test_offline_stand_in_reads_the_points_prompt_of_the_issue():
    prompt = "List the key decisions and lessons in this note in 2 sentences.\n\n" + NOTE[0]
    out = extractive_summary(prompt)
    assert not out.startswith("List") and "in 2 sentences" not in out
    assert whole_sentences_of(out, NOTE[1])


def test_offline_stand_in_cuts_no_sentence_to_fit():
    sentences = [f"Sentence number {i} talks about the Postgres ledger and its careful migration plan." for i in range(8)]
    wrapped = [s.replace(" ledger ", " ledger\n") for s in sentences]  # every sentence wrapped
    prompt = "Summarize this note.\n\n" + "\n".join(wrapped)
    for max_chars in (10, 100, 200, 700):
        out = extractive_summary(prompt, max_chars=max_chars)
        used = whole_sentences_of(out, sentences)
        assert used and (len(used) == 1 or len(out) <= max_chars)


def test_offline_stand_in_keeps_commands_that_are_the_material():
    # Chat advice is imperative, and a note can be a list of commands: both are material, not instructions.
    assistant = "assistant: Use a generator dependency that yields the session and closes it in a finally block."
    assert extractive_summary(f"Summarize this conversation.\n\nuser: How do I share a session?\n{assistant}") \
        .endswith(assistant)
    out = extractive_summary("List the key decisions in this note.\n\n- Use Postgres for the ledger.\n"
                             "- Rotate the API keys every quarter.")
    assert out == "Use Postgres for the ledger. Rotate the API keys every quarter."


def test_offline_stand_in_keeps_unpunctuated_lines_whole_when_there_is_nothing_else():
    prompt = ("Summarize this conversation in 2-3 sentences.\n\nInclude:\n- Main topic or question\n"
              "- Key conclusions or decisions\n\n## Notes\n- bought milk and eggs at the market\n"
              "- called Bob about the\n  Q3 hiring plan\n\n## Summary\n")
    assert extractive_summary(prompt) == "bought milk and eggs at the market\ncalled Bob about the Q3 hiring plan"
    assert extractive_summary("Summarize this conversation.\n\n## Conversation\n\n## Summary\n") == ""
    turns = ["Caroline: hey mel how was the weekend trip to the lake", "Melanie: lovely, we swam every single morning",
             "Caroline: we should go together next summer"]  # each a turn, though none ends a sentence
    assert extractive_summary("Summarize the chat.\n\n" + "\n".join(turns)) == "\n".join(turns)
