"""A folder of .md/.txt files (or one such file): one document per file, dated by its content.

Identity: the item key is the file's path relative to the folder (the file name for a single file), and
the record id follows from that key and the content. So a note nobody edited keeps its id *and* its
date when it is touched or freshly cloned, as long as its date comes from the file (rules 1 and 2).

Date (``created_at``), the first rule that applies; ``metadata["time"]["dated_by"]`` says which:

1. ``"front-matter"``: a front matter block at the very top of the file (a ``---`` line, ``key: value``
   lines, a ``---`` or ``...`` line) with ``date:``, or ``created:`` when ``date`` is absent or empty.
   The value is an ISO-8601 date or datetime (``2024-03-05``, ``2024-03-05 10:00``,
   ``2024-03-05T10:00:00+02:00``; no offset means UTC). Anything else (a bare number such as ``2024``,
   ``March 5``, a list) is a one-line ``SourceError`` naming the file and the field.
2. ``"file-name"``: a date in the relative path (midnight UTC; years 1900-2199 and a real calendar day,
   otherwise the digits are not a date): the file name starting with one (``2024-03-05-standup.md``,
   ``2024-03-05.md``, ``20240305 notes.md``, ``2024_03_05.md``), else its folder's name starting with one
   (``2024-03-05/notes.md``), else ``YYYY/MM/DD`` as the last folders and the file name
   (``journal/2024/03/05.md``, ``journal/2024/03/05-standup.md``, ``2024/03/05/notes.md``).
3. ``"mtime"``: the file's modification time (the old rule; ``touch`` and ``git clone`` re-date these).

Front matter (parsed here, no YAML library): the block is front matter only when its first line is
``---``, it is closed, and every non-blank line in it is ``key: value`` (key: letters, digits, ``_ . -``),
a ``# comment`` or an indented line continuing the previous key; otherwise the file is plain text and
kept whole (a note that starts with a ``---`` rule). Values stay text: quotes are removed, ``# comments``
after unquoted values dropped, ``[a, b]`` and indented ``- item`` lines become lists, ``|``/``>`` and
other indented lines become one string, ``null``/``~``/empty become null. The block is removed from the
content (the record is the note's body); its keys go to ``metadata["custom"]``, and ``title:`` (a string
or a number) replaces the file name as the title (``metadata["chat"]["title"]``).

Set aside (issue 32), never a reason to stop the folder: a note that cannot be read (a link loop, a broken
link, no permission) or is not UTF-8, and one with a bad front-matter date or title. Each is
``Intake.set_aside`` with its one-line error (naming the file, and the field); the other notes are read,
and a fixed note is read like any other at the next parse. Files whose body is empty (blank, or front
matter only) are skipped.

What a folder source reads stays inside its folder (issue 20). Skipped with a warning line naming the
file: a link (to a note or to a folder) that resolves outside the folder, unless the source allows it
(``pipeline.source(name, folder=..., follow_links=True)``); a FIFO, device or socket with a note's name
(never opened: a FIFO would block the read), whatever the setting; a note over ``Limits.note_bytes``
(stat'ed, never read). Links that stay inside are read as before: a link to a note is that note under
the link's name; a link to a folder inside is not descended (its notes are read where they are).
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, date, datetime
from pathlib import Path, PurePath
from typing import Any

from synthex.core.errors import SourceError
from synthex.core.importers.base import (
    Intake,
    NotRegularFile,
    SourceItem,
    TooLarge,
    describe,
    get_title,
    not_text,
    read_capped,
    repaired,
    special_kind,
)
from synthex.core.periods import iso, to_timestamp

SUFFIXES = (".md", ".txt", ".markdown")
DATE_KEYS = ("date", "created")  # front-matter keys that date a note, in order

# -- front matter ----------------------------------------------------------------------------------------

_OPEN = re.compile(r"\A\ufeff?---[ \t]*\r?\n")
_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.M)
_KEY = re.compile(r"^([A-Za-z0-9_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]+(.*)|)$")
_NULLS = ("", "~", "null", "Null", "NULL")


def _scalar(raw: str) -> str | None:
    """One YAML-ish scalar as text: quotes removed, a trailing ``# comment`` dropped, nulls as None."""
    raw = raw.strip()
    if raw[:1] == '"':
        end = raw.find('"', 1)
        while end > 0 and raw[end - 1] == "\\":
            end = raw.find('"', end + 1)
        if end > 0:
            try:
                return json.loads(raw[: end + 1])
            except ValueError:
                return raw[1:end]
    elif raw[:1] == "'":
        match = re.match(r"'((?:[^']|'')*)'", raw)
        if match:
            return match.group(1).replace("''", "'")
    else:
        raw = re.split(r"[ \t]#", raw, maxsplit=1)[0].strip()
    return None if raw in _NULLS else raw


