"""``TurnsAsOrigin``: a source's origin read as another system's turns (``synthex eval`` on an imported
project: ``synthex.core.importers.migrate.turns``). Everything but the items and the version is the
origin's own."""

from __future__ import annotations

from typing import Any

from synthex.core.importers import SourceItem
from synthex.core.importers.migrate.turns import TurnsAs
from synthex.core.sources.base import SourceOrigin


class TurnsAsOrigin(SourceOrigin):
    def __init__(self, origin: SourceOrigin, turns_as: TurnsAs) -> None:
        self.origin, self.turns_as = origin, turns_as
        self._view: tuple[list[SourceItem] | None, list[SourceItem]] = (None, [])

    def items(self) -> list[SourceItem]:
        read = self.origin.items()
        if self._view[0] is not read:  # one list per parse of the origin: callers cache on its identity
            self._view = (read, self.turns_as.items(read))
        return self._view[1]

    def warnings(self) -> list[str]:
        return self.origin.warnings() if self.turns_as.kind is not None else []

    def is_empty(self) -> bool:
        return not self.items()

    def why_empty(self) -> str | None:
        return self.origin.why_empty() if self.turns_as.kind is not None else None

    @property  # type: ignore[override]
    def kind(self) -> str:  # noqa: D102 - the origin's
        return self.origin.kind

    def token(self) -> str:
        return self.origin.token()

    def describe(self) -> str:
        return self.origin.describe()

    def config(self) -> dict[str, Any]:
        return self.origin.config() | self.turns_as.config()

    def toml_config(self) -> dict[str, Any]:
        return self.origin.toml_config()

    def __getattr__(self, name: str) -> Any:
        if name in ("origin", "turns_as", "_view"):
            raise AttributeError(name)
        return getattr(self.origin, name)
