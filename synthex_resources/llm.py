"""LLM resource: any OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, llama.cpp) via ``base_url``.

Bounded concurrency, retry with exponential backoff on 429/5xx/timeouts, a response cache keyed by
rendered-prompt hash + model + temperature (a rebuild with unchanged prompts costs no calls), and
the offline deterministic stand-in when neither a key nor a base URL is configured.
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from synthex.core.errors import StepError
from synthex.core.llm import Completer, Completion, OfflineExtractiveCompleter
from synthex.core.redact import redact

DEFAULT_MODEL = "gpt-4o-mini"
# What the UI shows as the model when no API key or base URL is set (not a model name: never sent).
OFFLINE_STAND_IN = "offline extractive stand-in (not an LLM)"
# USD per 1M tokens (input, output), for `synthex plan` estimates only.
PRICES = {"gpt-4o-mini": (0.15, 0.60), "gpt-4o": (2.50, 10.00), "gpt-4.1-mini": (0.40, 1.60),
          "gpt-4.1": (2.00, 8.00), "gpt-4.1-nano": (0.10, 0.40)}


def cache_key(prompt: str, model: str, temperature: float) -> str:
    rendered_hash = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
    return hashlib.sha256(f"{rendered_hash}|{model}|{temperature!r}".encode()).hexdigest()


class OpenAICompleter:
    cacheable = True

    def __init__(self, model: str, base_url: str | None, api_key: str | None, max_concurrency: int = 4,
                 max_retries: int = 5, timeout: float = 60.0, backoff_base: float = 0.5,
                 backoff_max: float = 30.0, cache: Any = None) -> None:
        from openai import OpenAI

        self.model = model
        self.base_url = base_url
        self.api_key = api_key  # kept only to mask it in error text
        self.max_concurrency = max(1, max_concurrency)
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.cache = cache
        # Retries are ours (below) so they are visible, bounded and tested; the client's are off.
        self.client = OpenAI(base_url=base_url, api_key=api_key or "not-needed", max_retries=0, timeout=timeout)
        self.calls = 0

    def _retryable(self, exc: Exception) -> bool:
        import openai

        if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError | openai.RateLimitError):
            return True
        return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500

    def _delay(self, attempt: int, exc: Exception) -> float:
        retry_after = None
        response = getattr(exc, "response", None)
        if response is not None:
            try:
                retry_after = float(response.headers.get("retry-after", ""))
            except (TypeError, ValueError):
                retry_after = None
        base = retry_after if retry_after is not None else self.backoff_base * (2 ** attempt)
        return min(self.backoff_max, base) * (1 + 0.1 * random.random())

    def _call(self, prompt: str, model: str, temperature: float) -> Completion:
        attempt = 0
        while True:
            try:
                self.calls += 1
                response = self.client.chat.completions.create(
                    model=model, temperature=temperature, messages=[{"role": "user", "content": prompt}])
                text = (response.choices[0].message.content or "").strip()
                usage = response.usage
                return Completion(text=text, model=response.model or model,
                                  tokens_in=usage.prompt_tokens if usage else 0,
                                  tokens_out=usage.completion_tokens if usage else 0,
                                  raw=response.model_dump_json())
            except Exception as exc:
                if not self._retryable(exc) or attempt >= self.max_retries:
                    where = self.base_url or "api.openai.com"
                    # Redacted, and without the original exception chained: provider error bodies can echo
                    # the key, and the chain would carry it into Dagster's event log.
                    raise StepError(redact(f"LLM call to {where} (model {model}) failed after {attempt + 1} "
                                           f"attempt(s): {type(exc).__name__}: {exc}",
                                           [self.api_key or ""])) from None
                time.sleep(self._delay(attempt, exc))
                attempt += 1

    def complete_many(self, prompts: list[str], model: str | None, temperature: float) -> list[Completion]:
        model = model or self.model
        keys = [cache_key(p, model, temperature) for p in prompts]
        cached = self.cache.get_many(list(set(keys))) if self.cache is not None else {}
        results: dict[int, Completion] = {}
        for i, key in enumerate(keys):
            if key in cached:
                row = cached[key]
                results[i] = Completion(row["response"], row["model"], 0, 0, raw=row["raw"], cached=True)
        missing = [i for i in range(len(prompts)) if i not in results]
        if missing:
            with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
                fresh = list(pool.map(lambda i: self._call(prompts[i], model, temperature), missing))
            for i, completion in zip(missing, fresh, strict=True):
                results[i] = completion
            if self.cache is not None:
                self.cache.put_many([
                    {"key": keys[i], "model": c.model, "response": c.text, "raw": c.raw,
                     "tokens_in": c.tokens_in, "tokens_out": c.tokens_out}
                    for i, c in zip(missing, fresh, strict=True)
                ])
        return [results[i] for i in range(len(prompts))]


@dataclass
class LLMConfig:
    """Model, base URL and key from config, else from OPENAI_* env vars; offline stand-in otherwise.

    Plain Python; ``synthex_resources.resources.LLMResource`` is the Dagster resource around it.
    """

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    max_concurrency: int = 4
    max_retries: int = 5
    timeout: float = 60.0
    backoff_base: float = 0.5

    def resolved(self) -> dict[str, Any]:
        return {
            "model": (self.model if self.model != OFFLINE_STAND_IN else None) or os.environ.get("SYNTHEX_MODEL")
                     or DEFAULT_MODEL,
            "base_url": self.base_url or os.environ.get("OPENAI_BASE_URL") or None,
            "api_key": self.api_key or os.environ.get("OPENAI_API_KEY") or None,
        }

    def is_offline(self) -> bool:
        cfg = self.resolved()
        return not cfg["api_key"] and not cfg["base_url"]

    def model_shown(self) -> str:
        """The model as the UI names it: the resolved model, or that the offline stand-in writes instead."""
        return OFFLINE_STAND_IN if self.is_offline() else self.resolved()["model"]

    def get_completer(self, cache: Any = None) -> Completer:
        cfg = self.resolved()
        if not cfg["api_key"] and not cfg["base_url"]:
            return OfflineExtractiveCompleter()
        return OpenAICompleter(cfg["model"], cfg["base_url"], cfg["api_key"], self.max_concurrency,
                               self.max_retries, self.timeout, self.backoff_base, cache=cache)