def _is_item(line: str) -> bool:
    stripped = line.strip()
    return stripped == "-" or stripped.startswith("- ")


def _value(raw: str, nested: list[str]) -> Any:
    """A key's value from the text after its colon and the lines under it (indented, or ``- item``)."""
    raw = raw.strip()
    lines = [line for line in nested if line.strip()]
    if not lines:
        if raw.startswith("[") and raw.endswith("]"):
            inner = raw[1:-1].strip()
            return [_scalar(part) for part in inner.split(",")] if inner else []
        return _scalar(raw)
    if raw in _NULLS and all(_is_item(line) for line in lines):
        return [_scalar(line.strip()[1:]) for line in lines]
    block = re.fullmatch(r"[|>][+-]?[0-9]?", re.split(r"[ \t]#", raw, maxsplit=1)[0].strip())
    if block or raw in _NULLS:  # a block scalar, or a nested structure kept as its text
        while nested and not nested[-1].strip():
            nested = nested[:-1]
        indent = min(len(line) - len(line.lstrip()) for line in lines)
        text = ("\n" if raw[:1] != ">" else " ").join(line[indent:].rstrip() for line in nested).strip()
        return text or None
    return _scalar(" ".join([raw, *(line.strip() for line in lines)]))  # a plain scalar over lines


def split_front_matter(text: str) -> tuple[dict[str, Any] | None, str]:
    """``(keys, body)`` of a note: ``(None, text)`` when it has no front matter block (see the module
    docstring for what counts as one)."""
    opening = _OPEN.match(text)
    if not opening:
        return None, text
    closing = _CLOSE.search(text, opening.end())
    if not closing:
        return None, text
    keys: dict[str, Any] = {}
    current: tuple[str, str] | None = None
    nested: list[str] = []
    for line in text[opening.end() : closing.start()].split("\n"):
        line = line.rstrip("\r")
        indented = line[:1] in (" ", "\t")
        if current is not None and (indented or not line.strip() or _is_item(line)):
            nested.append(line)
            continue
        if not line.strip() or line.startswith("#"):
            continue
        match = _KEY.match(line)
        if not match:  # prose, or an indented line before any key: not front matter
            return None, text
        if current is not None:
            keys[current[0]] = _value(current[1], nested)
        current, nested = (match.group(1), match.group(2) or ""), []
    if current is not None:
        keys[current[0]] = _value(current[1], nested)
    return keys, text[closing.end() :]


_SPACED_OFFSET = re.compile(r"(\d)\s+(Z|z|[+-]\d\d(?::?\d\d)?)$")  # YAML allows "10:00:00 +02:00"


def _is_number(text: str) -> bool:
    try:
        float(text)  # "2024", "1e9", "nan", "1_000": epoch seconds elsewhere, but here a likely mistake
    except ValueError:
        return False
    return True


