"""The shared shape every importer returns and the checks importers share (which importer reads a file,
and the parse kept while it is unchanged, are ``synthex.core.importers.formats``).

Error rule (issue 9): bad input is a ``SourceError`` whose message is one line naming the file, the
record (``conversation #i (id, 'title')``, ``file:lineno``, ``message #m``), the field and the problem;
never another exception. Every importer applies the same rule to the fields it reads:

- null and missing are the same: "absent". A required field that is absent is an error.
- structure (lists, objects), ids, roles and text must have their documented type, else an error;
  ids may be integers (stringified), never booleans.
- labels (titles) may be strings or numbers (stringified); any other type is an error.
- timestamps are absent, epoch seconds or ISO-8601 (``periods.to_timestamp``), else an error.
- unpaired UTF-16 surrogates (valid JSON escapes that cannot be written as UTF-8) become U+FFFD, with
  a warning on the item.

Warnings (``SourceItem.warnings``) are one-line notes about content left out of an item, not errors;
what a read leaves out whole (a file over a size bound, a link out of a notes folder, a FIFO) is a
warning line of its ``Intake``.

Bounds (``synthex.core.limits.Limits``, issue 20): a file is opened without blocking, checked to be a
regular file and stat'ed before anything is read (``open_regular``), and read to at most its bound plus
one byte (``read_capped``), so a file over the bound, or one that grows past it while read, is never
loaded whole: it is ``TooLarge``, which ``load_source`` turns into a warning that skips it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import reprlib
import stat as stat_module
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from synthex.core.errors import SourceError
from synthex.core.limits import Limits
from synthex.core.periods import to_timestamp


@dataclass
class SourceItem:
    """One conversation or document: becomes one source record."""

    key: str  # stable identity inside the file (conversation id, relative path, line id)
    content: str
    created_at: str  # ISO-8601 UTC
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # one line each, e.g. a turn left out for having no text


# -- one-line descriptions of user values -------------------------------------------------------------

_REPR = reprlib.Repr()  # bounded: a 5 MB string or a deeply nested object shows as a short excerpt
_REPR.maxstring, _REPR.maxother, _REPR.maxlevel, _REPR.maxlist, _REPR.maxdict = 40, 40, 2, 3, 3
SHOW_LIMIT = 60
_KINDS = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list", dict: "an object"}


def show(value: Any) -> str:
    """A short one-line excerpt of a user value (repr escapes newlines; JSON spelling for literals)."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    text = _REPR.repr(value)
    return text if len(text) <= SHOW_LIMIT else text[: SHOW_LIMIT - 3] + "..."


def describe(value: Any) -> str:
    """'a list [1, 2]', 'missing'... for messages like "'author' is a list [1, 2]; expected an object"."""
    if value is None:
        return "missing"
    return f"{_KINDS.get(type(value), type(value).__name__)} {show(value)}"


def label(value: Any) -> str:
    """An id as it appears in a record's name: plain when short and printable, else a bounded repr."""
    text = str(value)
    return text if text.isprintable() and len(text) <= 60 else show(text)


# -- typed field access: every wrong type is a one-line SourceError -----------------------------------

_EXPECTED = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number"}


def get(obj: dict[str, Any], name: str, kind: type | tuple[type, ...], where: str, shown: str = "") -> Any:
    """``obj[name]``, or None when absent; a SourceError naming ``where`` and the field (``shown``, by
    default ``name``) when it has another type. Booleans are not integers here."""
    value = obj.get(name)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if value is None or (isinstance(value, kinds) and not isinstance(value, bool)):
        return value
    expected = " or ".join(_EXPECTED[k] for k in kinds if not (k is int and float in kinds))
    raise SourceError(f"{where}: '{shown or name}' is {describe(value)}; expected {expected}")


def require(obj: dict[str, Any], name: str, kind: type, where: str) -> Any:
    value = get(obj, name, kind, where)
    if value is None:
        raise SourceError(f"{where}: missing required field '{name}'")
    return value


def get_id(obj: dict[str, Any], name: str, where: str) -> str | None:
    """An id: a string or an integer (stringified); None when absent or empty."""
    value = get(obj, name, (str, int), where)
    return None if value is None or value == "" else str(value)


