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

OFFLINE_MODEL = "offline-extractive-v2"  # v2: no prompt instructions, whole sentences
OFFLINE_LABEL = "offline-extractive-v2 (deterministic extractive stand-in, not an LLM)"


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


# -- The offline stand-in's reading of a prompt -----------------------------------------------------
# A rendered prompt is the prompt function's own wording (instructions, headers, field labels such as
# "Week: 2024-W05") wrapped around material taken from input records. The stand-in sees only the text,
# so it tells the two apart by how prompts are written, not by our prompts' exact strings:
#   * structure: markdown headers, lines ending in ":" that introduce what follows, and "Label: value"
#     lines whose value is not a sentence (dates, counts, titles) are never output;
#   * directives: a sentence that tells the model what to do (an imperative opening such as "List ...",
#     "Summarize ...", "Be concise."; an address such as "You are ..."; "in 2 sentences", "the
#     following") is never output, and before the first line of material a whole line that opens with
#     one is instruction;
#   * chat turns ("user: ...", "Caroline: ...") are material whatever their grammar (an assistant's
#     advice is imperative) and each starts a new sentence; other line breaks inside a paragraph are
#     wrapping, so a sentence is only ended by terminal punctuation.
# The output is a few whole sentences of that material, verbatim and in their original order.

_WORD = re.compile(r"[a-z0-9]+")
# Words too common to make a sentence representative; used only to score, never to index.
_COMMON = frozenset(
    "the a an and or of to in on for is are was were be been it this that with as at by from i you we "
    "my your our me us he she they them his her their not no do does did have has had can could would "
    "should will just so but if then than there here what which who how when where why about into".split()
)
_ROLES = frozenset("user assistant human ai bot model me".split())  # speakers of a chat turn, any case
# Labels a prompt uses for its fields; such a label never marks a speaker, and is never output.
_FIELD_LABELS = frozenset(
    "title date time week month year day period conversation conversations body content text note notes "
    "summary summaries input output context task instruction instructions rule rules format question "
    "answer goal example examples constraint constraints guideline guidelines style tone role system "
    "transcript record records source sources author tags tag topic subject id state entry entries "
    "message messages reflection reflections understanding information response result important "
    "requirement requirements focus audience length language hint tip warning remember count total "
    "current previous new updated".split()
)
# Verbs that open an instruction ("List the key decisions ...", "Be concise.").
_IMPERATIVES = frozenset(
    "summarize summarise list reflect update include extract write describe give identify keep return "
    "answer respond reply use focus be do don't avoid explain combine merge rewrite produce create generate "
    "output provide state highlight capture condense distill distil compress infer classify categorize "
    "categorise tag translate read consider analyze analyse review compare rate score select pick find "
    "determine mention ignore omit make format revise integrate incorporate add remove track maintain draft "
    "outline enumerate quote cite note paraphrase restate rephrase synthesize synthesise collect gather group "
    "sort rank organize organise prioritize prioritise emphasize emphasise preserve retain exclude skip "
    "limit continue think imagine assume pretend act convert fill complete check verify ensure remember "
    "never always only stick refer"
    .split()
)
# Field labels whose value is itself an instruction to the model ("Question: ...", "Format: ...").
_INSTRUCTION_LABELS = frozenset(
    "task instruction instructions rule rules format question query answer goal constraint constraints guideline "
    "guidelines style tone role system output response requirement requirements audience length language".split()
)
_NOT_SPEAKERS = _FIELD_LABELS | _IMPERATIVES  # "Summarize: ..." is an instruction, not someone speaking
# A word after which the opening word is a noun or subject, not a command ("List comprehensions are ...").
_NOT_A_COMMAND = frozenset("is are was were has have had will would can could should may might must did does of".split())
_LEAD_INS = frozenset("please now then finally also next first second third lastly briefly concisely carefully "
                      "kindly just and".split())
