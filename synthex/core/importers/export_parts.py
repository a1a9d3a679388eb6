"""A chat export split into parts: one source over every part, read like the single file.

ChatGPT splits a large account's export into ``conversations-000.json``, ``conversations-001.json``, ...
(beside ``chat.html``, ``export_manifest.json`` and folders of images); each part is a JSON list of
conversations, as ``conversations.json`` is. Claude splits a large account's export into several zip
files (``...-batch-0000.zip``, ``...-batch-0001.zip``), each with its own ``conversations.json``: extracted
side by side, each batch is a subfolder of one folder. So a folder is an export when it holds parts
(``conversations.json`` or ``conversations-<digits>.json``) at its top, or else in its immediate
subfolders (the extracted batches); it is read as one source over all of them, in the order of their
relative paths.

Identity: an item's key is its conversation id, whatever part holds it, so a conversation keeps its
record id when an account's export goes from one file to parts, or a conversation moves between parts.
Change detection: the change token is the stat signature of the parts alone (never of the images beside
them), so a re-export that changes one part re-parses the parts, and the CDC state compares item by item.

A part over ``Limits.source_file_bytes`` is skipped with a warning, as a single export file over it is.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from synthex.core.errors import SourceError
from synthex.core.importers.base import Intake, SourceItem, TooLarge

PART = re.compile(r"conversations(?:-\d+)?\.json\Z")
LISTED = 3  # part names a message shows


def _parts_in(folder: Path) -> list[Path]:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    return [Path(e.path) for e in entries if PART.match(e.name) and e.is_file()]


def export_parts(folder: Path) -> list[Path]:
    """The parts of the export ``folder`` holds, sorted by relative path; [] when it holds none (or is no
    folder). Only names are looked at: nothing is opened."""
    if not folder.is_dir():
        return []
    parts = _parts_in(folder)
    if not parts:  # extracted batches, one folder each
        try:
            subfolders = [Path(e.path) for e in os.scandir(folder) if e.is_dir()]
        except OSError:
            return []
        parts = [part for sub in subfolders for part in _parts_in(sub)]
    return sorted(parts, key=lambda part: part.relative_to(folder).parts)


def describe_parts(folder: Path, parts: list[Path]) -> str:
    """'3 part(s) (conversations-000.json, conversations-001.json, ...)' for messages."""
    names = [str(part.relative_to(folder)) for part in parts[:LISTED]]
    return f"{len(parts)} part(s) ({', '.join(names)}{', ...' if len(parts) > LISTED else ''})"


def parse_parts(folder: Path, parse_part: Callable[[Path, Intake], list[SourceItem]],
                intake: Intake) -> list[SourceItem]:
    """The items of every part of the export ``folder``, part by part (``parse_part`` reads one)."""
    parts = export_parts(folder)
    if not parts:
        raise SourceError(f"{folder}: no conversations.json or conversations-NNN.json in this folder (the "
                          f"conversations of a ChatGPT or Claude export)")
    items: list[SourceItem] = []
    cap = intake.limits.source_file_bytes
    for part in parts:
        try:
            size = part.stat().st_size
            if size > cap:
                intake.warn(intake.limits.over("source_file_bytes", f"{part}: skipped: the part", size))
                continue
            items.extend(parse_part(part, intake))
        except TooLarge as exc:  # grew past the bound while read
            intake.warn(str(exc))
        except OSError as exc:
            raise SourceError(f"{part}: cannot read file: {exc.strerror or exc}") from exc
    return items
