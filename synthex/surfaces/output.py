"""What every CLI command prints with: one JSON printer (``--json``), shared by the command modules."""

from __future__ import annotations

import json
from typing import Any

import click


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
