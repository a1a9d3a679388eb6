"""The application layer: one facade (run / plan / get / search / projection) over a project, used by
the CLI and by Python users through ``synthex.Pipeline``."""

from synthex.app.facade import ProjectApp
from synthex.app.pipeline import Pipeline

__all__ = ["Pipeline", "ProjectApp"]