def get_title(obj: dict[str, Any], name: str, where: str) -> str | None:
    """A title: a string, or a number written as text (a conversation called 2024); None when absent."""
    value = get(obj, name, (str, int, float), where)
    return None if value is None or value == "" else str(value)


def get_time(obj: dict[str, Any], name: str, where: str) -> datetime | None:
    """A timestamp field: None when absent, a UTC datetime, or a SourceError saying why it is not one."""
    value = obj.get(name)
    try:
        return to_timestamp(value)
    except ValueError as exc:
        raise SourceError(f"{where}: '{name}' is {describe(value)}, not a timestamp ({exc})") from None


def expect_object(value: Any, where: str) -> dict[str, Any]:
    """A list entry that must be an object (``where`` names it: "... message #3")."""
    if not isinstance(value, dict):
        raise SourceError(f"{where} is {describe(value)}; expected an object")
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    return value


def repaired(item: SourceItem, where: str) -> SourceItem:
    """``item`` without unpaired UTF-16 surrogates. JSON can escape half an emoji ("\\ud83d"); such a
    string cannot be encoded as UTF-8 and would fail the pipeline's hashing later, so it is repaired
    here, with a warning naming the record (``where``). Metadata depth is bounded by the importers."""
    other_strings = json.dumps([item.key, item.metadata], ensure_ascii=False)
    if not (_SURROGATE.search(item.content) or _SURROGATE.search(other_strings)):
        return item
    warning = f"{where}: unpaired UTF-16 surrogates replaced with U+FFFD"
    return SourceItem(
        key=_replace_surrogates(item.key),
        content=_replace_surrogates(item.content),
        created_at=item.created_at,
        metadata=_replace_surrogates(item.metadata),
        warnings=[*item.warnings, warning],
    )


# -- reading files within bounds ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SetAside:
    """A file a read could not take in and went on without (a note that is not UTF-8, a link loop, a
    front-matter date that is not a date): the file and the problem, as its one-line error said them."""

    file: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: {self.reason}"


@dataclass
class Intake:
    """How one read of a source takes files in: its bounds, whether a notes folder's links may lead out
    of it, the warning lines of what the read left out whole (a file over a bound, a link out of the
    folder, a FIFO), the files it set aside for an error (``set_aside``), and why a folder that holds files
    gave no item (``nothing``: none is a note; an export split into parts, passed as notes). One per parse;
    ``ParsedSource`` keeps both with the items."""

    limits: Limits = field(default_factory=Limits)
    follow_links: bool = False
    warnings: list[str] = field(default_factory=list)
    set_aside: list[SetAside] = field(default_factory=list)
    nothing: str | None = None  # why a folder that holds files yields no item (its files are no notes)

    def warn(self, line: str) -> None:
        self.warnings.append(line)

    def put_aside(self, file: Path, error: SourceError) -> None:
        """Go on without ``file``, whose read raised ``error`` (a one-line message naming it)."""
        message, prefix = " ".join(str(error).split()), f"{file}: "
        self.set_aside.append(SetAside(str(file), message[len(prefix):] if message.startswith(prefix) else message))


class TooLarge(SourceError):
    """A file over its size bound (the message names it and the bound): skipped with a warning."""


