"""The code location `dagster dev` / `synthex ui` load: the project's pipeline.py, else the demo.

SYNTHEX_PROJECT names the project folder (default: the current directory).
"""

from __future__ import annotations

import os
from pathlib import Path

from synthex.pipeline import Pipeline
from synthex.project import PIPELINE_FILE, load_pipeline
from synthex_assets.definitions import build_definitions


def demo_pipeline(project_dir: Path) -> Pipeline:
    from synthex.project import DEMO_EXPORT
    from synthex.prompts import (
        extract_transcript,
        monthly_reflection,
        summarize_conversation,
        world_model_prompt,
    )

    pipe = Pipeline("synthex-demo", agent="demo", project_dir=project_dir)
    pipe.source("chatgpt", file=str(DEMO_EXPORT), format="chatgpt-export")
    pipe.transform("transcripts", from_="chatgpt", fn=extract_transcript)
    pipe.transform("summaries", from_="transcripts", prompt=summarize_conversation)
    pipe.aggregate("monthly", from_="summaries", period="month", prompt=monthly_reflection)
    pipe.fold("world-model", from_="monthly", prompt=world_model_prompt)
    pipe.output("context", from_="world-model", surface="projection")
    pipe.output("search", from_=["summaries", "monthly"], surface="search")
    return pipe


def project_pipeline() -> Pipeline:
    project = Path(os.environ.get("SYNTHEX_PROJECT") or os.getcwd()).resolve()
    if (project / PIPELINE_FILE).exists():
        return load_pipeline(project)
    return demo_pipeline(project)


defs = build_definitions(project_pipeline())
