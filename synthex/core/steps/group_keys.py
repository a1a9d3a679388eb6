"""Key functions: which groups a record joins in a key aggregate (``pipeline.aggregate(..., by=...)``).

A key function takes a record and returns one key (a str), several (an iterable of str: the record joins
every one of those groups) or None / nothing (the record joins no group). ``by=`` takes a function, or
the name of one registered here: the built-ins read the ``chat`` metadata the importers fill and the
deterministic extractors of ``synthex.core.enrich`` (no model):

- ``speaker``: ``chat.author`` (or ``chat.speaker``): who said the turn;
- ``conversation``: ``chat.conversation_id``;
- ``session``: ``chat.session_id`` within its conversation (``"<conversation>/<session>"``); a record
  without a session joins no group;
- ``entity``: the proper-noun phrases of the text (``enrich.entities``), lower-cased, at most 8, the
  record's own speaker left out (``speaker`` groups those);
- ``topic``: the multi-word content phrases of the text (``enrich.topics``), at most 5.

A plugin adds key functions through the hook ``register_key_functions(registry)`` (``synthex.core.plugins``).
Keys are input like any other: ``keys_of`` bounds their length and count (``Limits.group_key_chars``,
``Limits.group_keys_per_record``), and a key function that raises or returns something else is one line
naming the step and the record.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from synthex.core import hookspecs
from synthex.core.errors import PipelineDefinitionError, StepError
from synthex.core.limits import Limits
from synthex.core.plugins import Registry, populate
from synthex.core.record import Record
from synthex.core.steps.base import callable_ref

KeyFunction = Callable[[Record], "str | Iterable[str] | None"]
BUILTIN_MODULES = ("synthex.core.steps.group_keys",)
# Keys the built-in extractors derive from text: a longer one is not a name or a topic, and is dropped
# (a user's key function is held to Limits.group_key_chars instead, with an error).
DERIVED_KEY_CHARS = 100


@dataclass(frozen=True)
class KeyGroup:
    """What a key aggregate's ``prompt(records, group)`` / ``fn(records, group)`` gets besides the
    records: the key, what made it (a key function's name or ``module:qualname``) and the period label
    when ``period=`` is given (None: the group spans every period). ``str(group)`` is the key."""

    key: str
    by: str
    period: str | None = None

    def __str__(self) -> str:
        return self.key


def speaker_key(record: Record) -> str | None:
    return record.meta("chat.author") or record.meta("chat.speaker") or None


def conversation_key(record: Record) -> str | None:
    value = record.meta("chat.conversation_id")
    return str(value) if value not in (None, "") else None


def session_key(record: Record) -> str | None:
    session = record.meta("chat.session_id")
    if session in (None, ""):
        return None
    conversation = conversation_key(record)
    return f"{conversation}/{session}" if conversation else str(session)


def entity_keys(record: Record) -> list[str]:
    from synthex.core.enrich import MAX_ENTITIES, entities

    speaker = str(speaker_key(record) or "").lower()
    keys = [e.lower() for e in entities(record.content)]
    return [k for k in dict.fromkeys(keys) if k != speaker and len(k) <= DERIVED_KEY_CHARS][:MAX_ENTITIES]


def topic_keys(record: Record) -> list[str]:
    from synthex.core.enrich import topics

    return [t for t in topics(record.content) if len(t) <= DERIVED_KEY_CHARS]


def register_key_functions(registry: Registry[KeyFunction]) -> None:
    for name, fn in (("speaker", speaker_key), ("conversation", conversation_key), ("session", session_key),
                     ("entity", entity_keys), ("topic", topic_keys)):
        registry.register(name, fn)


@functools.cache
def key_functions() -> Registry[KeyFunction]:
    """The key functions by name: the built-ins, then every installed plugin's (loaded once per process)."""
    return populate(Registry[KeyFunction]("key function"), hookspecs.register_key_functions, builtins=BUILTIN_MODULES)


def resolve_key_function(by: object, where: str) -> tuple[str, KeyFunction]:
    """(its name for metadata and export, the function) of a ``by=`` value: a registered name or a callable."""
    if isinstance(by, str):
        try:
            return by, key_functions().get(by)
        except PipelineDefinitionError as exc:
            raise PipelineDefinitionError(f"{where}: by={by!r}: {exc}") from None
    if callable(by):
        return callable_ref(by) or repr(by), by
    raise PipelineDefinitionError(f"{where}: by= takes a key function or the name of one "
                                  f"({', '.join(key_functions().names())}), not {type(by).__name__}")


def _shown(key: str) -> str:
    return repr(key if len(key) <= 40 else key[:40] + "...")


def keys_of(record: Record, fn: KeyFunction, by: str, limits: Limits, about: str) -> list[str]:
    """The groups ``record`` joins: ``fn``'s keys, whitespace runs made one space, empty ones and None dropped,
    deduplicated in order. Over a bound, or not strings: a StepError line naming ``about`` (the step and
    the record). A generator is read no further than one past the count bound."""
    try:
        raw = fn(record)
    except Exception as exc:  # noqa: BLE001 - any user error is reported, with context
        raise StepError(f"{about}: key function {by} raised {type(exc).__name__}: {exc}".splitlines()[0]) from exc
    if raw is None:
        return []
    if isinstance(raw, str):
        raw = [raw]
    elif isinstance(raw, (bytes, dict)) or not isinstance(raw, Iterable):
        raise StepError(f"{about}: key function {by} returned {type(raw).__name__}; expected a str, "
                        f"an iterable of str or None")
    bound = limits.group_keys_per_record
    taken = list(itertools.islice(raw, bound + 1))
    keys: list[str] = []
    for key in taken:
        if key is None:  # an absent value (a metadata field a record lacks) joins no group
            continue
        if not isinstance(key, str):
            raise StepError(f"{about}: key function {by} gave a key of type {type(key).__name__}; keys are str")
        if len(key) > limits.group_key_chars:
            raise StepError(limits.over("group_key_chars", f"{about}: key {_shown(key)}", len(key)))
        key = " ".join(key.split())
        if key and key not in keys:
            keys.append(key)
    if len(taken) > bound:
        raise StepError(f"{about}: key function {by} gave more than {bound} keys, over the group_keys_per_record "
                        f"bound (raise it with Pipeline(limits=Limits(group_keys_per_record=...)))")
    return keys
