"""Errors users see: each names the file, record or step and the problem."""


class SynthexError(Exception):
    """Base class for errors reported to the user without a traceback."""


class SourceError(SynthexError):
    """A source file could not be read or parsed (names the file and the problem)."""


class PipelineDefinitionError(SynthexError):
    """The pipeline definition is invalid (unknown step, cycle, duplicate name...)."""


class StepError(SynthexError):
    """A step failed on a record (names the step, the record and the problem). ``step``: the step the
    message names already; None when the caller must say which (e.g. the LLM is down)."""

    def __init__(self, message: str, *, step: str | None = None) -> None:
        super().__init__(message)
        self.step = step


class BadInputError(SynthexError):
    """An argument the user gave is wrong (an ambiguous id prefix, a bad name, a path in the way)."""