class NotRegularFile(SourceError):
    """A FIFO, device, socket or folder where a file's bytes were expected: never read (a FIFO blocks)."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(f"{path}: {kind}, not a regular file; not read")
        self.kind = kind


_SPECIAL = ((stat_module.S_ISFIFO, "a FIFO"), (stat_module.S_ISCHR, "a character device"),
            (stat_module.S_ISBLK, "a block device"), (stat_module.S_ISSOCK, "a socket"),
            (stat_module.S_ISDIR, "a folder"))


def special_kind(mode: int) -> str | None:
    """What a file that is not a regular file is ("a FIFO"...), from its stat mode; None for a regular one."""
    if stat_module.S_ISREG(mode):
        return None
    return next((name for test, name in _SPECIAL if test(mode)), "not a regular file")


def open_regular(path: Path, follow_links: bool = True) -> tuple[int, os.stat_result]:
    """A descriptor on the regular file ``path`` and its stat. Opened non-blocking, so that a FIFO put
    in a file's place after it was checked cannot block the read; anything but a regular file is
    ``NotRegularFile`` (and is closed unread). ``follow_links=False`` refuses a link as the last part."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow_links else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        kind = special_kind(st.st_mode)
        if kind is not None:
            raise NotRegularFile(path, kind)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_capped(path: Path, max_bytes: int, bound: str = "source_file_bytes", limits: Limits | None = None,
                what: str = "the file", follow_links: bool = True) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file ``path`` and its stat. Over ``max_bytes`` by its stat, or growing
    past it while read, it is ``TooLarge`` (naming the file and the bound ``bound``) after reading at most
    ``max_bytes + 1`` bytes."""
    limits = limits or Limits()
    fd, st = open_regular(path, follow_links)
    try:
        if st.st_size > max_bytes:
            raise TooLarge(limits.over(bound, f"{path}: skipped: {what}", st.st_size))
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > max_bytes:  # it grew while read: cut at the bound, and skipped like any file over it
        raise TooLarge(limits.over(bound, f"{path}: skipped: {what} (it grew while read)", size))
    return b"".join(chunks), st


# -- reading files ---------------------------------------------------------------------------------------

_MAGIC = {b"\x1f\x8b": "a gzip file: decompress it first", b"PK\x03\x04": "a zip archive: extract conversations.json",
          b"\x89PNG": "a PNG image", b"%PDF": "a PDF document"}


def binary_kind(head: bytes) -> str | None:
    """What a file is when its first bytes say it is not text (users pass the export's zip)."""
    return next((what for magic, what in _MAGIC.items() if head.startswith(magic)), None)


def not_text(path: str | Path, head: bytes, exc: UnicodeDecodeError) -> SourceError:
    """The error for bytes that are not UTF-8, saying what the file is when its first bytes tell."""
    return SourceError(f"{path}: not UTF-8 text ({binary_kind(head) or f'{exc.reason} at byte {exc.start}'})")


def loads(text: str) -> Any:
    """``json.loads`` whose every failure is a ValueError with a one-line reason (``JSONDecodeError``
    keeps its position): also integers too long to convert, nesting beyond the recursion limit, and
    input too large for memory."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise ValueError("a number with more than 4300 digits") from exc
    except RecursionError as exc:
        raise ValueError("nested too deeply") from exc
    except MemoryError as exc:
        raise ValueError("too large to load into memory") from exc


# What may follow the error position of a JSON text cut off inside its last value: a string that runs to the
# end (no closing quote, perhaps half an escape), or the start of a number or of true / false / null.
_CUT_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\.)*\\?\Z', re.S)
_CUT_NUMBER = re.compile(r"-?\d*(?:\.\d*)?(?:[eE][-+]?\d*)?\Z")


def looks_truncated(text: str, pos: int) -> bool:
    """A JSON text whose parse failed at ``pos`` was cut off (a download or an extraction that stopped
    mid-way) rather than written wrong: nothing but an unfinished value follows ``pos``."""
    rest = text[pos:].rstrip()
    return (not rest or bool(_CUT_STRING.match(rest)) or bool(_CUT_NUMBER.match(rest))
            or any(word.startswith(rest) for word in ("true", "false", "null")))


def read_json(path: Path, max_bytes: int | None = None) -> Any:
    """The JSON value in ``path``, read to at most ``max_bytes`` (default: ``Limits().source_file_bytes``;
    ``TooLarge`` over it)."""
    try:
        raw, _ = read_capped(path, max_bytes if max_bytes is not None else Limits().source_file_bytes)
    except OSError as exc:
        raise SourceError(f"{path}: cannot read file: {exc.strerror or exc}") from exc
    except MemoryError as exc:
        raise SourceError(f"{path}: too large to load into memory") from exc
    if not raw.strip():
        raise SourceError(f"{path}: the file is empty; expected JSON")
    if kind := binary_kind(raw[:8]):
        raise SourceError(f"{path}: not JSON text ({kind})")
    try:
        text = raw.decode("utf-8-sig")  # a BOM, as Windows editors write, is not an error
    except UnicodeDecodeError as exc:
        raise not_text(path, raw[:8], exc) from exc
    del raw  # the bytes are not needed once decoded: keeps a large export's peak memory down
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        if looks_truncated(text, exc.pos):
            raise SourceError(f"{path}: invalid JSON: the file looks truncated (it ends at character {len(text)} "
                              f"in an unfinished value; {exc.msg}: {where}); download or extract it again") from exc
        raise SourceError(f"{path}: invalid JSON at {where}: {exc.msg}") from exc
    except ValueError as exc:
        raise SourceError(f"{path}: invalid JSON ({exc})") from exc


def read_json_objects(path: Path, what: str, item: str,
                      max_bytes: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, object) of a JSON file that is a list of objects; anything else is an error naming the file.
    ``max_bytes`` bounds the file (``read_json``)."""
    data = read_json(path, max_bytes)
    if not isinstance(data, list):
        found = describe(data) if data is not None else "null"
        raise SourceError(f"{path}: expected {what} (a JSON list of {item}s), found {found}")
    for index, obj in enumerate(data):
        yield index, expect_object(obj, f"{path}: {item} #{index}")


def source_files(path: Path, listing: Callable[[Path], list[Path]] | None = None) -> list[Path]:
    """The files a source reads: ``path`` itself, or a folder's files as ``listing`` finds them (by default
    every file under it, links to files included, as ``rglob`` finds them)."""
    if not path.is_dir():
        return [path]
    if listing is not None:
        return listing(path)
    return sorted(p for p in path.rglob("*") if p.is_file())


def file_digest(path: Path, max_bytes: int | None = None,
                listing: Callable[[Path], list[Path]] | None = None) -> str:
    """Content hash of a file or folder: the cache key for parsed sources. A file over ``max_bytes``
    (default: ``Limits().source_file_bytes``) is read by nobody, so its stat stands for its content; the
    others are hashed in chunks (a file's size never decides the memory this takes)."""
    cap = max_bytes if max_bytes is not None else Limits().source_file_bytes
    digest = hashlib.sha256()
    in_folder = path.is_dir()
    for p in source_files(path, listing):
        digest.update(str(p.relative_to(path) if in_folder else p.name).encode())
        try:
            fd, st = open_regular(p)
        except OSError as exc:
            if not in_folder:
                raise
            # A folder's file that cannot be opened (a link loop, no permission): the parse sets it aside;
            # its error stands for its content, so fixing it is a change.
            digest.update(f"unreadable:{exc.errno}".encode())
            continue
        try:
            digest.update(str(st.st_size).encode())
            if st.st_size > cap:
                digest.update(f"unread:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}".encode())
                continue
            content, read = hashlib.sha256(), 0
            while read <= cap and (chunk := os.read(fd, 1 << 20)):
                content.update(chunk)
                read += len(chunk)
            digest.update(content.digest())
        finally:
            os.close(fd)
    return digest.hexdigest()


RACY_SECONDS = 2.0  # a file modified this recently may change again within the same mtime tick


def stat_signature(path: Path, listing: Callable[[Path], list[Path]] | None = None) -> tuple | None:
    """(name, size, mtime, ctime, inode) of a file or of every file in a folder (as ``listing`` finds
    them): the cheap "did it change?" test. None when a file was modified in the last seconds, where
    same-tick edits could go unseen (git's "racy" rule): then the content is hashed instead."""
    signature: list[tuple] = []
    for q in source_files(path, listing):
        try:
            st = q.stat()
        except OSError as exc:
            if not path.is_dir():
                raise
            signature.append((str(q), "unreadable", exc.errno))  # a folder's link loop: its parse sets it aside
            continue
        if time.time() - st.st_mtime < RACY_SECONDS:
            return None
        signature.append((str(q), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
    return tuple(signature)


def render_conversation(title: str, turns: list[tuple[str, str, str]]) -> str:
    """Text of a conversation: a title line, then ``role: text`` blocks (timestamps kept in metadata)."""
    lines = [f"# {title}"] if title else []
    for role, _ts, text in turns:
        lines.append(f"{role}: {text}")
    return "\n\n".join(lines)
