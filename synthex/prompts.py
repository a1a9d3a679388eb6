"""Public alias of ``synthex.core.prompts``: the path a project's pipeline.py imports prompt functions from."""

from synthex.core.digest import key_profile
from synthex.core.prompts import (
    anticipate_questions,
    compress_state,
    extract_transcript,
    member_digest,
    monthly_reflection,
    summarize_conversation,
    world_model_prompt,
)

__all__ = ["anticipate_questions", "compress_state", "extract_transcript", "key_profile", "member_digest",
           "monthly_reflection", "summarize_conversation", "world_model_prompt"]