def front_matter_date(keys: dict[str, Any], where: str) -> tuple[datetime | None, str | None]:
    """(timestamp, key) from ``date:`` or, when that is absent or empty, ``created:``; (None, None) when
    neither; a SourceError naming ``where`` and the key when the value is not an ISO date."""
    for name in DATE_KEYS:
        value = keys.get(name)
        if value is None or value == "":
            continue
        reason = "expected an ISO date or datetime such as 2024-03-05 or 2024-03-05T10:00:00Z"
        if isinstance(value, str) and not _is_number(value):
            try:
                ts = to_timestamp(_SPACED_OFFSET.sub(r"\1\2", value.strip()))
            except ValueError as exc:
                if "ISO-8601" not in str(exc):  # e.g. "outside the years 1000-9999"
                    reason = f"{exc}; {reason}"
            else:
                return ts, name
        raise SourceError(f"{where}: '{name}' is {describe(value)}, not a date ({reason})")
    return None, None


# -- dates in file names ----------------------------------------------------------------------------------

_NAME_DATE = re.compile(r"(\d{4})([-_.]?)(\d{2})\2(\d{2})(?!\d)")
_PATH_DATE = re.compile(r"(?:^|/)(\d{4})/(\d{2})/(\d{2})(?:[^\d/][^/]*)?(?:/[^/]*)?$")
YEARS = (1900, 2199)  # a file-name "date" outside these years is more likely an id than a date


def _day(year: str, month: str, day: str) -> datetime | None:
    try:
        value = date(int(year), int(month), int(day))
    except ValueError:
        return None
    if not YEARS[0] <= value.year <= YEARS[1]:
        return None
    return datetime(value.year, value.month, value.day, tzinfo=UTC)


def file_name_date(rel: PurePath) -> datetime | None:
    """Midnight UTC of the date the relative path ``rel`` names (rule 2 of the module docstring)."""
    for name in (rel.stem, rel.parent.name):
        match = _NAME_DATE.match(name)
        if match and (ts := _day(match.group(1), match.group(3), match.group(4))):
            return ts
    match = _PATH_DATE.search("/".join([*rel.parent.parts, rel.stem]))
    return _day(*match.groups()) if match else None


# -- parse ------------------------------------------------------------------------------------------------


# -- which files a folder holds ---------------------------------------------------------------------------

LINK_HINT = "follow_links=True on the source allows it"


def _inside(target: str, root: str) -> bool:
    return target == root or target.startswith(root.rstrip(os.sep) + os.sep)


def note_files(folder: Path, intake: Intake | None = None) -> list[Path]:
    """The notes of ``folder`` (files named ``*.md``, ``*.txt``, ``*.markdown`` under it), sorted, that a
    parse reads: what leaves the folder (unless ``intake.follow_links``) and special files are left out
    with a warning on ``intake`` (see the module docstring). Nothing is opened; only links are resolved."""
    root = os.path.realpath(folder)
    found: list[Path] = []
    said = Intake(follow_links=intake.follow_links) if intake is not None else None  # sorted, then passed on
    visited = {root}
    pending = [folder]
    while pending:
        current = pending.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:  # an unreadable subfolder: skipped, as rglob did
            continue
        for entry in entries:
            path = Path(entry.path)
            is_note = path.suffix.lower() in SUFFIXES
            try:
                if entry.is_symlink():
                    _link(path, is_note, root, visited, pending, found, said)
                elif entry.is_dir(follow_symlinks=False):
                    pending.append(path)
                elif is_note:
                    kind = special_kind(entry.stat(follow_symlinks=False).st_mode)
                    if kind is None:
                        found.append(path)
                    elif said is not None:
                        said.warn(f"{path}: skipped: {kind}, not a regular file (never opened)")
            except OSError:  # gone while listed: a later sync sees what is there then
                continue
    if intake is not None and said is not None:
        intake.warnings.extend(sorted(said.warnings))
    return sorted(found)


