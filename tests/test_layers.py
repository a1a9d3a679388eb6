"""Layers point one way: the import-linter contracts in pyproject.toml hold, every module is in a layer,
and an upward import hidden inside a function breaks the contract."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("synthex", "synthex_resources", "synthex_assets", "evals")
# Lazy re-export shims: they name lower modules by string and are in no layer themselves.
PACKAGE_INITS = {"synthex", "synthex_resources", "synthex_assets", "evals"}


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(lint), "--config", str(root / "pyproject.toml"), "--no-cache"], cwd=root,
                          capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})


def layer_modules() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    out = []
    for contract in config["contracts"]:
        for layer in contract.get("layers", []):
            out += [m.strip() for m in layer.replace("|", ":").split(":")]
    return out


def test_the_layer_contracts_hold():
    proc = lint_imports(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 kept, 0 broken" in proc.stdout


def test_every_module_belongs_to_a_layer():
    layers = layer_modules()
    missing = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            if module in PACKAGE_INITS:
                continue
            if not any(module == layer or module.startswith(layer + ".") for layer in layers):
                missing.append(module)
    assert missing == []


def test_an_upward_import_inside_a_function_breaks_the_contract(tmp_path):
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    record = tmp_path / "synthex" / "core" / "record.py"
    record.write_text(record.read_text() + "\n\ndef _reach_up():\n    import synthex_assets.launcher  # noqa\n")
    proc = lint_imports(tmp_path)
    assert proc.returncode != 0
    assert "synthex.core.record -> synthex_assets.launcher" in proc.stdout


def test_no_import_cycles():
    """Modules import each other one way (imports inside functions and under TYPE_CHECKING count)."""
    from evals.code_metrics import import_cycles

    assert import_cycles() == []
