"""A project's Python files run as modules: ``pipeline.py`` and the branch files ``branches/<name>.py``.

File loading only, beneath the definition: ``PipelineDefinition`` loads branch files through it, and
``synthex.core.project`` (which imports the definition) re-exports it, so neither imports the other.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from synthex.core.errors import PipelineDefinitionError
from synthex.core.naming import check_branch_name

BRANCHES_DIR = "branches"


def exec_file_module(module_name: str, path: Path) -> ModuleType:
    """Run a project's Python file as module ``module_name``; any error in it is one line naming it."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except PipelineDefinitionError:
        raise
    except Exception as exc:
        raise PipelineDefinitionError(f"{path}: failed to load: {type(exc).__name__}: {exc}") from exc
    return module


def branch_path(root: str | Path, name: str) -> Path:
    return Path(root) / BRANCHES_DIR / f"{check_branch_name(name)}.py"


def branch_module(root: str | Path, name: str) -> ModuleType:
    """Import ``branches/<name>.py`` once per version of the file (its prompt functions keep one
    identity, so the step versions they give are stable)."""
    path = branch_path(root, name)
    if not path.exists():
        raise PipelineDefinitionError(
            f"branch {name!r}: its definition {path} is gone; recreate it with `synthex branch create {name}` "
            f"or remove its records with `synthex branch delete {name}`")
    module_name = "synthex_branch_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
    stamp = path.stat().st_mtime_ns, path.stat().st_size
    loaded = sys.modules.get(module_name)
    if loaded is not None and getattr(loaded, "__synthex_stamp__", None) == (str(path), stamp):
        return loaded
    module = exec_file_module(module_name, path)
    if not callable(getattr(module, "overrides", None)):
        raise PipelineDefinitionError(f"{path}: defines no `overrides(pipeline)` function")
    module.__synthex_stamp__ = (str(path), stamp)
    return module
