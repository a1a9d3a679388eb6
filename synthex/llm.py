"""The LLM interface steps call, and the offline deterministic stand-in.

Steps see a ``Completer``; the Dagster LLM resource (``synthex_resources.llm``) provides one
backed by an OpenAI-compatible endpoint, or this module's ``OfflineExtractiveCompleter`` when
no key/base URL is configured, so a fresh machine runs the whole pipeline.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
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


# -- The one token model. ``synthex plan`` (the planner), the steps' ``estimate_tokens`` and the offline
# stand-in's audit all count with it; nothing else defines characters per token or output per call.
CHARS_PER_TOKEN = 4
OUTPUT_TOKENS_PER_CALL = 150  # what one summary-style model call is assumed to return
OUTPUT_CHARS_PER_CALL = OUTPUT_TOKENS_PER_CALL * CHARS_PER_TOKEN  # the same, as text size
TEMPLATE_TOKENS_PER_CALL = 50  # a prompt's own wording, assumed when the prompt cannot be rendered yet


def approx_tokens(text: str) -> int:
    """A model-free token estimate of one text (at least 1)."""
    return max(1, len(text) // CHARS_PER_TOKEN)


def estimate_call_tokens(prompts: Iterable[str], carries_state: bool = False) -> int:
    """Tokens for model calls whose prompts are rendered: each prompt plus one assumed output.

    ``carries_state``: each prompt also carries a state that is itself one earlier output (a fold's
    prompts are estimated with an empty state).
    """
    per_call = OUTPUT_TOKENS_PER_CALL * (2 if carries_state else 1)
    return sum(approx_tokens(p) + per_call for p in prompts)


def estimate_unrendered_tokens(input_chars: int, calls: int, carries_state: bool = False) -> int:
    """Tokens for ``calls`` model calls whose inputs are not stored yet, so no prompt can be rendered:
    the inputs' text, a template's wording per call and one assumed output per call."""
    per_call = TEMPLATE_TOKENS_PER_CALL + OUTPUT_TOKENS_PER_CALL * (2 if carries_state else 1)
    return input_chars // CHARS_PER_TOKEN + calls * per_call


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
