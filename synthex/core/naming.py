"""Names that end up as keys or paths elsewhere: branch names, and ids that come from data.

A branch name becomes a Dagster dynamic partition key, where ``| , [ ]`` are accepted but can never
materialize, and a path segment in places, so anything but ``[A-Za-z0-9_.-/]`` is refused up front.
An id read from a data file (a benchmark's ``sample_id``) never becomes a path as it is: ``path_segment``
makes it one safe folder name.
"""

from __future__ import annotations

import hashlib
import re

from synthex.core.errors import PipelineDefinitionError

MAIN = "main"  # the trunk every branch descends from
# The search mode (a name in the search-strategy registry) of a search output that names no mode, of a search
# that names no strategy (``SearchEngine.search``), and of a search at a named step when the output's mode
# does not rank the searched records themselves (a drill-down: search/memory_search.py). Named here only.
DEFAULT_SEARCH_MODE = "hybrid"
_BRANCH_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-/]{0,99}$")


def check_branch_name(branch: str) -> str:
    # A branch name is also a path under branches/: no "..", no empty segment, no trailing "/".
    parts = branch.split("/")
    if not _BRANCH_OK.match(branch) or any(part in ("", ".", "..") for part in parts):
        raise PipelineDefinitionError(
            f"branch name {branch!r} is not allowed: use letters, digits, '_', '-', '.', '/' "
            f"(Dagster partition keys cannot hold '|', ',', '[' or ']')")
    return branch


# A memory's Dagster namespace (``Pipeline(namespace=)``): the prefix of its asset keys and of its partition,
# job, sensor and schedule names on a shared instance, so it must be a Dagster name (``[A-Za-z0-9_]``).
_NAMESPACE_OK = re.compile(r"^[A-Za-z0-9_]{1,64}$")


def check_namespace(namespace: object) -> str | None:
    """``namespace`` as given (None: not set); one line when it cannot be a Dagster name."""
    if namespace is None:
        return None
    if not isinstance(namespace, str) or not _NAMESPACE_OK.match(namespace):
        raise PipelineDefinitionError(
            f"namespace {namespace!r} is not a Dagster name: use 1-64 letters, digits and '_' "
            f"(it prefixes the memory's asset keys, partitions, jobs and sensors on the instance)")
    return namespace


_SEGMENT_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")


def path_segment(value: str) -> str:
    """One folder name for an id from data: kept as it is when it is plainly safe, else a readable slug
    plus a hash of the original (so two ids never share a folder). Never ``..``, ``/`` or absolute."""
    text = str(value)
    if _SEGMENT_OK.match(text) and ".." not in text:
        return text
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:40] or "id"
    return f"{slug}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:12]}"