def _link(path: Path, is_note: bool, root: str, visited: set[str], pending: list[Path], found: list[Path],
          intake: Intake | None) -> None:
    target = os.path.realpath(path)
    inside, follow = _inside(target, root), intake is not None and intake.follow_links
    if os.path.isdir(target):
        if not inside and target not in visited:
            if follow:
                visited.add(target)
                pending.append(path)
            elif intake is not None:
                intake.warn(f"{path}: skipped: a link to the folder {target}, outside the notes folder ({LINK_HINT})")
        return  # a link to a folder inside: its notes are read where they are
    if not is_note:
        return
    if not os.path.exists(target):
        found.append(path)  # a broken link: reading it says "cannot read file", naming it
    elif not inside and not follow:
        if intake is not None:
            intake.warn(f"{path}: skipped: a link to {target}, outside the notes folder ({LINK_HINT})")
    elif (kind := special_kind(os.stat(target).st_mode)) is not None:
        if intake is not None:
            intake.warn(f"{path}: skipped: a link to {kind}, not a regular file (never opened)")
    else:
        found.append(path)


def _read_note(file: Path, root: str | None, intake: Intake) -> tuple[bytes, float] | None:
    """The bytes and mtime of one note, or None when it is skipped (with a warning on ``intake``)."""
    target = Path(os.path.realpath(file)) if root is not None else file
    if root is not None and not intake.follow_links and not _inside(str(target), root):
        intake.warn(f"{file}: skipped: it resolves to {target}, outside the notes folder ({LINK_HINT})")
        return None  # a link swapped in after the folder was listed
    try:
        raw, st = read_capped(target, intake.limits.note_bytes, "note_bytes", intake.limits, "the note",
                              follow_links=root is None)
    except TooLarge as exc:
        intake.warn(str(exc).replace(str(target), str(file), 1))
        return None
    except NotRegularFile as exc:
        intake.warn(f"{file}: skipped: {exc.kind}, not a regular file (never read)")
        return None
    except OSError as exc:  # unreadable, or a broken link
        raise SourceError(f"{file}: cannot read file: {exc.strerror or exc}") from exc
    return raw, st.st_mtime


# -- parse ------------------------------------------------------------------------------------------------


def parse(path: Path, intake: Intake | None = None) -> list[SourceItem]:
    """One item per note of the folder (or the one file) ``path``; what is skipped is said on ``intake``."""
    intake = intake or Intake()
    is_folder = path.is_dir()
    files = note_files(path, intake) if is_folder else [path]
    root = os.path.realpath(path) if is_folder else None
    items: list[SourceItem] = []
    for file in files:
        try:
            item = _note(file, file.relative_to(path) if is_folder else PurePath(file.name), root, intake)
        except SourceError as exc:  # set aside, named; the other notes are read
            intake.put_aside(file, exc)
            continue
        if item is not None:
            items.append(item)
    return items


def _note(file: Path, rel_path: PurePath, root: str | None, intake: Intake) -> SourceItem | None:
    """The item of one note; None when it is skipped (with a warning on ``intake``) or its body is empty."""
    note = _read_note(file, root, intake)
    if note is None:
        return None
    raw, mtime = note
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise not_text(file, raw[:8], exc) from exc
    del raw
    keys, body = split_front_matter(text)
    content = body.strip()
    if not content:
        return None
    where = f"{file}: front matter"
    ts, dated_by = (front_matter_date(keys, where)[0] if keys else None), "front-matter"
    if ts is None:
        ts, dated_by = file_name_date(rel_path), "file-name"
    if ts is None:
        ts, dated_by = datetime.fromtimestamp(mtime, tz=UTC), "mtime"
    title = (get_title(keys, "title", where) if keys else None) or file.stem
    created = iso(ts)
    metadata: dict[str, Any] = {
        "time": {"created_at": created, "dated_by": dated_by},
        "chat": {"title": title},
        "source": {"type": "folder", "path": str(file)},
    }
    if keys is not None:
        metadata["custom"] = keys
    item = SourceItem(key=str(rel_path), content=content, created_at=created, metadata=metadata)
    return repaired(item, str(file))  # a quoted front-matter value may escape half an emoji
