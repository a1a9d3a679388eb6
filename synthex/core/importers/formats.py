"""Which importer reads a file: format detection, the format registry (``file_formats``: the built-ins
below and every plugin's, through the ``register_formats`` hook of ``synthex.core.hookspecs``), and
``ParsedSource``, one source's parse kept while its file is unchanged.

Apart from ``synthex.core.importers.base`` so that the importers, which import ``base``, are imported by
this module only (no cycle between ``base`` and the importers).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from synthex.core import hookspecs
from synthex.core.errors import PipelineDefinitionError, SourceError
from synthex.core.importers import base, chatgpt, claude, folder, jsonl
from synthex.core.importers.base import (
    Intake,
    NotRegularFile,
    SetAside,
    SourceItem,
    TooLarge,
    file_digest,
    read_json,
    show,
    special_kind,
)
from synthex.core.importers.export_parts import describe_parts, export_parts, parse_parts
from synthex.core.importers.migrate import detect_migration_format, migration_parsers
from synthex.core.limits import Limits
from synthex.core.plugins import Registry, populate

FORMATS = ("chatgpt-export", "claude-export", "folder", "jsonl")


CHAT_EXPORTS = {"chatgpt-export": "ChatGPT", "claude-export": "Claude"}  # formats an export split into parts has


def detect_format(path: Path, max_bytes: int | None = None) -> str:
    """Guess the export format of ``path`` (a file or a folder); a JSON file is read to at most
    ``max_bytes`` (``read_json``). A folder is a notes folder unless it holds an export split into parts
    (``export_parts``): then it is that export's format, as its first part holding a conversation says."""
    if path.is_dir():
        parts = export_parts(path)
        return _split_export_format(path, parts, max_bytes) if parts else "folder"
    if not path.exists():
        raise SourceError(f"{path}: no such file or folder")
    # Other memory systems' files and Synthex's own export (synthex.core.importers.migrate) are sniffed first.
    if (migrated := detect_migration_format(path, max_bytes or Limits().source_file_bytes)) is not None:
        return migrated
    if path.suffix.lower() == ".jsonl":
        return "jsonl"
    if path.suffix.lower() in (".md", ".txt"):
        return "folder"
    return _json_format(path, read_json(path, max_bytes))


def _json_format(path: Path, data: object) -> str:
    if isinstance(data, list) and data and isinstance(data[0], dict):
        first = data[0]
        if "mapping" in first:
            return "chatgpt-export"
        if "chat_messages" in first:
            return "claude-export"
    raise SourceError(
        f"{path}: unknown format: expected a ChatGPT export (conversations with 'mapping'), "
        f"a Claude export (conversations with 'chat_messages'), a .jsonl file or a folder of .md/.txt"
    )


def _part_parser(fmt: str, max_bytes: int) -> Callable[[Path, Intake], list[SourceItem]]:
    """The parser of one part of a ``fmt`` export: a part of the other export (a Claude file among ChatGPT
    parts) is said as such, not as the field the other export lacks."""
    parse = BUILTIN_PARSERS[fmt]

    def parse_part(part: Path, intake: Intake) -> list[SourceItem]:
        try:
            return parse(part, intake)
        except SourceError:
            try:
                found = _json_format(part, read_json(part, max_bytes))
            except SourceError:
                found = fmt
            if found != fmt:
                raise SourceError(f"{part}: a {CHAT_EXPORTS[found]} export among the parts of a {CHAT_EXPORTS[fmt]} "
                                  f"export; give each export its own --from") from None
            raise

    return parse_part


def _split_export_format(folder: Path, parts: list[Path], max_bytes: int | None) -> str:
    for part in parts:
        data = read_json(part, max_bytes)
        if data != []:  # an empty part says nothing of its export
            return _json_format(part, data)
    raise SourceError(f"{folder}: an export split into {describe_parts(folder, parts)}, none of which holds a "
                      f"conversation")


FormatParser = Callable[[Path, Intake], list[SourceItem]]  # (the file or folder, the read's bounds and warnings)

