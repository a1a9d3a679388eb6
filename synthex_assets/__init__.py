"""Dagster wiring: Pipeline -> assets, resources, Definitions; planning and running through Dagster."""

from synthex_assets.definitions import build_definitions

__all__ = ["build_definitions"]
