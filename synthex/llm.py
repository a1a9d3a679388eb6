"""The LLM interface steps call, and the offline deterministic stand-in.

Steps see a ``Completer``; the Dagster LLM resource (``synthex_resources.llm``) provides one
backed by an OpenAI-compatible endpoint, or this module's ``OfflineExtractiveCompleter`` when
no key/base URL is configured, so a fresh machine runs the whole pipeline.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Protocol

OFFLINE_MODEL = "offline-extractive-v1"
OFFLINE_LABEL = "offline-extractive-v1 (deterministic extractive stand-in, not an LLM)"


@dataclass
class Completion:
    text: str
    model: str  # what actually answered (goes to audit.model)
    tokens_in: int = 0
    tokens_out: int = 0
    raw: str = ""  # the raw response body (goes to audit.raw_response)
    cached: bool = False


class Completer(Protocol):
    def complete_many(self, prompts: list[str], model: str | None, temperature: float) -> list[Completion]:
        """Complete each prompt; the result list is aligned with ``prompts``."""
        ...


_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
# Words too common to make a sentence representative; used only to score, never to index.
_COMMON = frozenset(
    "the a an and or of to in on for is are was were be been it this that with as at by from i you we "
    "my your our me us he she they them his her their not no do does did have has had can could would "
    "should will just so but if then than there here what which who how when where why about into".split()
)


def approx_tokens(text: str) -> int:
    """A model-free token estimate (~4 characters a token) for plans and the stand-in's audit."""
    return max(1, len(text) // 4)


def extractive_summary(prompt: str, max_sentences: int = 3, max_chars: int = 700) -> str:
    """Pick the prompt's most representative sentences (by shared content words), in order.

    Instruction lines (markdown headers, bullet instructions) are skipped so the output is drawn
    from the material the prompt carries, not from the prompt's wording.
    """
    body_lines = [
        ln.strip()
        for ln in prompt.splitlines()
        if ln.strip() and not ln.lstrip().startswith("#") and not ln.rstrip().endswith(":")
    ]
    sentences = list(dict.fromkeys(  # exact repeats add nothing to a summary
        s.strip().lstrip("-* ").strip() for s in _SENTENCE.split("\n".join(body_lines)) if len(s.strip()) > 20))
    if not sentences:
        return " ".join(body_lines)[:max_chars]
    counts = Counter(w for s in sentences for w in _WORD.findall(s.lower()) if w not in _COMMON)

    def score(sentence: str) -> float:
        words = [w for w in _WORD.findall(sentence.lower()) if w not in _COMMON]
        return sum(counts[w] for w in set(words)) / (1 + len(words)) ** 0.5

    ranked = sorted(range(len(sentences)), key=lambda i: (-score(sentences[i]), i))[:max_sentences]
    text = " ".join(sentences[i] for i in sorted(ranked))
    return text[:max_chars]


class OfflineExtractiveCompleter:
    """Deterministic extractive stand-in for an LLM; labelled as such in ``audit.model``."""

    cacheable = False  # deterministic and cheap: caching would only cost disk

    def complete_many(self, prompts: list[str], model: str | None, temperature: float) -> list[Completion]:
        out = []
        for prompt in prompts:
            text = extractive_summary(prompt)
            label = OFFLINE_LABEL if not model else f"{OFFLINE_LABEL}; configured model {model}"
            out.append(Completion(text, label, approx_tokens(prompt), approx_tokens(text), raw=text))
        return out