BUILTIN_PARSERS: dict[str, FormatParser] = {
    "chatgpt-export": chatgpt.parse,
    "claude-export": claude.parse,
    "folder": folder.parse,
    "jsonl": jsonl.parse,
    **migration_parsers(),
}
BUILTIN_MODULES = ("synthex.core.importers.formats",)


@dataclass(frozen=True)
class VersionedParser:
    """A format's parser and the version of what it makes. Registered so (a plugin's format, or
    ``pipeline.format(..., version=)``), the version is part of the version of every source step that reads
    the format (``parser_version``, ``FileOrigin.config``): records another version of the parser made get
    other ids, so a run replaces them. Without it a parser that starts to record a new metadata field leaves
    every stored record as it was (same text, same key, so the same id: nothing to do). The built-in formats
    need none: ``IMPORTER_VERSION`` is theirs, bumped with them."""

    parse: FormatParser
    version: str

    def __call__(self, path: Path, intake: Intake) -> list[SourceItem]:
        return self.parse(path, intake)


def module_version(module: ModuleType) -> str:
    """A version that changes with any edit of ``module``'s source (a plugin's parser and the helpers beside
    it): what a plugin gives its ``VersionedParser`` when it does not keep a version by hand."""
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):  # no source shipped: the module's name and file stand for it
        source = f"{module.__name__}:{getattr(module, '__file__', '')}"
    return "source:" + hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


def parser_version(fmt: str, own: Registry[FormatParser] | None = None) -> str | None:
    """The version of the parser ``fmt`` names when it is a ``VersionedParser`` (the pipeline's own formats
    ``own`` first, then the plugins'); None for ``auto``, a built-in, an unversioned or an unknown format (a
    read of an unknown one says so in one line)."""
    if fmt == "auto" or fmt in BUILTIN_PARSERS:
        return None
    parser = _registered(fmt, own)
    return parser.version if isinstance(parser, VersionedParser) else None


def _registered(fmt: str, own: Registry[FormatParser] | None) -> FormatParser | None:
    """The parser of a format that is not built in: the pipeline's own, else a plugin's (None: unknown)."""
    if own is not None and fmt in own:
        return own.get(fmt)
    formats = file_formats()
    return formats.get(fmt) if fmt in formats else None


def register_formats(registry: Registry[FormatParser]) -> None:
    for name, parse in BUILTIN_PARSERS.items():
        registry.register(name, parse)


# Cached for the process, not owned by an object: the catalogue is what the installed plugins register, and
# they do not change while a process runs; nothing registers into it after discovery (a pipeline's formats
# are its own registry, ``PipelineDefinition.formats``), so every reader sees the same catalogue.
@functools.cache
def file_formats() -> Registry[FormatParser]:
    """The formats ``pipeline.source(..., format=NAME)`` reads: the built-ins, then every installed plugin's
    (the evals plugin's benchmark formats). Loaded once per process, at the first read that needs it: a
    read-only catalogue (installed plugins do not change while a process runs)."""
    return populate(Registry[FormatParser]("file format"), hookspecs.register_formats, builtins=BUILTIN_MODULES)


def load_source(path: str | Path, fmt: str = "auto", intake: Intake | None = None,
                formats: Registry[FormatParser] | None = None) -> list[SourceItem]:
    """Parse a source file or folder (every call parses; ``ParsedSource`` keeps one parse); ``formats``: a
    pipeline's own (``PipelineDefinition.formats``), tried after the built-ins, before the plugins'. ``intake``
    bounds the read (``Limits``; default bounds when None) and collects the warnings of what it skipped:
    a single file over ``source_file_bytes`` is skipped whole, stat'ed before anything reads it."""
    p = Path(path).expanduser()
    if not p.exists():
        raise SourceError(f"{p}: no such file or folder")
    intake = intake if intake is not None else Intake()
    cap = intake.limits.source_file_bytes
    if not p.is_dir():
        st = p.stat()
        if (kind := special_kind(st.st_mode)) is not None:
            raise NotRegularFile(p, kind)
        if st.st_size > cap:
            intake.warn(intake.limits.over("source_file_bytes", f"{p}: skipped: the file", st.st_size))
            return []
    try:
        if fmt == "auto":
            fmt = detect_format(p, cap)
        if fmt in CHAT_EXPORTS and p.is_dir():  # an export split into parts: every part, in order
            items = parse_parts(p, _part_parser(fmt, cap), intake)
        else:
            items = _parser(p, fmt, formats)(p, intake)
    except TooLarge as exc:  # grew past the bound while read: skipped like any file over it
        intake.warn(str(exc))
        return []
    if not items and not intake.set_aside and reads_notes(p, fmt) and p.is_dir():
        intake.nothing = _why_no_notes(p, cap)
    seen: set[str] = set()
    for item in items:  # a set, not list.count: an export of 100k items stays linear
        if item.key in seen:
            raise SourceError(f"{p}: two items share the id {show(item.key)}")
        seen.add(item.key)
    return items