_ADDRESS = re.compile(
    r"^(?:you\b|your\b|you're\b|act as\b|as an? (?:ai|assistant|language model|expert)\b|i want you\b|"
    r"i need you\b|we want you\b|the following\b|below (?:is|are)\b|here (?:is|are) (?:the|a|an|some)\b|"
    r"given (?:the|this|these)\b|based on (?:the|this|these)\b|using (?:the|this|these)\b|"
    r"make sure\b|be sure\b|it is important\b|important\b)", re.IGNORECASE)
_META = re.compile(
    r"\b(?:in|into|as|with|to|within|under|at most|no more than|up to)\s+(?:\d+(?:\s*(?:-|–|to|or)\s*\d+)?|one|"
    r"two|three|four|five|a few|a couple of|several|few)\s+(?:short\s+|concise\s+|full\s+)?(?:sentences?|"
    r"bullets?|bullet points?|points|words|paragraphs?|lines|items)\b"
    r"|\bthe (?:following|above)\b|\b(?:shown|given|provided|listed|included|pasted) (?:below|above)\b"
    r"|\b(?:the|your) (?:summary|reflection|answer|response|output|reply) (?:should|must|needs to|has to)\b"
    r"|\b(?:conversation|chat|note|notes|text|transcript|messages?|summaries|records?|material) (?:above|below)\b",
    re.IGNORECASE)
_BULLET = re.compile(r"^(?:[-*•+]|\d{1,3}[.)])\s+")
_LABEL = re.compile(r"^(?P<label>[A-Za-z][\w'’&/.()-]*(?: [\w'’&/.()-]+){0,3}?)\s*:\s+(?P<value>\S.*)$")
_TERMINAL = re.compile(r"[.!?…][\"'’”)\]]*$")
_ABBREVIATIONS = frozenset("mr mrs ms dr prof st jr sr vs etc e.g i.e no fig inc ltd approx cf".split())
# A sentence ends at terminal punctuation followed by a space and a capital, digit, quote or a chat
# speaker's label ("... miss? assistant: Visit ...").
_ROLE_LABEL = "(?i:" + "|".join(sorted(_ROLES)) + r")\s*:\s"
_SPLIT = re.compile(r"(?<=[.!?…])([\"'’”)\]]*)\s+(?=[A-Z0-9\"'“‘(\[]|" + _ROLE_LABEL + ")")


@dataclass
class _Unit:
    """One logical line of a prompt: a header, an introducing label, a field, a chat turn or text."""

    kind: str  # "header" | "intro" | "instruction" | "field" | "turn" | "text"
    text: str  # what may be output (a field's value without its label; a turn keeps its speaker); an intro's words
    block: int  # index of the blank-line separated paragraph it is in

    @property
    def complete(self) -> bool:
        return self.kind in ("header", "intro") or bool(_TERMINAL.search(self.text))


def _label_kind(label: str, value: str) -> str:
    """What a "Label: value" line is: "turn" (a speaker says ``value``; output with the speaker), "field" (a
    prompt's field label: only the value may be output) or "text" (prose with a colon: output as it is)."""
    words = label.split()
    if label.lower() in _ROLES:
        return "turn"
    if (words[0].lower().strip("*_") in _NOT_SPEAKERS or label.lower() in _FIELD_LABELS
            or any(w.lower() in _FIELD_LABELS for w in words[1:]) or not _is_sentence_like(value)):
        return "field"
    # A named speaker ("Caroline", "Dr. Lee"): capitalized words, saying a sentence.
    return "turn" if all(w[:1].isupper() for w in words if w[:1].isalpha()) else "text"


def _is_sentence_like(text: str) -> bool:
    return bool(_TERMINAL.search(text)) or len(text.split()) >= 6


