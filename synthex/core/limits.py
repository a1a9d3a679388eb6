"""Size and date limits on what enters memory (issue 20: hostile input).

Every source, ``remember`` and the MCP server read their bounds from one ``Limits`` object that a
project sets on its pipeline (``Pipeline("x", limits=Limits(note_bytes=2_000_000))``). The defaults are
generous for real data (a ChatGPT export of several years is a few hundred MB; a note is rarely over
a megabyte) and small enough that one hostile item can neither exhaust memory nor take over a
projection. An item over a bound is skipped with a one-line warning naming it (``remember`` refuses
it), and is never loaded whole to find that out.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any

from synthex.core.errors import BadInputError, PipelineDefinitionError

MB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Bounds on input, checked where the input is read (docs/architecture.md, "Limits")."""

    # One source file read whole (an export, a JSONL file, a table dump): stat'ed before it is opened.
    source_file_bytes: int = 512 * MB
    # One note of a folder source (a .md/.txt file); a note over it is skipped with a warning.
    note_bytes: int = 8 * MB
    # The text of one record a source produces; an item over it is skipped with a warning.
    record_chars: int = 1_000_000
    # One ``remember`` text (CLI, Python, MCP): refused over it.
    remember_bytes: int = 256 * 1024
    # One MCP request body over HTTP: refused (413) before it is parsed.
    mcp_request_bytes: int = 1 * MB
    # Lines of a stream source read in one sync; the rest wait for the next sync.
    stream_batch_lines: int = 100_000
    # One line of a stream source (remember's and every writer's): a longer line is set aside unread.
    stream_line_bytes: int = 8 * MB
    # A record dated more than this many days after "now" is flagged and never the latest projection.
    future_days: float = 1.0
    # A key aggregate's group key (``by=``): its characters, and how many groups one record may join.
    group_key_chars: int = 256
    group_keys_per_record: int = 64
    # One `synthex sql` statement: stopped after this many seconds (DuckDB has no timeout of its own).
    sql_timeout_s: float = 30.0
    # The DuckDB memory of one SQL console (DuckDB's default is 80 % of the machine's RAM); a statement
    # that needs more spills to the project's data dir (``<data dir>/sql-tmp``), else fails in one line.
    sql_memory_bytes: int = 1024 * MB

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise PipelineDefinitionError(f"Limits.{field.name}: {value!r} is not a positive number")

    def to_dict(self) -> dict[str, Any]:
        """Only the bounds that differ from the defaults (what ``export-toml`` writes)."""
        default = Limits()
        return {k: v for k, v in asdict(self).items() if getattr(default, k) != v}

    def over(self, bound: str, what: str, size: float) -> str:
        """The one-line message for ``what`` (a file, a record) being ``size`` over the bound named
        ``bound``, saying how to raise it."""
        unit = "characters" if bound in ("record_chars", "group_key_chars") else "bytes"
        limit = getattr(self, bound)
        return (f"{what} is {_amount(size, unit)}, over the {bound} bound of {_amount(limit, unit)} "
                f"(raise it with Pipeline(limits=Limits({bound}=...)))")

    def check_remember(self, text: object, id: object = None, metadata: object = None) -> None:
        """A ``remember`` text over ``remember_bytes`` (UTF-8) is one ``BadInputError`` line, found without
        encoding more than 4 x the bound (a character is at most 4 bytes). Its ``id`` and ``metadata``
        (as JSON) together get the same bound: without it, megabytes rode along in either of them."""
        if id is not None or metadata is not None:
            extra = len(json.dumps([id, metadata], ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))
            if extra > self.remember_bytes:
                raise BadInputError(self.over("remember_bytes", "remember: refused: its id and metadata (as JSON)",
                                              extra).replace(" is ", " are ", 1))
        if not isinstance(text, str):
            return  # the type is remember's own check
        size = len(text) if len(text) > self.remember_bytes else len(text.encode("utf-8", "surrogatepass"))
        if size > self.remember_bytes:
            shown = "at least " if len(text) == size and len(text) > self.remember_bytes else ""
            raise BadInputError(self.over("remember_bytes", "remember: refused: the text", size)
                                .replace(" is ", f" is {shown}", 1))

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "limits") -> Limits:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise PipelineDefinitionError(f"{where}: unknown limit {unknown[0]!r}; known: {', '.join(sorted(known))}")
        return cls(**data)


def _amount(size: float, unit: str) -> str:
    """``1.0 GB (1,073,741,824 bytes)``: readable, and exact where a bound is set in units."""
    if unit != "bytes" or size < 10 * 1024:
        return f"{int(size):,} {unit}"
    scaled, names = size / 1024, ["KB", "MB", "GB", "TB"]
    while scaled >= 1024 and len(names) > 1:
        scaled, names = scaled / 1024, names[1:]
    return f"{scaled:.1f} {names[0]} ({int(size):,} bytes)"
