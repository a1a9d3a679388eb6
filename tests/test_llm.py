"""The LLM resource with the real openai client against a local fake OpenAI-compatible server."""

import pytest
from conftest import load
from fake_openai import FakeOpenAI

from synthex.errors import StepError
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
        store.delete_ids([r.id for s in ("summaries", "monthly", "world-model") for r in pipe.records(s)])
        pipe.run()
        assert server.calls == first_calls
        assert pipe.records("summaries")[0].audit["cached"] is True


def test_an_error_body_echoing_the_key_stores_no_key_anywhere(project, monkeypatch):
    from synthex.errors import StepError
    from synthex.redact import redact

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