def _units(prompt: str) -> list[_Unit]:
    units: list[_Unit] = []
    block = 0
    lines = prompt.splitlines()
    # Labels that open several lines are speakers ("Caroline: hey" / "Melanie: hi" / "Caroline: ..."): a
    # line they open starts a turn even after a turn without terminal punctuation.
    openers = Counter(m.group("label") for m in map(_LABEL.match, (ln.strip() for ln in lines)) if m)
    for raw in lines:
        line = raw.strip()
        if not line:
            block += 1
            continue
        prev = units[-1] if units and units[-1].block == block else None
        if line.startswith("#") or re.fullmatch(r"(?:[-=*_]\s*){3,}", line):
            units.append(_Unit("header", "", block))
            continue
        bullet = _BULLET.match(line)
        body = line[bullet.end():].strip() if bullet else line
        label = _LABEL.match(body)
        if label and not bullet and prev is not None and not prev.complete and prev.kind in ("text", "turn"):
            name = label.group("label")
            speaker = name.lower() in _ROLES or openers[name] > 1 or (
                prev.kind == "turn" and name.isalpha() and name[0].isupper() and name.lower() not in _NOT_SPEAKERS)
            if not speaker:
                label = None  # "... four days in\nKyoto in spring: what ...": a wrapped line, not a field
        if label:
            kind = _label_kind(label.group("label"), label.group("value"))
            if label.group("label").lower().strip("*_") in _INSTRUCTION_LABELS:
                kind = "instruction"  # "Question: When did ...?": the prompt's, whatever it says
            text = label.group("value").strip() if kind in ("field", "instruction") else body
            units.append(_Unit(kind, text, block))
        elif body.endswith(":") and len(body.split()) <= 12:
            units.append(_Unit("intro", body, block))
        elif (not bullet and prev is not None and prev.kind in ("text", "turn", "field", "instruction")
              and (prev.kind in ("text", "turn") or (not prev.complete and body[:1].islower()))):
            prev.text = f"{prev.text} {body}"  # a wrapped line continues its sentence
        else:
            units.append(_Unit("text", body, block))
    return units


def _sentences(text: str) -> list[str]:
    parts, start = [], 0
    for m in _SPLIT.finditer(text):
        end = m.start() + len(m.group(1))
        before = text[start:end].rstrip()
        last_word = before.rsplit(None, 1)[-1].rstrip(".").lower() if before.split() else ""
        if last_word in _ABBREVIATIONS or re.fullmatch(r"[a-z]", last_word):
            continue  # "Dr. Lee", "e.g. Rust", "J. Smith": not a sentence end
        parts.append(before)
        start = m.end()
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _directive(sentence: str) -> str:
    """How a sentence tells the model what to do: "" (it does not: material), "command" (it opens with an
    imperative verb, which material can do too: "Use Postgres for the ledger.") or "address" (it speaks to
    the model or about the task: "You are ...", "in 2 sentences", "the following", "the notes above")."""
    s = _BULLET.sub("", sentence.strip()).strip("*_\"'“ ")
    if _ADDRESS.match(s) or _META.search(s):
        return "address"
    words = re.findall(r"[a-z']+", s.lower())
    while words and words[0] in _LEAD_INS:
        words = words[1:]
    if words and words[0] in _IMPERATIVES and (len(words) == 1 or words[1] not in _NOT_A_COMMAND):
        return "command"
    return ""


