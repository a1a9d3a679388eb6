"""(to come)"""

from typing import Any


def register(registry: Any) -> None:
    pass