def _parser(path: Path, fmt: str, own: Registry[FormatParser] | None) -> FormatParser:
    """The parser of ``fmt``: a built-in, else the pipeline's own (``own``), else a plugin's. The plugins are
    discovered only by a read that names a format neither has; an unknown name is one line naming the known."""
    if fmt in BUILTIN_PARSERS:
        return BUILTIN_PARSERS[fmt]
    if (parser := _registered(fmt, own)) is not None:
        return parser
    formats = file_formats()
    if fmt not in formats:
        known = [*formats.names(), *(own.names() if own is not None else [])]
        failed = "".join(f"; {f}" for f in formats.failures)
        raise SourceError(f"{path}: unknown format {fmt!r}; expected one of {', '.join(known)} or 'auto'{failed}")
    return formats.get(fmt)


# The pipeline file being loaded (``synthex.core.project.pipeline_from_file``) collects what its legacy
# ``register_format`` calls register; outside such a load there is no pipeline to give a format to.
_LOADING: ContextVar[Registry[FormatParser] | None] = ContextVar("synthex_loading_formats", default=None)


@contextmanager
def collecting_formats() -> Iterator[Registry[FormatParser]]:
    """While a pipeline file runs: the formats its ``register_format`` calls add (its pipeline's, after)."""
    collected: Registry[FormatParser] = Registry("file format")
    token = _LOADING.set(collected)
    try:
        yield collected
    finally:
        _LOADING.reset(token)


def register_format(name: str, parser: Callable[[Path], list[SourceItem]]) -> None:
    """The call pipeline.py files of earlier templates make: the format becomes the loaded pipeline's own,
    as ``pipeline.format(name, parser)`` makes it (which new code calls)."""
    collected = _LOADING.get()
    if collected is None:
        raise PipelineDefinitionError(f"register_format({name!r}, ...): only a project's pipeline.py may call "
                                      f"it; call pipeline.format({name!r}, parser) on the pipeline instead")
    collected.register(name, parser, by=f"register_format({name!r}) in the pipeline file")


def reads_notes(path: Path, fmt: str) -> bool:
    """A parse of ``path`` in format ``fmt`` reads a notes folder (or one note)."""
    return fmt == "folder" or (fmt == "auto" and path.is_dir() and not export_parts(path))


FILES_COUNTED = 1000  # a folder with no notes: its files are counted up to this, for the message


def _why_no_notes(path: Path, max_bytes: int) -> str | None:
    """The line saying why the notes folder ``path`` yields nothing although it holds files (None when it
    holds none): what it holds, and how to read it when that is an export split into parts."""
    if parts := export_parts(path):
        try:
            fmt = detect_format(path, max_bytes)
            what, how = f"a {CHAT_EXPORTS[fmt]} export", f"format={fmt!r}"
        except SourceError:  # a part that is not JSON: the source that reads it will say so
            what, how = "an export", "format='chatgpt-export' (or 'claude-export')"
        return (f"{path}: no notes (.md, .txt, .markdown) here, but {what} split into {describe_parts(path, parts)}: "
                f"read it with pipeline.source(NAME, file={str(path)!r}, {how}), as `synthex init --from` does")
    count = 0
    for _, _, files in os.walk(path):
        count += len(files)
        if count >= FILES_COUNTED:
            break
    if not count:
        return None
    shown = f"{FILES_COUNTED}+" if count >= FILES_COUNTED else str(count)
    return f"{path}: no notes (.md, .txt, .markdown) among its {shown} file(s): nothing is imported from it"