def _candidates(prompt: str) -> tuple[list[str], list[str]]:
    """(material sentences in prompt order, fallbacks: commands and unpunctuated lines that are no
    instruction frame but could be material, in prompt order).

    Chat turns are material. Before any material, a first-paragraph line that opens with a directive is
    instruction as a whole ("You are a careful archivist. The notes are below."), and so is a paragraph
    opened by a directive ("Include:\n- Main topic or question"). A sentence addressing the model is never
    material. A command is material inside a paragraph of material ("- Use Postgres for the ledger.\n-
    Rotate the keys every quarter."), instruction in a paragraph of its own or after the last material
    ("... Be concise."). Lines without terminal punctuation ("- bought milk") are output only when the
    prompt has no whole sentence of material.
    """
    units = _units(prompt)
    first_block = units[0].block if units else 0
    found: list[tuple[str, str, int]] = []  # (sentence, "material" | "command" | "loose", block)
    instruction_blocks: set[int] = set()
    seen_blocks: set[int] = set()
    for unit in units:
        opens_block = unit.block not in seen_blocks
        seen_blocks.add(unit.block)
        if unit.kind in ("header", "intro", "instruction"):
            words = unit.text.lower().rstrip(":").split()
            if opens_block and unit.kind == "intro" and (_directive(unit.text) or " ".join(words) in _INSTRUCTION_LABELS):
                instruction_blocks.add(unit.block)  # "Include:\n- Main topic or question": fragments are instructions
            continue
        sentences = _sentences(unit.text)
        if not sentences:
            continue
        if unit.kind == "turn":  # a turn's last words end it, punctuated or not
            found += [(s, "material", unit.block) for k, s in enumerate(sentences)
                      if len(s) > 20 and (_TERMINAL.search(s) or k == len(sentences) - 1)]
            continue
        if unit.block == first_block and not any(kind == "material" for _, kind, _ in found) \
                and _directive(sentences[0]):
            continue
        for s in sentences:
            kind = _directive(s)
            if kind == "address" or len(s) <= 20:
                continue
            if _TERMINAL.search(s):
                if not (kind and unit.block in instruction_blocks):
                    found.append((s, "command" if kind else "material", unit.block))
            elif unit.kind == "text" and not kind and len(s.split()) >= 4 and unit.block not in instruction_blocks:
                found.append((s, "loose", unit.block))
    material_blocks = {block for _, kind, block in found if kind == "material"}
    last = max((i for i, (_, kind, _) in enumerate(found) if kind == "material"), default=-1)
    material = [s for i, (s, kind, block) in enumerate(found)
                if kind == "material" or (kind == "command" and i < last and block in material_blocks)]
    fallback = [s for s, kind, block in found if kind == "loose" or (kind == "command" and block != first_block)]
    return material, fallback


def extractive_summary(prompt: str, max_sentences: int = 3, max_chars: int = 700) -> str:
    """The prompt's most representative material sentences (by shared content words), whole and in order.

    Only material is output: the prompt's own instructions, headers and field labels never are (see the
    notes above). Sentences are never cut; ``max_chars`` limits how many are taken (at least one).
    """
    material, fallback = _candidates(prompt)
    # A note made only of commands ("Ship on Friday.") or of unpunctuated lines is still material.
    sentences = list(dict.fromkeys(material or fallback))  # exact repeats add nothing to a summary
    if not sentences:
        return ""

    def content_words(sentence: str) -> list[str]:
        label = _LABEL.match(sentence)  # a speaker's name says nothing about what the sentence is about
        if label and _label_kind(label.group("label"), label.group("value")) == "turn":
            sentence = label.group("value")
        return [w for w in _WORD.findall(sentence.lower()) if w not in _COMMON]

    words = [content_words(s) for s in sentences]
    counts = Counter(w for ws in words for w in ws)
    scores = [sum(counts[w] for w in set(ws)) / (1 + len(ws)) ** 0.5 for ws in words]
    chosen: list[int] = []
    size = 0
    for i in sorted(range(len(sentences)), key=lambda i: (-scores[i], i)):
        if len(chosen) == max_sentences:
            break
        if chosen and size + 1 + len(sentences[i]) > max_chars:
            continue
        mine = set(words[i])
        if any(len(mine & set(words[j])) >= 0.8 * len(mine | set(words[j])) for j in chosen):
            continue  # a near repeat ("user: [image] Planning ..." after "user: Planning ...") adds nothing
        chosen.append(i)
        size += len(sentences[i]) + (1 if size else 0)
    out = ""
    for i in sorted(chosen):  # a line without terminal punctuation stays a line of its own
        out += ("" if not out else " " if _TERMINAL.search(out) else "\n") + sentences[i]
    return out


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
