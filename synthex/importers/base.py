"""Public alias of ``synthex.core.importers.base``: the helpers an importer of a project's own format uses."""

from synthex.core.importers.base import (
    SourceItem,
    get,
    get_id,
    get_time,
    get_title,
    read_json,
    read_json_objects,
    render_conversation,
    require,
)

__all__ = ["SourceItem", "get", "get_id", "get_time", "get_title", "read_json", "read_json_objects",
           "render_conversation", "require"]
