"""Where the benchmark files given to the project live (``../shared/data`` beside the checkout).

The files are not part of the repository, so every eval and test that reads them resolves them here, in one
place: ``SYNTHEX_SHARED_DATA`` when set (a CI machine or a clone elsewhere), else ``shared/data`` beside the
checkout, else beside the current directory. The path is returned even when it does not exist, so a caller
can name it in its one-line error or its skip reason.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ENV_VAR = "SYNTHEX_SHARED_DATA"
CHECKOUT = Path(__file__).resolve().parents[1]

LOCOMO_DEV7 = ("locomo", "locomo10_dev7.json")
LONGMEMEVAL_S_DEV = ("longmemeval", "longmemeval_s_dev.json.gz")
LONGMEMEVAL_ORACLE_SAMPLE = ("longmemeval", "longmemeval_oracle_sample_2q.json")


def shared_data_dir(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path:
    """The folder of the shared benchmark files (see the module's docstring for the order searched)."""
    environ = os.environ if environ is None else environ
    if environ.get(ENV_VAR):
        return Path(environ[ENV_VAR]).expanduser()
    candidates = [CHECKOUT.parent / "shared" / "data", (cwd or Path.cwd()).resolve().parent / "shared" / "data"]
    return next((path for path in candidates if path.is_dir()), candidates[0])


def shared_data_file(parts: tuple[str, ...], environ: Mapping[str, str] | None = None,
                     cwd: Path | None = None) -> Path:
    """One shared file, e.g. ``shared_data_file(LOCOMO_DEV7)``."""
    return shared_data_dir(environ, cwd).joinpath(*parts)