def _listing(path: Path, fmt: str, follow_links: bool) -> Callable[[Path], list[Path]] | None:
    """The files a folder source's parse reads: a notes folder's notes, an export's parts (None: every file
    of a folder of another format)."""
    if reads_notes(path, fmt):
        return lambda folder_path: folder.note_files(folder_path, Intake(follow_links=follow_links))
    if path.is_dir() and (fmt in CHAT_EXPORTS or fmt == "auto"):
        return export_parts
    return None


def _cap(path: Path, fmt: str, limits: Limits) -> int:
    return limits.note_bytes if reads_notes(path, fmt) else limits.source_file_bytes


def change_token(path: Path, fmt: str = "auto", limits: Limits | None = None, follow_links: bool = False) -> str:
    """A cheap string that changes when what a parse of ``path`` reads changed: the stat signature of
    the files it reads, or their content hash when one was modified in the last seconds."""
    limits = limits or Limits()
    listing = _listing(path, fmt, follow_links)
    stat = base.stat_signature(path, listing)
    return repr(stat) if stat is not None else "sha256:" + file_digest(path, _cap(path, fmt, limits), listing)


class ParsedSource:
    """One source's parse, kept while the file is unchanged.

    An unchanged stat (size, mtime, ctime, inode; not for files modified in the last 2 s) reuses the
    parse without reading the file; otherwise the content is hashed, and only a changed content hash
    re-parses (a ``touch`` costs a hash, not a parse).
    """

    def __init__(self) -> None:
        self._stat: tuple | None = None
        self._digest: str | None = None
        self._key: tuple[str, str, Limits, bool] | None = None
        self._items: list[SourceItem] = []
        self._skipped: list[str] = []
        self._set_aside: tuple[SetAside, ...] = ()
        self._nothing: str | None = None

    def items(self, path: str | Path, fmt: str = "auto", limits: Limits | None = None,
              follow_links: bool = False, formats: Registry[FormatParser] | None = None) -> list[SourceItem]:
        """The items of ``path`` read within ``limits`` (a folder's links leave it only with
        ``follow_links``; ``formats``: the pipeline's own, ``load_source``); what the read skipped is in
        ``warnings``."""
        p = Path(path).expanduser()
        if not p.exists():
            raise SourceError(f"{p}: no such file or folder")
        limits = limits or Limits()
        key = (str(p.resolve()), fmt, limits, follow_links)
        listing = _listing(p, fmt, follow_links)
        try:  # the cache check reads the file too: an unreadable one is the same one-line error
            stat = base.stat_signature(p, listing)
            if stat is not None and key == self._key and stat == self._stat:
                return self._items
            digest = file_digest(p, _cap(p, fmt, limits), listing)
        except OSError as exc:
            raise SourceError(f"{exc.filename or p}: cannot read file: {exc.strerror or exc}") from exc
        if key != self._key or digest != self._digest:
            intake = Intake(limits=limits, follow_links=follow_links)
            self._items = load_source(p, fmt, intake, formats)
            self._skipped, self._set_aside, self._nothing = intake.warnings, tuple(intake.set_aside), intake.nothing
        self._key, self._stat, self._digest = key, stat, digest
        return self._items

    @property
    def nothing(self) -> str | None:
        """Why the current parse found no item in a folder that holds files (``Intake.nothing``)."""
        return self._nothing

    @property
    def set_aside(self) -> tuple[SetAside, ...]:
        """The files the current parse set aside for an error (a notes folder's bad notes), in order."""
        return self._set_aside

    @property
    def warnings(self) -> list[str]:
        """One line per file the read skipped (over a bound, a link out of the folder, a FIFO) or set aside
        (a bad note), then the warnings of the current items (e.g. turns left out for having no text)."""
        aside = [f"{note}: note set aside (quarantined); the other notes are read" for note in self._set_aside]
        nothing = [self._nothing] if self._nothing else []
        return [*nothing, *self._skipped, *aside, *(w for item in self._items for w in item.warnings)]
