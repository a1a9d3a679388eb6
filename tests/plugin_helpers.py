"""Plugins registered from outside the package, the way an installed one is: a module in a folder, and a
``<name>-0.0.0.dist-info`` beside it whose ``entry_points.txt`` names the module in the ``synthex.plugins``
group. importlib.metadata finds dist-info folders on ``sys.path``, so a ``synthex`` subprocess whose
PYTHONPATH holds that folder (``plugin_env``) loads the plugin through its entry point, as it would a
pip-installed one; the test process itself never imports it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

GROUP = "synthex.plugins"


def write_plugin(folder: Path, name: str, source: str) -> Path:
    """Write plugin ``name``: module ``<folder>/<name>.py`` holding ``source`` (dedented) and its dist-info
    declaring the entry point ``name = name``. Returns ``folder``, the path to put on PYTHONPATH (several
    plugins may share one folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    dist = folder / f"{name}-0.0.0.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.0\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text(f"[{GROUP}]\n{name} = {name}\n", encoding="utf-8")
    return folder


def plugin_env(*folders: Path) -> dict[str, str]:
    """This process's environment with ``folders`` first on PYTHONPATH, offline (no ``OPENAI_*``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["PYTHONPATH"] = os.pathsep.join([*(str(f) for f in folders), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_synthex(*args: str, env: dict[str, str], cwd: Path | None = None, check: bool = True,
                timeout: float = 600) -> subprocess.CompletedProcess:
    """``synthex ARGS`` as a separate process (the real door) with ``env`` (``plugin_env``)."""
    proc = subprocess.run([sys.executable, "-m", "synthex.surfaces.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"synthex {args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc
