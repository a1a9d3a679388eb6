"""UI previews show record text as text: no markdown images, links or HTML from a crafted conversation."""

from __future__ import annotations

from synthex.core.record import Record
from synthex_assets.preview import preview_markdown


def test_previews_escape_markdown_and_html():
    crafted = Record(id="0123456789", step="chatgpt", content="hi ![x](http://evil.example/p.png) <img src=x> | [a](b)")
    table = preview_markdown([crafted])
    row = table.splitlines()[2]
    assert "![x](" not in row and "<img" not in row and "](" not in row
    assert "\\!\\[x\\]" in row and "&lt;img" in row and "\\|" in row
    assert row.count(" | ") == 1  # the record's own pipe does not open a new column
